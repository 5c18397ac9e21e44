// Shape functions of the quantized layers the optimizer creates (domain kiln; attributes in ops/quantized_ops.h):
// QConv and QMatMul. Their geometry is Conv's and MatMul's; their types are the quantization's.
#include "core/error.h"
#include "ops/families.h"
#include "ops/fused_ops.h"
#include "ops/quantized_ops.h"

namespace kiln {
namespace {

// Checks the quantization attributes and the types of X, W, B and R; returns the output type.
Result<DataType> CheckQuantized(const InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
  if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1))
    return Err(StatusCode::kInvalidModel, "{}: needs X and W", n.Where());
  const bool fp8 = ctx.in(0).dtype == DataType::kFloat8E4M3FN;
  if (fp8 && n.op_type != "QMatMul")
    return Err(StatusCode::kInvalidModel, "{}: float8 X is for QMatMul only", n.Where());
  if (!quant_attrs::IsQuantizedInput(ctx.in(0).dtype))
    return Err(StatusCode::kInvalidModel, "{}: X must be int8, uint8 or float8e4m3fn, not {}", n.Where(),
               DataTypeName(ctx.in(0).dtype));
  const DataType wt = fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8;
  if (ctx.in(1).dtype != wt)
    return Err(StatusCode::kInvalidModel, "{}: W must be {} for {} X, not {}", n.Where(), DataTypeName(wt),
               DataTypeName(ctx.in(0).dtype), DataTypeName(ctx.in(1).dtype));
  if (fp8 && (p.x_zero_point != 0 || p.r_scale > 0))
    return Err(StatusCode::kInvalidModel, "{}: a float8 layer has zero points 0 and no int8 residual", n.Where());
  if ((p.y_type == DataType::kFloat8E4M3FN) != fp8 && !(p.y_type == DataType::kFloat32 || p.y_type == DataType::kFloat16))
    return Err(StatusCode::kInvalidModel, "{}: kiln_y_type {} does not go with {} X", n.Where(), DataTypeName(p.y_type),
               DataTypeName(ctx.in(0).dtype));
  if (ctx.has_input(2) && ctx.in(2).dtype != DataType::kFloat32)
    return Err(StatusCode::kInvalidModel, "{}: the bias (input 2) must be float32, not {}", n.Where(),
               DataTypeName(ctx.in(2).dtype));
  const DataType rt = p.r_scale > 0 ? DataType::kInt8 : DataType::kFloat32;
  const bool half_residual = rt == DataType::kFloat32 && ctx.has_input(3) && ctx.in(3).dtype == DataType::kFloat16;
  if (ctx.has_input(3) && ctx.in(3).dtype != rt && !half_residual)
    return Err(StatusCode::kInvalidModel, "{}: the residual (input 3) must be {}, not {}{}", n.Where(),
               rt == DataType::kInt8 ? "int8" : "float32 or float16", DataTypeName(ctx.in(3).dtype),
               rt == DataType::kInt8 ? " (kiln_r_scale is set)" : " (an int8 residual needs kiln_r_scale)");
  if (!fp8 && ctx.in(0).dtype == DataType::kUInt8 ? (p.x_zero_point < 0 || p.x_zero_point > 255)
                                          : (p.x_zero_point < -128 || p.x_zero_point > 127))
    return Err(StatusCode::kInvalidModel, "{}: kiln_x_zero_point {} does not fit X's type {}", n.Where(),
               p.x_zero_point, DataTypeName(ctx.in(0).dtype));
  return p.y_type;
}

// Runs `base`'s shape function on a copy of the context whose X and W read as float32.
Status DelegateAsFloat(InferContext& ctx, const char* base, size_t inputs) {
  KILN_ASSIGN_OR_RETURN(const DataType out_type, CheckQuantized(ctx));
  InferContext f{ctx.node, {}, {}};
  for (size_t i = 0; i < inputs && i < ctx.num_inputs(); ++i) f.inputs.push_back(ctx.inputs[i]);
  for (auto& in : f.inputs)
    if (in) in->dtype = DataType::kFloat32, in->value = nullptr;
  f.outputs.resize(1);
  const OpDef* def = FindOp(kOnnxDomain, base);
  if (!def) return Err(StatusCode::kInternal, "{}: no shape function for {}", ctx.node.Where(), base);
  KILN_RETURN_IF_ERROR(def->infer(f));
  const TensorInfo& y = f.outputs[0];
  if (y.has_shape) ctx.set_output(0, out_type, y.shape);
  else ctx.set_output_rank_unknown(0, out_type);
  return Status::Ok();
}

Status QConvShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(DelegateAsFloat(ctx, "Conv", 3));
  const Node& n = ctx.node;
  KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
  if (ctx.in(1).has_shape && ctx.in(1).rank() >= 1 && ctx.in(1).shape[0].known()) {
    const int64_t m = ctx.in(1).shape[0].value;
    if (p.w_scales.size() != 1 && static_cast<int64_t>(p.w_scales.size()) != m)
      return Err(StatusCode::kInvalidModel, "{}: kiln_w_scales has {} entries for {} output channels (1 or {})",
                 n.Where(), p.w_scales.size(), m, m);
  }
  return Status::Ok();
}

Status QMatMulShape(InferContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.has_input(1) && ctx.in(1).has_shape && ctx.in(1).rank() != 2)
    return Err(StatusCode::kInvalidModel, "{}: W must be a [K, N] matrix, not {}", n.Where(),
               ShapeToString(ctx.in(1).shape));
  KILN_RETURN_IF_ERROR(DelegateAsFloat(ctx, "MatMul", 2));
  KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
  if (ctx.in(1).has_shape && ctx.in(1).shape[1].known()) {
    const int64_t cols = ctx.in(1).shape[1].value;
    if (p.w_scales.size() != 1 && static_cast<int64_t>(p.w_scales.size()) != cols)
      return Err(StatusCode::kInvalidModel, "{}: kiln_w_scales has {} entries for {} columns (1 or {})", n.Where(),
                 p.w_scales.size(), cols, cols);
    if (ctx.has_input(2) && ctx.in(2).has_shape &&
        (ctx.in(2).rank() != 1 || (ctx.in(2).shape[0].known() && ctx.in(2).shape[0].value != cols)))
      return Err(StatusCode::kInvalidModel, "{}: the bias must be [{}], not {}", n.Where(), cols,
                 ShapeToString(ctx.in(2).shape));
  }
  return Status::Ok();
}

// kiln.WeightOnlyMatMul: X [..., K] float times the packed 4-bit weight; Y [..., N] in X's type.
Status WeightOnlyMatMulShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_ASSIGN_OR_RETURN(const woq_attrs::Params p, woq_attrs::Read(n));
  if (ctx.num_inputs() < 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return Err(StatusCode::kInvalidModel, "{}: needs X, the packed weight and its scales", n.Where());
  const TensorInfo& x = ctx.in(0);
  const TensorInfo& w = ctx.in(1);
  const TensorInfo& s = ctx.in(2);
  if (x.dtype != DataType::kFloat32 && x.dtype != DataType::kFloat16 && x.dtype != DataType::kBFloat16)
    return Err(StatusCode::kInvalidModel, "{}: X must be float32, float16 or bfloat16, not {}", n.Where(),
               DataTypeName(x.dtype));
  if (w.dtype != DataType::kUInt8)
    return Err(StatusCode::kInvalidModel, "{}: the packed weight must be uint8, not {}", n.Where(), DataTypeName(w.dtype));
  if (s.dtype != DataType::kFloat32 && s.dtype != DataType::kFloat16 && s.dtype != DataType::kBFloat16)
    return Err(StatusCode::kInvalidModel, "{}: the scales must be float32, float16 or bfloat16, not {}", n.Where(),
               DataTypeName(s.dtype));
  if (ctx.has_input(3) && ctx.in(3).dtype != DataType::kInt8)
    return Err(StatusCode::kInvalidModel, "{}: the zero points must be int8, not {}", n.Where(),
               DataTypeName(ctx.in(3).dtype));
  if (!w.has_shape || w.rank() != 2 || !w.shape[0].known() || !w.shape[1].known() || w.shape[1].value != p.row_bytes())
    return Err(StatusCode::kInvalidModel, "{}: the packed weight must be [N, {}] for K = {}, not {}", n.Where(),
               p.row_bytes(), p.k, w.has_shape ? ShapeToString(w.shape) : std::string("unknown"));
  const int64_t cols = w.shape[0].value;
  for (size_t i : {size_t{2}, size_t{3}}) {
    if (!ctx.has_input(i)) continue;
    const TensorInfo& t = ctx.in(i);
    if (!t.has_shape || t.rank() != 2 || !t.shape[0].known() || !t.shape[1].known() || t.shape[0].value != cols ||
        t.shape[1].value != p.groups())
      return Err(StatusCode::kInvalidModel, "{}: the {} must be [{}, {}], not {}", n.Where(),
                 i == 2 ? "scales" : "zero points", cols, p.groups(),
                 t.has_shape ? ShapeToString(t.shape) : std::string("unknown"));
  }
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  if (x.rank() < 1 || (x.shape.back().known() && x.shape.back().value != p.k))
    return Err(StatusCode::kInvalidModel, "{}: X {} must be [..., {}]", n.Where(), ShapeToString(x.shape), p.k);
  std::vector<Dim> out = x.shape;
  out.back() = Dim(cols);
  ctx.set_output(0, x.dtype, out);
  return Status::Ok();
}

}  // namespace

namespace woq_attrs {

Result<Params> Read(const Node& n) {
  Params p;
  KILN_ASSIGN_OR_RETURN(p.k, n.attr_int(kK, -1));
  KILN_ASSIGN_OR_RETURN(p.group_size, n.attr_int(kGroupSize, 0));
  KILN_ASSIGN_OR_RETURN(const int64_t wt, n.attr_int(kWType, static_cast<int64_t>(DataType::kInt4)));
  p.w_type = static_cast<DataType>(wt);
  if (p.k < 1) return Err(StatusCode::kInvalidModel, "{}: {} must be at least 1, not {}", n.Where(), kK, p.k);
  if (p.group_size < 1 || p.group_size > p.k)
    return Err(StatusCode::kInvalidModel, "{}: {} must be 1 to {} ({}), not {}", n.Where(), kGroupSize, p.k, kK,
               p.group_size);
  if (!Is4BitType(p.w_type))
    return Err(StatusCode::kInvalidModel, "{}: {} must be int4 ({}) or uint4 ({}), not {}", n.Where(), kWType,
               static_cast<int>(DataType::kInt4), static_cast<int>(DataType::kUInt4), wt);
  return p;
}

}  // namespace woq_attrs

namespace quant_attrs {

Result<QuantizedCopy> ReadQuantizedCopy(const Node& n) {
  QuantizedCopy c;
  KILN_ASSIGN_OR_RETURN(const int64_t qt, n.attr_int(kQType, 0));
  KILN_ASSIGN_OR_RETURN(c.scale, n.attr_float(kQScale, 0.f));
  KILN_ASSIGN_OR_RETURN(c.zero_point, n.attr_int(kQZeroPoint, 0));
  c.type = static_cast<DataType>(qt);
  const bool u8 = c.type == DataType::kUInt8, f8 = c.type == DataType::kFloat8E4M3FN;
  if ((c.type != DataType::kInt8 && !u8 && !f8) || !(c.scale > 0 && std::isfinite(c.scale)) ||
      c.zero_point < (u8 || f8 ? 0 : -128) || c.zero_point > (u8 ? 255 : f8 ? 0 : 127))
    return Err(StatusCode::kInvalidModel, "{}: its quantized output needs {} int8/uint8/float8e4m3fn, a positive "
               "finite {} and a {} in the type's range (0 for float8)", n.Where(), kQType, kQScale, kQZeroPoint);
  return c;
}

Result<Params> Read(const Node& n) {
  Params p;
  KILN_ASSIGN_OR_RETURN(p.x_scale, n.attr_float(kXScale, 0.f));
  KILN_ASSIGN_OR_RETURN(p.x_zero_point, n.attr_int(kXZeroPoint, 0));
  KILN_ASSIGN_OR_RETURN(p.w_scales, n.attr_floats(kWScales));
  KILN_ASSIGN_OR_RETURN(p.y_scale, n.attr_float(kYScale, 0.f));
  KILN_ASSIGN_OR_RETURN(p.y_zero_point, n.attr_int(kYZeroPoint, 0));
  KILN_ASSIGN_OR_RETURN(const int64_t yt, n.attr_int(kYType, static_cast<int64_t>(DataType::kFloat32)));
  p.y_type = static_cast<DataType>(yt);
  KILN_ASSIGN_OR_RETURN(std::string act, n.attr_string("kiln_activation", "None"));
  const auto a = fused::ParseActivation(act);
  if (!a) return Err(StatusCode::kInvalidModel, "{}: kiln_activation '{}' is not an activation", n.Where(), act);
  p.activation = *a;
  KILN_ASSIGN_OR_RETURN(p.act_alpha, n.attr_float("kiln_activation_alpha", 0.f));
  KILN_ASSIGN_OR_RETURN(p.act_beta, n.attr_float("kiln_activation_beta", 0.f));
  auto positive = [](float s) { return s > 0 && std::isfinite(s); };
  if (!positive(p.x_scale))
    return Err(StatusCode::kInvalidModel, "{}: kiln_x_scale must be a positive finite number, not {}", n.Where(),
               p.x_scale);
  if (p.w_scales.empty())
    return Err(StatusCode::kInvalidModel, "{}: kiln_w_scales is missing", n.Where());
  for (float s : p.w_scales)
    if (!positive(s))
      return Err(StatusCode::kInvalidModel, "{}: a weight scale is {}: every one must be positive and finite",
                 n.Where(), s);
  KILN_ASSIGN_OR_RETURN(p.r_scale, n.attr_float(kRScale, 0.f));
  if (n.has_attr(kRScale) && !positive(p.r_scale))
    return Err(StatusCode::kInvalidModel, "{}: kiln_r_scale must be a positive finite number, not {}", n.Where(),
               p.r_scale);
  if (p.y_type == DataType::kFloat32 || p.y_type == DataType::kFloat16) return p;
  if (p.y_type != DataType::kInt8 && p.y_type != DataType::kUInt8 && p.y_type != DataType::kFloat8E4M3FN)
    return Err(StatusCode::kInvalidModel,
               "{}: kiln_y_type must be float32, float16, int8, uint8 or float8e4m3fn, not {}", n.Where(), yt);
  if (!positive(p.y_scale))
    return Err(StatusCode::kInvalidModel, "{}: kiln_y_scale must be a positive finite number, not {}", n.Where(),
               p.y_scale);
  if (p.y_type == DataType::kFloat8E4M3FN) {
    if (p.y_zero_point != 0)
      return Err(StatusCode::kInvalidModel, "{}: kiln_y_zero_point must be 0 for a float8 output, not {}", n.Where(),
                 p.y_zero_point);
    return p;
  }
  const int64_t lo = p.y_type == DataType::kUInt8 ? 0 : -128, hi = p.y_type == DataType::kUInt8 ? 255 : 127;
  if (p.y_zero_point < lo || p.y_zero_point > hi)
    return Err(StatusCode::kInvalidModel, "{}: kiln_y_zero_point {} does not fit {}", n.Where(), p.y_zero_point,
               DataTypeName(p.y_type));
  return p;
}

}  // namespace quant_attrs

void RegisterQuantizedOps(OpRegistry& r) {
  r.Kiln("QConv").Shape(QConvShape).KeepsFp32();
  r.Kiln("QMatMul").Shape(QMatMulShape).KeepsFp32();
  // X and Y compute in the engine's float type; the scales (input 2) are parameters and keep theirs.
  r.Kiln("WeightOnlyMatMul").Shape(WeightOnlyMatMulShape).ParameterInputsFrom(2);
}

}  // namespace kiln
