// Pass unflatten-gemm: a Gemm between a Reshape that flattens the leading dims and one that restores them (GPT-2's
// Conv1D, exported as view(-1, K) -> addmm -> view(.., N)) becomes a MatMul over the unflattened tensor plus the
// bias Add:
//   Reshape(x [.., K], [M, K]) -> Gemm(W, C) -> Reshape([.., N])   =>   Add(MatMul(x, W'), C')
// (x of another shape, e.g. [.., H, D] with H * D = K, is read through a view [.., K]).
// The reshapes stood between the product and what follows it, so the bias, the GELU and the residual Add were
// never fused into the GEMM (GPT-2: 4 layers a block ran as 8). W' is W (transposed when transB), C' the bias as
// [N]. Only alpha 1, no transA, beta 1 with a [N] or [1, N] constant bias (or none). Shapes may be symbolic (an
// engine with dynamic shapes): K and N known, every other dim known or named; the view [lead.., K] of x then copies
// (0) each named leading dim from x's dim at the same position.
#include <cstring>
#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "passes/cleanup_util.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

// A shape of at least min_rank dims, each known or symbolic.
bool RankedShape(const Value* v, size_t min_rank) {
  if (!v || !v->has_shape || v->shape.size() < min_rank) return false;
  for (const Dim& d : v->shape)
    if (d.unknown()) return false;
  return true;
}

Tensor Transposed2D(const Tensor& w) {
  const int64_t r = w.dim(0), c = w.dim(1);
  Tensor t(w.dtype(), {c, r});
  const size_t es = DataTypeSize(w.dtype());
  const char* src = static_cast<const char*>(w.raw());
  char* dst = static_cast<char*>(t.raw());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) std::memcpy(dst + (j * r + i) * es, src + (i * c + j) * es, es);
  return t;
}

}  // namespace

Result<PassReport> UnflattenGemmPass(Graph& g, const PassOptions&) {
  PassReport report;
  std::vector<Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());
  std::unordered_set<const Node*> dead;
  for (Node* gemm : order) {
    if (!gemm->domain.empty() || gemm->op_type != "Gemm" || gemm->outputs.size() != 1 || gemm->inputs.size() < 2)
      continue;
    Value* a = gemm->input(0);
    Value* w = gemm->input(1);
    Value* c = gemm->input(2);
    Value* y = gemm->output(0);
    if (!a || !a->producer || !w || !w->is_const() || w->const_value->rank() != 2 || !y) continue;
    if (gemm->getf("alpha", 1.f) != 1.f || gemm->geti("transA", 0) != 0) continue;
    if (c && (!c->is_const() || gemm->getf("beta", 1.f) != 1.f)) continue;
    Node* r1 = a->producer;
    if (!r1->domain.empty() || r1->op_type != "Reshape" || dead.count(r1) || IsGraphOutput(g, a) ||
        LiveConsumers(g, a, dead).size() != 1)
      continue;
    Value* x = r1->input(0);
    if (!RankedShape(x, 2) || !RankedShape(a, 2) || a->shape.size() != 2 || !RankedShape(y, 2) ||
        y->shape.size() != 2 || !a->shape[1].known() || !y->shape[1].known())
      continue;
    auto readers = LiveConsumers(g, y, dead);
    if (readers.size() != 1 || IsGraphOutput(g, y)) continue;
    Node* r2 = readers[0];
    if (!r2->domain.empty() || r2->op_type != "Reshape" || r2->input(0) != y || !RankedShape(r2->output(0), 2)) continue;
    const Shape& xs = x->shape;
    const Shape& zs = r2->output(0)->shape;
    const int64_t k = a->shape[1].value, n = y->shape[1].value;
    // r2 restores leading dims whose product is M; x is read as [those dims.., K] (itself, or r1 retargeted to
    // that view when x's last dims were merged into K: GPT-2's heads [.., H, D] into its c_proj).
    if (!zs.back().known() || zs.back().value != n) continue;
    const Shape lead(zs.begin(), zs.end() - 1);
    Shape xk = lead;
    xk.push_back(Dim(k));
    bool view = xs.size() != xk.size();
    for (size_t i = 0; !view && i < xs.size(); ++i) view = !xs[i].same(xk[i]);
    // The view's target: known dims as they are, named ones copied (0) from x's dim at the same position.
    std::vector<int64_t> target;
    bool expressible = true;
    for (size_t i = 0; i < lead.size() && expressible; ++i) {
      if (lead[i].known()) expressible = lead[i].value > 0;  // a literal 0 would read as "copy"
      else expressible = i < xs.size() && lead[i].same(xs[i]);
      target.push_back(lead[i].known() ? lead[i].value : 0);
    }
    target.push_back(k);
    if (view && !expressible) continue;
    const bool trans_b = gemm->geti("transB", 0) != 0;
    const Tensor& wt = *w->const_value;
    if ((trans_b ? wt.dim(1) : wt.dim(0)) != k || (trans_b ? wt.dim(0) : wt.dim(1)) != n) continue;
    std::optional<Tensor> bias;
    if (c) {
      const Tensor& ct = *c->const_value;
      if (!(ct.rank() == 1 && ct.dim(0) == n) && !(ct.rank() == 2 && ct.dim(0) == 1 && ct.dim(1) == n)) continue;
      bias = ct.Reshaped({n});
    }
    // Gemm -> MatMul(x, W') writing a new [.., N] value; the second Reshape -> Add(bias) (or the MatMul writes its
    // output directly).
    Value* z = r2->outputs[0];
    Value* w2 = trans_b ? g.AddConstant(w->name + "_kn", Transposed2D(wt)) : w;
    gemm->op_type = "MatMul";
    gemm->opset = std::max<int64_t>(gemm->opset, 13);
    gemm->attrs.clear();
    if (view) {  // r1 stays, as the view [lead.., K]
      r1->inputs[1] = g.AddConstant(r1->name + "_unflattened_shape", Tensor::FromInt64(target));
      r1->attrs.erase("allowzero");
      a->shape = xk;
      gemm->inputs = {a, w2};
    } else {
      gemm->inputs = {x, w2};
    }
    if (bias) {
      Value* mm = g.AddValue(gemm->name + "_unflattened");
      mm->dtype = y->dtype;
      mm->shape = z->shape;
      mm->has_shape = true;
      mm->producer = gemm;
      gemm->outputs = {mm};
      r2->op_type = "Add";
      r2->opset = std::max<int64_t>(r2->opset, 14);
      r2->attrs.clear();
      r2->inputs = {mm, g.AddConstant(gemm->name + "_bias", std::move(*bias))};
    } else {
      gemm->outputs = {z};
      z->producer = gemm;
      dead.insert(r2);
      r2->inputs.clear();
      r2->outputs.clear();
    }
    y->producer = nullptr;
    if (!view) dead.insert(r1);
    report.details.push_back(fmt::format("{}: the product of '{}' unflattened ([M, K] -> {})", gemm->Where(), x->name,
                                         ShapeToString(z->shape)));
    ++report.rewrites;
  }
  RemoveNodes(g, [&](const Node* n) { return n->inputs.empty() && n->outputs.empty() && dead.count(n); });
  return report;  // the flattening reshapes are left unread for dead-code elimination
}

}  // namespace kiln
