// The plugin registry (internal side of include/kiln/plugin.h): registered creators, the OpDef each becomes, the
// plugin instances made from nodes' fields, and what backends need to run a plugin node.
//
// A registered plugin is an external op (ops/op_def.h AddExternalOp) whose converter checks a node's attributes
// against the creator's field specs and rewrites them to the plugin's serialized fields, and whose shape function
// calls the plugin's. Backends find plugin nodes through their kernel/layer tables' fallbacks
// (backends/cpu/plugin_kernel.cpp, backends/cuda/plugin_layer.cpp), which use the helpers below.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "kiln/plugin.h"

namespace kiln::plugins {

struct RegisteredPlugin {
  std::shared_ptr<IPluginCreator> creator;
  std::string domain, name, version;
  std::string library;  // "" when linked in
  std::vector<PluginFieldSpec> specs;
  std::vector<DataType> cpu_types, cuda_types;  // creator->floatTypes

  std::string QualifiedName() const { return domain.empty() ? name : domain + "." + name; }
  // "plugin com.example.Scale (version 1, from 'libx.so')"
  std::string Describe() const;
  PluginInfo Info() const;

  // Plugin instances by canonical fields (created once per distinct fields, shared by every node and thread).
  mutable std::mutex mu;
  mutable std::map<std::string, std::shared_ptr<const IPlugin>> instances;
};

// Registers a creator; `library` is the file it came from ("" when linked in).
Status Register(std::shared_ptr<IPluginCreator> creator, const std::string& library);
// The registered plugin defining (domain, name), or nullptr.
std::shared_ptr<const RegisteredPlugin> FindPlugin(std::string_view domain, std::string_view name);
std::shared_ptr<const RegisteredPlugin> FindPlugin(const Node& n);

// A node's fields: its attributes checked against the specs (names, types), defaults filled in, in spec order.
Result<PluginFields> FieldsOfNode(const RegisteredPlugin& p, const Node& n);
// The plugin instance for the node's fields (deserialization, for nodes read from an engine).
Result<std::shared_ptr<const IPlugin>> PluginForNode(const RegisteredPlugin& p, const Node& n);
// Field values as IR attributes and back.
Attribute ToAttribute(const PluginFieldValue& v);

// Runs the plugin's shape function and checks what it says: every output typed, every unknown dim bounded by
// max_dims. `where` names the node in errors.
Result<std::vector<PluginOutputInfo>> InferPluginOutputs(const RegisteredPlugin& p, const IPlugin& plugin,
                                                         const std::string& where,
                                                         const std::vector<PluginInputInfo>& inputs,
                                                         size_t num_outputs);
// kiln's symbolic dim arithmetic for plugins.
IDimBuilder& DimBuilder();
PluginDim ToPluginDim(const Dim& d);
Dim FromPluginDim(const PluginDim& d);

// ---- running a plugin node (both backends) ----

// An input at run time: concrete shape, and its values on the host where known (nullptr otherwise).
struct RunInput {
  DataType dtype = DataType::kUndefined;  // kUndefined: omitted
  std::vector<int64_t> shape;
  const void* host = nullptr;
};

// The outputs at concrete input shapes.
struct RunShapes {
  std::vector<DataType> dtypes;
  std::vector<std::vector<int64_t>> shapes;  // static outputs' shapes (empty for data-dependent ones)
  std::vector<bool> data_dependent;
  std::vector<std::vector<int64_t>> max_shapes;  // data-dependent outputs: the upper bound
  bool any_data_dependent() const;
};
Result<RunShapes> ConcreteShapes(const RegisteredPlugin& p, const IPlugin& plugin, const std::string& where,
                                 const std::vector<RunInput>& inputs, size_t num_outputs);

// An error naming the node, the plugin and the types when the plugin does not take these types on `backend`
// (called `backend_name` in the message).
Status CheckTypes(const RegisteredPlugin& p, const IPlugin& plugin, const std::string& where, PluginBackend backend,
                  std::string_view backend_name, const std::vector<DataType>& inputs,
                  const std::vector<DataType>& outputs);

// The output allocator both backends hand a plugin: checks the asked shape against the bound, then gets memory
// from `give` (host tensors on cpu; the preallocated bound on cuda).
class CheckedOutputAllocator : public IPluginOutputAllocator {
 public:
  using Give = std::function<void*(size_t index, const std::vector<int64_t>& shape)>;
  CheckedOutputAllocator(const RegisteredPlugin& p, std::string where, const RunShapes& shapes, Give give);
  void* allocate(int32_t index, const std::vector<int64_t>& shape) override;
  // The kernel's status, with what allocate refused added; an error when a data-dependent output was never
  // allocated after a successful run.
  Status Finish(Status kernel_status) const;

 private:
  const RegisteredPlugin& p_;
  std::string where_;
  const RunShapes& shapes_;
  Give give_;
  std::vector<bool> done_;
  std::string refused_;
};

}  // namespace kiln::plugins
