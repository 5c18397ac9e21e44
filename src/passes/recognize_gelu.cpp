// Pass recognize-gelu: finds GELU written out elementwise, as exporters write it, and replaces it with one
// ONNX Gelu node (which has a kernel on every backend).
//   erf form:  x * 0.5 * (1 + erf(x / sqrt(2)))   (x / 1.4142 or x * 0.7071; the 0.5 before or after)
//       before: Div(x, 1.414) -> Erf -> Add(1) -> Mul(x, .) -> Mul(0.5)       after: Gelu(x)
//   tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))   (x^3 as Pow(x, 3) or x*x*x)
//       before: Pow(x,3) -> Mul(0.0447) -> Add(x) -> Mul(0.798) -> Tanh -> Add(1) -> Mul(0.5*x, .)
//       after:  Gelu(x, approximate="tanh")
// Every intermediate must be read only inside the pattern (and not be a graph output); the last node is
// rewritten in place, so the output value and its name stay.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using fusion::Is;
using fusion::OperandBesideConst;
using fusion::Uses;

// The product of x, 0.5 and `a` (the "1 + ..." factor) in the orders exporters write it:
// (x * a) * 0.5, (a * 0.5) * x, a * (x * 0.5) — operands of each Mul in either order.
// Returns the last Mul, appending the intermediate nodes to `inner`.
Node* MatchHalfProduct(const Uses& u, Value* x, Value* a, std::vector<Node*>& inner) {
  Node* m1 = u.Single(a);
  if (!Is(m1, "Mul", 2) || (m1->inputs[0] == a) == (m1->inputs[1] == a)) return nullptr;
  Value* other = m1->inputs[0] == a ? m1->inputs[1] : m1->inputs[0];
  if (!other) return nullptr;
  Value* m1out = m1->outputs[0];
  if (other == x) {  // (x * a) * 0.5
    Node* m2 = u.Single(m1out);
    if (OperandBesideConst(m2, "Mul", 0.5) != m1out) return nullptr;
    inner.push_back(m1);
    return m2;
  }
  if (fusion::IsScalarConst(other, 0.5)) {  // (a * 0.5) * x
    Node* m2 = u.Single(m1out);
    if (!Is(m2, "Mul", 2)) return nullptr;
    const bool ok = (m2->inputs[0] == m1out && m2->inputs[1] == x) || (m2->inputs[1] == m1out && m2->inputs[0] == x);
    if (!ok) return nullptr;
    inner.push_back(m1);
    return m2;
  }
  Node* h = u.Producer(other);  // a * (x * 0.5)
  if (OperandBesideConst(h, "Mul", 0.5) != x || !u.OnlyBy(other, m1)) return nullptr;
  inner.push_back(h);
  return m1;
}

struct Match {
  Value* x = nullptr;
  Node* last = nullptr;
  std::vector<Node*> inner;
  bool tanh = false;
};

// Erf node e: Div(x, sqrt2) | Mul(x, 1/sqrt2) -> Erf -> Add(1) -> product with x and 0.5.
bool MatchErf(const Uses& u, Node* e, Match& m) {
  if (!Is(e, "Erf", 1) || !e->inputs[0]) return false;
  Value* d = e->inputs[0];
  Node* dn = u.Producer(d);
  if (!dn || !u.OnlyBy(d, e)) return false;
  Value* x = OperandBesideConst(dn, "Div", std::sqrt(2.0));
  if (!x) x = OperandBesideConst(dn, "Mul", std::sqrt(0.5));
  if (!x || !fusion::IsFloatType(x->dtype)) return false;
  Node* add = u.Single(e->outputs[0]);
  if (OperandBesideConst(add, "Add", 1.0) != e->outputs[0]) return false;
  m = Match{x, nullptr, {dn, e, add}, false};
  m.last = MatchHalfProduct(u, x, add->outputs[0], m.inner);
  return m.last != nullptr;
}

// x^3 as Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x)); appends the nodes.
bool MatchCube(const Uses& u, Value* cube, Value* x, std::vector<Node*>& inner) {
  Node* c = u.Producer(cube);
  if (!c) return false;
  if (OperandBesideConst(c, "Pow", 3.0) == x) {
    inner.push_back(c);
    return true;
  }
  if (!Is(c, "Mul", 2)) return false;
  for (int side = 0; side < 2; ++side) {
    Value* sq = c->inputs[1 - side];
    if (c->inputs[side] != x || !sq) continue;
    Node* s = u.Producer(sq);
    if (Is(s, "Mul", 2) && s->inputs[0] == x && s->inputs[1] == x && u.OnlyBy(sq, c)) {
      inner.push_back(s);
      inner.push_back(c);
      return true;
    }
  }
  return false;
}

// Tanh node t: x + 0.044715 * x^3 -> Mul(sqrt(2/pi)) -> Tanh -> Add(1) -> product with x and 0.5.
bool MatchTanh(const Uses& u, Node* t, Match& m) {
  if (!Is(t, "Tanh", 1) || !t->inputs[0]) return false;
  Value* k = t->inputs[0];
  Node* kn = u.Producer(k);
  if (!kn || !u.OnlyBy(k, t)) return false;
  Value* s = OperandBesideConst(kn, "Mul", std::sqrt(2.0 / M_PI));
  Node* sn = s ? u.Producer(s) : nullptr;
  if (!Is(sn, "Add", 2) || !u.OnlyBy(s, kn)) return false;
  for (int side = 0; side < 2; ++side) {
    Value* x = sn->inputs[side];
    Value* c = sn->inputs[1 - side];
    if (!x || !c || x == c || !fusion::IsFloatType(x->dtype)) continue;
    Node* cn = u.Producer(c);
    Value* cube = OperandBesideConst(cn, "Mul", 0.044715);
    if (!cube || !u.OnlyBy(c, sn) || !u.OnlyBy(cube, cn)) continue;
    std::vector<Node*> inner;
    if (!MatchCube(u, cube, x, inner)) continue;
    Node* one = u.Single(t->outputs[0]);
    if (OperandBesideConst(one, "Add", 1.0) != t->outputs[0]) return false;
    inner.insert(inner.end(), {cn, sn, kn, t, one});
    m = Match{x, nullptr, std::move(inner), true};
    m.last = MatchHalfProduct(u, x, one->outputs[0], m.inner);
    return m.last != nullptr;
  }
  return false;
}

}  // namespace

Result<PassReport> RecognizeGeluPass(Graph& g, const PassOptions& o) {
  PassReport report;
  report.rewrites = fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* node) {
    Match m;
    if (!MatchErf(u, node, m) && !MatchTanh(u, node, m)) return false;
    Node* last = m.last;
    const std::string old = last->name, first = m.inner.front()->name;
    last->op_type = "Gelu";
    last->domain.clear();
    last->opset = std::max<int64_t>(last->opset, 20);
    last->inputs = {m.x};
    last->attrs.clear();
    last->attrs["approximate"] = Attribute::String(m.tanh ? "tanh" : "none");
    const std::string scope = fusion::Scope(old);
    last->name = scope + "/Gelu";
    fusion::RemoveUnread(g, m.inner);
    report.details.push_back(fmt::format("gelu ({} form): {} .. {} ({} nodes) -> Gelu '{}'",
                                         m.tanh ? "tanh" : "erf", first, old, m.inner.size() + 1, last->name));
    return true;
  });
  return report;
}

}  // namespace kiln
