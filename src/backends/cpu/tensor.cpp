// CPU kernels of the data-movement ops that move no data or only metadata: Shape, Size, Reshape, Flatten,
// Squeeze, Unsqueeze, Identity, Dropout (inference). The view ops return the input buffer under a new
// shape (Tensor::Reshaped) instead of copying. The strided-copy ops live in tensor_copy.cpp, the rest
// (Pad, Trilu, Range, ConstantOfShape) in tensor_misc.cpp.
#include <algorithm>
#include <random>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/tensor_util.h"
#include "ops/shape_tensor_params.h"

namespace kiln::cpu {
namespace {

Status ShapeKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const int64_t r = x.rank();
  int64_t start = c.node.geti("start", 0), end = c.node.geti("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x.shape()[i]);
  c.out(0) = Tensor::FromInt64(dims);
  return Status::Ok();
}

Status SizeKernel(KernelContext& c) {
  c.out(0) = Tensor::FromInt64({c.in(0).numel()}, {});
  return Status::Ok();
}

Status ReshapeKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  if (!c.input(1)) return Err(StatusCode::kInvalidModel, "{}: the shape input is missing", c.node.Where());
  KILN_ASSIGN_OR_RETURN(auto shape,
                        ReshapeTarget(c.node, x.shape(), c.in(1).ToInt64Vector(), c.node.geti("allowzero", 0) != 0));
  c.out(0) = x.Reshaped(shape);
  return Status::Ok();
}

Status FlattenKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  int64_t axis = c.node.geti("axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank())
    return Err(StatusCode::kInvalidModel, "{}: axis is out of range for rank {}", c.node.Where(), x.rank());
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.shape()[i];
  const int64_t inner = outer == 0 ? NumElements(std::vector<int64_t>(x.shape().begin() + axis, x.shape().end()))
                                   : x.numel() / outer;
  c.out(0) = x.Reshaped({outer, inner});
  return Status::Ok();
}

Status SqueezeKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  std::vector<bool> drop(x.rank(), false);
  if (const Tensor* axes = c.input(1)) {
    KILN_ASSIGN_OR_RETURN(auto norm, NormalizeAxesList(c.node, axes->ToInt64Vector(), x.rank()));
    for (int64_t a : norm) {
      if (x.shape()[a] != 1)
        return Err(StatusCode::kInvalidArgument, "{}: cannot squeeze axis {} of shape {}", c.node.Where(), a,
                   ShapeToString(x.shape()));
      drop[a] = true;
    }
  } else {
    for (int64_t i = 0; i < x.rank(); ++i) drop[i] = x.shape()[i] == 1;
  }
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) shape.push_back(x.shape()[i]);
  c.out(0) = x.Reshaped(shape);
  return Status::Ok();
}

Status UnsqueezeKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  if (!c.input(1)) return Err(StatusCode::kInvalidModel, "{}: the axes input is missing", c.node.Where());
  const auto axes = c.in(1).ToInt64Vector();
  const int64_t r = x.rank() + static_cast<int64_t>(axes.size());
  KILN_ASSIGN_OR_RETURN(auto norm, NormalizeAxesList(c.node, axes, r));
  std::vector<bool> added(r, false);
  for (int64_t a : norm) added[a] = true;
  std::vector<int64_t> shape;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) shape.push_back(added[i] ? 1 : x.shape()[j++]);
  c.out(0) = x.Reshaped(shape);
  return Status::Ok();
}

Status IdentityKernel(KernelContext& c) {
  // A sequence or an optional passes through as it is (opsets 14 and 16).
  if (const OnnxValue* v = c.value_input(0)) {
    if (c.output_kind(0) != ValueKind::kTensor) c.value_out(0) = *v;
    else if (v->is_tensor()) c.out(0) = v->tensor;
    else return Err(StatusCode::kInternal, "{}: its output is a tensor but its input is {}", c.node.Where(), v->Describe());
    return Status::Ok();
  }
  if (c.output_kind(0) != ValueKind::kTensor) {
    c.value_out(0) = c.input(0) ? OnnxValue::FromTensor(c.in(0)) : OnnxValue::None();
    return Status::Ok();
  }
  c.out(0) = c.in(0);
  return Status::Ok();
}

// Dropout: in inference (the default) output = input and the mask is all true. With training_mode set
// and a positive ratio, elements are dropped at random and the rest scaled by 1 / (1 - ratio).
Status DropoutKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const double ratio = c.input(1) && c.in(1).numel() > 0 ? c.in(1).GetAsDouble(0) : 0.5;
  const bool training = c.input(2) && c.in(2).numel() > 0 && c.in(2).GetAsInt(0) != 0;
  const bool want_mask = WantOutput(c, 1);
  const DataType mask_type = c.node.opset != 0 && c.node.opset < 10 ? x.dtype() : DataType::kBool;
  if (!training || ratio == 0.0) {
    c.out(0) = x;
    if (want_mask) {
      Tensor& m = AllocOutput(c, 1, mask_type, x.shape());
      for (int64_t i = 0; i < m.numel(); ++i) m.SetFromDouble(i, 1.0);
    }
    return Status::Ok();
  }
  if (!IsFloatType(x.dtype()) || !(ratio > 0.0 && ratio < 1.0))
    return Err(StatusCode::kInvalidArgument, "{}: training-mode dropout needs a float input and ratio in (0, 1)",
               c.node.Where());
  // numpy's legacy generator (np.random.seed(seed); np.random.uniform(0, 1, shape)), which the ONNX
  // reference uses, so that a given seed (default 0) reproduces the reference masks.
  std::mt19937 rng(static_cast<uint32_t>(c.node.geti("seed", 0)));
  auto uniform = [&rng] {
    const uint64_t a = rng() >> 5, b = rng() >> 6;
    return (static_cast<double>(a) * 67108864.0 + static_cast<double>(b)) / 9007199254740992.0;
  };
  Tensor& y = AllocOutput(c, 0, x.dtype(), x.shape());
  Tensor mask(DataType::kBool, x.shape());
  const double scale = 1.0 / (1.0 - ratio);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = uniform() >= ratio;
    mask.data<uint8_t>()[i] = keep;
    y.SetFromDouble(i, keep ? x.GetAsDouble(i) * scale : 0.0);
  }
  if (want_mask) c.out(1) = mask_type == DataType::kBool ? mask : CastTensor(mask, mask_type);
  return Status::Ok();
}

}  // namespace

void RegisterTensorKernels(KernelRegistry& r) {
  r.Add("Shape", ShapeKernel);
  r.Add("Size", SizeKernel);
  r.Add("Reshape", ReshapeKernel);
  r.Add("Flatten", FlattenKernel);
  r.Add("Squeeze", SqueezeKernel);
  r.Add("Unsqueeze", UnsqueezeKernel);
  r.Add("Identity", IdentityKernel);
  r.Add("Dropout", DropoutKernel);
  RegisterTensorCopyKernels(r);
  RegisterTensorMiscKernels(r);
}

}  // namespace kiln::cpu
