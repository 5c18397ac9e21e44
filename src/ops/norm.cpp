// Shape functions of the normalization family: BatchNormalization (inference, and training_mode=1 from
// opset 14), InstanceNormalization, LayerNormalization (optional Mean/InvStdDev), GroupNormalization,
// LpNormalization.
#include "core/error.h"
#include "ops/families.h"
#include "ops/quantized_ops.h"

namespace kiln {

namespace {

// Checks that input `i` is 1-D with `want` elements (when both are known).
Status RequireVector(const InferContext& ctx, size_t i, const Dim& want, const char* what) {
  const TensorInfo& t = ctx.in(i);
  if (!t.has_shape) return Status::Ok();
  if (t.rank() != 1)
    return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must be 1-D, but its shape is {}", ctx.node.Where(),
               what, i, ShapeToString(t.shape));
  if (want.known() && t.shape[0].known() && t.shape[0].value != want.value)
    return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must have {} elements, but its shape is {}",
               ctx.node.Where(), what, i, want.value, ShapeToString(t.shape));
  return Status::Ok();
}

int NumPresentOutputs(const Node& n) {
  int c = 0;
  for (size_t i = 1; i < n.outputs.size(); ++i) c += n.outputs[i] != nullptr;
  return c;
}

Status BatchNormShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 5));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  KILN_ASSIGN_OR_RETURN(float eps, n.attr_float("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(float momentum, n.attr_float("momentum", 0.9f));
  KILN_ASSIGN_OR_RETURN(int64_t training, n.attr_int("training_mode", 0));
  KILN_ASSIGN_OR_RETURN(int64_t spatial, n.attr_int("spatial", 1));
  (void)eps;
  (void)momentum;
  if (NumPresentOutputs(n) > 0 && !(training && n.opset >= 14 && n.outputs.size() <= 3))
    return Err(StatusCode::kUnsupported,
               "{}: only inference is supported; the training outputs (running/saved mean and variance) are "
               "computed only with training_mode=1 at opset >= 14",
               n.Where());
  if (training && n.opset < 14)
    return Err(StatusCode::kUnsupported, "{}: training_mode is an opset >= 14 attribute", n.Where());
  const TensorInfo& x = ctx.in(0);
  if (x.has_shape && x.rank() < 2)
    return Err(StatusCode::kInvalidModel, "{}: X must have rank >= 2 (N, C, ...), but its shape is {}", n.Where(),
               ShapeToString(x.shape));
  const Dim c = x.has_shape ? x.shape[1] : Dim::Unknown();
  static const char* kNames[] = {"", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, i));
    if (spatial) KILN_RETURN_IF_ERROR(RequireVector(ctx, i, c, kNames[i]));
  }
  SetOutputLike(ctx, 0, x);
  for (size_t i = 1; i < 3; ++i)
    if (n.output(i)) ctx.set_output(i, ctx.in(2 + i).dtype, {c});
  return Status::Ok();
}

Status InstanceNormShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  KILN_ASSIGN_OR_RETURN(float eps, n.attr_float("epsilon", 1e-5f));
  (void)eps;
  const TensorInfo& x = ctx.in(0);
  if (x.has_shape && x.rank() < 2)
    return Err(StatusCode::kInvalidModel, "{}: input must have rank >= 2 (N, C, ...), but its shape is {}",
               n.Where(), ShapeToString(x.shape));
  const Dim c = x.has_shape ? x.shape[1] : Dim::Unknown();
  KILN_RETURN_IF_ERROR(RequireVector(ctx, 1, c, "scale"));
  KILN_RETURN_IF_ERROR(RequireVector(ctx, 2, c, "B"));
  SetOutputLike(ctx, 0, x);
  return Status::Ok();
}

// LayerNormalization and RMSNormalization (opset 23: X / sqrt(mean(X^2) + epsilon) * Scale, no B and no statistics
// outputs).
Status LayerNormShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  if (n.op_type == "RMSNormalization" && (ctx.num_inputs() > 2 || n.outputs.size() > 1))
    return Err(StatusCode::kInvalidModel, "{}: RMSNormalization takes X and Scale and gives Y only", n.Where());
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, n.attr_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(float eps, n.attr_float("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(int64_t stash, n.attr_int("stash_type", 1));
  (void)eps;
  const DataType stash_t = static_cast<DataType>(stash);
  if (stash_t != DataType::kFloat32 && stash_t != DataType::kBFloat16 && stash_t != DataType::kFloat64 &&
      stash_t != DataType::kFloat16)
    return Err(StatusCode::kInvalidModel, "{}: stash_type {} is not a floating-point type", n.Where(), stash);
  const TensorInfo& x = ctx.in(0);
  // Output 3 (kiln's): Y quantized per tensor (ops/quantized_ops.h: kQScale).
  DataType q_type = DataType::kUndefined;
  if (n.output(3)) {
    KILN_ASSIGN_OR_RETURN(const quant_attrs::QuantizedCopy c, quant_attrs::ReadQuantizedCopy(n));
    q_type = c.type;
  }
  if (!x.has_shape) {
    for (size_t i = 0; i < 3; ++i) ctx.set_output_rank_unknown(i, i == 0 ? x.dtype : stash_t);
    if (n.output(3)) ctx.set_output_rank_unknown(3, q_type);
    return Status::Ok();
  }
  const int64_t rank = x.rank();
  auto na = NormalizeAxis(axis, rank);
  if (!na) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), axis, rank);
  // Scale and B broadcast (unidirectionally) onto X's normalized dims.
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i) || !ctx.in(i).has_shape) continue;
    const Shape& s = ctx.in(i).shape;
    const int64_t off = rank - static_cast<int64_t>(s.size());
    bool ok = off >= 0;
    for (int64_t d = 0; ok && d < static_cast<int64_t>(s.size()); ++d) {
      const Dim& sd = s[d];
      const Dim& xd = x.shape[off + d];
      if (sd.known() && sd.value != 1 && (off + d < *na || (xd.known() && xd.value != sd.value))) ok = false;
    }
    if (!ok)
      return Err(StatusCode::kInvalidModel, "{}: {} shape {} does not broadcast to the normalized dims of X {} (axis {})",
                 n.Where(), i == 1 ? "Scale" : "B", ShapeToString(s), ShapeToString(x.shape), axis);
  }
  ctx.set_output(0, x.dtype, x.shape);
  if (n.output(3)) ctx.set_output(3, q_type, x.shape);
  Shape stat = x.shape;
  for (int64_t d = *na; d < rank; ++d) stat[d] = Dim(1);
  // Mean/InvStdDev only where the model asks for them (no allocation for omitted outputs).
  for (size_t i = 1; i < 3; ++i)
    if (n.output(i)) ctx.set_output(i, stash_t, stat);
  return Status::Ok();
}

Status GroupNormShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  KILN_ASSIGN_OR_RETURN(float eps, n.attr_float("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(int64_t groups, n.attr_int("num_groups", -1));
  KILN_ASSIGN_OR_RETURN(int64_t per_group, n.attr_int("kiln_scale_per_group", 0));
  (void)eps;
  if (!n.has_attr("num_groups"))
    return Err(StatusCode::kInvalidModel, "{}: the required attribute 'num_groups' is missing", n.Where());
  if (groups <= 0)
    return Err(StatusCode::kInvalidModel, "{}: num_groups must be positive, it is {}", n.Where(), groups);
  const TensorInfo& x = ctx.in(0);
  if (x.has_shape && x.rank() < 2)
    return Err(StatusCode::kInvalidModel, "{}: input must have rank >= 2 (N, C, ...), but its shape is {}",
               n.Where(), ShapeToString(x.shape));
  const Dim c = x.has_shape ? x.shape[1] : Dim::Unknown();
  if (c.known() && c.value % groups != 0)
    return Err(StatusCode::kInvalidModel, "{}: the {} channels do not split into num_groups = {} groups", n.Where(),
               c.value, groups);
  const Dim want = per_group ? Dim(groups) : c;
  KILN_RETURN_IF_ERROR(RequireVector(ctx, 1, want, "scale"));
  KILN_RETURN_IF_ERROR(RequireVector(ctx, 2, want, "bias"));
  SetOutputLike(ctx, 0, x);
  return Status::Ok();
}

// LpNormalization (opsets 1 and 22: 22 adds bfloat16): x / ||x||_p along axis (p 1 or 2); output like x.
Status LpNormShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, n.attr_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t p, n.attr_int("p", 2));
  if (p != 1 && p != 2) return Err(StatusCode::kInvalidModel, "{}: p must be 1 or 2, got {}", n.Where(), p);
  const TensorInfo& x = ctx.in(0);
  if (x.has_shape && !NormalizeAxis(axis, x.rank()))
    return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), axis, x.rank());
  SetOutputLike(ctx, 0, x);
  return Status::Ok();
}

}  // namespace

// ---- converters ----
// Converters of the normalization family.
//  - BatchNormalization: opset 7..15 share one kernel; the removed is_test/consumed_inputs attributes are
//    dropped (spatial=0 of opset 7..8 is kept and handled by the kernel).
//  - GroupNormalization: opset 18..20 give scale/bias per GROUP, opset 21 per CHANNEL; the older form is
//    recorded as kiln_scale_per_group = 1 so one kernel handles both.
namespace {

Status ConvertBatchNorm(ConvertContext& c) {
  c.node.attrs.erase("is_test");
  c.node.attrs.erase("consumed_inputs");
  if (c.opset >= 9) c.node.attrs.erase("spatial");
  return Status::Ok();
}

Status ConvertGroupNorm(ConvertContext& c) {
  if (c.opset < 21) c.node.attrs["kiln_scale_per_group"] = Attribute::Int(1);
  return Status::Ok();
}

}  // namespace

void RegisterNormOps(OpRegistry& r) {
  r.Onnx("BatchNormalization").Since(7).Convert(ConvertBatchNorm).Shape(BatchNormShape);
  r.Onnx("InstanceNormalization").Since(6).Shape(InstanceNormShape);
  r.Onnx("LayerNormalization").Since(17).Shape(LayerNormShape);
  r.Onnx("RMSNormalization").Since(23).Shape(LayerNormShape);
  r.Onnx("GroupNormalization").Since(18).Convert(ConvertGroupNorm).Shape(GroupNormShape);
  r.Onnx("LpNormalization").Shape(LpNormShape);
}

}  // namespace kiln
