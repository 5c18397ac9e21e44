// Converters of the elementwise family. Almost every op is already canonical after import; the table
// entries declare the ops supported (with the opset that introduced them). Clip before opset 11 carried
// min/max as attributes: they become constant inputs 1 and 2, as in later opsets.
#include "onnx/families.h"

namespace kiln {
namespace {

Status ConvertClip(ConvertContext& c) {
  if (c.opset >= 11 && !c.node.has_attr("min") && !c.node.has_attr("max")) return Status::Ok();
  const Value* x = c.node.input(0);
  const DataType dt = x ? x->dtype : DataType::kUndefined;
  // Old Clip has exactly one input; the bounds go to slots 1 and 2 (absent bound: input omitted).
  if (c.node.inputs.size() > 1) c.node.inputs.resize(1);
  MoveFloatAttrToInput(c, "min", 1, dt);
  MoveFloatAttrToInput(c, "max", 2, dt);
  return Status::Ok();
}

}  // namespace

void RegisterElementwiseConverters(ConverterRegistry& r) {
  // Ops that exist since opset 7 or earlier and kept the same form.
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Neg",
                         "Floor", "Ceil", "Tanh", "Sigmoid", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu",
                         "HardSigmoid", "Softplus", "Min", "Max", "Sum", "Mean", "Equal", "Less", "Greater",
                         "Not", "And", "Or", "Xor", "Cast"})
    r.Add(op, OpSupport{1, {}});
  r.Add("Clip", OpSupport{1, ConvertClip});
  r.Add("Erf", OpSupport{9, {}});
  r.Add("Sign", OpSupport{9, {}});
  r.Add("IsNaN", OpSupport{9, {}});
  r.Add("Where", OpSupport{9, {}});
  r.Add("IsInf", OpSupport{10, {}});
  r.Add("Mod", OpSupport{10, {}});  // opset 13 only widened the types; fmod (default 0) is read where used
  r.Add("QuantizeLinear", OpSupport{10, {}});
  r.Add("DequantizeLinear", OpSupport{10, {}});
  r.Add("Round", OpSupport{11, {}});
  r.Add("LessOrEqual", OpSupport{12, {}});
  r.Add("GreaterOrEqual", OpSupport{12, {}});
  r.Add("HardSwish", OpSupport{14, {}});
  r.Add("CastLike", OpSupport{15, {}});
  r.Add("Mish", OpSupport{18, {}});
  r.Add("Gelu", OpSupport{20, {}});
}

}  // namespace kiln
