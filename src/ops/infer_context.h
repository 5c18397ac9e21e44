// What a shape/type function sees: the node, each input's type, shape and known contents; and what it fills:
// each output's type and shape. Used at import/build time with symbolic shapes and whatever input values are
// constant, and at run time with concrete shapes and every input value (so outputs can be allocated before a
// kernel runs). Dims may stay symbolic, or unknown where the output depends on data (NonZero).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "core/dims.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace kiln {

struct TensorInfo {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  bool has_shape = false;                    // false: rank unknown
  const Tensor* value = nullptr;             // known contents (constant at build time; always at run time)
  std::optional<std::vector<Dim>> sym_value;  // known-symbolic contents of a small 1-D int64 tensor (bool: 0/1)
  // A sequence or an optional (ops/sequence.h): dtype is then the element type, and shape the elements' shape where
  // they all share one (has_shape false otherwise). Shape functions of tensor ops never see these (InferNode refuses
  // them); set_output leaves an output a tensor.
  ValueKind kind = ValueKind::kTensor;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
};

struct InferContext {
  const Node& node;
  std::vector<std::optional<TensorInfo>> inputs;  // nullopt where the input is omitted
  std::vector<TensorInfo> outputs;               // sized to node.outputs.size() by the caller

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].has_value(); }
  const TensorInfo& in(size_t i) const { return *inputs[i]; }
  // Known contents of input i, or nullptr.
  const Tensor* value(size_t i) const { return has_input(i) ? inputs[i]->value : nullptr; }
  TensorInfo& out(size_t i) { return outputs[i]; }
  void set_output(size_t i, DataType t, Shape s) {
    if (i >= outputs.size()) return;
    outputs[i].dtype = t;
    outputs[i].shape = std::move(s);
    outputs[i].has_shape = true;
  }
  void set_output_rank_unknown(size_t i, DataType t) {
    if (i >= outputs.size()) return;
    outputs[i].dtype = t;
    outputs[i].has_shape = false;
  }
};

using ShapeFn = std::function<Status(InferContext&)>;

}  // namespace kiln
