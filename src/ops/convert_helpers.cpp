// Helpers that converters use to turn attribute forms of operands into constant inputs.
#include "ops/families.h"

namespace kiln {

void SetInput(Node& n, size_t index, Value* v) {
  if (n.inputs.size() <= index) n.inputs.resize(index + 1, nullptr);
  n.inputs[index] = v;
}

void MoveIntsAttrToInput(ConvertContext& c, const std::string& attr, size_t index) {
  auto it = c.node.attrs.find(attr);
  if (it == c.node.attrs.end()) return;
  std::vector<int64_t> vals = it->second.kind == Attribute::Kind::kInt ? std::vector<int64_t>{it->second.i}
                                                                       : it->second.ints;
  c.node.attrs.erase(it);
  Value* v = c.graph.AddConstant(c.node.name + "_" + attr, Tensor::FromInt64(vals));
  SetInput(c.node, index, v);
}

void MoveFloatAttrToInput(ConvertContext& c, const std::string& attr, size_t index, DataType dtype) {
  auto it = c.node.attrs.find(attr);
  if (it == c.node.attrs.end()) return;
  const double val = it->second.kind == Attribute::Kind::kInt ? static_cast<double>(it->second.i) : it->second.f;
  c.node.attrs.erase(it);
  if (dtype == DataType::kUndefined) dtype = DataType::kFloat32;
  Value* v = c.graph.AddConstant(c.node.name + "_" + attr, Tensor::Scalar(dtype, val));
  SetInput(c.node, index, v);
}

}  // namespace kiln
