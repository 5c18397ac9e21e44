// Shape and type inference, one function per op type, used twice:
//  - at import/build time with symbolic shapes and whatever input values are constant, and
//  - at run time with concrete shapes and every input value (so outputs can be allocated before a kernel).
// A shape function fills ctx.outputs[i] with dtype and shape (dims may be symbolic or unknown when the
// output depends on data, e.g. NonZero). It checks its inputs and returns an error naming the node.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
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
  std::optional<std::vector<Dim>> sym_value;  // known-symbolic contents of a small 1-D int64 tensor
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

class ShapeRegistry {
 public:
  void Add(const std::string& op_type, ShapeFn fn) { fns_[op_type] = std::move(fn); }
  const ShapeFn* Find(const std::string& op_type) const {
    auto it = fns_.find(op_type);
    return it == fns_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> OpTypes() const;

 private:
  std::unordered_map<std::string, ShapeFn> fns_;
};

// The one table of shape functions (src/shape/registry.cpp lists the families).
const ShapeRegistry& Shapes();

// Runs one node's shape function; errors carry the node's name.
Status InferNode(InferContext& ctx);
// The context for a node of a graph: each input's type, shape, constant value and symbolic contents as the
// graph knows them; outputs sized, empty.
InferContext ContextFromGraph(const Node& n);

// Evaluates a node on constant inputs (provided by a backend, normally the CPU reference).
using ConstEvaluator =
    std::function<Result<std::vector<Tensor>>(const Node&, const std::vector<const Tensor*>&)>;

struct InferOptions {
  ConstEvaluator evaluator;            // when set, nodes whose inputs are all constant are folded
  int64_t max_fold_elements = 1 << 24; // do not materialize larger constants
};

// Infers every value's type and shape in topological order, folding constants (and therefore shape
// subgraphs such as Shape -> Gather -> Concat -> Reshape) wherever their inputs are known.
Status InferGraph(Graph& g, const InferOptions& opts);

// ---- helpers shared by the shape functions ----
// Numpy-style broadcast of shapes; error names the node and both shapes.
Result<Shape> BroadcastShapes(const Node& n, const Shape& a, const Shape& b);
// Shape inference helper: requires `count` inputs at least.
Status RequireInputs(const InferContext& ctx, size_t count);

}  // namespace kiln
