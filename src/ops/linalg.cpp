// Shape functions of the linear-algebra family: MatMul (batched, broadcasting, 1-D operands), Gemm, Einsum, and the
// integer matmuls MatMulInteger and QLinearMatMul.
#include <optional>

#include "core/error.h"
#include "ops/einsum_equation.h"
#include "ops/families.h"

namespace kiln {

namespace {

bool MatMulType(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kFloat64: case DataType::kFloat16: case DataType::kBFloat16:
    case DataType::kInt32: case DataType::kInt64: case DataType::kUInt32: case DataType::kUInt64:
      return true;
    default:
      return false;
  }
}

Status CheckTypes(const InferContext& ctx, size_t count) {
  const DataType t = ctx.in(0).dtype;
  if (!MatMulType(t))
    return Err(StatusCode::kInvalidModel, "{}: element type {} is not allowed", ctx.node.Where(), DataTypeName(t));
  for (size_t i = 1; i < count; ++i)
    if (ctx.has_input(i) && ctx.in(i).dtype != t)
      return Err(StatusCode::kInvalidModel, "{}: input {} has element type {} but input 0 has {}", ctx.node.Where(),
                 i, DataTypeName(ctx.in(i).dtype), DataTypeName(t));
  return Status::Ok();
}

Status MatMulShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_RETURN_IF_ERROR(CheckTypes(ctx, 2));
  const TensorInfo& a = ctx.in(0);
  const TensorInfo& b = ctx.in(1);
  if (!a.has_shape || !b.has_shape) {
    ctx.set_output_rank_unknown(0, a.dtype);
    return Status::Ok();
  }
  if (a.rank() < 1 || b.rank() < 1)
    return Err(StatusCode::kInvalidModel, "{}: MatMul operands must have rank >= 1, got {} and {}", n.Where(),
               ShapeToString(a.shape), ShapeToString(b.shape));
  Shape sa = a.shape, sb = b.shape;
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), Dim(1));
  if (b1) sb.push_back(Dim(1));
  const Dim ka = sa[sa.size() - 1], kb = sb[sb.size() - 2];
  if (ka.known() && kb.known() && ka.value != kb.value)
    return Err(StatusCode::kInvalidModel, "{}: inner dimensions differ: {} x {} (K = {} vs {})", n.Where(),
               ShapeToString(a.shape), ShapeToString(b.shape), ka.value, kb.value);
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  KILN_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(n, ba, bb));
  if (!a1) out.push_back(sa[sa.size() - 2]);
  if (!b1) out.push_back(sb[sb.size() - 1]);
  ctx.set_output(0, a.dtype, out);
  return Status::Ok();
}

// The output shape of a numpy matmul of inputs ia and ib (empty when a shape is unknown).
Result<std::optional<Shape>> MatMulOutShape(const InferContext& ctx, size_t ia, size_t ib) {
  const Node& n = ctx.node;
  const TensorInfo& a = ctx.in(ia);
  const TensorInfo& b = ctx.in(ib);
  if (!a.has_shape || !b.has_shape) return std::optional<Shape>();
  if (a.rank() < 1 || b.rank() < 1)
    return Err(StatusCode::kInvalidModel, "{}: matmul operands must have rank >= 1, got {} and {}", n.Where(),
               ShapeToString(a.shape), ShapeToString(b.shape));
  Shape sa = a.shape, sb = b.shape;
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), Dim(1));
  if (b1) sb.push_back(Dim(1));
  const Dim ka = sa[sa.size() - 1], kb = sb[sb.size() - 2];
  if (ka.known() && kb.known() && ka.value != kb.value)
    return Err(StatusCode::kInvalidModel, "{}: inner dimensions differ: {} x {}", n.Where(), ShapeToString(a.shape),
               ShapeToString(b.shape));
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  KILN_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(n, ba, bb));
  if (!a1) out.push_back(sa[sa.size() - 2]);
  if (!b1) out.push_back(sb[sb.size() - 1]);
  return std::optional<Shape>(out);
}

bool Is8Bit(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

// MatMulInteger(A, B, a_zero_point?, b_zero_point?): int8/uint8 operands, an int32 result.
Status MatMulIntegerShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  for (size_t i : {0, 1})
    if (ctx.in(i).dtype != DataType::kUndefined && !Is8Bit(ctx.in(i).dtype))
      return Err(StatusCode::kInvalidModel, "{}: input {} must be int8 or uint8, got {}", ctx.node.Where(), i,
                 DataTypeName(ctx.in(i).dtype));
  KILN_ASSIGN_OR_RETURN(std::optional<Shape> out, MatMulOutShape(ctx, 0, 1));
  if (out) ctx.set_output(0, DataType::kInt32, *out);
  else ctx.set_output_rank_unknown(0, DataType::kInt32);
  return Status::Ok();
}

// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point): y of y_zero_point's type.
Status QLinearMatMulShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 8));
  const DataType t = ctx.in(7).dtype;
  if (t != DataType::kUndefined && !Is8Bit(t))
    return Err(StatusCode::kInvalidModel, "{}: y_zero_point must be int8 or uint8, got {}", ctx.node.Where(),
               DataTypeName(t));
  KILN_ASSIGN_OR_RETURN(std::optional<Shape> out, MatMulOutShape(ctx, 0, 3));
  if (out) ctx.set_output(0, t, *out);
  else ctx.set_output_rank_unknown(0, t);
  return Status::Ok();
}

Status GemmShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_RETURN_IF_ERROR(CheckTypes(ctx, 3));
  KILN_ASSIGN_OR_RETURN(int64_t ta, n.attr_int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t tb, n.attr_int("transB", 0));
  KILN_ASSIGN_OR_RETURN(float alpha, n.attr_float("alpha", 1.f));
  KILN_ASSIGN_OR_RETURN(float beta, n.attr_float("beta", 1.f));
  (void)alpha;
  (void)beta;
  const TensorInfo& a = ctx.in(0);
  const TensorInfo& b = ctx.in(1);
  if (!a.has_shape || !b.has_shape) {
    ctx.set_output(0, a.dtype, Shape{Dim::Unknown(), Dim::Unknown()});
    return Status::Ok();
  }
  if (a.rank() != 2 || b.rank() != 2)
    return Err(StatusCode::kInvalidModel, "{}: Gemm needs 2-D A and B, got {} and {}", n.Where(),
               ShapeToString(a.shape), ShapeToString(b.shape));
  const Dim m = ta ? a.shape[1] : a.shape[0];
  const Dim ka = ta ? a.shape[0] : a.shape[1];
  const Dim kb = tb ? b.shape[1] : b.shape[0];
  const Dim nn = tb ? b.shape[0] : b.shape[1];
  if (ka.known() && kb.known() && ka.value != kb.value)
    return Err(StatusCode::kInvalidModel, "{}: inner dimensions differ: A {} (transA={}) and B {} (transB={})",
               n.Where(), ShapeToString(a.shape), ta, ShapeToString(b.shape), tb);
  Shape out{m, nn};
  if (ctx.has_input(2) && ctx.in(2).has_shape) {
    const TensorInfo& c = ctx.in(2);
    if (c.rank() > 2)
      return Err(StatusCode::kInvalidModel, "{}: C must have rank <= 2, got {}", n.Where(), ShapeToString(c.shape));
    // C must broadcast to [M, N] unidirectionally.
    for (int64_t i = 0; i < c.rank(); ++i) {
      const Dim& cd = c.shape[c.rank() - 1 - i];
      const Dim& od = out[1 - i];
      if (cd.known() && cd.value != 1 && od.known() && cd.value != od.value)
        return Err(StatusCode::kInvalidModel, "{}: C of shape {} does not broadcast to [{},{}]", n.Where(),
                   ShapeToString(c.shape), m.ToString(), nn.ToString());
    }
  }
  ctx.set_output(0, a.dtype, out);
  return Status::Ok();
}

Status EinsumShape(InferContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.num_inputs() == 0) return Err(StatusCode::kInvalidModel, "{}: Einsum needs at least one input", n.Where());
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, ctx.num_inputs()));
  const DataType t = ctx.in(0).dtype;
  if (!MatMulType(t) && t != DataType::kInt8 && t != DataType::kUInt8 && t != DataType::kInt16 &&
      t != DataType::kUInt16)
    return Err(StatusCode::kInvalidModel, "{}: element type {} is not allowed", n.Where(), DataTypeName(t));
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.in(i).dtype != t)
      return Err(StatusCode::kInvalidModel, "{}: input {} has element type {} but input 0 has {}", n.Where(), i,
                 DataTypeName(ctx.in(i).dtype), DataTypeName(t));
  KILN_ASSIGN_OR_RETURN(std::string eq, n.attr_string("equation", ""));
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.in(i).has_shape) {
      ctx.set_output_rank_unknown(0, t);
      return Status::Ok();
    }
    ranks.push_back(ctx.in(i).rank());
    shapes.push_back(ctx.in(i).shape);
  }
  KILN_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(n, eq, ranks));
  KILN_ASSIGN_OR_RETURN(auto sizes, EinsumLabelSizes(n, spec, shapes));
  Shape out(sizes.begin(), sizes.begin() + spec.output.size());
  ctx.set_output(0, t, out);
  return Status::Ok();
}

}  // namespace

// ---- converters ----
namespace {
// Gemm before opset 7 carried a `broadcast` attribute (C broadcasting is always on in kiln's Gemm): dropped.
Status ConvertGemm(ConvertContext& c) {
  c.node.attrs.erase("broadcast");
  return Status::Ok();
}
}  // namespace

void RegisterLinalgOps(OpRegistry& r) {
  r.Onnx("MatMul").Shape(MatMulShape).Int8Layer();
  r.Onnx("Gemm").Since(6).Convert(ConvertGemm).Shape(GemmShape).Int8Layer();
  r.Onnx("Einsum").Since(12).Shape(EinsumShape);
  r.Onnx("MatMulInteger").Since(10).Shape(MatMulIntegerShape);
  r.Onnx("QLinearMatMul").Since(10).Shape(QLinearMatMulShape);
}

}  // namespace kiln
