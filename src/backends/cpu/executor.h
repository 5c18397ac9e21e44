// The CPU reference backend's graph executor: runs a Graph node by node, inferring each node's output
// shapes from the concrete inputs, allocating outputs, and calling the node's reference kernel. Tensors are
// released after their last use.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "ir/graph.h"
#include "ops/infer.h"

namespace kiln::cpu {

// Runs one node on given inputs (nullptr for omitted ones) and returns its outputs.
Result<std::vector<Tensor>> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs);

// Gives the memory of output `index` of a node once its shape is known (an arena slot, say); returning an
// undefined Tensor lets the executor allocate it.
using OutputAllocator = std::function<Tensor(const Node& node, size_t index, DataType dtype,
                                             const std::vector<int64_t>& shape)>;
// A node's sequences and optionals (ops/sequence.h), for EvaluateNodeInto in graphs that have any: `inputs` gives,
// per input, its value where it is one (nullptr for tensors and omitted inputs); EvaluateNodeInto fills
// `output_kinds` (shape inference's, per output) and `outputs` (the value of each output that is not a tensor).
struct NodeValues {
  std::vector<const OnnxValue*> inputs;
  std::vector<ValueKind> output_kinds;
  std::vector<OnnxValue> outputs;
};

// EvaluateNode with outputs placed by `alloc` where it returns a tensor. A kernel may still hand back another
// buffer (a view of its input, or a data-dependent output): the caller checks outs[i].raw().
// Outputs the executor allocates itself hold at most `max_elements` elements (0: no limit); a larger one is an
// error naming the node and the shape, never a giant allocation. Without `values`, a node that makes a sequence or
// an optional is an error naming it; with them, such outputs come back there (their tensors in the result are
// undefined).
Result<std::vector<Tensor>> EvaluateNodeInto(const Node& node, const std::vector<const Tensor*>& inputs,
                                             const OutputAllocator& alloc, int64_t max_elements = 0,
                                             NodeValues* values = nullptr);

// Whether a graph's nodes read or make sequences or optionals (its inputs, node outputs or ops say so): the
// executors keep such values beside the tensors only then.
bool HasNonTensorValues(const Graph& g);
// The TensorInfo shape inference sees at run time for a value declared as `declared` (may be null) holding `v` (a
// sequence's element shape is left unknown).
TensorInfo RuntimeInfo(const Value* declared, const OnnxValue& v);

// A ConstEvaluator for shape inference's constant folding.
ConstEvaluator MakeConstEvaluator();

// Every op type the graph uses that has no CPU kernel: one line each (name, op type).
std::vector<std::string> MissingKernels(const Graph& g);

struct RunOptions {
  bool keep_all = false;  // keep every intermediate tensor (for --markAll style debugging)
  // Sees every float value as it is computed (GraphRunOptions::observe_float).
  std::function<Status(const std::string& name, const Tensor& t)> observe_float;
};

// Runs the graph. `inputs` maps graph input names to tensors (dtype and rank must match the model; missing
// or extra inputs are errors naming the input). Returns every graph output (and every value when keep_all).
// Sequences and optionals flow inside; a graph input or output that is one (other than an optional tensor holding
// its tensor) needs RunGraphValues.
Result<std::map<std::string, Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                               const RunOptions& opts = {});
// RunGraph for graphs whose inputs or outputs are sequences or optionals: every input and output as an OnnxValue.
Result<std::map<std::string, OnnxValue>> RunGraphValues(const Graph& g, const std::map<std::string, OnnxValue>& inputs,
                                                        const RunOptions& opts = {});
// Runs a control-flow body (If, Loop, Scan, SequenceMap) with inputs[i] bound to its input i; returns its outputs
// in order.
Result<std::vector<OnnxValue>> RunBodyGraph(const Graph& body, std::vector<OnnxValue> inputs);

}  // namespace kiln::cpu
