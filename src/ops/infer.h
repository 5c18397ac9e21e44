// Shape and type inference over a graph: each node's OpDef shape function (ops/op_def.h), run in topological
// order, folding nodes whose inputs are all known. A shape function fills ctx.outputs[i] with dtype and shape
// (dims may be symbolic or unknown when the output depends on data, e.g. NonZero). It checks its inputs and
// returns an error naming the node.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dims.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/infer_context.h"

namespace kiln {

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
