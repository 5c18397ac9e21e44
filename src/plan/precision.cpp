// Precision planning (see precision.h).
#include "plan/precision.h"

#include "ops/op_def.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kiln {

namespace {

// float32 -> float16 of in[begin, end), finite values beyond FP16's range saturated to +-65504; returns whether any
// value saturated.
bool ToHalfScalar(const float* in, uint16_t* out, int64_t begin, int64_t end) {
  bool clamped = false;
  for (int64_t i = begin; i < end; ++i) {
    float x = in[i];
    if (std::isfinite(x) && std::fabs(x) > 65504.0f) {
      x = x > 0 ? 65504.0f : -65504.0f;
      clamped = true;
    }
    out[i] = FloatToHalf(x);
  }
  return clamped;
}

#if defined(__x86_64__) || defined(__i386__)
// Whether the CPU has AVX and F16C, and the OS saves AVX state (CPUID leaf 1: ECX bits 27 OSXSAVE, 28 AVX, 29
// F16C). Asked through cpuid rather than __builtin_cpu_supports("f16c"), which clang 14 does not know.
bool CpuHasF16C() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
  return (c & need) == need;
}

// The same conversion with the F16C instructions, 8 values at a time (round to nearest even, as FloatToHalf; a NaN
// stays a NaN). Values were saturated to the FP16 range before, so none overflows to inf.
__attribute__((target("avx,f16c"))) bool ToHalfF16C(const float* in, uint16_t* out, int64_t begin, int64_t end) {
  bool clamped = false;
  const __m256 limit = _mm256_set1_ps(65504.0f), inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 x = _mm256_loadu_ps(in + i);
    const __m256 mag = _mm256_andnot_ps(sign_mask, x);
    // finite and beyond the range: |x| > 65504 and |x| < inf (NaN compares false on both)
    const __m256 over = _mm256_and_ps(_mm256_cmp_ps(mag, limit, _CMP_GT_OQ), _mm256_cmp_ps(mag, inf, _CMP_LT_OQ));
    if (_mm256_movemask_ps(over)) {
      clamped = true;
      x = _mm256_blendv_ps(x, _mm256_or_ps(limit, _mm256_and_ps(x, sign_mask)), over);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  return ToHalfScalar(in, out, i, end) || clamped;
}
#endif

// float32 -> float16 of a weight, finite values beyond FP16's range saturated to +-65504 (a mask's
// finfo(float32).min, say, would otherwise become inf and turn 0 * mask into NaN). Large tensors are split over
// the host's threads, with F16C where the CPU has it: BERT-base's 110M weights take a few tens of milliseconds.
// Returns whether any value saturated.
bool Float32ToHalfSaturating(const float* in, uint16_t* out, int64_t n) {
  auto run = [&](int64_t begin, int64_t end) {
#if defined(__x86_64__) || defined(__i386__)
    static const bool f16c = CpuHasF16C();
    if (f16c) return ToHalfF16C(in, out, begin, end);
#endif
    return ToHalfScalar(in, out, begin, end);
  };
  constexpr int64_t kPerThread = int64_t{1} << 18;
  const int64_t threads = std::clamp<int64_t>(n / kPerThread, 1, std::max(1u, std::thread::hardware_concurrency()));
  if (threads == 1) return run(0, n);
  std::vector<char> clamped(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  const int64_t step = (n + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { clamped[static_cast<size_t>(t)] = run(t * step, std::min(n, (t + 1) * step)); });
  for (auto& th : pool) th.join();
  return std::any_of(clamped.begin(), clamped.end(), [](char c) { return c != 0; });
}

bool IsFloat32(const Value* v) { return v && v->dtype == DataType::kFloat32; }

// Ops that never compute in the reduced type (OpDef trait keeps_fp32).
bool KeepsFloat32(const Node& n) { return TraitsOf(n).keeps_fp32; }

// Float inputs that are parameters, not data (OpDef trait): they keep their type when the node is lowered.
bool IsParameterInput(const Node& n, size_t i) { return TraitsOf(n).is_parameter_input(i); }

// Nodes whose float outputs are all tiny vectors (rank <= 1, at most 64 elements, or known symbolically): shape and scale arithmetic,
// which must stay exact (a dim above 2048 is not exact in FP16) and costs nothing in float32.
bool IsShapeArithmetic(const Node& n) {
  bool any = false;
  for (const Value* o : n.outputs) {
    if (!o || !IsFloatType(o->dtype)) continue;
    any = true;
    if (o->sym_value) continue;
    if (!o->has_shape || !IsStatic(o->shape) || o->is_graph_output) return false;
    if (o->shape.size() > 1 || NumElements(ToStatic(o->shape)) > 64) return false;
  }
  return any;
}

std::string DtypeSuffix(DataType t) { return t == DataType::kFloat16 ? "fp16" : t == DataType::kBFloat16 ? "bf16" : "fp32"; }

}  // namespace

Result<PrecisionReport> AssignPrecision(Graph& g, const PrecisionOptions& opts) {
  PrecisionReport rep;
  const DataType low = opts.low;
  if (low == DataType::kFloat32 && opts.io_types.empty() && opts.layer_precision.empty()) return rep;
  auto check = [](DataType t, const std::string& what) -> Status {
    if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
      return Err(StatusCode::kInvalidArgument, "precision planning: {} for {} is not fp32, fp16 or bf16",
                 DataTypeName(t), what);
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(check(low, "the engine"));
  for (const auto& [layer, t] : opts.layer_precision) KILN_RETURN_IF_ERROR(check(t, "layer '" + layer + "'"));

  // Converted copies of values: (value, dtype) -> the value holding it.
  std::map<std::pair<const Value*, DataType>, Value*> converted;
  std::vector<std::unique_ptr<Node>> old_nodes;
  old_nodes.swap(g.mutable_nodes());
  std::vector<std::unique_ptr<Node>>& out_nodes = g.mutable_nodes();
  int fresh = 0;
  // Appends Cast(in) -> out (to `to`) to the node list.
  auto add_cast = [&](const std::string& name, Value* in, Value* out, DataType to) {
    auto cast = std::make_unique<Node>();
    cast->name = name;
    cast->op_type = "Cast";
    cast->opset = g.opsets.count("") ? g.opsets.at("") : 21;
    cast->attrs["to"] = Attribute::Int(static_cast<int64_t>(to));
    cast->inputs = {in};
    cast->outputs = {out};
    out->producer = cast.get();
    out_nodes.push_back(std::move(cast));
    ++rep.casts_inserted;
  };

  auto convert = [&](Value* v, DataType to) -> Value* {
    auto key = std::make_pair(static_cast<const Value*>(v), to);
    if (auto it = converted.find(key); it != converted.end()) return it->second;
    Value* r;
    if (v->is_const()) {
      const Tensor& src = *v->const_value;
      Tensor converted_value;
      bool clamped = false;
      if (to == DataType::kFloat16) {
        const Tensor f = CastTensor(src, DataType::kFloat32);  // float32 itself is shared, not copied
        converted_value = Tensor::Uninitialized(DataType::kFloat16, src.shape());
        clamped = Float32ToHalfSaturating(f.data<float>(), converted_value.data<uint16_t>(), f.numel());
      } else {
        converted_value = CastTensor(src, to);
      }
      if (clamped) {
        ++rep.constants_clamped;
        rep.details.push_back("constant '" + v->name + "' has values beyond the float16 range: saturated to +-65504");
      }
      r = g.AddConstant(v->name + "_" + DtypeSuffix(to), std::move(converted_value));
      ++rep.constants_converted;
    } else {
      r = g.AddValue(v->name + "_" + DtypeSuffix(to));
      r->dtype = to;
      r->shape = v->shape;
      r->has_shape = v->has_shape;
      add_cast("kiln_cast_" + std::to_string(fresh++) + "_" + v->name, v, r, to);
    }
    converted[key] = r;
    return r;
  };

  // Values whose original type was float32 (they may now hold the reduced type).
  std::set<const Value*> orig_f32;
  std::map<const Value*, DataType> orig_type;
  for (Value* in : g.inputs) {
    auto it = opts.io_types.find(in->name);
    if (it == opts.io_types.end() || it->second == in->dtype) continue;
    if (!IsFloatType(in->dtype) || !IsFloatType(it->second))
      return Err(StatusCode::kInvalidArgument, "input '{}' is {}: its I/O format cannot be {}", in->name,
                 DataTypeName(in->dtype), DataTypeName(it->second));
    if (in->dtype == DataType::kFloat32) orig_f32.insert(in);
    in->dtype = it->second;  // the engine takes the boundary type; consumers get what they compute in
    converted[{in, in->dtype}] = in;
  }

  for (auto& np : old_nodes) {
    Node& n = *np;
    // (A sequence or optional of float32 keeps its type: no Cast takes one, and the ops that read them keep float32.)
    auto was_f32 = [&](const Value* v) {
      return v && v->kind == ValueKind::kTensor && (v->dtype == DataType::kFloat32 || orig_f32.count(v));
    };
    bool has_float = false;
    for (const Value* v : n.inputs) has_float |= was_f32(v);
    for (const Value* v : n.outputs) has_float |= was_f32(v);
    // The node's compute type: its --layerPrecisions entry, else the engine's reduced type.
    DataType target = low;
    auto pin = opts.layer_precision.find(n.name);
    if (pin != opts.layer_precision.end()) target = pin->second;
    bool lower = target != DataType::kFloat32 && has_float && !KeepsFloat32(n);
    std::string why_fp32 = "op kept exact";
    if (lower && IsShapeArithmetic(n)) {
      lower = false;
      why_fp32 = "small tensors: shape or scale arithmetic";
    } else if (lower && opts.kernel_takes && !opts.kernel_takes(n, target)) {
      lower = false;  // the backend's kernel for this node declares no reduced-type variant
      why_fp32 = std::string("the backend's kernel takes no ") + DataTypeName(target);
    }
    if (opts.obey_layer_precisions && has_float && pin != opts.layer_precision.end() && !lower &&
        target != DataType::kFloat32)
      return Err(StatusCode::kUnsupported,
                 "{}: --layerPrecisions asks for {}, which cannot be honoured ({}), and --precisionConstraints=obey "
                 "makes that an error; drop the entry or use --precisionConstraints=prefer",
                 n.Where(), DataTypeName(target), why_fp32);
    if (has_float && pin != opts.layer_precision.end())
      rep.details.push_back(n.Where() + ": computes in " + DataTypeName(lower ? target : DataType::kFloat32) +
                            (lower || target == DataType::kFloat32 ? " (--layerPrecisions)"
                                                                    : " (--layerPrecisions; " + why_fp32 + ")"));
    else if (has_float && !lower && low != DataType::kFloat32)
      rep.details.push_back(n.Where() + ": computes in float32 (" + why_fp32 + ")");
    if (has_float && (low != DataType::kFloat32 || pin != opts.layer_precision.end()))
      (lower ? rep.lowered : rep.kept_fp32) += 1;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value* v = n.inputs[i];
      if (!v || !was_f32(v)) continue;
      if (n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size")) continue;  // they read dims, not data
      // The type this node wants: the reduced one for lowered data inputs, float32 otherwise.
      const DataType want = (lower && !IsParameterInput(n, i)) ? target : DataType::kFloat32;
      if (v->dtype == want) continue;
      if (auto it = converted.find({v, want}); it != converted.end()) n.inputs[i] = it->second;
      else n.inputs[i] = convert(v, want);
    }
    if (lower)
      for (Value* o : n.outputs)
        if (IsFloat32(o)) {
          o->dtype = target;
          orig_f32.insert(o);
          converted[{o, target}] = o;
        }
    out_nodes.push_back(std::move(np));
  }

  // Graph outputs leave in their boundary type (float32 unless --outputIOFormats says otherwise).
  for (Value* o : g.outputs) {
    auto io = opts.io_types.find(o->name);
    if (io != opts.io_types.end() && (!IsFloatType(io->second) || !(IsFloat32(o) || orig_f32.count(o) ||
                                                                     IsFloatType(o->dtype))))
      return Err(StatusCode::kInvalidArgument, "output '{}' is {}: its I/O format cannot be {}", o->name,
                 DataTypeName(o->dtype), DataTypeName(io->second));
    if (!orig_f32.count(o) && io == opts.io_types.end()) continue;
    const DataType boundary = io != opts.io_types.end() ? io->second : DataType::kFloat32;
    if (o->dtype == boundary) continue;
    if (o->is_graph_input || !o->producer)
      return Err(StatusCode::kUnsupported, "output '{}' is also an input: its I/O format cannot differ", o->name);
    Value* inner = g.AddValue(o->name + "_" + DtypeSuffix(o->dtype));
    inner->dtype = o->dtype;
    inner->shape = o->shape;
    inner->has_shape = o->has_shape;
    inner->producer = o->producer;
    for (Value*& x : o->producer->outputs)
      if (x == o) x = inner;
    for (auto& m : out_nodes)
      for (Value*& x : m->inputs)
        if (x == o) x = inner;
    o->dtype = boundary;
    add_cast("kiln_cast_out_" + o->name, inner, o, boundary);
  }
  return rep;
}

}  // namespace kiln
