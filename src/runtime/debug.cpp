// The debug API (include/kiln/debug.h): node-by-node runs of networks and engines on a backend's kernels.
#include "kiln/debug.h"

#include "backends/factory.h"
#include "core/error.h"
#include "onnx/importer.h"
#include "runtime/engine_impl.h"
#include "runtime/network_graph.h"

namespace kiln::debug {

std::string ReferenceBackendName() { return std::string(ReferenceBackend().Name()); }

Result<std::map<std::string, Tensor>> RunNetwork(const NetworkDefinition& network,
                                                 const std::map<std::string, Tensor>& inputs,
                                                 const NetworkRunOptions& options) {
  const Backend* backend = &ReferenceBackend();
  if (!options.backend.empty()) {
    KILN_ASSIGN_OR_RETURN(backend, FindBackend(options.backend));
  }
  GraphRunOptions ro;
  ro.keep_all = options.keep_all;
  return backend->RunGraph(GraphOf(network), inputs, ro);
}

Result<std::map<std::string, Tensor>> RunEngineLayers(const Engine& engine,
                                                      const std::map<std::string, Tensor>& inputs) {
  const EngineImpl& e = ImplOf(engine);
  GraphRunOptions ro;
  ro.keep_all = true;
  ro.allow_tf32 = e.allow_tf32;
  const auto& nodes = e.graph->nodes();
  for (size_t k = 0; k < nodes.size() && k < e.tactics.size(); ++k) ro.tactics[nodes[k]->name] = e.tactics[k];
  return e.backend->RunGraph(*e.graph, inputs, ro);
}

Result<Tensor> ReadOnnxTensorFile(const std::string& path, std::string* name) {
  return ReadTensorProtoFile(path, name);
}

}  // namespace kiln::debug
