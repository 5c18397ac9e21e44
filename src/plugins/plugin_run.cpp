// Running a plugin node, whatever the backend: output shapes at concrete input shapes, the type check, and the
// output allocator for data-dependent outputs (plugin_registry.h).
#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"
#include "plugins/plugin_registry.h"

namespace kiln::plugins {

namespace {

std::string TypeList(const std::vector<DataType>& types) {
  std::vector<std::string> s;
  for (DataType t : types) s.push_back(t == DataType::kUndefined ? "omitted" : DataTypeName(t));
  return fmt::format("({})", fmt::join(s, ", "));
}

std::string ShapeString(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

}  // namespace

Result<RunShapes> ConcreteShapes(const RegisteredPlugin& p, const IPlugin& plugin, const std::string& where,
                                 const std::vector<RunInput>& inputs, size_t num_outputs) {
  std::vector<PluginInputInfo> ins(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype == DataType::kUndefined) continue;
    ins[i].present = true;
    ins[i].dtype = inputs[i].dtype;
    for (int64_t d : inputs[i].shape) ins[i].dims.emplace_back(d);
    ins[i].data = inputs[i].host;
  }
  KILN_ASSIGN_OR_RETURN(std::vector<PluginOutputInfo> outs, InferPluginOutputs(p, plugin, where, ins, num_outputs));
  RunShapes r;
  r.dtypes.resize(num_outputs);
  r.shapes.resize(num_outputs);
  r.data_dependent.resize(num_outputs, false);
  r.max_shapes.resize(num_outputs);
  for (size_t i = 0; i < num_outputs; ++i) {
    const PluginOutputInfo& o = outs[i];
    r.dtypes[i] = o.dtype;
    const bool dd = std::any_of(o.dims.begin(), o.dims.end(), [](const PluginDim& d) { return d.unknown(); });
    const auto& dims = dd ? o.max_dims : o.dims;
    std::vector<int64_t> values;
    for (const PluginDim& d : dims) {
      if (!d.known())
        return Err(StatusCode::kInternal,
                   "{}, {}: output {}'s {} dim '{}' is still symbolic at concrete input shapes: the shape function "
                   "must compute sizes from the inputs' dims",
                   where, p.Describe(), i, dd ? "max" : "", d.toString());
      values.push_back(d.value);
    }
    r.data_dependent[i] = dd;
    (dd ? r.max_shapes[i] : r.shapes[i]) = std::move(values);
  }
  return r;
}

Status CheckTypes(const RegisteredPlugin& p, const IPlugin& plugin, const std::string& where, PluginBackend backend,
                  std::string_view name, const std::vector<DataType>& inputs, const std::vector<DataType>& outputs) {
  if (plugin.supportsTypes(backend, inputs, outputs)) return Status::Ok();
  return Err(StatusCode::kUnsupported,
             "{}, {}: the plugin does not take inputs {} -> outputs {} on the {} backend (supportsTypes says no){}",
             where, p.Describe(), TypeList(inputs), TypeList(outputs), name,
             backend == PluginBackend::kCuda ? "; build without --fp16/--bf16 or pin this layer with "
                                               "--layerPrecisions=<name>:fp32"
                                             : "");
}

CheckedOutputAllocator::CheckedOutputAllocator(const RegisteredPlugin& p, std::string where, const RunShapes& shapes,
                                               Give give)
    : p_(p), where_(std::move(where)), shapes_(shapes), give_(std::move(give)), done_(shapes.dtypes.size(), false) {}

void* CheckedOutputAllocator::allocate(int32_t index, const std::vector<int64_t>& shape) {
  auto refuse = [&](const std::string& why) -> void* {
    refused_ += (refused_.empty() ? "" : "; ") +
                fmt::format("allocate({}, {}) was refused: {}", index, ShapeString(shape), why);
    return nullptr;
  };
  if (index < 0 || static_cast<size_t>(index) >= done_.size())
    return refuse(fmt::format("the node has {} outputs", done_.size()));
  const size_t i = static_cast<size_t>(index);
  if (!shapes_.data_dependent[i])
    return refuse(fmt::format("output {} has the shape {} known before the run; it arrives allocated", i,
                              ShapeString(shapes_.shapes[i])));
  if (done_[i]) return refuse("it was allocated already");
  const auto& bound = shapes_.max_shapes[i];
  bool fits = shape.size() == bound.size();
  for (size_t k = 0; fits && k < shape.size(); ++k) fits = shape[k] >= 0 && shape[k] <= bound[k];
  if (!fits)
    return refuse(fmt::format("it exceeds the bound {} the shape function gave (max_dims)", ShapeString(bound)));
  void* ptr = give_(i, shape);
  if (!ptr) return refuse("out of memory");
  done_[i] = true;
  return ptr;
}

Status CheckedOutputAllocator::Finish(Status kernel_status) const {
  if (!refused_.empty())
    return Err(kernel_status.ok() ? StatusCode::kInternal : kernel_status.code(), "{}, {}: {}{}", where_, p_.Describe(),
               kernel_status.ok() ? std::string() : kernel_status.message() + "; ", refused_);
  if (!kernel_status.ok()) {
    if (kernel_status.message().find(where_) != std::string::npos) return kernel_status;
    return Status(kernel_status.code(), fmt::format("{}, {}: {}", where_, p_.Describe(), kernel_status.message()));
  }
  for (size_t i = 0; i < done_.size(); ++i)
    if (shapes_.data_dependent[i] && !done_[i])
      return Err(StatusCode::kInternal,
                 "{}, {}: the plugin returned without giving data-dependent output {} a shape: call "
                 "ctx.outputs->allocate({}, shape)",
                 where_, p_.Describe(), i, i);
  return Status::Ok();
}

}  // namespace kiln::plugins
