// kiln.FusedPointwise by NVRTC code generation (fused_pointwise_codegen.h).
//
// The generated kernel: each thread takes chunks of 16 bytes of output (8 float16/bfloat16 or 4 float32
// elements), grid-stride. A chunk inside the output runs the vector path when the launch allows it (output and
// every kFull operand 16-byte aligned): kFull operands are read with one 16-byte load each, kScalar operands
// were read once per thread before the loop, and kBroadcast operands are read per their launch-time `mode`:
//   0  the operand is constant across the chunk (innermost dim broadcast, e.g. a per-channel [1,C,1,1] bias
//      in NCHW with H*W a multiple of the chunk): one load of the chunk's first element;
//   1  the operand is contiguous across the chunk (innermost dim present, e.g. a trailing [C] bias with C a
//      multiple of the chunk): one 16-byte load;
//   2  anything else: one load per element through its strides.
// The program then runs per element as straight-line float code (fpw_body: one call of the step's functor from
// ops/pointwise_formulas.h, whose text starts the source, per step) and the chunk is stored with one
// 16-byte store. The last partial chunk, and every chunk of a launch that cannot vectorize, runs the scalar
// path (per element loads through the same kinds). Broadcast offsets use the launch's merged dims (innermost
// first, one pass for all broadcast operands, a runtime loop over the __grid_constant__ parameters) with
// multiply-shift division; indices are 32-bit (the layer runs the interpreter for outputs of 2^31
// elements or more).
#include "backends/cuda/fused_pointwise_codegen.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/nvrtc_module.h"
#include "backends/cuda/pointwise_layers_util.h"
#include "core/error.h"
#include "ops/pointwise_op.h"
#include "pointwise_formulas_text.h"  // generated from ops/pointwise_formulas.h (cmake/PointwiseFormulas.cmake)

namespace kiln::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kParamDims = 8;

// Launch parameters, laid out the same in the generated source (kParamsSource): 8-byte pointers, then 4-byte
// fields only.
struct FpwParams {
  void* y;
  const void* in[kPwMaxOperands];
  uint32_t numel;
  int32_t vec_ok;
  int32_t rank;
  int32_t pad;
  uint32_t dims[kParamDims];  // merged dims, innermost first (1 past rank)
  uint32_t magic[kParamDims];
  uint32_t shift[kParamDims];
  uint32_t strides[kPwMaxOperands][kParamDims];
  int32_t mode[kPwMaxOperands];
};
static_assert(kPwMaxOperands == 8 && kPwMaxRank <= kParamDims, "the generated FpwParams has 8 operands and dims");

constexpr const char* kParamsSource = R"(struct FpwParams {
  void* y;
  const void* in[8];
  u32 numel;
  int vec_ok;
  int rank;
  int pad;
  u32 dims[8];
  u32 magic[8];
  u32 shift[8];
  u32 strides[8][8];
  int mode[8];
};
)";

// Division by d as (umulhi(n, magic) + n) >> shift, exact for n < 2^31 (d >= 1).
void Divider(uint32_t d, uint32_t* magic, uint32_t* shift) {
  uint32_t s = 0;
  while ((uint64_t{1} << s) < d) ++s;
  *shift = s;
  *magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1);
}

std::string FloatLit(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return fmt::format("__int_as_float(0x{:08x})", u);
}

// The step's expression over operand names x, y (plain identifiers) and its alpha/beta: a call of the formula's
// functor (ops/pointwise_formulas.h, prepended to the source).
std::string StepExpr(PwOp op, const std::string& x, const std::string& y, float alpha, float beta) {
  const PwOpInfo& info = PwInfo(op);
  if (PwIsBinary(op)) return fmt::format("kiln::pwf::{}{{}}({}, {})", info.name, x, y);
  return fmt::format("kiln::pwf::{}{{}}({}, {}, {})", info.name, x, FloatLit(alpha), FloatLit(beta));
}

// Element load/store helpers of one dtype: ld1/st1 (one element as float), ldv/stv (16 bytes <-> VEC floats).
std::string DtypeHelpers(int dtype, int sm) {
  if (dtype == static_cast<int>(DataType::kFloat32))
    return R"(typedef float elem_t;
#define VEC 4
__device__ __forceinline__ float ld1(const elem_t* p, u32 i) { return p[i]; }
__device__ __forceinline__ void st1(elem_t* p, u32 i, float v) { p[i] = v; }
__device__ __forceinline__ void ldv(const elem_t* p, float* a) {
  const kv16 v = *reinterpret_cast<const kv16*>(p);
#pragma unroll
  for (int j = 0; j < 4; ++j) a[j] = __uint_as_float(v.w[j]);
}
__device__ __forceinline__ void stv(elem_t* p, const float* r) {
  kv16 v;
#pragma unroll
  for (int j = 0; j < 4; ++j) v.w[j] = __float_as_uint(r[j]);
  *reinterpret_cast<kv16*>(p) = v;
}
)";
  std::string s = "typedef u16 elem_t;\n#define VEC 8\n";
  if (dtype == static_cast<int>(DataType::kFloat16)) {
    s += R"(__device__ __forceinline__ float cvt_in(u32 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)h));
  return f;
}
__device__ __forceinline__ u32 cvt_out(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
)";
  } else if (sm >= 80) {
    s += R"(__device__ __forceinline__ float cvt_in(u32 h) { return __uint_as_float(h << 16); }
__device__ __forceinline__ u32 cvt_out(float f) {
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
)";
  } else {
    s += R"(__device__ __forceinline__ float cvt_in(u32 h) { return __uint_as_float(h << 16); }
__device__ __forceinline__ u32 cvt_out(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}
)";
  }
  s += R"(__device__ __forceinline__ float ld1(const elem_t* p, u32 i) { return cvt_in(p[i]); }
__device__ __forceinline__ void st1(elem_t* p, u32 i, float v) { p[i] = (u16)cvt_out(v); }
__device__ __forceinline__ void ldv(const elem_t* p, float* a) {
  const kv16 v = *reinterpret_cast<const kv16*>(p);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    a[2 * j] = cvt_in(v.w[j] & 0xffffu);
    a[2 * j + 1] = cvt_in(v.w[j] >> 16);
  }
}
__device__ __forceinline__ void stv(elem_t* p, const float* r) {
  kv16 v;
#pragma unroll
  for (int j = 0; j < 4; ++j) v.w[j] = cvt_out(r[2 * j]) | (cvt_out(r[2 * j + 1]) << 16);
  *reinterpret_cast<kv16*>(p) = v;
}
)";
  return s;
}

bool SameDim(const Dim& a, const Dim& b) { return a.same(b); }

class NvrtcLayer : public Layer {
 public:
  NvrtcLayer(std::string where, const void* fn, std::vector<FpwKind> kinds, int elem_bytes, PwProgramArgs interp)
      : where_(std::move(where)), fn_(fn), kinds_(std::move(kinds)), elem_bytes_(elem_bytes), interp_(interp) {
    for (FpwKind k : kinds_) has_broadcast_ |= k == FpwKind::kBroadcast;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const int64_t numel = out[0].numel();
    if (numel == 0) return Status::Ok();
    bool fits = numel < (int64_t{1} << 31) && in.size() == kinds_.size();
    for (size_t k = 0; fits && k < in.size(); ++k) {
      const int64_t n = in[k].numel();
      if (kinds_[k] == FpwKind::kFull) fits = n == numel;
      else if (kinds_[k] == FpwKind::kScalar) fits = n == 1;
    }
    if (!fits) return Interpret(ctx, in, out);

    FpwParams p;
    std::memset(&p, 0, sizeof(p));
    p.y = out[0].data;
    p.numel = static_cast<uint32_t>(numel);
    const int vec = 16 / elem_bytes_;
    auto aligned = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
    bool vec_ok = aligned(out[0].data);
    for (size_t k = 0; k < in.size(); ++k) {
      p.in[k] = in[k].data;
      if (kinds_[k] == FpwKind::kFull) vec_ok = vec_ok && aligned(in[k].data);
    }
    for (int d = 0; d < kParamDims; ++d) {
      p.dims[d] = 1;
      p.magic[d] = 1;
    }
    if (has_broadcast_) {
      std::vector<std::vector<int64_t>> shapes;
      shapes.reserve(in.size());
      for (const auto& t : in) shapes.push_back(t.shape);
      KILN_ASSIGN_OR_RETURN(PwBroadcast bc, pwl::MakePwBroadcast(where_, out[0].shape, shapes));
      p.rank = bc.rank;
      for (int d = 0; d < bc.rank; ++d) {
        const int src = bc.rank - 1 - d;  // bc is outermost first
        p.dims[d] = static_cast<uint32_t>(bc.dims[src]);
        Divider(p.dims[d], &p.magic[d], &p.shift[d]);
        for (size_t k = 0; k < in.size(); ++k) p.strides[k][d] = static_cast<uint32_t>(bc.strides[k][src]);
      }
      const bool inner_whole = bc.rank > 0 && p.dims[0] % vec == 0;
      for (size_t k = 0; k < in.size(); ++k) {
        if (kinds_[k] != FpwKind::kBroadcast) continue;
        p.mode[k] = 2;
        if (inner_whole && p.strides[k][0] == 0) p.mode[k] = 0;
        else if (inner_whole && p.strides[k][0] == 1 && aligned(in[k].data)) p.mode[k] = 1;
      }
    }
    p.vec_ok = vec_ok ? 1 : 0;
    const int64_t chunks = (numel + vec - 1) / vec;
    const int64_t blocks = std::min<int64_t>((chunks + kBlock - 1) / kBlock, int64_t{1} << 20);
    void* args[] = {&p};
    return pwl::InNode(where_, LaunchNvrtcKernel(fn_, static_cast<unsigned>(blocks), kBlock, ctx.stream, args));
  }

 private:
  Status Interpret(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                   std::vector<DeviceTensor>& out) const {
    std::vector<std::vector<int64_t>> shapes;
    const void* ptrs[kPwMaxOperands] = {};
    for (size_t i = 0; i < in.size() && i < static_cast<size_t>(kPwMaxOperands); ++i) {
      shapes.push_back(in[i].shape);
      ptrs[i] = in[i].data;
    }
    KILN_ASSIGN_OR_RETURN(PwBroadcast bc, pwl::MakePwBroadcast(where_, out[0].shape, shapes));
    return pwl::InNode(where_, KILN_CUDA_STATUS(LaunchFusedPointwise(pwl::Code(out[0].dtype), interp_, ptrs,
                                                                     out[0].data, bc, ctx.stream)));
  }

  std::string where_;
  const void* fn_;
  std::vector<FpwKind> kinds_;
  int elem_bytes_;
  PwProgramArgs interp_;
  bool has_broadcast_ = false;
};

}  // namespace

std::string FusedPointwiseSource(const fused::PwProgram& prog, const FpwCodegenOptions& opts) {
  const size_t nin = opts.operands.size();
  std::string s = kPointwiseFormulasText;
  s += "// kiln.FusedPointwise, generated (fused_pointwise_codegen.cpp)\n";
  s += "typedef unsigned int u32;\ntypedef unsigned short u16;\nstruct __align__(16) kv16 { u32 w[4]; };\n";
  s += kParamsSource;
  s += DtypeHelpers(opts.dtype, opts.sm);
  // Offsets of every kBroadcast operand k at output element i (o{k}), sharing one pass over the merged dims: a
  // runtime loop (p is __grid_constant__, so dynamic indices read the constant bank; unrolled copies of it would
  // triple the compile time).
  std::vector<size_t> bcast;
  for (size_t k = 0; k < nin; ++k)
    if (opts.operands[k] == FpwKind::kBroadcast) bcast.push_back(k);
  if (!bcast.empty()) {
    s += "__device__ __forceinline__ void fpw_offsets(const FpwParams& p, u32 i";
    for (size_t k : bcast) s += fmt::format(", u32& o{}", k);
    s += ") {\n";
    for (size_t k : bcast) s += fmt::format("  o{} = 0;\n", k);
    s += "#pragma unroll 1\n  for (int d = 0; d < p.rank; ++d) {\n";
    s += "    const u32 q = (__umulhi(i, p.magic[d]) + i) >> p.shift[d];\n    const u32 c = i - q * p.dims[d];\n";
    for (size_t k : bcast) s += fmt::format("    o{0} += c * p.strides[{0}][d];\n", k);
    s += "    i = q;\n  }\n}\n";
  }
  std::string decl_offsets, call_args;  // "u32 o1, o2;" and ", o1, o2"
  for (size_t k : bcast) {
    decl_offsets += fmt::format("{}o{}", decl_offsets.empty() ? "u32 " : ", ", k);
    call_args += fmt::format(", o{}", k);
  }
  if (!bcast.empty()) decl_offsets += ";";
  // The program: one expression per step.
  s += "__device__ __forceinline__ float fpw_body(";
  for (size_t k = 0; k < nin; ++k) s += fmt::format("{}float x{}", k ? ", " : "", k);
  s += ") {\n";
  auto name = [](int64_t a) { return a >= 0 ? fmt::format("x{}", a) : fmt::format("v{}", -1 - a); };
  for (size_t j = 0; j < prog.ops.size(); ++j) {
    const std::string x = name(prog.args[2 * j]);
    const std::string y = prog.arity[j] == 2 ? name(prog.args[2 * j + 1]) : x;
    s += fmt::format("  const float v{} = {};\n", j, StepExpr(prog.ops[j], x, y, prog.alpha[j], prog.beta[j]));
  }
  s += fmt::format("  return v{};\n}}\n", prog.ops.size() - 1);

  // The kernel.
  s += "extern \"C\" __global__ void __launch_bounds__(256) kiln_fused_pointwise(const __grid_constant__ FpwParams p) {\n";
  s += "  elem_t* __restrict__ y = (elem_t*)p.y;\n";
  for (size_t k = 0; k < nin; ++k) s += fmt::format("  const elem_t* __restrict__ in{0} = (const elem_t*)p.in[{0}];\n", k);
  s += "  const u32 n = p.numel;\n";
  for (size_t k = 0; k < nin; ++k)
    if (opts.operands[k] == FpwKind::kScalar) s += fmt::format("  const float s{0} = ld1(in{0}, 0);\n", k);
  s += R"(  const u32 nchunks = (n + VEC - 1) / VEC;
  for (u32 c = blockIdx.x * blockDim.x + threadIdx.x; c < nchunks; c += gridDim.x * blockDim.x) {
    const u32 base = c * VEC;
    if (p.vec_ok && base + VEC <= n) {
)";
  if (!bcast.empty()) s += fmt::format("      {}\n      fpw_offsets(p, base{});\n", decl_offsets, call_args);
  for (size_t k = 0; k < nin; ++k) {
    switch (opts.operands[k]) {
      case FpwKind::kFull: s += fmt::format("      float a{0}[VEC];\n      ldv(in{0} + base, a{0});\n", k); break;
      case FpwKind::kScalar: break;
      case FpwKind::kBroadcast:
        s += fmt::format(R"(      float a{0}[VEC];
      if (p.mode[{0}] == 0) {{
        const float t = ld1(in{0}, o{0});
#pragma unroll
        for (int e = 0; e < VEC; ++e) a{0}[e] = t;
      }} else if (p.mode[{0}] == 1) {{
        ldv(in{0} + o{0}, a{0});
      }} else {{
#pragma unroll
        for (int e = 0; e < VEC; ++e) {{
          {1}
          fpw_offsets(p, base + e{2});
          a{0}[e] = ld1(in{0}, o{0});
        }}
      }}
)", k, decl_offsets, call_args);
        break;
    }
  }
  s += "      float r[VEC];\n#pragma unroll\n      for (int e = 0; e < VEC; ++e) r[e] = fpw_body(";
  for (size_t k = 0; k < nin; ++k)
    s += fmt::format("{}{}", k ? ", " : "",
                     opts.operands[k] == FpwKind::kScalar ? fmt::format("s{}", k) : fmt::format("a{}[e]", k));
  s += ");\n      stv(y + base, r);\n    } else {\n";
  s += "      const u32 end = base + VEC < n ? base + VEC : n;\n";
  s += "      for (u32 i = base; i < end; ++i) {\n";
  if (!bcast.empty()) s += fmt::format("        {}\n        fpw_offsets(p, i{});\n", decl_offsets, call_args);
  s += "        st1(y, i, fpw_body(";
  for (size_t k = 0; k < nin; ++k) {
    std::string v;
    switch (opts.operands[k]) {
      case FpwKind::kFull: v = fmt::format("ld1(in{}, i)", k); break;
      case FpwKind::kScalar: v = fmt::format("s{}", k); break;
      case FpwKind::kBroadcast: v = fmt::format("ld1(in{0}, o{0})", k); break;
    }
    s += fmt::format("{}{}", k ? ", " : "", v);
  }
  s += "));\n      }\n    }\n  }\n}\n";
  return s;
}

std::vector<FpwKind> FusedPointwiseKinds(const Node& n) {
  std::vector<FpwKind> kinds(n.inputs.size(), FpwKind::kBroadcast);
  const Value* out = n.outputs.empty() ? nullptr : n.outputs[0];
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* v = n.inputs[i];
    if (!v || !v->has_shape) continue;
    bool scalar = true;
    for (const Dim& d : v->shape) scalar = scalar && d.known() && d.value == 1;
    if (scalar) {
      kinds[i] = FpwKind::kScalar;
      continue;
    }
    if (!out || !out->has_shape) continue;
    // Like the output: the same dims once leading dims of extent 1 are dropped from both.
    auto strip = [](const Shape& s) {
      size_t b = 0;
      while (b < s.size() && s[b].known() && s[b].value == 1) ++b;
      return Shape(s.begin() + static_cast<std::ptrdiff_t>(b), s.end());
    };
    const Shape a = strip(v->shape), o = strip(out->shape);
    bool full = a.size() == o.size();
    for (size_t d = 0; full && d < a.size(); ++d) full = SameDim(a[d], o[d]);
    if (full) kinds[i] = FpwKind::kFull;
  }
  return kinds;
}

Result<std::unique_ptr<Layer>> MakeFusedPointwiseNvrtcLayer(const Node& n, const fused::PwProgram& prog,
                                                            const PwProgramArgs& interp, double* compile_ms) {
  const DataType t = pwl::InputType(n, 0);
  FpwCodegenOptions opts;
  opts.dtype = pwl::Code(t);
  KILN_ASSIGN_OR_RETURN(opts.sm, CurrentDeviceSm());
  opts.operands = FusedPointwiseKinds(n);
  const std::string where = n.Where();
  KILN_ASSIGN_OR_RETURN(NvrtcKernel k, CompileNvrtcKernel(where, FusedPointwiseSource(prog, opts),
                                                          "kiln_fused_pointwise"));
  if (compile_ms) *compile_ms = k.compile_ms;
  return std::unique_ptr<Layer>(std::make_unique<NvrtcLayer>(where, k.fn, opts.operands,
                                                             static_cast<int>(DataTypeSize(t)), interp));
}

}  // namespace kiln::cuda
