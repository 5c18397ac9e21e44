// The CUDA layer of plugin ops (tactic "plugin"): the plugin's enqueueCuda on the layer's stream with its workspace
// (plugins/plugin_registry.h). LayerRegistry::Find(node) falls back to it for nodes whose op a registered plugin
// defines. Outputs whose size depends on data get the bound the plugin's shape function gives (MaxOutputElements);
// the plugin reports their real shape through the output allocator after synchronizing its stream.
#include <algorithm>
#include <map>
#include <mutex>

#include "backends/cuda/layer.h"
#include "core/error.h"
#include "plugins/plugin_registry.h"

namespace kiln::cuda {

namespace {

std::vector<PluginTensor> ToPlugin(const std::vector<DeviceTensor>& ts) {
  std::vector<PluginTensor> r(ts.size());
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i].present()) r[i] = {ts[i].data, ts[i].dtype, ts[i].shape};
  return r;
}

class PluginLayer : public Layer {
 public:
  PluginLayer(std::shared_ptr<const plugins::RegisteredPlugin> p, std::shared_ptr<const IPlugin> plugin,
              std::string where, size_t num_outputs, bool data_dependent)
      : p_(std::move(p)),
        plugin_(std::move(plugin)),
        where_(std::move(where)),
        num_outputs_(num_outputs),
        data_dependent_(data_dependent) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& inputs,
                        const std::vector<DeviceTensor>& outputs) const override {
    return plugin_->cudaWorkspaceBytes(ToPlugin(inputs), ToPlugin(outputs));
  }

  int64_t MaxOutputElements(size_t i, const std::vector<DeviceTensor>& inputs) const override {
    if (!data_dependent_) return -1;
    auto shapes = Shapes(inputs);
    if (!shapes.ok() || i >= shapes->data_dependent.size() || !shapes->data_dependent[i]) return -1;
    return NumElements(shapes->max_shapes[i]);
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    std::vector<PluginTensor> ins = ToPlugin(inputs), outs(outputs.size());
    plugins::RunShapes shapes;
    if (data_dependent_) {
      KILN_ASSIGN_OR_RETURN(shapes, Shapes(inputs));
    } else {
      shapes.data_dependent.assign(outputs.size(), false);
      shapes.max_shapes.resize(outputs.size());
      for (const DeviceTensor& o : outputs) {
        shapes.dtypes.push_back(o.dtype);
        shapes.shapes.push_back(o.shape);
      }
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      outs[i].dtype = shapes.dtypes[i];
      if (shapes.data_dependent[i]) continue;  // data == nullptr until allocate()
      outs[i].data = outputs[i].data;
      outs[i].shape = outputs[i].shape;
    }
    static char empty_output;  // the "address" of a 0-element bound
    plugins::CheckedOutputAllocator alloc(
        *p_, where_, shapes, [&](size_t i, const std::vector<int64_t>& shape) -> void* {
          outputs[i].shape = shape;  // the runtime allocated the bound (MaxOutputElements) at outputs[i].data
          outs[i].shape = shape;
          outs[i].data = outputs[i].data ? outputs[i].data : &empty_output;
          return outs[i].data;
        });
    PluginCudaContext pctx;
    pctx.stream = ctx.stream;
    pctx.workspace = ctx.workspace;
    pctx.workspace_bytes = ctx.workspace_bytes;
    pctx.outputs = &alloc;
    return alloc.Finish(plugin_->enqueueCuda(ins, outs, pctx));
  }

 private:
  Result<plugins::RunShapes> Shapes(const std::vector<DeviceTensor>& inputs) const {
    std::vector<plugins::RunInput> in(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].present())
        in[i] = {inputs[i].dtype, inputs[i].shape, inputs[i].host ? inputs[i].host->raw() : nullptr};
    return plugins::ConcreteShapes(*p_, *plugin_, where_, in, num_outputs_);
  }

  std::shared_ptr<const plugins::RegisteredPlugin> p_;
  std::shared_ptr<const IPlugin> plugin_;
  std::string where_;
  size_t num_outputs_;
  bool data_dependent_;
};

struct Checked {
  std::shared_ptr<const plugins::RegisteredPlugin> p;
  std::shared_ptr<const IPlugin> plugin;
};

// The plugin of a node, checked for a CUDA implementation that takes the node's types.
Result<Checked> CheckNode(const Node& n) {
  auto p = plugins::FindPlugin(n);
  if (!p) return Err(StatusCode::kNotFound, "{}: no plugin defines op {}", n.Where(), QualifiedOpName(n));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const IPlugin> plugin, plugins::PluginForNode(*p, n));
  if (!plugin->hasCuda())
    return Err(StatusCode::kUnsupported,
               "{}, {}: the plugin has no CUDA implementation (hasCuda() is false); build for the cpu backend "
               "(--backend=cpu)",
               n.Where(), p->Describe());
  std::vector<DataType> in, out;
  for (const Value* v : n.inputs) in.push_back(v ? v->dtype : DataType::kUndefined);
  for (const Value* v : n.outputs) out.push_back(v ? v->dtype : DataType::kUndefined);
  KILN_RETURN_IF_ERROR(plugins::CheckTypes(*p, *plugin, n.Where(), PluginBackend::kCuda, "cuda", in, out));
  return Checked{std::move(p), std::move(plugin)};
}

LayerFactory MakeFactory() {
  LayerFactory f;
  f.tactics = [](const LayerSpec& spec) -> Result<std::vector<std::string>> {
    KILN_RETURN_IF_ERROR(CheckNode(spec.node).status());
    return std::vector<std::string>{"plugin"};
  };
  f.create = [](const LayerSpec& spec, const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    if (tactic != "plugin")
      return Err(StatusCode::kInvalidArgument, "{}: plugin layers have the one tactic 'plugin', not '{}'", n.Where(),
                 tactic);
    KILN_ASSIGN_OR_RETURN(Checked c, CheckNode(n));
    bool data_dependent = false;
    for (const Value* v : n.outputs)
      data_dependent |= v && (!v->has_shape ||
                              std::any_of(v->shape.begin(), v->shape.end(), [](const Dim& d) { return d.unknown(); }));
    return std::unique_ptr<Layer>(
        new PluginLayer(std::move(c.p), std::move(c.plugin), n.Where(), n.outputs.size(), data_dependent));
  };
  return f;
}

}  // namespace

// One factory per registered plugin (per registration: a plugin registered again gets a new one), so that what a
// factory says of the layers it makes can follow the plugin (its float types: RegisteredPlugin::cuda_types).
const LayerFactory* PluginLayerFactory(const Node& n) {
  if (n.domain == kKilnDomain) return nullptr;
  auto p = plugins::FindPlugin(n);
  if (!p) return nullptr;
  static std::mutex mu;
  static std::map<const plugins::RegisteredPlugin*, std::pair<std::shared_ptr<const plugins::RegisteredPlugin>,
                                                               std::unique_ptr<LayerFactory>>>
      factories;  // the registration is kept alive with its factory, so its address names it uniquely
  std::lock_guard lock(mu);
  auto& entry = factories[p.get()];
  if (!entry.second) {
    entry = {p, std::make_unique<LayerFactory>(MakeFactory())};
    entry.second->compute_types = p->cuda_types;  // the precision planner lowers the node only to these
  }
  return entry.second.get();
}

}  // namespace kiln::cuda
