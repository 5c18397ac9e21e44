// CUDA layers of the pointwise family, part 2: Cast, CastLike, QuantizeLinear, DequantizeLinear (kernels in
// pointwise_cast.cu), DynamicQuantizeLinear (dynamic_quantize.cu) and kiln.FusedPointwise (fused_pointwise.cu).
// Semantics follow the CPU reference (src/backends/cpu/elementwise_cast.cpp, tensor_more_ops.cpp,
// fused_pointwise.cpp). One tactic each ("default"), except
// FusedPointwise: "nvrtc" (generated code) and "interp".
#include <memory>
#include <string>
#include <utility>

#include "backends/cuda/dynamic_quantize_kernels.h"
#include "backends/cuda/fused_pointwise_codegen.h"
#include "backends/cuda/pointwise_layers_util.h"
#include "ops/fused_ops.h"
#include "ops/quantize_linear.h"

namespace kiln::cuda::pwl {
namespace {

bool IsFloat8(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2 ||
         t == DataType::kFloat8E5M2FNUZ;
}
bool IsScaleType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}
// ONNX 1.18+'s narrow types, one value per byte, which only these layers take (holds_narrow_types below;
// layer_registry.cpp refuses them for every other layer).
bool IsNarrowType(DataType t) {
  return t == DataType::kFloat4E2M1 || t == DataType::kFloat8E8M0 || Is2BitType(t);
}
// Every dtype Cast handles: numeric (int2/uint2 and int4/uint4 included), bool, float8, float4e2m1, float8e8m0.
bool IsCastType(DataType t) {
  return IsIntegerType(t) || IsScaleType(t) || t == DataType::kBool || IsFloat8(t) || IsNarrowType(t);
}
// Cast-24's round_mode (float8e8m0 only): "up" (the default; the CPU reads any other string as "up" too), "down",
// "nearest".
int CastRoundMode(const std::string& mode) {
  if (mode == "down") return kCastRoundDown;
  if (mode == "nearest") return kCastRoundNearest;
  return kCastRoundUp;
}
// A factory of these layers, marked as taking the narrow types.
LayerFactory NarrowFactory(LayerFactory f) {
  f.holds_narrow_types = true;
  return f;
}
std::string TypeName(DataType t) { return DataTypeName(t); }

// ---- Cast / CastLike ----
LayerFactory CastFactory(bool like) {
  return Factory([like](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType from = InputType(n, 0);
    const DataType to = like ? InputType(n, 1) : static_cast<DataType>(n.geti("to", 0));
    if (!IsCastType(from)) return NotSupported(n, "casting from " + TypeName(from), "use a numeric, bool or float8 type");
    if (!IsCastType(to)) return NotSupported(n, "casting to " + TypeName(to), "use a numeric, bool or float8 type");
    const bool saturate = n.geti("saturate", 1) != 0;
    const int round_mode = CastRoundMode(n.gets("round_mode", "up"));
    const std::string where = n.Where();
    return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      if (in[0].dtype == out[0].dtype) {
        if (out[0].nbytes() == 0) return Status::Ok();
        return InNode(where, KILN_CUDA_STATUS(cudaMemcpyAsync(out[0].data, in[0].data, out[0].nbytes(),
                                                              cudaMemcpyDeviceToDevice, ctx.stream)));
      }
      return InNode(where, KILN_CUDA_STATUS(LaunchCast(Code(in[0].dtype), Code(out[0].dtype), saturate, round_mode,
                                                       in[0].data, out[0].data, out[0].numel(), ctx.stream)));
    });
  });
}

// ---- QuantizeLinear / DequantizeLinear ----
int64_t Product(const std::vector<int64_t>& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= s[d];
  return p;
}

// Where scale / zero point elements sit for x (the CPU reference's MakeQuantLayout): per tensor (one element,
// no block_size), per axis (1-D along `axis`), or blocked (x's shape with ceil(D / block) along the axis).
Result<QuantLayout> MakeLayout(const std::string& where, const std::vector<int64_t>& x,
                               const std::vector<int64_t>& param, int64_t axis_attr, int64_t block, const char* what) {
  QuantLayout l;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (Product(param, 0, param.size()) == 1 && block <= 0) return l;  // per tensor: every index is 0
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (axis < 0 || axis >= rank)
    return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for input of rank {}", where, axis_attr,
               rank);
  l.dim = x[axis];
  l.inner = Product(x, axis + 1, x.size());
  if (block <= 0) {
    if (param.size() != 1 || param[0] != l.dim)
      return Err(StatusCode::kInvalidArgument, "{}: {} of shape {} does not match axis {} of input {}", where, what,
                 ShapeToString(param), axis, ShapeToString(x));
    l.axis_step = 1;
    return l;
  }
  bool ok = static_cast<int64_t>(param.size()) == rank;
  for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis ? param[d] == (x[d] + block - 1) / block : param[d] == x[d];
  if (!ok)
    return Err(StatusCode::kInvalidArgument, "{}: {} of shape {} does not fit blocked quantization of {} with "
               "block_size {} on axis {}", where, what, ShapeToString(param), ShapeToString(x), block, axis);
  l.block = block;
  l.inner_step = 1;
  l.axis_step = l.inner;
  l.outer_step = param[axis] * l.inner;
  return l;
}

// The scale's layout, and the zero point (nullptr when omitted) with its layout (then the scale's), of a
// Q/DQ node's inputs {x, scale, zero point}.
struct QuantParams {
  QuantLayout scale;
  const void* zero_point = nullptr;
  QuantLayout zero_point_layout;
};

Result<QuantParams> QuantParamsOf(const std::string& where, const std::vector<DeviceTensor>& in, int64_t axis,
                                  int64_t block) {
  QuantParams q;
  KILN_ASSIGN_OR_RETURN(q.scale, MakeLayout(where, in[0].shape, in[1].shape, axis, block, "scale"));
  q.zero_point_layout = q.scale;
  if (in.size() > 2 && in[2].present()) {
    q.zero_point = in[2].data;
    KILN_ASSIGN_OR_RETURN(q.zero_point_layout, MakeLayout(where, in[0].shape, in[2].shape, axis, block, "zero point"));
  }
  return q;
}

LayerFactory QuantizeFactory() {
  return Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType x = InputType(n, 0), s = InputType(n, 1), z = InputType(n, 2);
    const DataType y = n.outputs.empty() || !n.outputs[0] ? DataType::kUndefined : n.outputs[0]->dtype;
    if (!(IsScaleType(x) || x == DataType::kInt32))
      return NotSupported(n, "input dtype " + TypeName(x), "quantize float32/float16/bfloat16/float64/int32");
    if (!IsScaleType(s)) return NotSupported(n, "scale dtype " + TypeName(s), "give a float32/float16/bfloat16 scale");
    const bool y_ok = y == DataType::kUInt8 || y == DataType::kInt8 || y == DataType::kUInt16 ||
                      y == DataType::kInt16 || y == DataType::kInt32 || Is4BitType(y) || Is2BitType(y) ||
                      y == DataType::kFloat4E2M1 || IsFloat8(y);
    if (!y_ok)
      return NotSupported(n, "quantizing to " + TypeName(y),
                          "use uint8/int8/uint16/int16/int32/int4/uint4/int2/uint2, float8 or float4e2m1");
    if (z != DataType::kUndefined && z != y)
      return NotSupported(n, "a " + TypeName(z) + " zero point with a " + TypeName(y) + " output",
                          "give the zero point the output's dtype");
    const int64_t axis = n.geti("axis", 1), block = n.geti("block_size", 0);
    const bool saturate = n.geti("saturate", 1) != 0;
    const int div = Code(quant_attrs::QuantizeDivisionType(n, x, s));
    const std::string where = n.Where();
    return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      KILN_ASSIGN_OR_RETURN(QuantParams q, QuantParamsOf(where, in, axis, block));
      return InNode(where, KILN_CUDA_STATUS(LaunchQuantize(Code(in[0].dtype), Code(in[1].dtype), Code(out[0].dtype),
                                                           saturate, in[0].data, in[1].data, q.scale, q.zero_point,
                                                           q.zero_point_layout, out[0].data, out[0].numel(),
                                                           ctx.stream, div)));
    });
  });
}

LayerFactory DequantizeFactory() {
  return Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType x = InputType(n, 0), s = InputType(n, 1), z = InputType(n, 2);
    if (!(IsIntegerType(x) || IsFloat8(x) || x == DataType::kFloat4E2M1))
      return NotSupported(n, "input dtype " + TypeName(x),
                          "dequantize an integer type (2 to 64 bits), float8 or float4e2m1");
    if (!IsScaleType(s)) return NotSupported(n, "scale dtype " + TypeName(s), "give a float32/float16/bfloat16 scale");
    if (z != DataType::kUndefined && !IsFloat8(x) && z != x)
      return NotSupported(n, "a " + TypeName(z) + " zero point with a " + TypeName(x) + " input",
                          "give the zero point the input's dtype");
    const int64_t axis = n.geti("axis", 1), block = n.geti("block_size", 0);
    const std::string where = n.Where();
    return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      KILN_ASSIGN_OR_RETURN(QuantParams q, QuantParamsOf(where, in, axis, block));
      return InNode(where, KILN_CUDA_STATUS(LaunchDequantize(Code(in[0].dtype), Code(in[1].dtype), Code(out[0].dtype),
                                                             in[0].data, in[1].data, q.scale, q.zero_point,
                                                             q.zero_point_layout, out[0].data, out[0].numel(),
                                                             ctx.stream)));
    });
  });
}

// ---- kiln.FusedPointwise ----
// Checks the node and translates its program for the interpreter kernel (used by both tactics: "nvrtc" falls
// back to it for shapes its generated kernel does not cover).
Result<PwProgramArgs> FusedPointwiseArgs(const Node& n, const fused::PwProgram& prog) {
  const size_t num_in = n.inputs.size();
  if (num_in < 1 || num_in > static_cast<size_t>(kPwMaxOperands))
    return NotSupported(n, fmt::format("{} inputs", num_in),
                        fmt::format("the CUDA kernel takes 1 to {}; split the fused group", kPwMaxOperands));
  if (prog.ops.size() > static_cast<size_t>(kPwMaxSteps))
    return NotSupported(n, fmt::format("a program of {} steps", prog.ops.size()),
                        fmt::format("the CUDA kernel runs up to {}; split the fused group", kPwMaxSteps));
  const DataType t = InputType(n, 0);
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return NotSupported(n, "dtype " + TypeName(t), "FusedPointwise runs float32/float16/bfloat16");
  for (size_t i = 0; i < num_in; ++i)
    if (InputType(n, i) != t)
      return NotSupported(n, fmt::format("input {} of dtype {} with input 0 of {}", i, TypeName(InputType(n, i)),
                                         TypeName(t)), "give every input one dtype");
  PwProgramArgs args;
  args.num_steps = static_cast<int>(prog.ops.size());
  auto slot = [](int64_t a) { return static_cast<uint8_t>(a >= 0 ? a : kPwMaxOperands + (-1 - a)); };
  for (size_t s = 0; s < prog.ops.size(); ++s) {
    if (prog.ops[s] == PwOp::kNone) return NotSupported(n, fmt::format("step {}'s op", s), "it has no formula");
    args.op[s] = static_cast<uint8_t>(prog.ops[s]);
    args.arg0[s] = slot(prog.args[2 * s]);
    // Unary steps repeat their operand in the second slot; reading it only for binary ops keeps it harmless.
    args.arg1[s] = slot(prog.arity[s] == 2 ? prog.args[2 * s + 1] : prog.args[2 * s]);
    args.alpha[s] = prog.alpha[s];
    args.beta[s] = prog.beta[s];
  }
  return args;
}

// Tactics: "nvrtc" (the program compiled to straight-line CUDA at layer creation, fused_pointwise_codegen.cpp)
// and "interp" (one precompiled kernel interpreting the program, fused_pointwise.cu).
LayerFactory FusedPointwiseFactory() {
  LayerFactory f;
  f.tactics = [](const LayerSpec& spec) -> Result<std::vector<std::string>> {
    const Node& n = spec.node;
    KILN_ASSIGN_OR_RETURN(fused::PwProgram prog, fused::ParseProgram(n, n.inputs.size()));
    KILN_RETURN_IF_ERROR(FusedPointwiseArgs(n, prog).status());
    return std::vector<std::string>{"nvrtc", "interp"};
  };
  f.create = [](const LayerSpec& spec, const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    KILN_ASSIGN_OR_RETURN(fused::PwProgram prog, fused::ParseProgram(n, n.inputs.size()));
    KILN_ASSIGN_OR_RETURN(PwProgramArgs args, FusedPointwiseArgs(n, prog));
    if (tactic == "nvrtc") return MakeFusedPointwiseNvrtcLayer(n, prog, args);
    if (tactic != "interp" && tactic != "default")
      return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}' (FusedPointwise has 'nvrtc' and 'interp')",
                 n.Where(), tactic);
    const std::string where = n.Where();
    return MakeLayer([where, args](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                   std::vector<DeviceTensor>& out) -> Status {
      std::vector<std::vector<int64_t>> shapes;
      const void* ptrs[kPwMaxOperands] = {};
      for (size_t i = 0; i < in.size() && i < static_cast<size_t>(kPwMaxOperands); ++i) {
        shapes.push_back(in[i].shape);
        ptrs[i] = in[i].data;
      }
      KILN_ASSIGN_OR_RETURN(PwBroadcast bc, MakePwBroadcast(where, out[0].shape, shapes));
      return InNode(where, KILN_CUDA_STATUS(LaunchFusedPointwise(Code(out[0].dtype), args, ptrs, out[0].data, bc,
                                                                 ctx.stream)));
    });
  };
  return f;
}

// ---- DynamicQuantizeLinear ----
// float32 x only (the op's one input type): y, y_scale and y_zero_point computed on the device (no host round trip),
// with a small fixed workspace for the min/max partials.
class DynamicQuantizeLayer : public Layer {
 public:
  explicit DynamicQuantizeLayer(std::string where) : where_(std::move(where)) {}
  size_t WorkspaceBytes(const std::vector<DeviceTensor>&, const std::vector<DeviceTensor>&) const override {
    return DynamicQuantizeWorkspaceBytes();
  }
  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    if (in[0].dtype != DataType::kFloat32)
      return Err(StatusCode::kInvalidArgument, "{}: x must be float32, got {}", where_, TypeName(in[0].dtype));
    auto wanted = [&](size_t i) { return i < out.size() && out[i].present() ? out[i].data : nullptr; };
    return InNode(where_, KILN_CUDA_STATUS(LaunchDynamicQuantizeLinear(
                              static_cast<const float*>(in[0].data), in[0].numel(), static_cast<uint8_t*>(out[0].data),
                              static_cast<float*>(wanted(1)), static_cast<uint8_t*>(wanted(2)), ctx.workspace,
                              ctx.workspace_bytes, ctx.stream)));
  }

 private:
  std::string where_;
};

LayerFactory DynamicQuantizeFactory() {
  LayerFactory f = Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    if (InputType(n, 0) != DataType::kFloat32)
      return NotSupported(n, "input dtype " + TypeName(InputType(n, 0)), "DynamicQuantizeLinear takes float32 x");
    return std::unique_ptr<Layer>(std::make_unique<DynamicQuantizeLayer>(n.Where()));
  });
  f.compute_types = {DataType::kFloat32};  // x stays float32 in reduced-precision engines
  return f;
}

}  // namespace

void RegisterCastQuantLayers(LayerRegistry& r) {
  r.Add("Cast", NarrowFactory(CastFactory(false)));
  r.Add("CastLike", NarrowFactory(CastFactory(true)));
  r.Add("QuantizeLinear", NarrowFactory(QuantizeFactory()));
  r.Add("DequantizeLinear", NarrowFactory(DequantizeFactory()));
  r.Add("DynamicQuantizeLinear", DynamicQuantizeFactory());
}

void RegisterFusedPointwiseLayer(LayerRegistry& r) { r.Add("kiln.FusedPointwise", FusedPointwiseFactory()); }

}  // namespace kiln::cuda::pwl
