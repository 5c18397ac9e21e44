#include "ir/graph.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "core/error.h"

namespace kiln {

const char* AttributeKindName(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::kFloat: return "float";
    case Attribute::Kind::kInt: return "int";
    case Attribute::Kind::kString: return "string";
    case Attribute::Kind::kTensor: return "tensor";
    case Attribute::Kind::kGraph: return "graph";
    case Attribute::Kind::kFloats: return "floats";
    case Attribute::Kind::kInts: return "ints";
    case Attribute::Kind::kStrings: return "strings";
    default: return "undefined";
  }
}

std::string Value::TypeString() const {
  const std::string t = std::string(DataTypeName(dtype)) + (has_shape ? ShapeToString(shape) : "[?]");
  switch (kind) {
    case ValueKind::kSequence: return "seq(" + t + ")";
    case ValueKind::kOptionalTensor: return "optional(" + t + ")";
    case ValueKind::kOptionalSequence: return "optional(seq(" + t + "))";
    default: return t;
  }
}

std::string Node::Where() const { return fmt::format("node '{}' ({})", name, op_type); }

namespace {
Status KindError(const Node& n, const std::string& k, const Attribute& a, const char* want) {
  return Err(StatusCode::kInvalidModel, "{}: attribute '{}' must be {}, but the model gives {}", n.Where(), k,
             want, AttributeKindName(a.kind));
}
}  // namespace

Result<int64_t> Node::attr_int(const std::string& k, int64_t def) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return def;
  if (it->second.kind != Attribute::Kind::kInt) return KindError(*this, k, it->second, "an int");
  return it->second.i;
}
Result<float> Node::attr_float(const std::string& k, float def) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return def;
  if (it->second.kind == Attribute::Kind::kInt) return static_cast<float>(it->second.i);
  if (it->second.kind != Attribute::Kind::kFloat) return KindError(*this, k, it->second, "a float");
  return it->second.f;
}
Result<std::string> Node::attr_string(const std::string& k, const std::string& def) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return def;
  if (it->second.kind != Attribute::Kind::kString) return KindError(*this, k, it->second, "a string");
  return it->second.s;
}
Result<std::vector<int64_t>> Node::attr_ints(const std::string& k, const std::vector<int64_t>& def) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return def;
  if (it->second.kind == Attribute::Kind::kInt) return std::vector<int64_t>{it->second.i};
  if (it->second.kind != Attribute::Kind::kInts) return KindError(*this, k, it->second, "a list of ints");
  return it->second.ints;
}
Result<std::vector<float>> Node::attr_floats(const std::string& k, const std::vector<float>& def) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return def;
  if (it->second.kind == Attribute::Kind::kFloat) return std::vector<float>{it->second.f};
  if (it->second.kind != Attribute::Kind::kFloats) return KindError(*this, k, it->second, "a list of floats");
  return it->second.floats;
}
int64_t Node::geti(const std::string& k, int64_t def) const {
  auto r = attr_int(k, def);
  return r.ok() ? *r : def;
}
float Node::getf(const std::string& k, float def) const {
  auto r = attr_float(k, def);
  return r.ok() ? *r : def;
}
std::string Node::gets(const std::string& k, const std::string& def) const {
  auto r = attr_string(k, def);
  return r.ok() ? *r : def;
}
std::vector<int64_t> Node::getints(const std::string& k, const std::vector<int64_t>& def) const {
  auto r = attr_ints(k, def);
  return r.ok() ? *r : def;
}
std::vector<float> Node::getfloats(const std::string& k, const std::vector<float>& def) const {
  auto r = attr_floats(k, def);
  return r.ok() ? *r : def;
}

std::unique_ptr<Graph> Graph::Clone() const {
  auto g = std::make_unique<Graph>();
  g->name = name;
  g->opsets = opsets;
  g->fresh_ = fresh_;
  std::unordered_map<const Value*, Value*> vmap;
  std::unordered_map<const Node*, Node*> nmap;
  for (const Value& v : values_) {
    g->values_.push_back(v);
    Value* nv = &g->values_.back();
    g->by_name_[nv->name] = nv;
    vmap[&v] = nv;
  }
  for (const auto& n : nodes_) {
    g->nodes_.push_back(std::make_unique<Node>(*n));
    Node* nn = g->nodes_.back().get();
    nmap[n.get()] = nn;
    for (Value*& in : nn->inputs)
      if (in) in = vmap.at(in);
    for (Value*& out : nn->outputs)
      if (out) out = vmap.at(out);
  }
  for (Value& v : g->values_)
    v.producer = v.producer && nmap.count(v.producer) ? nmap.at(v.producer) : nullptr;
  for (Value* v : inputs) g->inputs.push_back(vmap.at(v));
  for (Value* v : outputs) g->outputs.push_back(vmap.at(v));
  return g;
}

Value* Graph::FindValue(const std::string& n) const {
  auto it = by_name_.find(n);
  return it == by_name_.end() ? nullptr : it->second;
}

Value* Graph::GetOrAddValue(const std::string& n) {
  if (Value* v = FindValue(n)) return v;
  values_.emplace_back();
  Value* v = &values_.back();
  v->name = n;
  by_name_[n] = v;
  return v;
}

Value* Graph::AddValue(const std::string& hint) {
  std::string n = hint;
  while (by_name_.count(n)) n = fmt::format("{}__{}", hint, fresh_++);
  return GetOrAddValue(n);
}

Value* Graph::AddConstant(const std::string& hint, Tensor t) {
  Value* v = AddValue(hint);
  v->dtype = t.dtype();
  v->shape = FromStatic(t.shape());
  v->has_shape = true;
  v->const_value = std::move(t);
  return v;
}

Node* Graph::AddNode(std::string op_type, std::string n) {
  nodes_.push_back(std::make_unique<Node>());
  nodes_.back()->op_type = std::move(op_type);
  nodes_.back()->name = std::move(n);
  return nodes_.back().get();
}

Node* Graph::InsertNode(size_t pos, std::string op_type, std::string n) {
  auto node = std::make_unique<Node>();
  node->op_type = std::move(op_type);
  node->name = std::move(n);
  Node* raw = node.get();
  nodes_.insert(nodes_.begin() + static_cast<std::ptrdiff_t>(std::min(pos, nodes_.size())), std::move(node));
  return raw;
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> r;
  r.reserve(values_.size());
  for (const auto& v : values_) r.push_back(const_cast<Value*>(&v));
  return r;
}

Status Graph::TopoSort() {
  std::unordered_map<const Value*, Node*> producer;
  for (auto& n : nodes_) {
    for (Value* o : n->outputs) {
      if (!o) continue;
      if (producer.count(o))
        return Err(StatusCode::kInvalidModel, "{}: output '{}' is also produced by node '{}'", n->Where(), o->name,
                   producer[o]->name);
      if (o->is_const() || o->is_graph_input)
        return Err(StatusCode::kInvalidModel, "{}: output '{}' has the name of a graph input or initializer",
                   n->Where(), o->name);
      producer[o] = n.get();
    }
  }
  for (auto& n : nodes_)
    for (Value* o : n->outputs)
      if (o) o->producer = n.get();

  // Kahn's algorithm, stable with respect to the model's order.
  std::unordered_map<Node*, size_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<std::vector<size_t>> users(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node* n = nodes_[i].get();
    for (Value* in : n->inputs) {
      if (!in) continue;
      auto it = producer.find(in);
      if (it == producer.end()) {
        if (!in->is_const() && !in->is_graph_input)
          return Err(StatusCode::kInvalidModel,
                     "{}: input '{}' is neither a graph input, an initializer nor any node's output (a missing "
                     "initializer?)",
                     n->Where(), in->name);
        continue;
      }
      ++pending[i];
      users[index[it->second]].push_back(i);
    }
  }
  std::vector<size_t> ready, order;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (pending[i] == 0) ready.push_back(i);
  std::make_heap(ready.begin(), ready.end(), std::greater<>());
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), std::greater<>());
    size_t i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) {
        ready.push_back(u);
        std::push_heap(ready.begin(), ready.end(), std::greater<>());
      }
  }
  if (order.size() != nodes_.size()) {
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (pending[i] > 0)
        return Err(StatusCode::kInvalidModel, "the graph has a cycle through {}", nodes_[i]->Where());
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(nodes_.size());
  for (size_t i : order) sorted.push_back(std::move(nodes_[i]));
  nodes_ = std::move(sorted);
  return Status::Ok();
}

size_t Graph::RemoveFoldedNodes() {
  return std::erase_if(nodes_, [](const std::unique_ptr<Node>& n) {
    for (Value* o : n->outputs)
      if (o && !o->is_const()) return false;
    for (Value* o : n->outputs)
      if (o) o->producer = nullptr;
    return true;
  });
}

size_t Graph::RemoveDeadNodes() {
  std::unordered_set<const Value*> live(outputs.begin(), outputs.end());
  std::vector<bool> keep(nodes_.size(), false);
  for (size_t k = nodes_.size(); k-- > 0;) {
    Node* n = nodes_[k].get();
    for (Value* o : n->outputs)
      if (o && live.count(o)) keep[k] = true;
    if (keep[k])
      for (Value* in : n->inputs)
        if (in) live.insert(in);
  }
  size_t removed = 0;
  std::vector<std::unique_ptr<Node>> kept;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (keep[k]) {
      kept.push_back(std::move(nodes_[k]));
    } else {
      for (Value* o : nodes_[k]->outputs)
        if (o) o->producer = nullptr;
      ++removed;
    }
  }
  nodes_ = std::move(kept);
  return removed;
}

}  // namespace kiln
