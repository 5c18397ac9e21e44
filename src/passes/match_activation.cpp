// Matching of the activation after a fusable node (see match_activation.h).
#include "passes/match_activation.h"

#include <limits>

namespace kiln::fusion {

// The activation reading `y` (y's only reader(s)); kind stays empty when there is none.
Activation MatchActivation(const Uses& u, Value* y) {
  Activation a;
  if (!y || u.IsOutput(y)) return a;
  const auto& readers = u.Readers(y);
  // SiLU: y -> Sigmoid -> Mul(y, sigmoid(y)); y read by exactly those two.
  if (readers.size() == 2 && readers[0] != readers[1]) {
    for (int i = 0; i < 2; ++i) {
      Node* sg = readers[i];
      Node* mul = readers[1 - i];
      if (!Is(sg, "Sigmoid", 1) || !Is(mul, "Mul", 2)) continue;
      Value* s = sg->outputs[0];
      const bool ok = (mul->inputs[0] == y && mul->inputs[1] == s) || (mul->inputs[1] == y && mul->inputs[0] == s);
      if (ok && u.OnlyBy(s, mul)) {
        a.kind = "SiLU";
        a.last = mul;
        a.inner = {sg};
        return a;
      }
    }
    return a;
  }
  Node* n = u.Single(y);
  if (!n || !n->domain.empty() || n->inputs.empty() || n->inputs[0] != y || n->outputs.size() != 1 ||
      !n->outputs[0])
    return a;
  const std::string& op = n->op_type;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh") {
    if (n->inputs.size() != 1) return a;
    a.kind = op;
  } else if (op == "LeakyRelu") {
    auto al = n->attr_float("alpha", 0.01f);
    if (!al.ok() || n->inputs.size() != 1) return a;
    a.kind = op;
    a.alpha = *al;
  } else if (op == "HardSigmoid") {
    auto al = n->attr_float("alpha", 0.2f);
    auto be = n->attr_float("beta", 0.5f);
    if (!al.ok() || !be.ok() || n->inputs.size() != 1) return a;
    a.kind = op;
    a.alpha = *al;
    a.beta = *be;
  } else if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    for (size_t i = 1; i < n->inputs.size() && i < 3; ++i) {
      if (!n->inputs[i]) continue;
      auto c = fusion::ScalarConst(n->inputs[i]);
      if (!c) return a;
      (i == 1 ? lo : hi) = static_cast<float>(*c);
    }
    if (n->inputs.size() > 3) return a;
    a.kind = op;
    a.alpha = lo;
    a.beta = hi;
  } else if (op == "Gelu") {
    auto ap = n->attr_string("approximate", "none");
    if (!ap.ok() || n->inputs.size() != 1 || (*ap != "none" && *ap != "tanh")) return a;
    a.kind = *ap == "tanh" ? "GeluTanh" : "Gelu";
  } else {
    return a;
  }
  a.last = n;
  return a;
}

void SetActivationAttrs(Node* n, const Activation& a) {
  n->attrs["kiln_activation"] = Attribute::String(a.kind.empty() ? "None" : a.kind);
  n->attrs["kiln_activation_alpha"] = Attribute::Float(a.alpha);
  n->attrs["kiln_activation_beta"] = Attribute::Float(a.beta);
}

}  // namespace kiln::fusion
