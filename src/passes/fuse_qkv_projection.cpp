// Pass fuse-qkv-projection: the three projections of one attention's Q, K and V become one GEMM with their weights
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
  if (!g || g->domain != "kiln" || g->op_type != "FusedMatMul" || g->inputs.size() != 3 || !u.OnlyBy(y, r))
    return std::nullopt;
  if (g->gets("kiln_activation", "None") != "None") return std::nullopt;
  const Value* w = g->inputs[1];
  const Value* b = g->inputs[2];
  if (!g->inputs[0] || !w || !b || !w->is_const() || !b->is_const() || w->const_value->rank() != 2 ||
      b->const_value->rank() != 1 || b->const_value->dim(0) != w->const_value->dim(1))
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
  for (size_t s = 0; s < 3; ++s) {
    const Node* gm = p[s].gemm;
    const Tensor& w = *gm->inputs[1]->const_value;
    const Tensor& b = *gm->inputs[2]->const_value;
    const Value* in = at->inputs[s];
    if (gm->inputs[0] != x || w.shape() != wq.shape() || w.dtype() != wq.dtype() || b.dtype() != wq.dtype() ||
        in->dtype != q->dtype || !fusion::SameShape(in, q))
      return false;
  }
  const int64_t k = wq.dim(0), n = wq.dim(1);
  const std::string qname = p[0].gemm->name, kname = p[1].gemm->name, vname = p[2].gemm->name;
  // The query projection becomes the packed one; its output value keeps its name, its shape widens.
  Node* gemm = p[0].gemm;
  Value* packed = gemm->outputs[0];
  std::vector<const Tensor*> weights, biases;
  for (const Projection& pr : p) {
    weights.push_back(&*pr.gemm->inputs[1]->const_value);
    biases.push_back(&*pr.gemm->inputs[2]->const_value);
  }
  KILN_ASSIGN_OR_RETURN(Tensor w, ConcatLast(o, weights, qname + "/qkv_weight"));
  KILN_ASSIGN_OR_RETURN(Tensor b, ConcatLast(o, biases, qname + "/qkv_bias"));
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

}  // namespace

Result<PassReport> FuseQkvProjectionPass(Graph& g, const PassOptions& o) {
  PassReport report;
  if (!o.evaluator) return report;  // no way to concatenate the weights
  Status st;
  report.rewrites = fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* n) {
    if (!st.ok()) return false;
    Result<bool> r = TryFuse(g, o, u, n, report);
    if (!r.ok()) st = r.status();
    return r.ok() && *r;
  });
  KILN_RETURN_IF_ERROR(st);
  return report;
}

}  // namespace kiln
