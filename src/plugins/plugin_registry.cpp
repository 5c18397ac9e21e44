// The plugin registry: registered creators (each also an external OpDef), linked-in creators, and the plugin
// instances made from nodes' fields.
#include "plugins/plugin_registry.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <shared_mutex>

#include "core/error.h"
#include "ops/op_def.h"
#include "plugins/plugin_op.h"

namespace kiln::plugins {

namespace {

struct Registry {
  std::shared_mutex mu;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<RegisteredPlugin>> plugins;
};
Registry& TheRegistry() {
  static Registry r;
  return r;
}

struct LinkedIn {
  std::mutex mu;
  std::vector<std::shared_ptr<IPluginCreator>> creators;
};
LinkedIn& TheLinkedIn() {
  static LinkedIn l;
  return l;
}

std::string Str(const char* s) { return s ? std::string(s) : std::string(); }

// A field value spelled exactly (floats by their bits), for the instance cache's keys.
std::string KeyOf(const PluginFieldValue& v) {
  auto f = [](float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return fmt::format("{:08x}", b);
  };
  switch (fieldTypeOf(v)) {
    case PluginFieldType::kInt: return fmt::format("i{}", std::get<int64_t>(v));
    case PluginFieldType::kFloat: return "f" + f(std::get<float>(v));
    case PluginFieldType::kString:
      return fmt::format("s{}:{}", std::get<std::string>(v).size(), std::get<std::string>(v));
    case PluginFieldType::kInts: return fmt::format("I[{}]", fmt::join(std::get<std::vector<int64_t>>(v), ","));
    case PluginFieldType::kFloats: {
      std::string r = "F[";
      for (float x : std::get<std::vector<float>>(v)) r += f(x) + ",";
      return r + "]";
    }
  }
  return "?";
}

std::string FieldsKey(const PluginFields& fields) {
  std::string k;
  for (const auto& [name, v] : fields.items()) k += fmt::format("{}:{}={};", name.size(), name, KeyOf(v));
  return k;
}

Result<PluginFieldValue> FromAttribute(const Attribute& a, const PluginFieldSpec& spec, const std::string& where) {
  using K = Attribute::Kind;
  const PluginFieldType want = spec.type;
  auto is = [&](K k, PluginFieldType t) { return a.kind == k && want == t; };
  if (is(K::kInt, PluginFieldType::kInt)) return PluginFieldValue(a.i);
  if (is(K::kFloat, PluginFieldType::kFloat)) return PluginFieldValue(a.f);
  if (is(K::kString, PluginFieldType::kString)) return PluginFieldValue(a.s);
  if (is(K::kInts, PluginFieldType::kInts)) return PluginFieldValue(a.ints);
  if (is(K::kFloats, PluginFieldType::kFloats)) return PluginFieldValue(a.floats);
  // ONNX writes an empty list without its element type.
  if (want == PluginFieldType::kInts && a.kind == K::kFloats && a.floats.empty()) return PluginFieldValue(a.ints);
  if (want == PluginFieldType::kFloats && a.kind == K::kInts && a.ints.empty()) return PluginFieldValue(a.floats);
  return Err(StatusCode::kInvalidModel, "{}: field '{}' must be of type {}, but the node gives an attribute of type {}",
             where, spec.name, fieldTypeName(want), AttributeKindName(a.kind));
}

Status CheckCreator(const IPluginCreator& c, const std::string& library) {
  const std::string from = library.empty() ? std::string() : fmt::format(" (from '{}')", library);
  const std::string name = Str(c.name()), domain = Str(c.domain()), version = Str(c.version());
  if (name.empty()) return Err(StatusCode::kInvalidArgument, "a plugin creator{} gives no op name", from);
  if (name.find('.') != std::string::npos)
    return Err(StatusCode::kInvalidArgument,
               "plugin '{}'{}: an op name has no '.' (kiln qualifies ops as domain.Name): put the prefix in the domain",
               name, from);
  if (version.empty())
    return Err(StatusCode::kInvalidArgument, "plugin {}{} gives no version: engines record it", name, from);
  if (domain == kKilnDomain)
    return Err(StatusCode::kInvalidArgument,
               "plugin {}{} is in domain 'kiln', which holds kiln's internal ops: give it a domain of its own", name,
               from);
  std::set<std::string> seen;
  for (const PluginFieldSpec& s : c.fieldSpecs()) {
    if (s.name.empty() || !seen.insert(s.name).second)
      return Err(StatusCode::kInvalidArgument, "plugin {}{} declares field '{}' {}", name, from, s.name,
                 s.name.empty() ? "without a name" : "twice");
    if (s.default_value && fieldTypeOf(*s.default_value) != s.type)
      return Err(StatusCode::kInvalidArgument, "plugin {}{}: field '{}' is {} but its default is {}", name, from,
                 s.name, fieldTypeName(s.type), fieldTypeName(fieldTypeOf(*s.default_value)));
  }
  return Status::Ok();
}

}  // namespace

std::string RegisteredPlugin::Describe() const {
  return fmt::format("plugin {} (version {}, {})", QualifiedName(), version,
                     library.empty() ? std::string("linked in") : fmt::format("from '{}'", library));
}

PluginInfo RegisteredPlugin::Info() const { return {domain, name, version, library, specs}; }

bool RunShapes::any_data_dependent() const {
  return std::any_of(data_dependent.begin(), data_dependent.end(), [](bool b) { return b; });
}

Status Register(std::shared_ptr<IPluginCreator> creator, const std::string& library) {
  if (!creator) return Err(StatusCode::kInvalidArgument, "registerPlugin: the creator is null");
  KILN_RETURN_IF_ERROR(CheckCreator(*creator, library));
  auto p = std::make_shared<RegisteredPlugin>();
  p->domain = std::string(CanonicalDomain(Str(creator->domain())));
  p->name = Str(creator->name());
  p->version = Str(creator->version());
  p->library = library;
  p->specs = creator->fieldSpecs();
  p->cpu_types = creator->floatTypes(PluginBackend::kCpu);
  p->cuda_types = creator->floatTypes(PluginBackend::kCuda);
  p->creator = std::move(creator);

  Registry& r = TheRegistry();
  std::unique_lock lock(r.mu);
  const auto key = std::make_pair(p->domain, p->name);
  if (auto it = r.plugins.find(key); it != r.plugins.end())
    return Err(StatusCode::kInvalidArgument, "cannot register {}: {} is registered already", p->Describe(),
               it->second->Describe());
  KILN_RETURN_IF_ERROR(AddExternalOp(MakePluginOpDef(p)));
  r.plugins.emplace(key, std::move(p));
  return Status::Ok();
}

std::shared_ptr<const RegisteredPlugin> FindPlugin(std::string_view domain, std::string_view name) {
  Registry& r = TheRegistry();
  std::shared_lock lock(r.mu);
  auto it = r.plugins.find({std::string(CanonicalDomain(domain)), std::string(name)});
  return it == r.plugins.end() ? nullptr : it->second;
}

std::shared_ptr<const RegisteredPlugin> FindPlugin(const Node& n) { return FindPlugin(n.domain, n.op_type); }

Attribute ToAttribute(const PluginFieldValue& v) {
  switch (fieldTypeOf(v)) {
    case PluginFieldType::kInt: return Attribute::Int(std::get<int64_t>(v));
    case PluginFieldType::kFloat: return Attribute::Float(std::get<float>(v));
    case PluginFieldType::kString: return Attribute::String(std::get<std::string>(v));
    case PluginFieldType::kInts: return Attribute::Ints(std::get<std::vector<int64_t>>(v));
    case PluginFieldType::kFloats: return Attribute::Floats(std::get<std::vector<float>>(v));
  }
  return Attribute();
}

Result<PluginFields> FieldsOfNode(const RegisteredPlugin& p, const Node& n) {
  const std::string where = fmt::format("{}, {}", n.Where(), p.Describe());
  for (const auto& [key, a] : n.attrs) {
    const std::string& field = key;  // clang 14: a lambda may not capture a structured binding
    auto spec = std::find_if(p.specs.begin(), p.specs.end(), [&](const PluginFieldSpec& s) { return s.name == field; });
    if (spec == p.specs.end()) {
      std::vector<std::string> names;
      for (const auto& s : p.specs) names.push_back(s.name);
      return Err(StatusCode::kInvalidModel, "{}: the plugin has no field '{}' (its fields: {})", where, key,
                 names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
    }
  }
  PluginFields fields;
  for (const PluginFieldSpec& s : p.specs) {
    auto it = n.attrs.find(s.name);
    if (it != n.attrs.end()) {
      KILN_ASSIGN_OR_RETURN(PluginFieldValue v, FromAttribute(it->second, s, where));
      fields.set(s.name, std::move(v));
    } else if (s.default_value) {
      fields.set(s.name, *s.default_value);
    } else {
      return Err(StatusCode::kInvalidModel, "{}: the node lacks field '{}' ({}), which the plugin requires", where,
                 s.name, fieldTypeName(s.type));
    }
  }
  return fields;
}

Result<std::shared_ptr<const IPlugin>> PluginForNode(const RegisteredPlugin& p, const Node& n) {
  KILN_ASSIGN_OR_RETURN(PluginFields fields, FieldsOfNode(p, n));
  const std::string key = FieldsKey(fields);
  {
    std::lock_guard lock(p.mu);
    if (auto it = p.instances.find(key); it != p.instances.end()) return it->second;
  }
  auto made = p.creator->create(fields);
  if (!made.ok())
    return Status(made.status().code() == StatusCode::kOk ? StatusCode::kInternal : made.status().code(),
                  fmt::format("{}, {}: {}", n.Where(), p.Describe(), made.status().message()));
  if (!*made)
    return Err(StatusCode::kInternal, "{}, {}: the creator returned no plugin and no error", n.Where(), p.Describe());
  std::shared_ptr<const IPlugin> plugin(std::move(*made));
  std::lock_guard lock(p.mu);
  if (p.instances.size() >= 1024) p.instances.clear();  // a model with ever-new fields: do not grow without bound
  return p.instances.emplace(key, std::move(plugin)).first->second;
}

}  // namespace kiln::plugins

// ---- the public registry API (include/kiln/plugin.h) ----
namespace kiln {

Status registerPlugin(std::shared_ptr<IPluginCreator> creator) { return plugins::Register(std::move(creator), ""); }

Status deregisterPlugin(const std::string& domain, const std::string& name) {
  plugins::Registry& r = plugins::TheRegistry();
  std::unique_lock lock(r.mu);
  auto it = r.plugins.find({std::string(CanonicalDomain(domain)), name});
  if (it == r.plugins.end())
    return Err(StatusCode::kNotFound, "no plugin {} is registered", QualifiedOpName(domain, name));
  RemoveExternalOp(it->second->domain, it->second->name);
  r.plugins.erase(it);
  return Status::Ok();
}

std::vector<PluginInfo> getRegisteredPlugins() {
  plugins::Registry& r = plugins::TheRegistry();
  std::shared_lock lock(r.mu);
  std::vector<PluginInfo> out;
  for (const auto& [k, p] : r.plugins) out.push_back(p->Info());
  return out;
}

void addLinkedInPlugin(std::shared_ptr<IPluginCreator> creator) {
  if (!creator) return;
  plugins::LinkedIn& l = plugins::TheLinkedIn();
  std::lock_guard lock(l.mu);
  l.creators.push_back(std::move(creator));
}

std::vector<PluginInfo> getLinkedInPlugins() {
  plugins::LinkedIn& l = plugins::TheLinkedIn();
  std::lock_guard lock(l.mu);
  std::vector<PluginInfo> out;
  for (const auto& c : l.creators)
    out.push_back({std::string(CanonicalDomain(plugins::Str(c->domain()))), plugins::Str(c->name()),
                   plugins::Str(c->version()), "", c->fieldSpecs()});
  return out;
}

Status registerLinkedInPlugins(const std::vector<std::string>& names) {
  std::vector<std::shared_ptr<IPluginCreator>> all;
  {
    plugins::LinkedIn& l = plugins::TheLinkedIn();
    std::lock_guard lock(l.mu);
    all = l.creators;
  }
  auto qualified = [](const IPluginCreator& c) {
    return QualifiedOpName(plugins::Str(c.domain()), plugins::Str(c.name()));
  };
  std::vector<std::shared_ptr<IPluginCreator>> chosen;
  for (const std::string& want : names) {
    if (want == "all") {
      chosen.insert(chosen.end(), all.begin(), all.end());
      continue;
    }
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& c) { return qualified(*c) == want; });
    if (it == all.end()) {
      std::vector<std::string> have;
      for (const auto& c : all) have.push_back(qualified(*c));
      return Err(StatusCode::kNotFound,
                 "no linked-in plugin is called '{}' (this program links in: {}); a plugin library is loaded with "
                 "--dynamicPlugins=lib.so",
                 want, have.empty() ? std::string("none") : fmt::format("{}", fmt::join(have, ", ")));
    }
    chosen.push_back(*it);
  }
  for (const auto& c : chosen) {
    auto existing = plugins::FindPlugin(plugins::Str(c->domain()), plugins::Str(c->name()));
    if (existing && existing->creator == c) continue;  // registered already
    KILN_RETURN_IF_ERROR(plugins::Register(c, ""));
  }
  return Status::Ok();
}

}  // namespace kiln
