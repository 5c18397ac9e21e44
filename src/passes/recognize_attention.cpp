// Pass recognize-attention: finds scaled-dot-product attention written out with MatMul and Softmax and
// replaces it with one kiln "Attention" node (domain kiln).
//   before: S = MatMul(Q, K^T); S = S * c | S / c (the scale may also sit on Q or on K^T);
//           optional mask: S = Add(S, mask) and/or S = Where(keep, S, fill) (gpt2's causal mask);
//           P = Softmax(S, axis=-1); optional NaN guard (PyTorch's SDPA export):
//           P = Where(IsNaN(P), 0, P); Y = MatMul(P, V)
//   after:  Y = kiln.Attention(Q, K, V, [mask], [keep]; scale, kiln_k_transposed, kiln_mask_fill,
//                              kiln_keep_if_true, kiln_where_first, kiln_nan_to_zero)
// When K^T comes from a Transpose that only this attention reads, the Transpose is changed to produce K
// itself (its perm with the last two axes swapped; dropped when that is the identity) and
// kiln_k_transposed = 0; otherwise input 1 is K^T and kiln_k_transposed = 1.
// Every intermediate (scores, scaled/masked scores, probabilities) must be read only inside the pattern.
// Then the head split / merge Transposes around each kiln.Attention (perm swapping axes -3 and -2 only, e.g.
// [0,2,1,3]: [B,S,H,D] <-> [B,H,S,D]) are absorbed: a Transpose read only by the attention's Q, K or V becomes
// kiln_q_layout / kiln_k_layout / kiln_v_layout = "BSHD" (the kernel reads the untransposed tensor through
// strides), and a Transpose that alone reads the attention's output becomes kiln_out_layout = "BSHD". BERT's
// K^T Transpose [0,2,3,1], re-permuted to [0,2,1,3] above, goes the same way.
#include <numeric>

#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"
#include "ops/fused_ops.h"

namespace kiln {
namespace {

using fusion::Is;
using fusion::Uses;

struct Match {
  Value *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr, *cond = nullptr;
  double scale = 1.0, fill = 0.0;
  bool k_transposed = true, keep_if_true = true, where_first = false, nan_to_zero = false;
  Node* mm1 = nullptr;  // MatMul(Q, K^T)
  Node* last = nullptr; // MatMul(P, V)
  Node* k_transpose = nullptr;  // Transpose changed to produce K (when not dropped)
  std::vector<int64_t> k_perm;
  std::vector<Node*> inner;
};

// `m` broadcasts into `s` without enlarging it: rank <= and every dim 1 or the same as s's. In the last two
// (query, key) dims a dim that shape inference could not name is accepted where the scores' dim is not known
// either (a causal mask built at run time from Shape -> Trilu): the Attention kernel checks the broadcast at run
// time and fails naming the node rather than computing something else.
bool BroadcastsInto(const Value* m, const Value* s) {
  if (!m || !m->has_shape || !s->has_shape || m->shape.size() > s->shape.size()) return false;
  const size_t rank = s->shape.size(), off = rank - m->shape.size();
  for (size_t i = 0; i < m->shape.size(); ++i) {
    const Dim& a = m->shape[i];
    const Dim& b = s->shape[off + i];
    if ((a.known() && a.value == 1) || a.same(b)) continue;
    if (off + i + 2 >= rank && !a.known() && !b.known()) continue;
    return false;
  }
  return true;
}

// Absorbs a Mul/Div by a scalar constant producing `*x` (read only by mm1) into the scale.
void AbsorbScale(const Uses& u, Value** x, Match& m) {
  Node* p = u.Producer(*x);
  if (!p || !u.OnlyBy(*x, m.mm1)) return;
  double c = 0;
  Value* o = fusion::OperandBesideAnyConst(p, "Mul", &c);
  if (o) {
    m.scale *= c;
  } else if ((o = fusion::OperandBesideAnyConst(p, "Div", &c)) && c != 0) {
    m.scale /= c;
  } else {
    return;
  }
  *x = o;
  m.inner.push_back(p);
}

// Q, K^T, V of the two MatMuls: same float type, rank >= 2, scales on Q and K^T absorbed, K's Transpose.
bool Finish(const Uses& u, Match& m) {
  Value* q = m.mm1->inputs[0];
  Value* kt = m.mm1->inputs[1];
  if (!q || !kt || q == kt) return false;
  for (const Value* t : {q, kt, m.v})
    if (!t->has_shape || t->shape.size() < 2 || t->dtype != m.last->outputs[0]->dtype) return false;
  AbsorbScale(u, &q, m);
  AbsorbScale(u, &kt, m);
  m.q = q;
  m.k = kt;
  m.k_transposed = true;
  Node* tp = u.Producer(kt);
  Node* kt_reader = u.Single(kt);  // mm1, or the scale on K^T absorbed above
  const bool kt_private =
      kt_reader == m.mm1 || (kt_reader && kt_reader != m.mm1 && !m.inner.empty() && m.inner.back() == kt_reader);
  if (Is(tp, "Transpose", 1) && kt_private && tp->inputs[0]->has_shape) {
    const size_t r = tp->inputs[0]->shape.size();
    std::vector<int64_t> perm = tp->getints("perm");
    if (perm.empty()) {
      perm.resize(r);
      for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(r - 1 - i);
    }
    if (perm.size() == r && r >= 2) {
      std::swap(perm[r - 1], perm[r - 2]);
      std::vector<int64_t> id(r);
      std::iota(id.begin(), id.end(), 0);
      m.k_transposed = false;
      if (perm == id) {
        m.k = tp->inputs[0];
        m.inner.push_back(tp);
      } else {
        m.k_transpose = tp;
        m.k_perm = perm;
      }
    }
  }
  return true;
}

// Walks from the softmax input back to MatMul(Q, K^T) through mask steps (Add, Where; nearest the softmax)
// and then scale steps (Mul/Div by a scalar constant). Backtracks over which Add operand is the scores.
bool Walk(const Uses& u, Value* cur, Node* next, bool masks_allowed, Match m, const Value* s_ref, Match& out) {
  Node* p = u.Producer(cur);
  if (!p || !u.OnlyBy(cur, next)) return false;
  if (Is(p, "MatMul", 2)) {
    m.mm1 = p;
    // The masks must not enlarge the scores.
    Value* s = p->outputs[0];
    if (!s->has_shape || s->shape.size() != s_ref->shape.size()) return false;
    if (m.mask && !BroadcastsInto(m.mask, s)) return false;
    if (m.cond && !BroadcastsInto(m.cond, s)) return false;
    m.inner.push_back(p);
    if (!Finish(u, m)) return false;
    out = std::move(m);
    return true;
  }
  if (masks_allowed && !m.mask && Is(p, "Add", 2)) {
    for (int side = 0; side < 2; ++side) {
      Value* s = p->inputs[side];
      Value* mk = p->inputs[1 - side];
      if (!s || !mk || s == mk || mk->dtype != s_ref->dtype) continue;
      Match mm = m;
      mm.mask = mk;
      mm.inner.push_back(p);
      if (Walk(u, s, p, true, std::move(mm), s_ref, out)) return true;
    }
    return false;
  }
  if (masks_allowed && !m.cond && Is(p, "Where", 3)) {
    Value* c = p->inputs[0];
    if (!c || c->dtype != DataType::kBool) return false;
    Match mm = m;
    Value* s = nullptr;
    if (auto f = fusion::ScalarConst(p->inputs[2]); f && p->inputs[1] && !p->inputs[1]->is_const()) {
      s = p->inputs[1];
      mm.keep_if_true = true;
      mm.fill = *f;
    } else if (auto f1 = fusion::ScalarConst(p->inputs[1]); f1 && p->inputs[2] && !p->inputs[2]->is_const()) {
      s = p->inputs[2];
      mm.keep_if_true = false;
      mm.fill = *f1;
    } else {
      return false;
    }
    mm.cond = c;
    mm.where_first = m.mask != nullptr;  // an Add nearer the softmax runs after the Where
    mm.inner.push_back(p);
    return Walk(u, s, p, true, std::move(mm), s_ref, out);
  }
  double c = 0;
  if (Value* s = fusion::OperandBesideAnyConst(p, "Mul", &c)) {
    m.scale *= c;
    m.inner.push_back(p);
    return Walk(u, s, p, false, std::move(m), s_ref, out);
  }
  if (Value* s = fusion::OperandBesideAnyConst(p, "Div", &c); s && c != 0) {
    m.scale /= c;
    m.inner.push_back(p);
    return Walk(u, s, p, false, std::move(m), s_ref, out);
  }
  return false;
}

bool MatchAttention(const Uses& u, Node* sm, Match& out) {
  if (!Is(sm, "Softmax", 1) || !sm->inputs[0]) return false;
  Value* s = sm->inputs[0];
  if (!s->has_shape || s->shape.size() < 2 || !fusion::IsFloatType(s->dtype)) return false;
  const int64_t rank = static_cast<int64_t>(s->shape.size());
  auto axis = NormalizeAxis(sm->geti("axis", -1), rank);
  if (!axis || *axis != rank - 1) return false;
  Value* p = sm->outputs[0];
  Match m;
  // PyTorch's SDPA export guards fully masked rows: P = Where(IsNaN(P), 0, P), read only by the second MatMul.
  if (!u.Single(p) && !u.IsOutput(p) && u.Readers(p).size() == 2) {
    Node* isnan = nullptr;
    Node* guard = nullptr;
    for (Node* r : u.Readers(p)) {
      if (Is(r, "IsNaN", 1)) isnan = r;
      else if (Is(r, "Where", 3)) guard = r;
    }
    if (isnan && guard && u.OnlyBy(isnan->outputs[0], guard) && guard->inputs[0] == isnan->outputs[0] &&
        fusion::IsScalarConst(guard->inputs[1], 0.0) && guard->inputs[2] == p) {
      m.inner.push_back(isnan);
      m.inner.push_back(guard);
      m.nan_to_zero = true;
      p = guard->outputs[0];
    }
  }
  Node* mm2 = u.Single(p);
  if (!Is(mm2, "MatMul", 2) || mm2->inputs[0] != p || mm2->inputs[1] == p || !mm2->inputs[1]) return false;
  m.v = mm2->inputs[1];
  m.last = mm2;
  m.inner.push_back(sm);
  return Walk(u, s, sm, true, std::move(m), s, out);
}

// A Transpose whose perm swaps axes -3 and -2 of a rank >= 3 tensor and keeps the rest.
bool IsHeadSwap(const Node* n) {
  if (!Is(n, "Transpose", 1) || !n->inputs[0] || !n->inputs[0]->has_shape || n->outputs.size() != 1) return false;
  const size_t r = n->inputs[0]->shape.size();
  if (r < 3) return false;
  std::vector<int64_t> perm = n->getints("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  if (perm.size() != r) return false;
  for (size_t i = 0; i < r; ++i) {
    const size_t want = i == r - 3 ? r - 2 : i == r - 2 ? r - 3 : i;
    if (perm[i] != static_cast<int64_t>(want)) return false;
  }
  return true;
}

bool HasLayout(const Node* n, const char* name) {
  auto it = n->attrs.find(name);
  return it != n->attrs.end();
}

// Absorbs one head split / merge Transpose into the kiln.Attention node `at` (see the top); false when it has
// none left.
bool AbsorbHeadTranspose(Graph& g, const Uses& u, Node* at, PassReport& report) {
  const auto& kInputLayouts = fused::kAttentionInputLayouts;
  if (at->op_type != "Attention" || at->domain != "kiln") return false;
  for (size_t i = 0; i < 3 && i < at->inputs.size(); ++i) {
    Value* x = at->inputs[i];
    Node* tp = x ? u.Producer(x) : nullptr;
    if (HasLayout(at, kInputLayouts[i]) || !IsHeadSwap(tp) || !u.OnlyBy(x, at)) continue;
    at->inputs[i] = tp->inputs[0];
    at->attrs[kInputLayouts[i]] = Attribute::String("BSHD");
    report.details.push_back(
        fmt::format("attention: {} absorbed into '{}' ({} = BSHD)", tp->name, at->name, kInputLayouts[i]));
    fusion::RemoveUnread(g, {tp});
    return true;
  }
  if (at->outputs.empty() || !at->outputs[0] || HasLayout(at, fused::kAttentionOutputLayout)) return false;
  Value* y = at->outputs[0];
  Node* tp = u.Single(y);
  if (!IsHeadSwap(tp) || !u.OnlyBy(y, tp) || tp->outputs[0] == nullptr) return false;
  Value* z = tp->outputs[0];
  at->outputs[0] = z;  // the attention writes the Transpose's output (its name too) in the BSHD layout
  z->producer = at;
  tp->inputs.clear();
  tp->outputs = {y};
  y->producer = tp;
  at->attrs[fused::kAttentionOutputLayout] = Attribute::String("BSHD");
  report.details.push_back(
      fmt::format("attention: {} absorbed into '{}' (kiln_out_layout = BSHD)", tp->name, at->name));
  fusion::RemoveUnread(g, {tp});
  return true;
}

}  // namespace

Result<PassReport> RecognizeAttentionPass(Graph& g, const PassOptions& o) {
  PassReport report;
  report.rewrites = fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* node) {
    Match m;
    if (!MatchAttention(u, node, m)) return false;
    if (m.k_transpose) {
      m.k_transpose->attrs["perm"] = Attribute::Ints(m.k_perm);
      Value* kv = m.k_transpose->outputs[0];
      const size_t r = kv->shape.size();
      if (kv->has_shape && r >= 2) std::swap(kv->shape[r - 1], kv->shape[r - 2]);
    }
    Node* last = m.last;
    const std::string old = last->name, first = m.mm1->name;
    last->op_type = "Attention";
    last->domain = "kiln";
    last->opset = 1;
    last->inputs = {m.q, m.k, m.v, m.mask, m.cond};
    while (!last->inputs.empty() && !last->inputs.back()) last->inputs.pop_back();
    last->attrs.clear();
    last->attrs["scale"] = Attribute::Float(static_cast<float>(m.scale));
    last->attrs["kiln_k_transposed"] = Attribute::Int(m.k_transposed ? 1 : 0);
    if (m.nan_to_zero) last->attrs["kiln_nan_to_zero"] = Attribute::Int(1);
    if (m.cond) {
      last->attrs["kiln_mask_fill"] = Attribute::Float(static_cast<float>(m.fill));
      last->attrs["kiln_keep_if_true"] = Attribute::Int(m.keep_if_true ? 1 : 0);
      last->attrs["kiln_where_first"] = Attribute::Int(m.where_first ? 1 : 0);
    }
    last->name = fusion::Scope(old) + "/Attention";
    fusion::UseKilnDomain(g);
    fusion::RemoveUnread(g, m.inner);
    report.details.push_back(fmt::format(
        "attention: {} .. {} ({} nodes; scale {:.6g}{}{}{}{}) -> kiln.Attention '{}'", first, old, m.inner.size() + 1,
        m.scale, m.mask ? ", additive mask" : "", m.cond ? ", Where mask" : "", m.nan_to_zero ? ", NaN guard" : "",
        m.k_transposed ? ", K^T input" : (m.k_transpose ? ", K Transpose re-permuted" : ", K Transpose dropped"),
        last->name));
    return true;
  });
  report.rewrites += fusion::RewriteToFixpoint(
      g, [&](const Uses& u, Node* node) { return AbsorbHeadTranspose(g, u, node, report); });
  return report;
}

}  // namespace kiln
