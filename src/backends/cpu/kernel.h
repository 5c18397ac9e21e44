// CPU reference kernels: readable, one file per op family, registered in one explicit table.
// A kernel gets its node (attributes), its inputs (nullptr where omitted) and its outputs. Outputs whose
// shape inference produced a static shape arrive allocated (zero-filled) with that shape and dtype; an
// output whose shape depends on data (NonZero, NonMaxSuppression) arrives undefined and the kernel
// assigns it.
// Sequences and optionals (ops/sequence.h) travel beside the tensors as OnnxValues, for the nodes that read or make
// them: value_input(i) is input i where it is one, and the kernel sets value_out(i) for each output whose
// output_kind(i) is not kTensor (tensor-only nodes see neither).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/onnx_value.h"
#include "ops/op_def.h"

namespace kiln::cpu {

struct KernelContext {
  const Node& node;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor>& outputs;
  // Where the outputs the node does not list go (a node from a file may list fewer than its kernel writes): one
  // tensor per index, each thrown away after the run.
  std::map<size_t, Tensor> discarded = {};
  // Sequences and optionals, where the node reads or makes any (else null): per input, its value or nullptr (a
  // tensor, or an omitted input; inputs[i] is the tensor an optional holds, else nullptr); per output, the kind shape
  // inference gave it, and the values the kernel makes for the outputs that are not tensors.
  const std::vector<const OnnxValue*>* value_inputs = nullptr;
  const std::vector<ValueKind>* output_kinds = nullptr;
  std::vector<OnnxValue>* value_outputs = nullptr;
  std::map<size_t, OnnxValue> discarded_values = {};

  size_t num_inputs() const { return inputs.size(); }
  const Tensor* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  const Tensor& in(size_t i) const { return *inputs[i]; }
  Tensor& out(size_t i) { return i < outputs.size() ? outputs[i] : discarded[i]; }
  size_t num_outputs() const { return outputs.size(); }
  const OnnxValue* value_input(size_t i) const {
    return value_inputs && i < value_inputs->size() ? (*value_inputs)[i] : nullptr;
  }
  ValueKind output_kind(size_t i) const {
    return output_kinds && i < output_kinds->size() ? (*output_kinds)[i] : ValueKind::kTensor;
  }
  OnnxValue& value_out(size_t i) {
    return value_outputs && i < value_outputs->size() ? (*value_outputs)[i] : discarded_values[i];
  }
};

using KernelFn = std::function<Status(KernelContext&)>;

class KernelRegistry {
 public:
  // `op` is the OpDef's qualified name: "Relu" (ONNX), "kiln.FusedConv" (kiln's internal ops).
  void Add(const std::string& op, KernelFn fn) { fns_[op] = std::move(fn); }
  const KernelFn* Find(const std::string& op) const {
    auto it = fns_.find(op);
    return it == fns_.end() ? nullptr : &it->second;
  }
  // The node's kernel: a built-in one, else the plugin kernel where a registered plugin defines the node's op.
  const KernelFn* Find(const Node& n) const;
  std::vector<std::string> OpTypes() const;  // qualified names

 private:
  std::unordered_map<std::string, KernelFn> fns_;
};

// The one table (src/backends/cpu/registry.cpp lists the families).
const KernelRegistry& Kernels();
// The kernel of a node whose op a registered plugin defines, or nullptr (plugin_kernel.cpp).
const KernelFn* PluginKernel(const Node& n);

// Runs `fn(begin, end)` over [0, n) split across the CPU threads (serial for small n).
void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 4096);
int NumThreads();

}  // namespace kiln::cpu
