// The one table of CUDA layers: each op family registers its factories here.
#include "backends/cuda/families.h"
#include "core/error.h"

namespace kiln::cuda {

const LayerRegistry& Layers() {
  static const LayerRegistry reg = [] {
    LayerRegistry r;
    RegisterPointwiseLayers(r);
    RegisterReduceLayers(r);
    RegisterNormLayers(r);
    RegisterTensorLayers(r);
    RegisterIndexLayers(r);
    RegisterMatmulLayers(r);
    RegisterAttentionLayers(r);
    RegisterConvLayers(r);
    RegisterPoolLayers(r);
    RegisterQuantizedLayers(r);
    RegisterWeightOnlyLayers(r);
    return r;
  }();
  return reg;
}

const LayerFactory* LayerRegistry::Find(const Node& n) const {
  if (const LayerFactory* f = Find(QualifiedOpName(n))) return f;
  return PluginLayerFactory(n);
}

std::vector<std::string> LayerRegistry::OpTypes() const {
  std::vector<std::string> r;
  for (const auto& [k, v] : factories_) r.push_back(k);
  return r;
}

LayerSpec SpecAt(const Node& node, const Node& tuned_node, bool allow_tf32) {
  LayerSpec spec{node, {}, {}, allow_tf32};
  for (const Value* v : tuned_node.inputs)
    spec.input_shapes.push_back(v && v->has_shape && IsStatic(v->shape) ? ToStatic(v->shape) : std::vector<int64_t>{});
  for (const Value* v : tuned_node.outputs)
    spec.output_shapes.push_back(v && v->has_shape && IsStatic(v->shape) ? ToStatic(v->shape) : std::vector<int64_t>{});
  return spec;
}

Result<std::vector<std::string>> TacticsFor(const LayerSpec& spec) {
  const LayerFactory* f = Layers().Find(spec.node);
  if (!f)
    return Err(StatusCode::kUnsupported, "{}: the CUDA backend has no kernel for op type {}", spec.node.Where(),
               spec.node.op_type);
  if (!f->tactics) return std::vector<std::string>{"default"};
  auto r = f->tactics(spec);
  if (!r.ok()) {
    if (r.status().message().find(spec.node.name) == std::string::npos) return r.status().WithContext(spec.node.Where());
    return r.status();
  }
  if (r->empty()) return Err(StatusCode::kUnsupported, "{}: no CUDA tactic can run this node", spec.node.Where());
  return r;
}

Result<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec, const std::string& tactic) {
  const LayerFactory* f = Layers().Find(spec.node);
  if (!f)
    return Err(StatusCode::kUnsupported, "{}: the CUDA backend has no kernel for op type {}", spec.node.Where(),
               spec.node.op_type);
  auto r = f->create(spec, tactic);
  if (!r.ok() && r.status().message().find(spec.node.name) == std::string::npos)
    return r.status().WithContext(spec.node.Where());
  return r;
}

}  // namespace kiln::cuda
