// The CPU kernel of plugin ops: runs the plugin's runCpu (plugins/plugin_registry.h). KernelRegistry::Find(node)
// falls back to it for nodes whose op a registered plugin defines.
#include "backends/cpu/kernel.h"
#include "core/error.h"
#include "plugins/plugin_registry.h"

namespace kiln::cpu {

namespace {

Status RunPluginKernel(KernelContext& k) {
  const Node& n = k.node;
  auto p = plugins::FindPlugin(n);
  if (!p)
    return Err(StatusCode::kNotFound, "{}: no plugin defines op {} any more (was it deregistered?)", n.Where(),
               QualifiedOpName(n));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const IPlugin> plugin, plugins::PluginForNode(*p, n));
  const std::string where = n.Where();

  std::vector<plugins::RunInput> run_in(k.num_inputs());
  std::vector<PluginTensor> ins(k.num_inputs());
  std::vector<DataType> in_types(k.num_inputs(), DataType::kUndefined);
  for (size_t i = 0; i < k.num_inputs(); ++i) {
    const Tensor* t = k.input(i);
    if (!t || !t->defined()) continue;
    run_in[i] = {t->dtype(), t->shape(), t->raw()};
    ins[i] = {const_cast<void*>(t->raw()), t->dtype(), t->shape()};
    in_types[i] = t->dtype();
  }
  KILN_ASSIGN_OR_RETURN(plugins::RunShapes shapes,
                        plugins::ConcreteShapes(*p, *plugin, where, run_in, k.num_outputs()));
  KILN_RETURN_IF_ERROR(plugins::CheckTypes(*p, *plugin, where, PluginBackend::kCpu, "cpu", in_types, shapes.dtypes));

  std::vector<PluginTensor> outs(k.num_outputs());
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i].dtype = shapes.dtypes[i];
    if (shapes.data_dependent[i]) continue;  // data == nullptr until allocate()
    Tensor& o = k.out(i);
    if (!o.defined() || o.shape() != shapes.shapes[i] || o.dtype() != shapes.dtypes[i])
      o = Tensor(shapes.dtypes[i], shapes.shapes[i]);
    outs[i].data = o.raw();
    outs[i].shape = o.shape();
  }
  static char empty_output;  // where a 0-element output "lives"
  plugins::CheckedOutputAllocator alloc(*p, where, shapes, [&](size_t i, const std::vector<int64_t>& shape) -> void* {
    Tensor t(shapes.dtypes[i], shape);
    if (t.numel() > 0 && !t.raw()) return nullptr;
    k.out(i) = std::move(t);
    outs[i].data = k.out(i).numel() > 0 ? k.out(i).raw() : &empty_output;
    outs[i].shape = shape;
    return outs[i].data;
  });
  PluginCpuContext ctx;
  ctx.outputs = &alloc;
  ctx.num_threads = NumThreads();
  return alloc.Finish(plugin->runCpu(ins, outs, ctx));
}

}  // namespace

const KernelFn* PluginKernel(const Node& n) {
  static const KernelFn kRunPlugin = RunPluginKernel;
  if (n.domain == kKilnDomain || !plugins::FindPlugin(n)) return nullptr;
  return &kRunPlugin;
}

}  // namespace kiln::cpu
