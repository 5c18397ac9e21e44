// CUDA layers of the matmul family: MatMul, Gemm, kiln.FusedGemm and kiln.FusedMatMul run on cuBLASLt for
// float32/float16/bfloat16 (tactics: the cuBLASLt heuristic's algorithms) and on a generic contraction kernel for
// float64 and the integer types (tactic "generic"); Einsum lives in einsum_layer.cpp.
//
// The residual of FusedGemm / FusedMatMul (input 3, exactly the output's shape; activation None only) runs as
// cuBLASLt's C matrix with beta 1, separate from D: Y = alpha A B + R + bias (the bias through the epilogue, or
// the post-op kernel). cuBLASLt computes D = epilogue(alpha op(A) op(B) + beta C + bias), so with an activation
// the sum would be activated, unlike the graph's act(...) + R; such nodes are refused.
//
// Tactic names: "cublaslt:<algorithm bytes in hex>" (the algorithm tuned for the spec's shapes; other shapes ask
// the heuristic at enqueue), "cublaslt:heuristic" (always ask the heuristic), either one prefixed with "postop/"
// when the bias/activation run in a separate kernel instead of a cuBLASLt epilogue, and "generic".
#include <optional>

#include "backends/cuda/cublaslt_gemm.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "backends/cuda/matmul_kernels.h"
#include "core/error.h"
#include "ops/fused_ops.h"

namespace kiln::cuda {

LayerFactory EinsumLayerFactory();  // einsum_layer.cpp

namespace {

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxTactics = 8;
constexpr std::string_view kHeuristicTactic = "cublaslt:heuristic";
constexpr std::string_view kPostOpPrefix = "postop/";
constexpr std::string_view kGenericTactic = "generic";

bool IsLtType(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16; }
bool IsGenericIntType(DataType t) {
  return t == DataType::kInt32 || t == DataType::kInt64 || t == DataType::kUInt32 || t == DataType::kUInt64;
}

int64_t Product(const std::vector<int64_t>& v, size_t begin = 0, size_t end = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = begin; i < std::min(end, v.size()); ++i) p *= v[i];
  return p;
}

// What a MatMul / Gemm / FusedGemm / FusedMatMul node asks for.
struct GemmConfig {
  std::string where;
  bool is_gemm = false;     // Gemm / FusedGemm (else MatMul / FusedMatMul)
  bool bias_input = false;  // FusedMatMul's bias[N] (input 2)
  bool c_input = false;     // Gemm's C (input 2) is given
  bool residual = false;    // FusedGemm / FusedMatMul residual R (input 3): Y = ... + R
  bool ta = false, tb = false;
  float alpha = 1.f, beta = 1.f;
  GemmPostOp act;
  DataType dtype = DataType::kUndefined;
  bool tf32 = true;
};

GemmAct ToGemmAct(fused::Act a) {
  switch (a) {
    case fused::Act::kNone: return GemmAct::kNone;
    case fused::Act::kRelu: return GemmAct::kRelu;
    case fused::Act::kLeakyRelu: return GemmAct::kLeakyRelu;
    case fused::Act::kSigmoid: return GemmAct::kSigmoid;
    case fused::Act::kTanh: return GemmAct::kTanh;
    case fused::Act::kClip: return GemmAct::kClip;
    case fused::Act::kHardSigmoid: return GemmAct::kHardSigmoid;
    case fused::Act::kSiLU: return GemmAct::kSiLU;
    case fused::Act::kGelu: return GemmAct::kGelu;
    case fused::Act::kGeluTanh: return GemmAct::kGeluTanh;
  }
  return GemmAct::kNone;
}

Result<GemmConfig> ReadConfig(const LayerSpec& spec) {
  const Node& n = spec.node;
  GemmConfig c;
  c.where = n.Where();
  const bool fused = n.op_type == "FusedGemm" || n.op_type == "FusedMatMul";
  c.is_gemm = n.op_type == "Gemm" || n.op_type == "FusedGemm";
  c.bias_input = n.op_type == "FusedMatMul";
  if (!n.input(0) || !n.input(1))
    return Err(StatusCode::kInvalidArgument, "{}: {} needs inputs A and B", c.where, n.op_type);
  if (c.bias_input && !n.input(2))
    return Err(StatusCode::kInvalidArgument, "{}: FusedMatMul needs its bias input", c.where);
  c.dtype = n.inputs[0]->dtype;
  if (c.is_gemm) {
    c.ta = n.geti("transA", 0) != 0;
    c.tb = n.geti("transB", 0) != 0;
    c.alpha = n.getf("alpha", 1.f);
    c.beta = n.getf("beta", 1.f);
    c.c_input = n.input(2) != nullptr;
  }
  if (fused) {
    const std::string name = n.gets("kiln_activation", "None");
    auto act = fused::ParseActivation(name);
    if (!act) return Err(StatusCode::kInvalidModel, "{}: unknown kiln_activation '{}'", c.where, name);
    c.act = GemmPostOp{ToGemmAct(*act), n.getf("kiln_activation_alpha", 0.f), n.getf("kiln_activation_beta", 0.f)};
    c.residual = n.input(3) != nullptr;
  }
  c.tf32 = spec.allow_tf32;
  const bool ok = IsLtType(c.dtype) || c.dtype == DataType::kFloat64 || (!fused && IsGenericIntType(c.dtype));
  if (!ok)
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA {} supports float32/float16/bfloat16 (cuBLASLt), float64{}, not {}; run the node on "
               "the CPU or cast its inputs",
               c.where, n.op_type, fused ? "" : " and int32/int64/uint32/uint64 (generic kernel)",
               DataTypeName(c.dtype));
  if (c.residual && (c.act.act != GemmAct::kNone || !IsLtType(c.dtype)))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA {} adds a residual (input 3) only with activation None and float32/float16/bfloat16 "
               "(cuBLASLt's C), not activation '{}' on {}; run the node on the CPU",
               c.where, n.op_type, n.gets("kiln_activation", "None"), DataTypeName(c.dtype));
  return c;
}

// The batch structure of a (broadcast, batched) MatMul: output batch dims [0, split) are looped on the host,
// dims [split, r) run as one call of `inner` matrices in which each operand either has every dim (full: stride one
// matrix) or none (broadcast: stride 0).
struct MatMulGeometry {
  int64_t m = 0, n = 0, k = 0;
  std::vector<int64_t> batch;                 // output batch dims
  std::vector<int64_t> a_bstride, b_bstride;  // per output batch dim: stride in matrices (0 where broadcast)
  size_t split = 0;
  int64_t inner = 1, outer = 1;
  bool a_full = true, b_full = true;
  bool out_scalar = false;  // both operands 1-D
};

Result<MatMulGeometry> PlanMatMul(const std::string& where, std::vector<int64_t> sa, std::vector<int64_t> sb) {
  MatMulGeometry g;
  if (sa.empty() || sb.empty())
    return Err(StatusCode::kInvalidArgument, "{}: MatMul operands must have rank >= 1", where);
  g.out_scalar = sa.size() == 1 && sb.size() == 1;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);  // [K] -> [1, K]
  if (sb.size() == 1) sb.push_back(1);           // [K] -> [K, 1]
  g.m = sa[sa.size() - 2];
  g.k = sa.back();
  g.n = sb.back();
  if (sb[sb.size() - 2] != g.k)
    return Err(StatusCode::kInvalidArgument, "{}: inner dimensions differ ({} vs {})", where, g.k, sb[sb.size() - 2]);
  const size_t r = std::max(sa.size(), sb.size()) - 2;
  std::vector<int64_t> ab(r, 1), bb(r, 1);  // batch dims aligned to the right
  std::copy(sa.begin(), sa.end() - 2, ab.begin() + (r - (sa.size() - 2)));
  std::copy(sb.begin(), sb.end() - 2, bb.begin() + (r - (sb.size() - 2)));
  g.batch.resize(r);
  for (size_t d = 0; d < r; ++d) {
    if (ab[d] != bb[d] && ab[d] != 1 && bb[d] != 1)
      return Err(StatusCode::kInvalidArgument, "{}: batch dimensions {} and {} do not broadcast", where, ab[d], bb[d]);
    g.batch[d] = ab[d] == 1 ? bb[d] : ab[d];
  }
  auto matrix_strides = [&](const std::vector<int64_t>& dims) {
    std::vector<int64_t> st(r, 0);
    int64_t run = 1;
    for (size_t d = r; d-- > 0;) {
      st[d] = dims[d] == 1 ? 0 : run;
      run *= dims[d];
    }
    return st;
  };
  g.a_bstride = matrix_strides(ab);
  g.b_bstride = matrix_strides(bb);
  for (size_t s = 0; s <= r; ++s) {
    bool a_full = true, a_bcast = true, b_full = true, b_bcast = true;
    for (size_t d = s; d < r; ++d) {
      a_full &= ab[d] == g.batch[d];
      a_bcast &= ab[d] == 1;
      b_full &= bb[d] == g.batch[d];
      b_bcast &= bb[d] == 1;
    }
    if ((a_full || a_bcast) && (b_full || b_bcast)) {
      g.split = s;
      g.a_full = a_full;
      g.b_full = b_full;
      break;
    }
  }
  g.outer = Product(g.batch, 0, g.split);
  g.inner = Product(g.batch, g.split);
  return g;
}

// How one node runs at given shapes.
struct GemmPlan {
  MatMulGeometry geo;  // Gemm: no batch
  LtGemmShape lt;      // every host-loop call runs this shape
  enum class CMode { kNone, kDirect, kBias, kFill } c_mode = CMode::kNone;  // Gemm's C
  int64_t c_rows = 1, c_cols = 1;
  bool post = false, post_bias = false;  // LaunchGemmPostOp after the GEMM (with input 2 as the bias)
  int64_t out_numel = 0;
};

// `lt_epilogue`: put the bias/activation into cuBLASLt's epilogue where it computes them exactly.
Result<GemmPlan> MakePlan(const GemmConfig& cfg, const std::vector<int64_t>& sa, const std::vector<int64_t>& sb,
                          const std::vector<int64_t>* s2, bool lt_epilogue) {
  GemmPlan p;
  p.lt.dtype = static_cast<int>(cfg.dtype);
  p.lt.tf32 = cfg.tf32 && cfg.dtype == DataType::kFloat32;
  const GemmAct act = cfg.act.act;
  const bool lt_act = lt_epilogue && (act == GemmAct::kRelu || act == GemmAct::kGeluTanh);
  auto with_act = [&](bool bias) {
    if (act == GemmAct::kRelu) return bias ? LtEpilogue::kReluBias : LtEpilogue::kRelu;
    if (act == GemmAct::kGeluTanh) return bias ? LtEpilogue::kGeluTanhBias : LtEpilogue::kGeluTanh;
    return bias ? LtEpilogue::kBias : LtEpilogue::kNone;
  };
  if (!cfg.is_gemm) {
    KILN_ASSIGN_OR_RETURN(p.geo, PlanMatMul(cfg.where, sa, sb));
    const MatMulGeometry& g = p.geo;
    p.out_numel = g.outer * g.inner * g.m * g.n;
    if (cfg.bias_input) {
      if (g.out_scalar || !s2 || Product(*s2) != g.n)
        return Err(StatusCode::kInvalidArgument, "{}: the bias must have the {} elements of the product's last axis",
                   cfg.where, g.n);
      if (lt_epilogue) {
        p.lt.epilogue = lt_act ? with_act(true) : LtEpilogue::kBias;
        p.post = act != GemmAct::kNone && !lt_act;
      } else {
        p.post = p.post_bias = true;
      }
    }
    p.lt.m = g.m;
    p.lt.n = g.n;
    p.lt.k = g.k;
    if (g.inner > 1 && g.a_full && !g.b_full) {
      p.lt.m = g.inner * g.m;  // B is shared by the inner batch: fold the batch into M
    } else if (g.inner > 1) {
      p.lt.batch = g.inner;
      p.lt.stride_a = g.a_full ? g.m * g.k : 0;
      p.lt.stride_b = g.b_full ? g.k * g.n : 0;
      p.lt.stride_y = g.m * g.n;
    }
    if (cfg.residual) {  // R has Y's layout: C = R, beta 1
      p.lt.has_c = true;
      p.lt.stride_c = p.lt.stride_y;
    }
    return p;
  }
  if (sa.size() != 2 || sb.size() != 2)
    return Err(StatusCode::kInvalidArgument, "{}: Gemm needs 2-D A and B", cfg.where);
  MatMulGeometry& g = p.geo;
  g.m = cfg.ta ? sa[1] : sa[0];
  g.k = cfg.ta ? sa[0] : sa[1];
  g.n = cfg.tb ? sb[0] : sb[1];
  if ((cfg.tb ? sb[1] : sb[0]) != g.k)
    return Err(StatusCode::kInvalidArgument, "{}: inner dimensions of A and B differ", cfg.where);
  p.out_numel = g.m * g.n;
  p.lt.trans_a = cfg.ta;
  p.lt.trans_b = cfg.tb;
  p.lt.m = g.m;
  p.lt.n = g.n;
  p.lt.k = g.k;
  if (cfg.c_input && s2 && cfg.beta != 0.f && Product(*s2) > 0) {
    const std::vector<int64_t>& cs = *s2;
    p.c_rows = cs.size() >= 2 ? cs[cs.size() - 2] : 1;
    p.c_cols = cs.empty() ? 1 : cs.back();
    if (cs.size() > 2 || (p.c_rows != 1 && p.c_rows != g.m) || (p.c_cols != 1 && p.c_cols != g.n))
      return Err(StatusCode::kInvalidArgument, "{}: C does not broadcast to [{},{}]", cfg.where, g.m, g.n);
    if (cfg.residual) {  // cuBLASLt's C carries the residual: Gemm's C must be a bias (beta 1, one row)
      if (p.c_rows != 1 || p.c_cols != g.n || cfg.beta != 1.f)
        return Err(StatusCode::kUnsupported,
                   "{}: with a residual, C must be a bias row [1,{}] with beta 1 (got [{},{}], beta {})", cfg.where,
                   g.n, p.c_rows, p.c_cols, cfg.beta);
      p.c_mode = GemmPlan::CMode::kBias;
    } else if (p.c_rows == g.m && p.c_cols == g.n) p.c_mode = GemmPlan::CMode::kDirect;
    else if (p.c_rows == 1 && p.c_cols == g.n && cfg.beta == 1.f) p.c_mode = GemmPlan::CMode::kBias;
    else p.c_mode = GemmPlan::CMode::kFill;
  }
  using CMode = GemmPlan::CMode;
  p.lt.has_c = p.c_mode == CMode::kDirect || p.c_mode == CMode::kFill || cfg.residual;
  if (!lt_epilogue) {
    p.post_bias = p.c_mode == CMode::kBias;
    p.post = p.post_bias || act != GemmAct::kNone;
  } else if (p.c_mode == CMode::kNone || p.c_mode == CMode::kBias) {
    const bool bias = p.c_mode == CMode::kBias;  // C is a row vector and beta is 1: cuBLASLt's bias epilogue
    p.lt.epilogue = lt_act ? with_act(bias) : (bias ? LtEpilogue::kBias : LtEpilogue::kNone);
    p.post = act != GemmAct::kNone && !lt_act;
  } else {
    p.post = act != GemmAct::kNone;  // with a C matrix the activation runs after the GEMM, in its own kernel
  }
  return p;
}

std::optional<std::vector<int64_t>> Shape2(const std::vector<DeviceTensor>& in) {
  if (in.size() > 2 && in[2].present()) return in[2].shape;
  return std::nullopt;
}

const char* At(const void* p, int64_t elements, size_t es) {
  return static_cast<const char*>(p) + elements * static_cast<int64_t>(es);
}

// ---- cuBLASLt layer ----

class LtGemmLayer : public Layer {
 public:
  LtGemmLayer(GemmConfig cfg, bool lt_epilogue, std::optional<LtAlgo> tuned, LtGemmShape tuned_shape,
              size_t tuned_ws)
      : cfg_(std::move(cfg)), lt_epilogue_(lt_epilogue), tuned_(tuned), tuned_shape_(tuned_shape),
        tuned_ws_(tuned_ws) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>&, const std::vector<DeviceTensor>&) const override {
    return kLtWorkspaceBytes;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    if (in.size() < 2 || out.empty()) return Err(StatusCode::kInvalidArgument, "{}: missing operands", cfg_.where);
    const auto s2 = Shape2(in);
    KILN_ASSIGN_OR_RETURN(GemmPlan p, MakePlan(cfg_, in[0].shape, in[1].shape, s2 ? &*s2 : nullptr, lt_epilogue_));
    if (p.out_numel == 0) return Status::Ok();
    if (out[0].numel() != p.out_numel)
      return Err(StatusCode::kInternal, "{}: output has {} elements, the product {}", cfg_.where, out[0].numel(),
                 p.out_numel);
    const int code = static_cast<int>(cfg_.dtype);
    const size_t es = DataTypeSize(cfg_.dtype);
    void* y = out[0].data;
    const void* c = s2 ? in[2].data : nullptr;
    const MatMulGeometry& g = p.geo;
    const void* r = nullptr;  // the residual, Y's shape and layout
    if (cfg_.residual) {
      if (in.size() < 4 || !in[3].present() || in[3].numel() != p.out_numel || in[3].dtype != cfg_.dtype)
        return Err(StatusCode::kInvalidArgument, "{}: the residual must have the output's {} elements of {}",
                   cfg_.where, p.out_numel, DataTypeName(cfg_.dtype));
      r = in[3].data;
      if (g.k == 0) {  // Y = R (+ bias)
        KILN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y, r, static_cast<size_t>(p.out_numel) * es,
                                                  cudaMemcpyDeviceToDevice, ctx.stream));
        if (cfg_.bias_input || p.c_mode == GemmPlan::CMode::kBias)
          KILN_CUDA_RETURN_IF_ERROR(LaunchGemmPostOp(code, y, p.out_numel, g.n, c, cfg_.act, ctx.stream));
        return Status::Ok();
      }
    }
    if (p.c_mode != GemmPlan::CMode::kNone && (p.c_mode == GemmPlan::CMode::kFill || g.k == 0))
      KILN_CUDA_RETURN_IF_ERROR(LaunchBroadcastFill(code, y, g.m, g.n, c, p.c_rows, p.c_cols, cfg_.beta, ctx.stream));
    if (g.k == 0) {  // nothing to multiply: Y = beta * C or 0, then bias and activation
      if (p.c_mode == GemmPlan::CMode::kNone)
        KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y, 0, static_cast<size_t>(p.out_numel) * es, ctx.stream));
      if (cfg_.bias_input || cfg_.act.act != GemmAct::kNone)
        KILN_CUDA_RETURN_IF_ERROR(
            LaunchGemmPostOp(code, y, p.out_numel, g.n, cfg_.bias_input ? c : nullptr, cfg_.act, ctx.stream));
      return Status::Ok();
    }
    LtGemmArgs args;
    args.alpha = cfg_.alpha;
    if (p.c_mode == GemmPlan::CMode::kDirect) {
      args.c = c;
      args.beta = cfg_.beta;
    } else if (p.c_mode == GemmPlan::CMode::kFill) {
      args.c = y;  // beta * C already materialized in Y
      args.beta = 1.f;
    }
    if (r) args.beta = 1.f;  // C = R (kNone / kBias C modes only)
    if (LtEpilogueHasBias(p.lt.epilogue)) args.bias = c;
    const LtAlgo* tuned = tuned_ && p.lt == tuned_shape_ ? &*tuned_ : nullptr;
    for (int64_t o = 0; o < g.outer; ++o) {
      int64_t rem = o, a_off = 0, b_off = 0;
      for (size_t d = g.split; d-- > 0;) {
        const int64_t i = rem % g.batch[d];
        rem /= g.batch[d];
        a_off += i * g.a_bstride[d];
        b_off += i * g.b_bstride[d];
      }
      args.a = At(in[0].data, a_off * g.m * g.k, es);
      args.b = At(in[1].data, b_off * g.k * g.n, es);
      args.y = const_cast<char*>(At(y, o * g.inner * g.m * g.n, es));
      if (p.c_mode == GemmPlan::CMode::kFill) args.c = args.y;
      if (r) args.c = At(r, o * g.inner * g.m * g.n, es);
      KILN_RETURN_IF_ERROR(LtGemmRun(ctx.cublaslt, p.lt, args, tuned, tuned_ws_, ctx.workspace, ctx.workspace_bytes,
                                     ctx.stream));
    }
    if (p.post)
      KILN_CUDA_RETURN_IF_ERROR(
          LaunchGemmPostOp(code, y, p.out_numel, g.n, p.post_bias ? c : nullptr, cfg_.act, ctx.stream));
    return Status::Ok();
  }

 private:
  GemmConfig cfg_;
  bool lt_epilogue_;
  std::optional<LtAlgo> tuned_;
  LtGemmShape tuned_shape_;
  size_t tuned_ws_;
};

// ---- generic layer (float64, integers) ----

class GenericGemmLayer : public Layer {
 public:
  explicit GenericGemmLayer(GemmConfig cfg) : cfg_(std::move(cfg)) {}

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    if (in.size() < 2 || out.empty()) return Err(StatusCode::kInvalidArgument, "{}: missing operands", cfg_.where);
    const auto s2 = Shape2(in);
    KILN_ASSIGN_OR_RETURN(GemmPlan p, MakePlan(cfg_, in[0].shape, in[1].shape, s2 ? &*s2 : nullptr, false));
    if (p.out_numel == 0) return Status::Ok();
    const MatMulGeometry& g = p.geo;
    ContractionParams cp;
    cp.num_operands = 2;
    cp.operands[0] = in[0].data;
    cp.operands[1] = in[1].data;
    cp.out = out[0].data;
    // Labels: batch dims..., m, n (the output), k (summed).
    const int nb = static_cast<int>(g.batch.size());
    if (nb + 3 > kMaxContractionLabels)
      return Err(StatusCode::kUnsupported, "{}: too many batch dimensions ({})", cfg_.where, nb);
    const int lm = nb, ln = nb + 1, lk = nb + 2;
    cp.num_labels = nb + 3;
    cp.num_out = nb + 2;
    for (int d = 0; d < nb; ++d) {
      cp.sizes[d] = g.batch[d];
      cp.strides[0][d] = g.a_bstride[d] * g.m * g.k;
      cp.strides[1][d] = g.b_bstride[d] * g.k * g.n;
    }
    cp.sizes[lm] = g.m;
    cp.sizes[ln] = g.n;
    cp.sizes[lk] = g.k;
    cp.strides[0][lm] = cfg_.ta ? 1 : g.k;
    cp.strides[0][lk] = cfg_.ta ? g.m : 1;
    cp.strides[1][ln] = cfg_.tb ? g.k : 1;
    cp.strides[1][lk] = cfg_.tb ? 1 : g.n;
    if (cfg_.is_gemm) {
      cp.alpha = cfg_.alpha;
      cp.beta = cfg_.beta;
      if (p.c_mode != GemmPlan::CMode::kNone) {
        cp.c = in[2].data;
        cp.c_strides[lm] = p.c_rows == 1 ? 0 : p.c_cols;
        cp.c_strides[ln] = p.c_cols == 1 ? 0 : 1;
      }
    }
    const int code = static_cast<int>(cfg_.dtype);
    KILN_CUDA_RETURN_IF_ERROR(LaunchContraction(code, cp, ctx.stream));
    if (cfg_.bias_input || cfg_.act.act != GemmAct::kNone)
      KILN_CUDA_RETURN_IF_ERROR(LaunchGemmPostOp(code, out[0].data, p.out_numel, g.n,
                                                 cfg_.bias_input ? in[2].data : nullptr, cfg_.act, ctx.stream));
    return Status::Ok();
  }

 private:
  GemmConfig cfg_;
};

// ---- factory ----

// The plan at the spec's tuning shapes, or nullopt where they are unknown.
Result<std::optional<GemmPlan>> SpecPlan(const LayerSpec& spec, const GemmConfig& cfg, bool lt_epilogue) {
  const auto& s = spec.input_shapes;
  if (s.size() < 2 || s[0].empty() || s[1].empty()) return std::optional<GemmPlan>();
  const std::vector<int64_t>* s2 = s.size() > 2 && spec.node.input(2) ? &s[2] : nullptr;
  KILN_ASSIGN_OR_RETURN(GemmPlan p, MakePlan(cfg, s[0], s[1], s2, lt_epilogue));
  return std::optional<GemmPlan>(std::move(p));
}

bool Tunable(const GemmPlan& p) { return p.out_numel > 0 && p.geo.k > 0; }

Result<std::vector<std::string>> GemmTactics(const LayerSpec& spec) {
  KILN_ASSIGN_OR_RETURN(GemmConfig cfg, ReadConfig(spec));
  if (!IsLtType(cfg.dtype)) return std::vector<std::string>{std::string(kGenericTactic)};
  KILN_ASSIGN_OR_RETURN(auto plan, SpecPlan(spec, cfg, true));
  if (!plan || !Tunable(*plan)) return std::vector<std::string>{std::string(kHeuristicTactic)};
  KILN_ASSIGN_OR_RETURN(cublasLtContext * h, SharedLtHandle());
  KILN_ASSIGN_OR_RETURN(auto algos,
                        LtHeuristicAlgos(h, plan->lt, kLtWorkspaceBytes, kMaxTactics, LtTunedAlignment(plan->lt)));
  std::string prefix;
  if (algos.empty() && plan->lt.epilogue != LtEpilogue::kNone) {  // no algorithm with the epilogue: run it apart
    KILN_ASSIGN_OR_RETURN(plan, SpecPlan(spec, cfg, false));
    KILN_ASSIGN_OR_RETURN(algos,
                          LtHeuristicAlgos(h, plan->lt, kLtWorkspaceBytes, kMaxTactics, LtTunedAlignment(plan->lt)));
    prefix = kPostOpPrefix;
  }
  if (algos.empty())
    return Err(StatusCode::kUnsupported,
               "{}: cuBLASLt has no algorithm for this {} (M={} N={} K={} batch={}, {}); run the node on the CPU",
               cfg.where, DataTypeName(cfg.dtype), plan->lt.m, plan->lt.n, plan->lt.k, plan->lt.batch,
               cfg.tf32 ? "TF32 allowed" : "no TF32");
  std::vector<std::string> names;
  for (const LtAlgo& a : algos) names.push_back(prefix + LtAlgoToTactic(a));
  return names;
}

Result<std::unique_ptr<Layer>> GemmCreate(const LayerSpec& spec, const std::string& tactic) {
  KILN_ASSIGN_OR_RETURN(GemmConfig cfg, ReadConfig(spec));
  if (!IsLtType(cfg.dtype)) {
    if (tactic != kGenericTactic && tactic != "default")
      return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}' for {} (expected '{}')", cfg.where, tactic,
                 DataTypeName(cfg.dtype), kGenericTactic);
    return std::unique_ptr<Layer>(std::make_unique<GenericGemmLayer>(std::move(cfg)));
  }
  std::string_view name = tactic;
  const bool lt_epilogue = !name.starts_with(kPostOpPrefix);
  if (!lt_epilogue) name.remove_prefix(kPostOpPrefix.size());
  if (name == kHeuristicTactic || name == "default")
    return std::unique_ptr<Layer>(std::make_unique<LtGemmLayer>(std::move(cfg), lt_epilogue, std::nullopt,
                                                                LtGemmShape{}, 0));
  const std::optional<LtAlgo> algo = LtAlgoFromTactic(name);
  if (!algo)
    return Err(StatusCode::kInvalidArgument,
               "{}: unknown tactic '{}' (expected 'cublaslt:<algorithm>' or '{}', optionally after '{}')", cfg.where,
               tactic, kHeuristicTactic, kPostOpPrefix);
  KILN_ASSIGN_OR_RETURN(auto plan, SpecPlan(spec, cfg, lt_epilogue));
  if (!plan || !Tunable(*plan))
    return Err(StatusCode::kInvalidArgument,
               "{}: tactic '{}' names a tuned cuBLASLt algorithm but the layer's shapes are unknown or empty; use '{}'",
               cfg.where, tactic, kHeuristicTactic);
  KILN_ASSIGN_OR_RETURN(cublasLtContext * h, SharedLtHandle());
  auto ws = LtCheckAlgo(h, plan->lt, *algo);
  if (!ws.ok())
    return Err(StatusCode::kUnsupported,
               "{}: the tuned cuBLASLt algorithm of tactic '{}' does not run this GEMM on this GPU/cuBLASLt ({}); "
               "rebuild the engine for this machine",
               cfg.where, tactic, ws.status().message());
  if (*ws > kLtWorkspaceBytes)
    return Err(StatusCode::kUnsupported, "{}: the cuBLASLt algorithm of tactic '{}' needs {} bytes of workspace (max {})",
               cfg.where, tactic, *ws, kLtWorkspaceBytes);
  return std::unique_ptr<Layer>(
      std::make_unique<LtGemmLayer>(std::move(cfg), lt_epilogue, algo, plan->lt, *ws));
}

}  // namespace

void RegisterMatmulLayers(LayerRegistry& r) {
  for (const char* op : {"MatMul", "Gemm", "kiln.FusedGemm", "kiln.FusedMatMul"}) r.Add(op, LayerFactory{GemmTactics, GemmCreate});
  r.Add("Einsum", EinsumLayerFactory());
}

}  // namespace kiln::cuda
