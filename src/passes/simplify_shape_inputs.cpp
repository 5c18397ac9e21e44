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
// Second: a Shape of an intermediate whose dims are constants or graph-input dims reads the graph inputs' shapes.
#include <algorithm>
#include <map>
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

  // A Shape of an intermediate whose dims are constants or dims of the graph inputs (T5's key length taken from its
  // transposed K) reads the graph input's shape instead: Concat of slices of Shape(input) and constants. The
  // intermediate then has no reader but its consumers, so the fusions see it whole.
  std::map<std::string, std::pair<Value*, int64_t>> symbol_at;  // symbol -> (graph input, its axis)
  for (Value* in : g.inputs)
    if (in->has_shape)
      for (size_t i = 0; i < in->shape.size(); ++i)
        if (in->shape[i].symbolic() && !symbol_at.count(in->shape[i].sym))
          symbol_at[in->shape[i].sym] = {in, static_cast<int64_t>(i)};
  std::map<const Value*, Value*> input_shape;  // graph input -> Shape(input), made once, first in the graph
  std::vector<Node*> shapes;
  for (const auto& up : g.nodes())
    if (up->domain.empty() && up->op_type == "Shape" && up->inputs.size() == 1 && up->outputs.size() == 1)
      shapes.push_back(up.get());
  for (Node* n : shapes) {
    Value* v = n->inputs[0];
    if (!v || v->is_graph_input || v->is_const() || !v->has_shape || !n->outputs[0]) continue;
    const int64_t r = static_cast<int64_t>(v->shape.size());
    auto clamp = [&](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + r : a, 0, r); };
    const int64_t start = clamp(n->geti("start", 0)), end = clamp(n->geti("end", r));
    if (start >= end) continue;
    bool ok = true, any_symbol = false;
    for (int64_t i = start; i < end && ok; ++i) {
      const Dim& d = v->shape[i];
      ok = d.known() || (d.symbolic() && symbol_at.count(d.sym));
      any_symbol |= !d.known();
    }
    if (!ok || !any_symbol) continue;
    std::vector<Value*> parts;
    size_t pos = 0;
    while (g.nodes()[pos].get() != n) ++pos;
    for (int64_t i = start; i < end; ++i) {
      const Dim& d = v->shape[i];
      if (d.known()) {
        parts.push_back(g.AddConstant(n->name + "/dim" + std::to_string(i), Tensor::FromInt64({d.value})));
        continue;
      }
      auto [in, axis] = symbol_at.at(d.sym);
      Value*& sh = input_shape[in];
      if (!sh) {
        Node* s0 = g.InsertNode(0, "Shape", in->name + "/shape");
        ++pos;
        s0->opset = 15;
        sh = g.AddValue(in->name + "_shape");
        sh->dtype = DataType::kInt64;
        sh->shape = {Dim(static_cast<int64_t>(in->shape.size()))};
        sh->has_shape = true;
        s0->inputs = {in};
        s0->outputs = {sh};
        sh->producer = s0;
      }
      Node* sl = g.InsertNode(pos++, "Slice", n->name + "/dim" + std::to_string(i));
      sl->opset = 13;
      Value* part = g.AddValue(n->name + "_dim" + std::to_string(i));
      part->dtype = DataType::kInt64;
      part->shape = {Dim(1)};
      part->has_shape = true;
      part->sym_value = std::vector<Dim>{ShapeDimAsContent(d)};
      sl->inputs = {sh, g.AddConstant(sl->name + "/start", Tensor::FromInt64({axis})),
                    g.AddConstant(sl->name + "/end", Tensor::FromInt64({axis + 1}))};
      sl->outputs = {part};
      part->producer = sl;
      parts.push_back(part);
    }
    n->op_type = "Concat";
    n->opset = std::max<int64_t>(n->opset, 13);
    n->attrs.clear();
    n->attrs["axis"] = Attribute::Int(0);
    n->inputs = parts;
    report.details.push_back(fmt::format("{}: the shape of '{}' ({}) read from the graph inputs' shapes", n->Where(),
                                         v->name, ShapeToString(v->shape)));
    ++report.rewrites;
  }
  return report;
}

}  // namespace kiln
