// The built-in op table (each family registers its ops, in this order) and the external (plugin) ops.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "core/error.h"
#include "ops/families.h"
#include "ops/op_def.h"

namespace kiln {

OpDef& OpRegistry::Define(std::string domain, std::string name) {
  auto d = std::make_unique<OpDef>();
  d->domain = std::string(CanonicalDomain(domain));
  d->name = std::move(name);
  defs_.push_back(std::move(d));
  return *defs_.back();
}

const OpDef* OpRegistry::Find(std::string_view domain, std::string_view name, int64_t opset) const {
  domain = CanonicalDomain(domain);
  const OpDef* best = nullptr;
  for (const auto& d : defs_) {
    if (d->name != name || d->domain != domain) continue;
    if (opset > 0) {
      if (d->Covers(opset)) return d.get();
    } else if (!best || d->since_version > best->since_version) {
      best = d.get();
    }
  }
  return best;
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> r;
  for (const auto& d : defs_) r.push_back(d.get());
  return r;
}

Status OpRegistry::Validate() const {
  for (size_t i = 0; i < defs_.size(); ++i) {
    const OpDef& a = *defs_[i];
    if (!a.infer) return Err(StatusCode::kInternal, "op {} has no shape function", a.QualifiedName());
    if (a.since_version > a.until_version)
      return Err(StatusCode::kInternal, "op {} covers opsets {} to {}", a.QualifiedName(), a.since_version,
                 a.until_version);
    for (size_t j = 0; j < i; ++j) {
      const OpDef& b = *defs_[j];
      if (a.domain == b.domain && a.name == b.name && a.since_version <= b.until_version &&
          b.since_version <= a.until_version)
        return Err(StatusCode::kInternal, "op {} is defined twice for overlapping opsets", a.QualifiedName());
    }
  }
  return Status::Ok();
}

const OpRegistry& BuiltinOps() {
  static const OpRegistry reg = [] {
    OpRegistry r;
    RegisterElementwiseOps(r);
    RegisterReduceOps(r);
    RegisterNormOps(r);
    RegisterLinalgOps(r);
    RegisterConvOps(r);
    RegisterTensorOps(r);
    RegisterIndexOps(r);
    RegisterResizeOps(r);
    RegisterRnnOps(r);
    RegisterTransformerOps(r);
    RegisterFusedOps(r);
    RegisterQuantizedOps(r);
    RegisterControlFlowOps(r);
    RegisterSequenceOps(r);
    RegisterLlmOps(r);
    RegisterSignalOps(r);
    return r;
  }();
  return reg;
}

namespace {

// Lookups hand out plain pointers (FindOp, TraitsOf) that a build or import on another thread may hold while the
// op is removed, so a removed definition is retired, never freed: pointers stay valid for the process.
struct ExternalTable {
  std::shared_mutex mu;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<OpDef>> ops;
  std::vector<std::shared_ptr<OpDef>> retired;
};
ExternalTable& External() {
  static ExternalTable t;
  return t;
}

}  // namespace

const OpDef* FindOp(std::string_view domain, std::string_view name, int64_t opset) {
  if (const OpDef* d = BuiltinOps().Find(domain, name, opset)) return d;
  ExternalTable& t = External();
  std::shared_lock lock(t.mu);
  auto it = t.ops.find({std::string(CanonicalDomain(domain)), std::string(name)});
  if (it == t.ops.end()) return nullptr;
  return (opset <= 0 || it->second->Covers(opset)) ? it->second.get() : nullptr;
}

const OpDef* FindOp(const Node& n) {
  // Nodes the passes create carry no import opset (0): they run under the newest definition.
  if (const OpDef* d = FindOp(n.domain, n.op_type, n.domain.empty() ? n.opset : 0)) return d;
  return FindOp(n.domain, n.op_type, 0);
}

const OpTraits& TraitsOf(const Node& n) {
  static const OpTraits kNone;
  const OpDef* d = FindOp(n);
  return d ? d->traits : kNone;
}

Status AddExternalOp(OpDef def) {
  def.domain = std::string(CanonicalDomain(def.domain));
  if (def.name.empty()) return Err(StatusCode::kInvalidArgument, "an op needs a name");
  if (!def.infer)
    return Err(StatusCode::kInvalidArgument, "op {} has no shape function: an op must say what it outputs",
               def.QualifiedName());
  if (BuiltinOps().Find(def.domain, def.name))
    return Err(StatusCode::kInvalidArgument, "op {} is built into kiln: give the plugin another name or domain",
               def.QualifiedName());
  ExternalTable& t = External();
  std::unique_lock lock(t.mu);
  auto key = std::make_pair(def.domain, def.name);
  if (t.ops.count(key))
    return Err(StatusCode::kInvalidArgument, "op {} is registered already (by another plugin?)", def.QualifiedName());
  t.ops.emplace(std::move(key), std::make_shared<OpDef>(std::move(def)));
  return Status::Ok();
}

void RemoveExternalOp(std::string_view domain, std::string_view name) {
  ExternalTable& t = External();
  std::unique_lock lock(t.mu);
  auto it = t.ops.find({std::string(CanonicalDomain(domain)), std::string(name)});
  if (it == t.ops.end()) return;
  t.retired.push_back(std::move(it->second));
  t.ops.erase(it);
}

std::vector<OpDef> ExternalOps() {
  ExternalTable& t = External();
  std::shared_lock lock(t.mu);
  std::vector<OpDef> r;
  for (const auto& [k, v] : t.ops) r.push_back(*v);
  return r;
}

bool KeepsQuantizedConstant(const Node& n) {
  if (!TraitsOf(n).keeps_quantized_constant || n.inputs.empty() || !n.inputs[0] || !n.inputs[0]->is_const())
    return false;
  const DataType t = n.inputs[0]->dtype;
  return t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kFloat8E4M3FN || Is4BitType(t);
}

}  // namespace kiln
