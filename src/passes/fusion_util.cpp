// Matching helpers of the recognition and fusion passes (see fusion_util.h).
#include "passes/fusion_util.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace kiln::fusion {

Uses::Uses(const Graph& g) {
  for (const Value* o : g.outputs) outputs_.insert(o);
  for (const auto& n : g.nodes()) {
    for (Value* in : n->inputs)
      if (in) readers_[in].push_back(n.get());
    for (Value* o : n->outputs)
      if (o) producers_[o] = n.get();
  }
}

const std::vector<Node*>& Uses::Readers(const Value* v) const {
  static const std::vector<Node*> kNone;
  auto it = readers_.find(v);
  return it == readers_.end() ? kNone : it->second;
}

Node* Uses::Producer(const Value* v) const {
  auto it = producers_.find(v);
  return it == producers_.end() ? nullptr : it->second;
}

Node* Uses::Single(const Value* v) const {
  if (!v || IsOutput(v)) return nullptr;
  const auto& r = Readers(v);
  if (r.empty()) return nullptr;
  for (Node* n : r)
    if (n != r[0]) return nullptr;
  return r[0];
}

std::optional<double> ScalarConst(const Value* v) {
  if (!v || !v->is_const() || v->const_value->numel() != 1) return std::nullopt;
  const DataType t = v->const_value->dtype();
  if (t == DataType::kString || t == DataType::kUndefined) return std::nullopt;
  return v->const_value->GetAsDouble(0);
}

bool Near(double a, double b, double rtol) { return std::fabs(a - b) <= rtol * std::max(std::fabs(b), 1e-30); }

bool IsScalarConst(const Value* v, double want, double rtol) {
  auto c = ScalarConst(v);
  return c && Near(*c, want, rtol);
}

bool Is(const Node* n, const char* op, size_t n_inputs) {
  return n && n->domain.empty() && n->op_type == op && n->inputs.size() == n_inputs &&
         n->outputs.size() == 1 && n->outputs[0];
}

Value* OperandBesideAnyConst(const Node* n, const char* op, double* c) {
  if (!Is(n, op, 2) || !n->inputs[0] || !n->inputs[1]) return nullptr;
  const bool commutative = n->op_type == "Add" || n->op_type == "Mul";
  if (auto v = ScalarConst(n->inputs[1]); v && !n->inputs[0]->is_const()) {
    *c = *v;
    return n->inputs[0];
  }
  if (commutative)
    if (auto v = ScalarConst(n->inputs[0]); v && !n->inputs[1]->is_const()) {
      *c = *v;
      return n->inputs[1];
    }
  return nullptr;
}

Value* OperandBesideConst(const Node* n, const char* op, double want, double rtol) {
  double c = 0;
  Value* other = OperandBesideAnyConst(n, op, &c);
  return other && Near(c, want, rtol) ? other : nullptr;
}

bool SameShape(const Value* a, const Value* b) {
  if (!a || !b || !a->has_shape || !b->has_shape || a->shape.size() != b->shape.size()) return false;
  for (size_t i = 0; i < a->shape.size(); ++i)
    if (!a->shape[i].same(b->shape[i])) return false;
  return true;
}

bool IsOp(const Node* n, const char* op) { return n && n->domain.empty() && n->op_type == op; }

Value ConstantStandIn(const std::string& name, const Tensor& t) {
  Value v;
  v.name = name;
  v.dtype = t.dtype();
  v.shape = FromStatic(t.shape());
  v.has_shape = true;
  v.const_value = t;
  return v;
}

bool IsFloatType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

bool IsMatMulByConstMatrix(const Node* n) {
  if (!Is(n, "MatMul", 2) || !n->inputs[0] || !n->inputs[1] || n->outputs.size() != 1 || !n->outputs[0]) return false;
  const Value* w = n->inputs[1];
  return w->is_const() && w->const_value->rank() == 2 && w->dtype == n->outputs[0]->dtype;
}

std::string Scope(const std::string& name) {
  const auto p = name.rfind('/');
  return p == std::string::npos ? std::string() : name.substr(0, p);
}

size_t RemoveUnread(Graph& g, const std::vector<Node*>& candidates) {
  // Linear in the graph: count each value's readers once, remove candidates whose outputs nobody reads, and let
  // each removal release its inputs' producers (a worklist, not a sweep per removed node: a 20,000-node chain
  // took seconds that way).
  std::unordered_set<const Node*> pending(candidates.begin(), candidates.end());
  if (pending.empty()) return 0;
  std::unordered_map<const Value*, size_t> readers;
  for (const auto& n : g.nodes())
    for (const Value* in : n->inputs)
      if (in) ++readers[in];
  for (const Value* o : g.outputs) ++readers[o];
  auto unread = [&](const Node* n) {
    for (const Value* o : n->outputs)
      if (o && (o->is_graph_output || readers[o] > 0)) return false;
    return true;
  };
  std::vector<const Node*> work;
  for (const Node* n : pending)
    if (unread(n)) work.push_back(n);
  std::unordered_set<const Node*> dead;
  while (!work.empty()) {
    const Node* n = work.back();
    work.pop_back();
    if (!dead.insert(n).second) continue;
    for (const Value* in : n->inputs) {
      if (!in || --readers[in] > 0) continue;
      const Node* p = in->producer;
      if (p && pending.count(p) && !dead.count(p) && unread(p)) work.push_back(p);
    }
  }
  if (dead.empty()) return 0;
  auto& nodes = g.mutable_nodes();
  for (const auto& n : nodes)
    if (dead.count(n.get()))
      for (Value* o : n->outputs)
        if (o) o->producer = nullptr;
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(), [&](const auto& n) { return dead.count(n.get()) != 0; }),
              nodes.end());
  return dead.size();
}

void UseKilnDomain(Graph& g) {
  if (!g.opsets.count("kiln")) g.opsets["kiln"] = 1;
}

int RewriteToFixpoint(Graph& g, const std::function<bool(const Uses& u, Node* n)>& rewrite) {
  // Nodes earlier passes bypassed but left for dead-code elimination (eliminate-identity's no-op Reshape, a shape
  // chain) go first: otherwise they look like second readers of their inputs and keep patterns from matching.
  g.RemoveDeadNodes();
  int rewrites = 0;
  for (bool found = true; found;) {
    found = false;
    Uses u(g);
    for (const auto& node : g.nodes())
      if (rewrite(u, node.get())) {
        ++rewrites;
        found = true;
        break;  // the node list changed: start over with a fresh index
      }
  }
  return rewrites;
}

}  // namespace kiln::fusion
