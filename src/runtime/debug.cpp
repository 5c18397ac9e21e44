// The debug API (include/kiln/debug.h): node-by-node runs of networks and engines on a backend's kernels.
#include "kiln/debug.h"
#include "kiln/debug_values.h"

#include "backends/factory.h"
#include "core/error.h"
#include "onnx/importer.h"
#include "runtime/engine_impl.h"
#include "runtime/network_graph.h"

namespace kiln::debug {

std::string ReferenceBackendName() { return std::string(ReferenceBackend().Name()); }

namespace {
// The backend a node-by-node run uses (the reference one unless named) and its options.
Result<const Backend*> RunBackend(const NetworkRunOptions& options) {
  if (options.backend.empty()) return &ReferenceBackend();
  return FindBackend(options.backend);
}
GraphRunOptions RunOptions(const NetworkRunOptions& options) {
  GraphRunOptions ro;
  ro.keep_all = options.keep_all;
  ro.allow_tf32 = options.allow_tf32;
  return ro;
}
}  // namespace

Result<std::map<std::string, Tensor>> RunNetwork(const NetworkDefinition& network,
                                                 const std::map<std::string, Tensor>& inputs,
                                                 const NetworkRunOptions& options) {
  KILN_ASSIGN_OR_RETURN(const Backend* backend, RunBackend(options));
  return backend->RunGraph(GraphOf(network), inputs, RunOptions(options));
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

namespace {
ValueKind KindOf(OnnxType t) {
  switch (t) {
    case OnnxType::kSequence: return ValueKind::kSequence;
    case OnnxType::kOptionalTensor: return ValueKind::kOptionalTensor;
    case OnnxType::kOptionalSequence: return ValueKind::kOptionalSequence;
    default: return ValueKind::kTensor;
  }
}
}  // namespace

OnnxType NetworkValueType(const NetworkDefinition& network, const std::string& name) {
  const Value* v = GraphOf(network).FindValue(name);
  if (!v || (!v->is_graph_input && !v->is_graph_output)) return OnnxType::kTensor;
  switch (v->kind) {
    case ValueKind::kSequence: return OnnxType::kSequence;
    case ValueKind::kOptionalTensor: return OnnxType::kOptionalTensor;
    case ValueKind::kOptionalSequence: return OnnxType::kOptionalSequence;
    default: return OnnxType::kTensor;
  }
}

Result<std::map<std::string, OnnxValue>> RunNetworkValues(const NetworkDefinition& network,
                                                          const std::map<std::string, OnnxValue>& inputs,
                                                          const NetworkRunOptions& options) {
  KILN_ASSIGN_OR_RETURN(const Backend* backend, RunBackend(options));
  return backend->RunGraphValues(GraphOf(network), inputs, RunOptions(options));
}

Result<OnnxValue> ReadOnnxValueFile(const std::string& path, OnnxType type, std::string* name) {
  return ReadValueProtoFile(path, KindOf(type), name);
}

}  // namespace kiln::debug
