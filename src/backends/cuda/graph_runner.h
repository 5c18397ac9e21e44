// A simple GPU executor for tests, conformance and `kiln compare --markAll`: runs a Graph node by node on the
// CUDA layers, inferring each node's shapes from the concrete inputs, with a fresh device buffer per value and a
// synchronization after every node (so a failure names its node). Engines use the planned executor instead.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "backends/cuda/layer.h"

namespace kiln::cuda {

struct GpuRunOptions {
  bool keep_all = false;                       // return every intermediate value too
  std::map<std::string, std::string> tactics;  // node name -> tactic (default: the factory's first)
  std::string tactic;                          // tactic for every node not named in `tactics` (when non-empty)
  bool allow_tf32 = true;
  // Enqueues every layer this many times on the same buffers and workspace (a layer whose result depends on
  // anything but its inputs, such as what an earlier run left in the workspace, shows it here).
  int repeat = 1;
  // Fills each layer's workspace with a different non-zero byte pattern before every run (a layer must not rely on
  // what its scratch memory holds; engines share one workspace among all their layers).
  bool poison_workspace = false;
  // false: no synchronization between nodes (and every buffer kept to the end, as a free would synchronize), so
  // consecutive layers' kernels meet on the stream as they do in an engine; a failure then names no node.
  bool sync_each_node = true;
  // Sees a host copy of every float value as it is computed (GraphRunOptions::observe_float).
  std::function<Status(const std::string& name, const Tensor& host)> observe_float;
};

// Runs `g` on the current CUDA device. `inputs` are host tensors named like the graph inputs; returns host copies
// of every graph output (and every value with keep_all).
Result<std::map<std::string, Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                               const GpuRunOptions& opts = {});

}  // namespace kiln::cuda
