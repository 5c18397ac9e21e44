// Pass recognize-layernorm: finds layer normalization over the last axis written out with reductions, as
// exporters before opset 17 write it, and replaces it with one ONNX LayerNormalization node; likewise RMS
// normalization (T5, LLaMA; see MatchRmsNorm) with one RMSNormalization node (opset 23).
//   before: mean = ReduceMean(x, -1); d = Sub(x, mean); var = ReduceMean(Pow(d, 2) | Mul(d, d), -1);
//           n = Div(d, Sqrt(Add(var, eps))) | Mul(d, Reciprocal(Sqrt(Add(var, eps))));
//           y = Add(Mul(n, gamma), beta)            (gamma and beta optional, constants over the last axis)
//   after:  y = LayerNormalization(x, gamma | ones, beta | zeros, axis=-1, epsilon=eps)
// Every intermediate must be read only inside the pattern and not be a graph output; the last node is
// rewritten in place, so the output value and its name stay.
#include <algorithm>

#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using fusion::Is;
using fusion::Uses;

// ReduceMean over exactly the last axis of `x`, keepdims=1 (axes as the canonical constant input or as the
// attribute of old opsets).
bool IsMeanOverLastAxis(const Node* n, const Value* x) {
  if (!n || !n->domain.empty() || n->op_type != "ReduceMean" || n->inputs.empty() || n->inputs[0] != x ||
      n->outputs.size() != 1 || !n->outputs[0])
    return false;
  if (!x->has_shape || x->shape.empty()) return false;
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  if (n->geti("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (n->input(1)) {
    if (!n->input(1)->is_const()) return false;
    axes = n->input(1)->const_value->ToInt64Vector();
  } else {
    axes = n->getints("axes");
  }
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

// A constant that broadcasts along the last axis only (numel C, other dims 1, rank <= x's rank), same dtype.
bool IsLastAxisVector(const Value* v, const Value* x, int64_t c) {
  if (!v || !v->is_const() || v->dtype != x->dtype) return false;
  const Tensor& t = *v->const_value;
  if (t.numel() != c || t.rank() > static_cast<int64_t>(x->shape.size())) return false;
  for (int64_t d = 0; d + 1 < t.rank(); ++d)
    if (t.dim(d) != 1) return false;
  return true;
}

// Next node after `v` that is `op` with a last-axis constant on the other side; stores the constant.
Node* AffineStep(const Uses& u, Value* v, const char* op, const Value* x, int64_t c, Value** k) {
  Node* n = u.Single(v);
  if (!Is(n, op, 2)) return nullptr;
  for (int side = 0; side < 2; ++side)
    if (n->inputs[side] == v && IsLastAxisVector(n->inputs[1 - side], x, c)) {
      *k = n->inputs[1 - side];
      return n;
    }
  return nullptr;
}

struct Match {
  Value* x = nullptr;
  Value *gamma = nullptr, *beta = nullptr;
  double eps = 0;
  Node* last = nullptr;
  std::vector<Node*> inner;
};

bool MatchLayerNorm(const Uses& u, Node* mean, Match& m) {
  if (!mean || mean->inputs.empty() || !mean->inputs[0]) return false;
  Value* x = mean->inputs[0];
  if (!IsMeanOverLastAxis(mean, x) || !fusion::IsFloatType(x->dtype)) return false;
  const Dim cd = x->shape.back();
  if (!cd.known() || cd.value <= 0) return false;
  const int64_t c = cd.value;
  Node* sub = u.Single(mean->outputs[0]);
  if (!Is(sub, "Sub", 2) || sub->inputs[0] != x || sub->inputs[1] != mean->outputs[0]) return false;
  Value* d = sub->outputs[0];
  if (u.IsOutput(d)) return false;
  // d feeds exactly the square and the normalization.
  std::vector<Node*> readers;
  for (Node* r : u.Readers(d))
    if (std::find(readers.begin(), readers.end(), r) == readers.end()) readers.push_back(r);
  if (readers.size() != 2) return false;
  for (int pick = 0; pick < 2; ++pick) {
    Node* sq = readers[pick];
    Node* norm = readers[1 - pick];
    const bool is_pow = fusion::OperandBesideConst(sq, "Pow", 2.0, 0.0) == d;
    const bool is_mul = Is(sq, "Mul", 2) && sq->inputs[0] == d && sq->inputs[1] == d;
    if (!is_pow && !is_mul) continue;
    Node* var = u.Single(sq->outputs[0]);
    if (!var || var->inputs.empty() || var->inputs[0] != sq->outputs[0] || !IsMeanOverLastAxis(var, sq->outputs[0]))
      continue;
    Node* add = u.Single(var->outputs[0]);
    double eps = 0;
    if (!add || fusion::OperandBesideAnyConst(add, "Add", &eps) != var->outputs[0] || eps < 0) continue;
    Node* sqrt = u.Single(add->outputs[0]);
    if (!Is(sqrt, "Sqrt", 1)) continue;
    std::vector<Node*> inner = {mean, sub, sq, var, add, sqrt};
    Value* sd = sqrt->outputs[0];
    if (Is(norm, "Div", 2)) {
      if (norm->inputs[0] != d || norm->inputs[1] != sd || !u.OnlyBy(sd, norm)) continue;
    } else if (Is(norm, "Mul", 2)) {
      Node* rec = u.Single(sd);
      if (!Is(rec, "Reciprocal", 1)) continue;
      Value* r = rec->outputs[0];
      const bool ok = (norm->inputs[0] == d && norm->inputs[1] == r) || (norm->inputs[1] == d && norm->inputs[0] == r);
      if (!ok || !u.OnlyBy(r, norm)) continue;
      inner.push_back(rec);
    } else {
      continue;
    }
    m = Match{x, nullptr, nullptr, eps, norm, std::move(inner)};
    if (Node* gm = AffineStep(u, m.last->outputs[0], "Mul", x, c, &m.gamma)) {
      m.inner.push_back(m.last);
      m.last = gm;
    }
    if (Node* bt = AffineStep(u, m.last->outputs[0], "Add", x, c, &m.beta)) {
      m.inner.push_back(m.last);
      m.last = bt;
    }
    return true;
  }
  return false;
}

// RMS normalization over the last axis (T5's T5LayerNorm, LLaMA's RMSNorm):
//   var = ReduceMean(Pow(x, 2) | Mul(x, x), -1); s = Add(var, eps);
//   n = Mul(x, Reciprocal(Sqrt(s)) | Div(1, Sqrt(s)) | Pow(s, -0.5)) | Div(x, Sqrt(s));  y = Mul(n, gamma) (optional)
bool MatchRmsNorm(const Uses& u, Node* sq, Match& m) {
  if (!sq || sq->outputs.size() != 1 || !sq->outputs[0]) return false;
  Value* x = nullptr;
  if (Is(sq, "Mul", 2) && sq->inputs[0] && sq->inputs[0] == sq->inputs[1]) x = sq->inputs[0];
  else if (Value* b = fusion::OperandBesideConst(sq, "Pow", 2.0, 0.0); b && sq->inputs[0] == b) x = b;
  if (!x || !fusion::IsFloatType(x->dtype) || !x->has_shape || x->shape.empty()) return false;
  const Dim cd = x->shape.back();
  if (!cd.known() || cd.value <= 0) return false;
  const int64_t c = cd.value;
  Node* var = u.Single(sq->outputs[0]);
  if (!var || var->inputs.empty() || var->inputs[0] != sq->outputs[0] || !IsMeanOverLastAxis(var, sq->outputs[0]))
    return false;
  Node* add = u.Single(var->outputs[0]);
  double eps = 0;
  if (!add || fusion::OperandBesideAnyConst(add, "Add", &eps) != var->outputs[0] || eps < 0) return false;
  Value* s = add->outputs[0];
  std::vector<Node*> inner = {sq, var, add};
  Node* norm = nullptr;
  Node* step = u.Single(s);
  auto reads_x_and = [&](const Node* n, const Value* r) {
    return (n->inputs[0] == x && n->inputs[1] == r) || (n->inputs[1] == x && n->inputs[0] == r);
  };
  if (Is(step, "Sqrt", 1)) {
    Value* sd = step->outputs[0];
    Node* next = u.Single(sd);
    inner.push_back(step);
    if (Is(next, "Div", 2) && next->inputs[0] == x && next->inputs[1] == sd) {
      norm = next;
    } else if (Is(next, "Reciprocal", 1) ||
               (Is(next, "Div", 2) && next->inputs[1] == sd && fusion::IsScalarConst(next->inputs[0], 1.0, 0.0))) {
      Node* mul = u.Single(next->outputs[0]);
      if (!Is(mul, "Mul", 2) || !reads_x_and(mul, next->outputs[0])) return false;
      inner.push_back(next);
      norm = mul;
    }
  } else if (fusion::OperandBesideConst(step, "Pow", -0.5, 0.0) == s && step->inputs[0] == s) {
    Node* mul = u.Single(step->outputs[0]);
    if (!Is(mul, "Mul", 2) || !reads_x_and(mul, step->outputs[0])) return false;
    inner.push_back(step);
    norm = mul;
  }
  if (!norm) return false;
  m = Match{x, nullptr, nullptr, eps, norm, std::move(inner)};
  if (Node* gm = AffineStep(u, m.last->outputs[0], "Mul", x, c, &m.gamma)) {
    m.inner.push_back(m.last);
    m.last = gm;
  }
  return true;
}

// A [C] constant of x's dtype: `v` reshaped, or filled with `fill` when v is null.
Value* VectorConstant(Graph& g, Value* v, const Value* x, int64_t c, double fill, const std::string& hint) {
  if (v && v->const_value->rank() == 1) return v;
  Tensor t;
  if (v) {
    t = v->const_value->Reshaped({c});
  } else {
    t = Tensor(x->dtype, {c});
    for (int64_t i = 0; i < c; ++i) t.SetFromDouble(i, fill);
  }
  return g.AddConstant(hint, std::move(t));
}

// Rewrites a match's last node in place into `op` (LayerNormalization with scale and bias, or RMSNormalization with
// scale) over the last axis; the output value and its name stay. Returns the detail line.
std::string RewriteNorm(Graph& g, Match& m, bool rms) {
  const char* op = rms ? "RMSNormalization" : "LayerNormalization";
  const int64_t c = m.x->shape.back().value;
  const std::string scope = fusion::Scope(m.last->name);
  std::vector<Value*> inputs = {m.x, VectorConstant(g, m.gamma, m.x, c, 1.0, scope + "/" + op + ".scale")};
  if (!rms) inputs.push_back(VectorConstant(g, m.beta, m.x, c, 0.0, scope + "/LayerNormalization.bias"));
  Node* last = m.last;
  const std::string old = last->name, first = m.inner.front()->name;
  last->op_type = op;
  last->domain.clear();
  last->opset = std::max<int64_t>(last->opset, rms ? 23 : 17);
  last->inputs = std::move(inputs);
  last->attrs.clear();
  last->attrs["axis"] = Attribute::Int(-1);
  last->attrs["epsilon"] = Attribute::Float(static_cast<float>(m.eps));
  last->name = scope + "/" + op;
  fusion::RemoveUnread(g, m.inner);
  return fmt::format("{}: {} .. {} ({} nodes{}{}) -> {} '{}' (eps {})", rms ? "rmsnorm" : "layernorm", first, old,
                     m.inner.size() + 1, m.gamma ? ", scale" : "", m.beta ? ", bias" : "", op, last->name, m.eps);
}

}  // namespace

Result<PassReport> RecognizeLayerNormPass(Graph& g, const PassOptions& o) {
  PassReport report;
  for (bool rms : {false, true})  // LayerNorm first: its variance is an RMS of the centred input
    report.rewrites += fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* node) {
      Match m;
      if (!(rms ? MatchRmsNorm(u, node, m) : MatchLayerNorm(u, node, m))) return false;
      report.details.push_back(RewriteNorm(g, m, rms));
      return true;
    });
  return report;
}

}  // namespace kiln
