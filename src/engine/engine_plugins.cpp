// The plugins an engine needs: recorded when it is written, checked against the registry when it is read.
#include <filesystem>
#include <map>

#include "core/error.h"
#include "engine/engine_internal.h"
#include "ops/op_def.h"
#include "plugins/plugin_registry.h"

namespace kiln {

namespace {

bool IsModelOpDomain(const std::string& domain) { return !domain.empty() && domain != kKilnDomain; }

}  // namespace

std::vector<EnginePluginRef> PluginsOfGraph(const Graph& g) {
  std::map<std::pair<std::string, std::string>, EnginePluginRef> refs;
  for (const auto& n : g.nodes()) {
    if (n->domain == kKilnDomain) continue;
    auto p = plugins::FindPlugin(*n);
    if (!p || refs.count({p->domain, p->name})) continue;
    const std::string file = p->library.empty() ? "" : std::filesystem::path(p->library).filename().string();
    refs[{p->domain, p->name}] = {p->domain, p->name, p->version, file};
  }
  std::vector<EnginePluginRef> r;
  for (auto& [k, v] : refs) r.push_back(std::move(v));
  return r;
}

Status CheckEnginePlugins(const Graph& g, const std::vector<EnginePluginRef>& refs) {
  std::map<std::pair<std::string, std::string>, const EnginePluginRef*> by_op;
  for (const EnginePluginRef& r : refs) by_op[{std::string(CanonicalDomain(r.domain)), r.name}] = &r;
  for (const auto& n : g.nodes()) {
    auto it = by_op.find({n->domain, n->op_type});
    if (it == by_op.end()) {
      // Not recorded as a plugin: an ONNX or kiln op, or an op from outside that must still be defined.
      if (IsModelOpDomain(n->domain) && !FindOp(*n))
        return Err(StatusCode::kNotFound,
                   "the engine's {} uses op {}, which no registered plugin defines: load the plugin library that "
                   "defines it (--dynamicPlugins=lib.so)",
                   n->Where(), QualifiedOpName(*n));
      continue;
    }
    const EnginePluginRef& r = *it->second;
    const std::string op = QualifiedOpName(r.domain, r.name);
    auto p = plugins::FindPlugin(r.domain, r.name);
    if (!p) {
      if (r.library.empty())
        return Err(StatusCode::kNotFound,
                   "the engine needs plugin {} (version {}; it was linked into the program that built the engine) "
                   "for {}, and no such plugin is registered: register it first (--staticPlugins={}, or "
                   "kiln::registerPlugin)",
                   op, r.version, n->Where(), op);
      return Err(StatusCode::kNotFound,
                 "the engine needs plugin {} (version {}) from library '{}' for {}, and no such plugin is "
                 "registered: load that library first (--dynamicPlugins=<path to {}>, or kiln::loadPluginLibrary)",
                 op, r.version, r.library, n->Where(), r.library);
    }
    if (p->version != r.version)
      return Err(StatusCode::kUnsupported,
                 "the engine was built with plugin {} version {}{}, but the registered one is version {} ({}): load "
                 "the plugin the engine was built with, or rebuild the engine",
                 op, r.version, r.library.empty() ? std::string() : fmt::format(" from '{}'", r.library), p->version,
                 p->library.empty() ? std::string("linked in") : fmt::format("from '{}'", p->library));
  }
  return Status::Ok();
}

}  // namespace kiln
