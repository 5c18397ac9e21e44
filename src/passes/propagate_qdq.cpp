// Pass propagate-qdq: moves per-tensor quantize/dequantize nodes across ops that only move elements (the views —
// Reshape, Flatten, Squeeze, Unsqueeze — and Transpose), so that an INT8 layer's output meets the QuantizeLinear of
// the next INT8 layer's input and int8 tensors stay int8 between them (fuse-quantized then folds both into the
// layers). Exact: quantization is elementwise, so it commutes with moving elements.
//   Q(view(y))   =>  view'(Q(y))      when y is read by the view alone and the view's output by the Q alone
//   view(DQ(x))  =>  DQ(view'(x))     when the DQ's output is read by the view alone
// view' is the same op on the other element type (its other inputs, attributes and name kept). Per-tensor only (a
// one-element scale and zero point, no axis to move).
#include "core/error.h"
#include "ops/op_def.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using fusion::Uses;

bool Moves(const Node* n) {
  if (!n || n->outputs.size() != 1 || !n->outputs[0] || n->inputs.empty() || !n->inputs[0]) return false;
  return TraitsOf(*n).view || (n->domain.empty() && n->op_type == "Transpose");
}

bool PerTensor(const Node* q) {
  for (size_t i : {size_t{1}, size_t{2}}) {
    const Value* v = q->input(i);
    if (i == 1 && !v) return false;
    if (v && (!v->is_const() || v->const_value->numel() != 1)) return false;
  }
  return q->outputs.size() == 1 && q->outputs[0];
}

using fusion::IsOp;

// in -> first -> (mid) -> second -> out  becomes  in -> second -> (a fresh value of `type` and `shape`) -> first -> out,
// with second moved before first in the node order (its other inputs, if any, come from before first already).
void Swap(Graph& g, Node* first, Node* second, DataType type, const Shape& shape, bool has_shape) {
  Value* in = first->inputs[0];
  Value* mid = first->outputs[0];
  Value* out = second->outputs[0];
  Value* fresh = g.AddValue(out->name + "/quantized");
  fresh->dtype = type;
  fresh->shape = shape;
  fresh->has_shape = has_shape;
  second->inputs[0] = in;
  second->outputs[0] = fresh;
  fresh->producer = second;
  first->inputs[0] = fresh;
  first->outputs[0] = out;
  out->producer = first;
  mid->producer = nullptr;  // read and written by nothing now
  auto& nodes = g.mutable_nodes();
  size_t i1 = 0, i2 = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].get() == first) i1 = k;
    if (nodes[k].get() == second) i2 = k;
  }
  if (i1 < i2) {  // first now runs right after second
    auto moved = std::move(nodes[i1]);
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i1));
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(i2), std::move(moved));
  }
}

// Q(view(y)) -> view(Q(y)): the Q reads y and writes an int8 value of y's shape; the view reads that.
bool MoveQuantizeUp(Graph& g, const Uses& u, Node* q, PassReport& report) {
  if (!IsOp(q, "QuantizeLinear") || !PerTensor(q)) return false;
  Value* t = q->inputs[0];
  Node* view = u.Producer(t);
  if (!Moves(view) || !u.OnlyBy(t, q)) return false;
  Value* y = view->inputs[0];
  if (!u.OnlyBy(y, view) || u.IsOutput(y)) return false;
  Swap(g, view, q, q->outputs[0]->dtype, y->shape, y->has_shape);
  report.details.push_back(fmt::format("moved {} ({}) before {} ({})", q->name, q->op_type, view->name, view->op_type));
  return true;
}

// view(DQ(x)) -> DQ(view(x)): the view reads x and writes a value of x's type and its own output's shape.
bool MoveDequantizeDown(Graph& g, const Uses& u, Node* view, PassReport& report) {
  if (!Moves(view)) return false;
  Value* d = view->inputs[0];
  Node* dq = u.Producer(d);
  if (!IsOp(dq, "DequantizeLinear") || !PerTensor(dq) || !u.OnlyBy(d, view) || u.IsOutput(d)) return false;
  const Value* out = view->outputs[0];
  Swap(g, dq, view, dq->inputs[0]->dtype, out->shape, out->has_shape);
  report.details.push_back(
      fmt::format("moved {} ({}) after {} ({})", dq->name, dq->op_type, view->name, view->op_type));
  return true;
}

}  // namespace

Result<PassReport> PropagateQdqPass(Graph& g, const PassOptions& o) {
  (void)o;
  PassReport report;
  report.rewrites = fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* n) {
    return MoveQuantizeUp(g, u, n, report) || MoveDequantizeDown(g, u, n, report);
  });
  return report;
}

}  // namespace kiln
