// ONNX -> kiln op set: one converter per op type, registered in explicit tables per op family.
// A converter canonicalizes a freshly imported node in place: attribute forms of operands that later
// opsets turned into inputs (axes, split, pads, starts/ends, min/max, scales, k...) become constant
// inputs, defaults that changed between opsets are written out, and legacy ops are rewritten onto their
// modern equivalent (Upsample -> Resize). After conversion, kernels and shape functions see one form.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct ConvertContext {
  Graph& graph;
  Node& node;
  int64_t opset;  // default-domain opset of the model
};

using ConverterFn = std::function<Status(ConvertContext&)>;

struct OpSupport {
  int64_t min_opset = 1;  // earliest opset version of the op kiln handles
  ConverterFn convert;    // may be empty: the node is already canonical
};

class ConverterRegistry {
 public:
  void Add(const std::string& op_type, OpSupport s) { ops_[op_type] = std::move(s); }
  void Add(const std::string& op_type) { ops_[op_type] = OpSupport{}; }
  const OpSupport* Find(const std::string& op_type) const {
    auto it = ops_.find(op_type);
    return it == ops_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> OpTypes() const;

 private:
  std::unordered_map<std::string, OpSupport> ops_;
};

// The one table (src/onnx/registry.cpp lists the families).
const ConverterRegistry& Converters();

// ---- helpers for converters ----
// Moves int-list attribute `attr` to input slot `index` as an int64 constant (when present), padding the
// input list with omitted inputs as needed, and erases the attribute.
void MoveIntsAttrToInput(ConvertContext& c, const std::string& attr, size_t index);
// Same for a float attribute, as a scalar of the dtype of input 0 when known, else float32.
void MoveFloatAttrToInput(ConvertContext& c, const std::string& attr, size_t index, DataType dtype);
// Sets input slot `index` (padding with omitted inputs).
void SetInput(Node& n, size_t index, Value* v);

}  // namespace kiln
