// Pass simplify-shape-inputs: a Reshape whose target is computed at run time from other tensors' shapes (the
// Shape -> Gather -> Unsqueeze -> Concat chains exporters write for `x.view(x.size(0), x.size(1), H, D)`) gets a
// constant target when shape inference already knows the result symbolically:
//   x: [batch, seq, 768]   Reshape(x, Concat(Shape(x)[0], Shape(x)[1], 12, 64)) -> [batch, seq, 12, 64]
//   =>  Reshape(x, [0, 0, 12, 64])
// Each output dim becomes its known value, 0 (copy the input's dim at the same position: the same symbol there),
// or -1 for at most one dim that is neither (e.g. batch*seq when flattening). The shape chain is left unread and
// removed. A static build folds these chains as constants; a build with dynamic shapes kept them, and with them
// a second reader of the projections' outputs (the Shape node) that kept the fusions that follow (QKV packing,
// attention layouts) from matching: dynamic engines had other layers than static ones.
// Reshapes with allowzero = 1, or an output dim known to be 0, are left alone (0 would mean a literal zero).
#include <unordered_set>

#include "core/error.h"
#include "passes/cleanup_util.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"

namespace kiln {


Result<PassReport> SimplifyShapeInputsPass(Graph& g, const PassOptions&) {
  PassReport report;
  std::vector<Node*> released;  // the nodes upstream of a replaced target (each once)
  std::unordered_set<const Node*> seen;
  auto release = [&](Value* v) {
    std::vector<Value*> work{v};
    while (!work.empty()) {
      Value* w = work.back();
      work.pop_back();
      Node* p = w ? w->producer : nullptr;
      if (!p || !seen.insert(p).second) continue;
      released.push_back(p);
      for (Value* in : p->inputs) work.push_back(in);
    }
  };
  for (const auto& up : g.nodes()) {
    Node* n = up.get();
    if (!n->domain.empty() || n->op_type != "Reshape" || n->inputs.size() != 2 || !n->inputs[1] ||
        n->inputs[1]->is_const())
      continue;
    auto allowzero = n->attr_int("allowzero", 0);
    if (!allowzero.ok() || *allowzero != 0) continue;
    auto target = ReshapeTargetFor(n->input(0), n->output(0));
    if (!target) continue;
    Value* old = n->inputs[1];
    n->inputs[1] = g.AddConstant(n->name + "/shape", Tensor::FromInt64(*target));
    release(old);
    report.details.push_back(fmt::format("{}: the target computed by '{}' is the constant {} ({})", n->Where(),
                                         old->name, *target, ShapeToString(n->output(0)->shape)));
    ++report.rewrites;
  }
  // The shape chains no one reads now go at once: a Shape node left reading a projection's output would keep the
  // fusion passes from seeing that output's only reader.
  fusion::RemoveUnread(g, released);
  return report;
}

}  // namespace kiln
