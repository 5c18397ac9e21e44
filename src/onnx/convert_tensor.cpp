// ONNX converters of the data-movement ops. Operands that older opsets gave as attributes become constant
// inputs so that shape functions and kernels see the newest form only:
//   Squeeze/Unsqueeze axes (< 13), Split split (< 13), Slice starts/ends/axes (< 10),
//   Pad pads/value (< 11), Dropout ratio (< 12).
#include "onnx/families.h"

namespace kiln {
namespace {

DataType InputType(const ConvertContext& c, size_t i) {
  const Value* v = c.node.input(i);
  return v ? v->dtype : DataType::kUndefined;
}

Status ConvertAxesAttr(ConvertContext& c) {
  if (c.opset < 13) MoveIntsAttrToInput(c, "axes", 1);
  return Status::Ok();
}

Status ConvertSplit(ConvertContext& c) {
  if (c.opset < 13) MoveIntsAttrToInput(c, "split", 1);
  return Status::Ok();
}

Status ConvertSlice(ConvertContext& c) {
  if (c.opset >= 10) return Status::Ok();
  MoveIntsAttrToInput(c, "starts", 1);
  MoveIntsAttrToInput(c, "ends", 2);
  MoveIntsAttrToInput(c, "axes", 3);
  return Status::Ok();
}

Status ConvertPad(ConvertContext& c) {
  if (c.opset >= 11) return Status::Ok();
  MoveIntsAttrToInput(c, "pads", 1);
  MoveFloatAttrToInput(c, "value", 2, InputType(c, 0));
  return Status::Ok();
}

Status ConvertDropout(ConvertContext& c) {
  if (c.opset >= 12) return Status::Ok();
  // Before opset 12 there is no training mode: inference only, and the ratio is informational.
  MoveFloatAttrToInput(c, "ratio", 1, DataType::kFloat32);
  return Status::Ok();
}

}  // namespace

void RegisterTensorConverters(ConverterRegistry& r) {
  r.Add("Shape", OpSupport{1, {}});
  r.Add("Size", OpSupport{1, {}});
  r.Add("Reshape", OpSupport{5, {}});
  r.Add("Flatten", OpSupport{1, {}});
  r.Add("Transpose", OpSupport{1, {}});
  r.Add("Squeeze", OpSupport{1, ConvertAxesAttr});
  r.Add("Unsqueeze", OpSupport{1, ConvertAxesAttr});
  r.Add("Expand", OpSupport{8, {}});
  r.Add("Concat", OpSupport{4, {}});
  r.Add("Split", OpSupport{2, ConvertSplit});
  r.Add("Slice", OpSupport{1, ConvertSlice});
  r.Add("Tile", OpSupport{6, {}});
  r.Add("Pad", OpSupport{2, ConvertPad});
  r.Add("DepthToSpace", OpSupport{1, {}});
  r.Add("SpaceToDepth", OpSupport{1, {}});
  r.Add("ConstantOfShape", OpSupport{9, {}});
  r.Add("Range", OpSupport{11, {}});
  r.Add("Identity", OpSupport{1, {}});
  r.Add("Dropout", OpSupport{7, ConvertDropout});
  r.Add("Trilu", OpSupport{14, {}});
}

}  // namespace kiln
