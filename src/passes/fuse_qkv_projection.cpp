// Pass fuse-qkv-projection: attentions read Q, K and V packed in one tensor. First form: the three projections of one attention's Q, K and V become one GEMM with their weights
// side by side, whose output the attention reads packed (one launch instead of three, and a GEMM three times as
// wide that keeps the tensor cores busier):
//   Q = Reshape(FusedMatMul(x, Wq, bq), [.., S, H, D])      (same for K and V, from the same x)
//   Y = kiln.Attention(Q, K, V, ...; kiln_{q,k,v}_layout = BSHD)
//   =>
//   P = FusedMatMul(x, [Wq | Wk | Wv], [bq | bk | bv])       (the query projection node, rewritten in place)
//   P5 = Reshape(P, [0, .., 0, 3, H, D])                     (the query Reshape, in place: a view)
//   Y = kiln.Attention(P5, P5, P5, ...; kiln_{q,k,v}_layout = BS3HD)
// Fused only when every projection is a kiln.FusedMatMul without activation or residual, with constant weights
// [K, N] and bias [N] of one dtype, read by its Reshape alone, whose output the attention alone reads as
// BSHD (K not transposed), and Q, K and V have the same static [H, D] with H * D == N. The other two projections
// and Reshapes go. The weights are concatenated by the options' constant evaluator (none: nothing is fused).
#include <optional>

#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"
#include "ops/fused_ops.h"

namespace kiln {
namespace {

using fusion::Uses;

struct Projection {
  Node* reshape = nullptr;
  Node* gemm = nullptr;
};

// The FusedMatMul -> Reshape chain feeding input `slot` of attention `at`, or nothing.
std::optional<Projection> MatchProjection(const Uses& u, Node* at, size_t slot) {
  Value* in = at->input(slot);
  if (!in || !u.OnlyBy(in, at)) return std::nullopt;
  Node* r = u.Producer(in);
  if (!fusion::Is(r, "Reshape", 2) || !r->inputs[0]) return std::nullopt;
  Value* y = r->inputs[0];
  Node* g = u.Producer(y);
  if (!g || !u.OnlyBy(y, r)) return std::nullopt;
  // A bias-less MatMul by a constant matrix (T5, LLaMA) counts as a projection with a zero bias.
  if (fusion::IsMatMulByConstMatrix(g)) return Projection{r, g};
  if (g->domain != "kiln" || g->op_type != "FusedMatMul" || g->inputs.size() != 3) return std::nullopt;
  if (g->gets("kiln_activation", "None") != "None") return std::nullopt;
  const Value* w = g->inputs[1];
  const Value* b = g->inputs[2];
  if (!g->inputs[0] || !w || !w->is_const() || w->const_value->rank() != 2 || w->dtype != y->dtype || !b ||
      !b->is_const() || b->const_value->rank() != 1 || b->const_value->dim(0) != w->const_value->dim(1))
    return std::nullopt;
  return Projection{r, g};
}

// The parts side by side along their last axis: Concat, run by the options' constant evaluator (the CPU reference).
Result<Tensor> ConcatLast(const PassOptions& o, const std::vector<const Tensor*>& parts, const std::string& name) {
  Node cat;
  cat.name = name;
  cat.op_type = "Concat";
  cat.opset = 13;
  cat.attrs["axis"] = Attribute::Int(-1);
  cat.outputs.push_back(nullptr);
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> r, o.evaluator(cat, parts));
  return std::move(r.at(0));
}

Result<bool> TryFuse(Graph& g, const PassOptions& o, const Uses& u, Node* at, PassReport& report) {
  if (at->domain != "kiln" || at->op_type != "Attention" || at->inputs.size() < 3) return false;
  if (at->geti("kiln_k_transposed", 0) != 0) return false;
  for (const char* l : fused::kAttentionInputLayouts)
    if (at->gets(l, "BHSD") != "BSHD") return false;
  if (at->inputs[0] == at->inputs[1] || at->inputs[0] == at->inputs[2] || at->inputs[1] == at->inputs[2])
    return false;
  Projection p[3];
  for (size_t s = 0; s < 3; ++s) {
    auto m = MatchProjection(u, at, s);
    if (!m) return false;
    p[s] = *m;
  }
  Value* x = p[0].gemm->inputs[0];
  const Tensor& wq = *p[0].gemm->inputs[1]->const_value;
  const Value* q = at->inputs[0];
  if (!x->has_shape || x->shape.empty() || !q->has_shape || q->shape.size() != x->shape.size() + 1) return false;
  const Dim h = q->shape[q->shape.size() - 2], d = q->shape.back();
  if (!h.known() || !d.known() || h.value * d.value != wq.dim(1)) return false;
  // The heads view must keep x's leading dims ([B, S] stays [B, S]): the packed view copies them (0s).
  for (size_t i = 0; i + 1 < x->shape.size(); ++i)
    if (!q->shape[i].same(x->shape[i])) return false;
  // Bias-less projections read zeros.
  std::vector<Tensor> zeros;
  zeros.reserve(3);
  const Tensor* bias_of[3];
  for (size_t s = 0; s < 3; ++s) {
    const Node* gm = p[s].gemm;
    if (gm->inputs.size() > 2 && gm->inputs[2]) {
      bias_of[s] = &*gm->inputs[2]->const_value;
    } else {
      zeros.emplace_back(wq.dtype(), std::vector<int64_t>{wq.dim(1)});
      bias_of[s] = &zeros.back();
    }
  }
  for (size_t s = 0; s < 3; ++s) {
    const Node* gm = p[s].gemm;
    const Tensor& w = *gm->inputs[1]->const_value;
    const Tensor& b = *bias_of[s];
    const Value* in = at->inputs[s];
    if (gm->inputs[0] != x || w.shape() != wq.shape() || w.dtype() != wq.dtype() || b.dtype() != wq.dtype() ||
        b.shape() != std::vector<int64_t>{wq.dim(1)} || in->dtype != q->dtype || !fusion::SameShape(in, q))
      return false;
  }
  const int64_t k = wq.dim(0), n = wq.dim(1);
  const std::string qname = p[0].gemm->name, kname = p[1].gemm->name, vname = p[2].gemm->name;
  // The query projection becomes the packed one; its output value keeps its name, its shape widens.
  Node* gemm = p[0].gemm;
  Value* packed = gemm->outputs[0];
  std::vector<const Tensor*> weights, biases;
  for (size_t s = 0; s < 3; ++s) {
    weights.push_back(&*p[s].gemm->inputs[1]->const_value);
    biases.push_back(bias_of[s]);
  }
  KILN_ASSIGN_OR_RETURN(Tensor w, ConcatLast(o, weights, qname + "/qkv_weight"));
  KILN_ASSIGN_OR_RETURN(Tensor b, ConcatLast(o, biases, qname + "/qkv_bias"));
  if (gemm->domain.empty()) {  // a bias-less MatMul becomes the packed FusedMatMul
    gemm->op_type = "FusedMatMul";
    gemm->domain = "kiln";
    gemm->opset = 1;
    gemm->attrs.clear();
    gemm->attrs["kiln_activation"] = Attribute::String("None");
    gemm->attrs["kiln_activation_alpha"] = Attribute::Float(0.f);
    gemm->attrs["kiln_activation_beta"] = Attribute::Float(0.f);
    gemm->inputs.resize(3, nullptr);
    fusion::UseKilnDomain(g);
  }
  gemm->inputs[1] = g.AddConstant(qname + "/qkv_weight", std::move(w));
  gemm->inputs[2] = g.AddConstant(qname + "/qkv_bias", std::move(b));
  gemm->name = qname + "_qkv";
  packed->shape = x->shape;
  packed->shape.back() = Dim(3 * n);
  // The query Reshape views it as [.., S, 3, H, D].
  Node* view = p[0].reshape;
  std::vector<int64_t> target(x->shape.size() - 1, 0);  // 0: the input's dim
  target.insert(target.end(), {3, h.value, d.value});
  view->inputs[1] = g.AddConstant(view->name + "/qkv_shape", Tensor::FromInt64(target));
  view->attrs.erase("allowzero");
  Value* p5 = view->outputs[0];
  p5->shape = x->shape;
  p5->shape.back() = Dim(3);
  p5->shape.push_back(h);
  p5->shape.push_back(d);
  for (size_t s = 0; s < 3; ++s) at->inputs[s] = p5;
  for (const char* l : fused::kAttentionInputLayouts) at->attrs[l] = Attribute::String("BS3HD");
  fusion::RemoveUnread(g, {p[1].reshape, p[2].reshape, p[1].gemm, p[2].gemm});
  report.details.push_back(fmt::format("fused {}, {} and {} -> FusedMatMul '{}' [{} x {}] read packed (BS3HD) by '{}'",
                                       qname, kname, vname, gemm->name, k, 3 * n,
                                       at->name));
  return true;
}

// The second form, where the model packs Q, K and V itself (timm's and torchvision's ViT/DeiT/Swin attention:
// qkv(x).reshape(B, S, 3, H, D).permute(2, 0, 3, 1, 4), then unbind(0) or [0], [1], [2]):
//   P = Reshape(Y, [B, S, 3, H, D]); T = Transpose(P, [2, 0, 3, 1, 4]);
//   Q, K, V = Squeeze(Split(T, axis 0)[i], [0])  or  Gather(T, i, axis 0)        (i = 0, 1, 2)
//   kiln.Attention(Q, K, V; BHSD)
//   =>
//   kiln.Attention(P, P, P; BS3HD)
// The transpose and the split were two full copies of the projection's output. Q, K and V must each be read by the
// attention alone, and T by the split (or the three gathers) alone.
// The part index the packed tensor T's slice `v` takes along axis 0, and the nodes that made it; -1 when v is not
// such a slice.
struct Part {
  int index = -1;
  Value* packed = nullptr;             // T
  std::vector<Node*> nodes;            // Squeeze + Split, or Gather
};

Part SliceOfPacked(const Uses& u, const Value* v) {
  Part r;
  Node* n = u.Producer(v);
  if (fusion::Is(n, "Gather", 2) && n->geti("axis", 0) == 0) {
    const Value* idx = n->inputs[1];
    if (!idx || !idx->is_const() || idx->const_value->rank() != 0) return r;
    const int64_t i = idx->const_value->GetAsInt(0);
    if (i < 0 || i > 2) return r;
    r.index = static_cast<int>(i);
    r.packed = n->inputs[0];
    r.nodes = {n};
    return r;
  }
  if (!fusion::Is(n, "Squeeze", 2) || !n->inputs[0]) return r;
  auto axes = n->inputs[1] && n->inputs[1]->is_const() ? n->inputs[1]->const_value->ToInt64Vector()
                                                        : std::vector<int64_t>{};
  if (axes != std::vector<int64_t>{0}) return r;
  Value* part = n->inputs[0];
  Node* sp = u.Producer(part);
  if (!sp || !sp->domain.empty() || sp->op_type != "Split" || sp->outputs.size() != 3 || sp->geti("axis", 0) != 0 ||
      !sp->inputs[0] || !u.OnlyBy(part, n))
    return r;
  for (int i = 0; i < 3; ++i)
    if (sp->outputs[i] == part) r.index = i;
  if (r.index < 0 || !part->has_shape || part->shape.empty() || !part->shape[0].known() || part->shape[0].value != 1)
    return r;
  r.packed = sp->inputs[0];
  r.nodes = {n, sp};
  return r;
}

// The third form (GPT-2's c_attn: one projection split along its last axis, each third viewed as heads):
//   Q, K, V = Split(Y [.., S, 3 * H * D], last axis, 3 equal parts); Reshape each to [.., S, H, D];
//   kiln.Attention(Q, K, V; BSHD)   =>   kiln.Attention(P, P, P; BS3HD) with P = Reshape(Y, [.., S, 3, H, D])
bool TryPackLastAxisSplit(Graph& g, const Uses& u, Node* at, PassReport& report) {
  if (at->domain != "kiln" || at->op_type != "Attention" || at->inputs.size() < 3) return false;
  if (at->geti("kiln_k_transposed", 0) != 0) return false;
  for (const char* l : fused::kAttentionInputLayouts)
    if (at->gets(l, "BHSD") != "BSHD") return false;
  Node* sp = nullptr;
  std::vector<Node*> views;
  for (int s = 0; s < 3; ++s) {
    Value* in = at->input(s);
    if (!in || !u.OnlyBy(in, at) || !in->has_shape || in->shape.size() < 3) return false;
    for (const Dim& dd : in->shape)
      if (dd.unknown()) return false;  // known or named dims (dynamic shapes) only
    Node* r = u.Producer(in);
    if (!fusion::Is(r, "Reshape", 2) || !r->inputs[0] || !u.OnlyBy(r->inputs[0], r)) return false;
    Node* p = u.Producer(r->inputs[0]);
    if (!p || !p->domain.empty() || p->op_type != "Split" || p->outputs.size() != 3 || p->outputs[s] != r->inputs[0])
      return false;
    if (sp && p != sp) return false;
    sp = p;
    views.push_back(r);
  }
  Value* y = sp->inputs[0];
  if (!y || !y->has_shape || y->shape.size() + 1 != at->input(0)->shape.size()) return false;
  const int64_t rank = static_cast<int64_t>(y->shape.size());
  if (sp->geti("axis", 0) != rank - 1 && sp->geti("axis", 0) != -1) return false;
  const Shape& ys = y->shape;
  const Shape& qs = at->input(0)->shape;
  auto same_shape = [](const Shape& a, const Shape& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!a[i].same(b[i])) return false;
    return true;
  };
  for (int s = 0; s < 3; ++s)
    if (!same_shape(at->input(s)->shape, qs)) return false;
  if (!qs[qs.size() - 2].known() || !qs.back().known() || !ys.back().known()) return false;
  const int64_t h = qs[qs.size() - 2].value, d = qs.back().value;
  if (ys.back().value != 3 * h * d) return false;
  // P's target: y's leading dims (known ones as they are, named ones copied with 0 from the same position), 3, H, D.
  std::vector<int64_t> ps;
  Shape p_shape;
  for (size_t i = 0; i + 1 < ys.size(); ++i) {
    if (!ys[i].same(qs[i]) || (ys[i].known() && ys[i].value == 0)) return false;
    ps.push_back(ys[i].known() ? ys[i].value : 0);
    p_shape.push_back(ys[i]);
  }
  ps.insert(ps.end(), {3, h, d});
  for (int64_t v : {int64_t{3}, h, d}) p_shape.push_back(Dim(v));
  // The query's view becomes the packed one.
  Node* view = views[0];
  view->inputs = {y, g.AddConstant(view->name + "/qkv_shape", Tensor::FromInt64(ps))};
  view->attrs.erase("allowzero");
  Value* p5 = view->outputs[0];
  p5->shape = p_shape;
  for (int s = 0; s < 3; ++s) at->inputs[s] = p5;
  for (const char* l : fused::kAttentionInputLayouts) at->attrs[l] = Attribute::String("BS3HD");
  report.details.push_back(fmt::format("'{}' reads Q, K and V packed (BS3HD) from '{}': {} and the views removed",
                                       at->name, y->name, sp->name));
  fusion::RemoveUnread(g, {views[1], views[2], sp});
  return true;
}

bool TryPackSplit(Graph& g, const Uses& u, Node* at, PassReport& report) {
  if (TryPackLastAxisSplit(g, u, at, report)) return true;
  if (at->domain != "kiln" || at->op_type != "Attention" || at->inputs.size() < 3) return false;
  if (at->geti("kiln_k_transposed", 0) != 0) return false;
  for (const char* l : fused::kAttentionInputLayouts)
    if (at->gets(l, "BHSD") != "BHSD") return false;
  Part parts[3];
  // Each part may reach the attention through a view that splits its first dim in two (expose-window-attention's
  // [B * nW, ..] -> [B, nW, ..]); then all three must split it alike, and the packed tensor is viewed the same way.
  std::vector<int64_t> split;
  std::vector<Node*> views;
  for (int s = 0; s < 3; ++s) {
    Value* in = at->input(s);
    if (!in || !u.OnlyBy(in, at)) return false;
    Node* view = u.Producer(in);
    std::vector<int64_t> sp;
    if (fusion::Is(view, "Reshape", 2) && view->inputs[0] && view->inputs[0]->has_shape && in->has_shape &&
        IsStatic(view->inputs[0]->shape) && IsStatic(in->shape) && in->shape.size() == view->inputs[0]->shape.size() + 1) {
      const std::vector<int64_t> a = ToStatic(view->inputs[0]->shape), b = ToStatic(in->shape);
      if (b[0] * b[1] != a[0] || !std::equal(a.begin() + 1, a.end(), b.begin() + 2) || !u.OnlyBy(view->inputs[0], view))
        return false;
      sp = {b[0], b[1]};
      views.push_back(view);
      in = view->inputs[0];
    }
    if (s > 0 && sp != split) return false;
    split = sp;
    parts[s] = SliceOfPacked(u, in);
    if (parts[s].index != s || parts[s].packed != parts[0].packed) return false;
  }
  Value* t = parts[0].packed;
  Node* tr = u.Producer(t);
  if (!fusion::Is(tr, "Transpose", 1) || tr->getints("perm", {}) != std::vector<int64_t>{2, 0, 3, 1, 4}) return false;
  // T is read by the split or the three gathers only.
  for (const Node* r : u.Readers(t))
    if (r != parts[0].nodes.back() && r != parts[1].nodes.back() && r != parts[2].nodes.back()) return false;
  if (u.IsOutput(t)) return false;
  Value* p = tr->inputs[0];
  if (!p || !p->has_shape || p->shape.size() != 5 || !p->shape[2].known() || p->shape[2].value != 3) return false;
  if (!split.empty()) {  // P [G, S, 3, H, D] viewed as [B, nW, S, 3, H, D]
    if (!IsStatic(p->shape)) return false;
    std::vector<int64_t> ps = ToStatic(p->shape);
    ps.erase(ps.begin());
    ps.insert(ps.begin(), split.begin(), split.end());
    Value* pv = g.AddValue(p->name + "_split");
    pv->dtype = p->dtype;
    pv->shape = FromStatic(ps);
    pv->has_shape = true;
    Node* r = g.AddNode("Reshape", p->name + "/split_view");
    r->opset = 14;
    r->inputs = {p, g.AddConstant(p->name + "/split_view_shape", Tensor::FromInt64(ps))};
    r->outputs = {pv};
    pv->producer = r;
    p = pv;
  }
  for (int s = 0; s < 3; ++s) at->inputs[s] = p;
  for (const char* l : fused::kAttentionInputLayouts) at->attrs[l] = Attribute::String("BS3HD");
  report.details.push_back(fmt::format("'{}' reads Q, K and V packed (BS3HD) from '{}': {} and its split removed",
                                       at->name, p->name, tr->name));
  std::vector<Node*> gone = {tr};
  for (const Part& pt : parts) gone.insert(gone.end(), pt.nodes.begin(), pt.nodes.end());
  gone.insert(gone.end(), views.begin(), views.end());
  fusion::RemoveUnread(g, gone);
  return true;
}

}  // namespace

Result<PassReport> FuseQkvProjectionPass(Graph& g, const PassOptions& o) {
  PassReport report;
  Status st;
  report.rewrites = fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* n) {
    if (!st.ok() || !o.evaluator) return false;  // no evaluator: no way to concatenate the weights
    Result<bool> r = TryFuse(g, o, u, n, report);
    if (!r.ok()) st = r.status();
    return r.ok() && *r;
  });
  KILN_RETURN_IF_ERROR(st);
  const int packed = fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* n) { return TryPackSplit(g, u, n, report); });
  report.rewrites += packed;
  if (packed > 0) KILN_RETURN_IF_ERROR(g.TopoSort());  // a view of the packed tensor was appended
  return report;
}

}  // namespace kiln
