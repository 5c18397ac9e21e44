// Pass expose-window-attention: Swin's shifted-window attention adds its window mask per window by viewing the
// scores of all windows [B*nW, H, N, N] as [B, nW, H, N, N] and back (torchvision's shifted_window_attention):
//   S = MatMul(Q, K^T); S = Add(S, bias); S5 = Reshape(S, [B, nW, H, N, N]); S5 = Add(S5, mask);
//   S = Reshape(S5, [B*nW, H, N, N]); P = Softmax(S); O = MatMul(P, V)
// recognize-attention stops at the two reshapes, so these attentions ran as five separate layers over the whole
// score tensor. This pass moves the attention into the 5-D batch instead, where the mask broadcasts over B:
//   Q5 = Reshape(Q, [B, nW, H, N, D]) (likewise K^T's and V's), S5 = MatMul(Q5, K5^T), Add(bias), Add(mask),
//   P5 = Softmax(., last axis), O = Reshape(MatMul(P5, V5), [B*nW, H, N, Dv])
// The reshapes of Q, K and V are free views; a Mul by a scalar (the query's scale) and a Transpose that keeps the
// batch axis (K^T) are moved after them so recognize-attention still finds them. Only static shapes, a first dim
// split as B * nW, masks that do not vary over B, and a chain whose every intermediate has one reader.
#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using fusion::Uses;

bool Static(const Value* v, size_t rank) {
  return v && v->has_shape && v->shape.size() == rank && IsStatic(v->shape);
}

// The constant operand of a two-input Add and the other one, or nothing.
std::pair<Value*, Value*> ConstAndOther(const Node* add) {
  if (!fusion::Is(add, "Add", 2)) return {nullptr, nullptr};
  Value* a = add->inputs[0];
  Value* b = add->inputs[1];
  if (a && a->is_const() && b && !b->is_const()) return {a, b};
  if (b && b->is_const() && a && !a->is_const()) return {b, a};
  return {nullptr, nullptr};
}

// `c` broadcasts into `shape` (right-aligned) and is 1 (or absent) along its first `lead` dims.
bool BroadcastsWithout(const Value* c, const std::vector<int64_t>& shape, size_t lead) {
  const std::vector<int64_t>& cs = c->const_value->shape();
  if (cs.size() > shape.size()) return false;
  const size_t off = shape.size() - cs.size();
  for (size_t i = 0; i < cs.size(); ++i) {
    if (off + i < lead && cs[i] != 1) return false;
    if (cs[i] != 1 && cs[i] != shape[off + i]) return false;
  }
  return true;
}

struct Rewriter {
  Graph& g;
  const Uses& u;
  int64_t b, nw;        // the split of the first dim
  const Node* reader;   // the node whose operand is being rewritten
  std::vector<Node*> dropped;

  Value* NewValue(const Value* like, const std::vector<int64_t>& shape, const std::string& hint) {
    Value* v = g.AddValue(hint);
    v->dtype = like->dtype;
    v->shape = FromStatic(shape);
    v->has_shape = true;
    return v;
  }
  Node* NewNode(const std::string& op, const std::string& name, int64_t opset, std::vector<Value*> ins, Value* out) {
    Node* n = g.AddNode(op, name);
    n->opset = opset;
    n->inputs = std::move(ins);
    n->outputs = {out};
    out->producer = n;
    return n;
  }
  std::vector<int64_t> Split(const std::vector<int64_t>& s) const {
    std::vector<int64_t> r = {b, nw};
    r.insert(r.end(), s.begin() + 1, s.end());
    return r;
  }
  // `v` (rank 4, first dim b * nw, read by `by`) as its 5-D view; a scalar Mul or a batch-keeping Transpose that
  // alone makes v moves after the view.
  Value* View5(Value* v, const Node* by) {
    const std::vector<int64_t> s = ToStatic(v->shape);
    Node* p = u.Producer(v);
    if (p && u.OnlyBy(v, by) && p->outputs.size() == 1) {
      if (fusion::Is(p, "Mul", 2)) {
        for (int side = 0; side < 2; ++side) {
          Value* c = p->inputs[side];
          Value* x = p->inputs[1 - side];
          if (c && c->is_const() && c->const_value->numel() == 1 && Static(x, 4) && SameDims(x, s)) {
            Value* x5 = View5(x, p);
            Value* out = NewValue(v, Split(s), v->name + "_w5");
            NewNode("Mul", p->name + "_w5", p->opset, {x5, c}, out);
            dropped.push_back(p);
            return out;
          }
        }
      }
      if (fusion::Is(p, "Transpose", 1) && Static(p->inputs[0], 4)) {
        const std::vector<int64_t> perm = p->getints("perm", {3, 2, 1, 0});
        if (perm.size() == 4 && perm[0] == 0) {
          Value* x5 = View5(p->inputs[0], p);
          Value* out = NewValue(v, Split(s), v->name + "_w5");
          Node* t = NewNode("Transpose", p->name + "_w5", p->opset, {x5}, out);
          t->attrs["perm"] = Attribute::Ints({0, 1, perm[1] + 1, perm[2] + 1, perm[3] + 1});
          dropped.push_back(p);
          return out;
        }
      }
    }
    Value* out = NewValue(v, Split(s), v->name + "_w5");
    NewNode("Reshape", v->name + "/window_view", 14,
            {v, g.AddConstant(v->name + "/window_view_shape", Tensor::FromInt64(Split(s)))}, out);
    return out;
  }
  static bool SameDims(const Value* v, const std::vector<int64_t>& s) { return ToStatic(v->shape) == s; }
};

bool TryExpose(Graph& g, const PassOptions& o, const Uses& u, Node* r2, PassReport& report) {
  // ... -> R1 (5-D) -> Add(mask) -> R2 (back to 4-D) -> Softmax -> MatMul(P, V)
  if (!fusion::Is(r2, "Reshape", 2) || !Static(r2->output(0), 4)) return false;
  Node* add_mask = u.Producer(r2->inputs[0]);
  auto [mask, s5] = ConstAndOther(add_mask);
  if (!mask || !u.OnlyBy(r2->inputs[0], r2) || !u.OnlyBy(s5, add_mask)) return false;
  Node* r1 = u.Producer(s5);
  if (!fusion::Is(r1, "Reshape", 2) || !Static(s5, 5)) return false;
  Value* x = r1->inputs[0];
  if (!Static(x, 4) || !u.OnlyBy(x, r1)) return false;
  const std::vector<int64_t> s4 = ToStatic(x->shape), v5 = ToStatic(s5->shape);
  if (ToStatic(r2->output(0)->shape) != s4 || v5[0] * v5[1] != s4[0] || !std::equal(s4.begin() + 1, s4.end(), v5.begin() + 2))
    return false;
  if (!BroadcastsWithout(mask, v5, 1)) return false;
  Node* softmax = u.Single(r2->output(0));
  if (!fusion::Is(softmax, "Softmax", 1) || softmax->outputs.size() != 1) return false;
  const int64_t axis = softmax->geti("axis", softmax->opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3) return false;
  Value* p = softmax->output(0);
  Node* pv = u.Single(p);
  if (!fusion::Is(pv, "MatMul", 2) || pv->inputs[0] != p || !Static(pv->inputs[1], 4) || !Static(pv->output(0), 4))
    return false;
  // The scores: MatMul(Q, K^T), optionally + a bias constant that does not vary over the windows' batch.
  Node* add_bias = u.Producer(x);
  Value* bias = nullptr;
  Value* s0 = x;
  if (auto [c, other] = ConstAndOther(add_bias); c) {
    if (!BroadcastsWithout(c, s4, 1) || !u.OnlyBy(other, add_bias)) return false;
    bias = c;
    s0 = other;
  }
  Node* qk = u.Producer(s0);
  if (!fusion::Is(qk, "MatMul", 2) || !Static(qk->inputs[0], 4) || !Static(qk->inputs[1], 4)) return false;
  for (Value* in : {qk->inputs[0], qk->inputs[1], pv->inputs[1]})
    if (in->shape[0].value != s4[0]) return false;

  const std::string what = fmt::format("{}: the attention from '{}' to '{}' runs over [{}, {}] windows", r2->Where(),
                                       qk->name, pv->name, v5[0], v5[1]);
  Rewriter rw{g, u, v5[0], v5[1], nullptr, {}};
  Value* q5 = rw.View5(qk->inputs[0], qk);
  Value* k5 = rw.View5(qk->inputs[1], qk);
  Value* v5v = rw.View5(pv->inputs[1], pv);
  auto split = [&](const Value* v) { return rw.Split(ToStatic(v->shape)); };
  Value* sc = rw.NewValue(s0, split(s0), s0->name + "_w5");
  rw.NewNode("MatMul", qk->name + "_w5", qk->opset, {q5, k5}, sc);
  // The bias and the mask as one additive constant [.., nW, H, N, N] (small: it does not vary over B), so that the
  // attention takes it as its mask.
  Value* total = mask;
  if (bias && o.evaluator) {
    Node sum;
    sum.name = add_mask->name + "_bias_and_mask";
    sum.op_type = "Add";
    sum.opset = 14;
    sum.outputs.push_back(nullptr);
    auto r = o.evaluator(sum, {&*bias->const_value, &*mask->const_value});
    if (r.ok() && r->size() == 1) {
      total = g.AddConstant(sum.name, std::move(r->at(0)));
      bias = nullptr;
    }
  }
  if (bias) {
    Value* sb = rw.NewValue(x, split(x), x->name + "_w5");
    rw.NewNode("Add", add_bias->name + "_w5", add_bias->opset, {sc, bias}, sb);
    sc = sb;
  }
  Value* sm = rw.NewValue(s5, v5, s5->name + "_masked");
  rw.NewNode("Add", add_mask->name + "_w5", add_mask->opset, {sc, total}, sm);
  Value* p5 = rw.NewValue(p, v5, p->name + "_w5");
  Node* soft = rw.NewNode("Softmax", softmax->name + "_w5", softmax->opset, {sm}, p5);
  soft->attrs["axis"] = Attribute::Int(4);
  Value* out = pv->outputs[0];
  Value* o5 = rw.NewValue(out, split(out), out->name + "_w5");
  rw.NewNode("MatMul", pv->name + "_w5", pv->opset, {p5, v5v}, o5);
  // The reshape back to [B * nW, ...] keeps the last node's output (and name). When a head merge
  // Transpose(0, 2, 1, 3) alone reads it, the transpose goes first, in 5-D, where recognize-attention can fold it
  // into the attention's output layout.
  std::vector<Node*> gone = {softmax, r2, add_mask, r1, qk};
  Node* merge = u.Single(out);
  Node* back = pv;
  Value* from = o5;
  if (fusion::Is(merge, "Transpose", 1) && merge->getints("perm", {}) == std::vector<int64_t>{0, 2, 1, 3} &&
      Static(merge->output(0), 4) && merge->outputs.size() == 1) {
    const std::vector<int64_t> os = ToStatic(o5->shape);
    Value* t5 = rw.NewValue(out, {os[0], os[1], os[3], os[2], os[4]}, merge->name + "_w5");
    rw.NewNode("Transpose", merge->name + "_w5", merge->opset, {o5}, t5)->attrs["perm"] =
        Attribute::Ints({0, 1, 3, 2, 4});
    back = merge;
    from = t5;
    gone.push_back(pv);
  }
  const Value* back_out = back->outputs[0];
  back->op_type = "Reshape";
  back->opset = std::max<int64_t>(back->opset, 14);
  back->attrs.clear();
  back->inputs = {from, g.AddConstant(back_out->name + "/window_merge_shape",
                                      Tensor::FromInt64(ToStatic(back_out->shape)))};
  if (add_bias != nullptr && s0 != x) gone.push_back(add_bias);
  gone.insert(gone.end(), rw.dropped.begin(), rw.dropped.end());
  fusion::RemoveUnread(g, gone);
  report.details.push_back(what);
  return true;
}

}  // namespace

Result<PassReport> ExposeWindowAttentionPass(Graph& g, const PassOptions& o) {
  PassReport report;
  report.rewrites = fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* n) { return TryExpose(g, o, u, n, report); });
  if (report.rewrites > 0) KILN_RETURN_IF_ERROR(g.TopoSort());
  return report;
}

}  // namespace kiln
