// Pass fold-reshape-transpose-chains: collapses chains of layout-only ops.
//   Reshape/Flatten/Squeeze/Unsqueeze(x) -> Reshape/Flatten/Squeeze/Unsqueeze  ==>  one Reshape(x, static target)
//   Transpose(x, p1) -> Transpose(p2)  ==>  Transpose(x, p) with p[j] = p1[p2[j]]
//   a Transpose whose permutation is the identity (alone or after composing)  ==>  removed
//   a collapsed reshape chain whose result has x's shape  ==>  removed
// Before: x -> Reshape(r1) -> a -> Reshape(r2, [6,-1]) -> y     After: x -> Reshape(r2, [6,20]) -> y
// A chain is collapsed only when its intermediate (a) has no other reader and is not a graph output; the
// first node is left dead for dead-code elimination.
#include <numeric>
#include <unordered_set>

#include "core/error.h"
#include "passes/cleanup_util.h"
#include "passes/pass_list.h"

namespace kiln {

namespace {

bool IsReshapeLike(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

bool IsDefaultOp(const Node* n, bool (*pred)(const std::string&)) {
  return n && n->domain.empty() && pred(n->op_type);
}
bool IsTransposeOp(const std::string& op) { return op == "Transpose"; }

// The first node of a chain ending in `second`: the producer of second's data input when it has the wanted
// kind and its output is read by `second` only.
Node* ChainHead(const Graph& g, const Node& second, bool (*pred)(const std::string&),
                const std::unordered_set<const Node*>& dead) {
  const Value* mid = second.input(0);
  if (!mid || !IsDefaultOp(mid->producer, pred) || IsGraphOutput(g, mid)) return nullptr;
  if (mid->producer->outputs.size() != 1 || !mid->producer->input(0)) return nullptr;
  if (LiveConsumers(g, mid, dead).size() != 1) return nullptr;
  return mid->producer;
}

// The permutation of a Transpose (its default reverses the axes); nullopt when unknown or invalid.
std::optional<std::vector<int64_t>> Perm(const Node& t) {
  const Value* x = t.input(0);
  if (t.has_attr("perm")) {
    auto p = t.attr_ints("perm");
    if (!p.ok()) return std::nullopt;
    std::vector<int64_t> sorted = *p;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i)
      if (sorted[i] != static_cast<int64_t>(i)) return std::nullopt;
    if (x && x->has_shape && x->shape.size() != p->size()) return std::nullopt;
    return *p;
  }
  if (!x || !x->has_shape) return std::nullopt;
  std::vector<int64_t> p(x->shape.size());
  std::iota(p.rbegin(), p.rend(), 0);
  return p;
}

bool IsIdentityPerm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// The constant target that the Reshape of `x` replacing `second` should have: its output shape when fully known,
// the constant shape input of a Reshape when it contains no 0 (0 would copy a dim of the intermediate), or one
// written with 0 (x's dim) and -1 from the symbolic shapes of x and the output (dynamic shapes).
std::optional<std::vector<int64_t>> StaticTarget(const Node& second, const Value* x) {
  const Value* out = second.output(0);
  if (out && out->has_shape && IsStatic(out->shape)) {
    std::vector<int64_t> t = ToStatic(out->shape);
    for (int64_t d : t)
      if (d == 0) return std::nullopt;  // would need allowzero
    return t;
  }
  auto symbolic = [&] { return ReshapeTargetFor(x, out); };
  if (second.op_type != "Reshape") return symbolic();
  auto t = ConstInts(second.input(1));
  if (!t) return symbolic();
  int minus_one = 0;
  for (int64_t d : *t) {
    if (d == 0 || d < -1) return symbolic();
    minus_one += d == -1;
  }
  if (minus_one > 1) return symbolic();
  return t;
}

}  // namespace

Result<PassReport> FoldReshapeTransposeChainsPass(Graph& g, const PassOptions& o) {
  PassReport report;
  std::unordered_set<const Node*> dead, remove;
  std::vector<Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());

  // Takes `n` (computing out = x) out of the graph; false when its output must stay.
  auto drop = [&](Node* n, Value* x, const std::string& what) {
    Value* out = n->outputs[0];
    const std::string out_name = out->name;
    Bypass b = BypassValue(g, x, out);
    if (b == Bypass::kKept) return false;
    dead.insert(n);
    if (b == Bypass::kRenamed) remove.insert(n);
    report.details.push_back(fmt::format("removed {} ({}): '{}' is '{}'", n->name, what, out_name,
                                         b == Bypass::kRenamed ? out_name : x->name));
    ++report.rewrites;
    return true;
  };

  for (Node* n : order) {
    if (dead.count(n) || n->outputs.size() != 1 || !n->output(0) || !n->input(0)) continue;
    if (IsDefaultOp(n, IsTransposeOp)) {
      auto p2 = Perm(*n);
      if (!p2) continue;
      Node* head = ChainHead(g, *n, IsTransposeOp, dead);
      std::optional<std::vector<int64_t>> p1 = head ? Perm(*head) : std::nullopt;
      if (!head || !p1 || p1->size() != p2->size()) {
        if (IsIdentityPerm(*p2)) drop(n, n->inputs[0], "Transpose with the identity permutation");
        continue;
      }
      std::vector<int64_t> p(p2->size());
      for (size_t j = 0; j < p.size(); ++j) p[j] = (*p1)[(*p2)[j]];
      Value* x = head->inputs[0];
      const std::string desc = fmt::format("Transpose {} -> {}", head->name, n->name);
      if (IsIdentityPerm(p) && drop(n, x, desc + " is the identity")) continue;
      n->inputs[0] = x;
      n->attrs["perm"] = Attribute::Ints(p);
      report.details.push_back(fmt::format("composed {} into one Transpose {} with perm {}", desc, n->name, p));
      ++report.rewrites;
      continue;
    }
    if (IsDefaultOp(n, IsReshapeLike)) {
      Node* head = ChainHead(g, *n, IsReshapeLike, dead);
      if (!head) continue;
      Value* x = head->inputs[0];
      const std::string desc = fmt::format("{} {} -> {} {}", head->op_type, head->name, n->op_type, n->name);
      if (SameTypeAndShape(x, n->outputs[0]) && drop(n, x, desc + " gives back the input shape")) continue;
      auto target = StaticTarget(*n, x);
      if (!target) continue;
      n->op_type = "Reshape";
      n->opset = std::max<int64_t>(n->opset, 14);
      n->attrs.clear();
      n->inputs = {x, g.AddConstant(n->name + "_shape", Tensor::FromInt64(*target))};
      report.details.push_back(fmt::format("collapsed {} into one Reshape {} to {}", desc, n->name, *target));
      ++report.rewrites;
    }
  }
  if (!remove.empty()) RemoveNodes(g, [&](const Node* n) { return remove.count(n) != 0; });
  return report;
}

}  // namespace kiln
