// CPU reference kernels: readable, one file per op family, registered in one explicit table.
// A kernel gets its node (attributes), its inputs (nullptr where omitted) and its outputs. Outputs whose
// shape inference produced a static shape arrive allocated (zero-filled) with that shape and dtype; an
// output whose shape depends on data (NonZero, NonMaxSuppression) arrives undefined and the kernel
// assigns it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_def.h"

namespace kiln::cpu {

struct KernelContext {
  const Node& node;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor>& outputs;
  // Where the outputs the node does not list go (a node from a file may list fewer than its kernel writes): one
  // tensor per index, each thrown away after the run.
  std::map<size_t, Tensor> discarded = {};

  size_t num_inputs() const { return inputs.size(); }
  const Tensor* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  const Tensor& in(size_t i) const { return *inputs[i]; }
  Tensor& out(size_t i) { return i < outputs.size() ? outputs[i] : discarded[i]; }
  size_t num_outputs() const { return outputs.size(); }
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
