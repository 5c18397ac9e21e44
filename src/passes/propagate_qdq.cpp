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

bool IsOp(const Node* n, const char* op) { return n && n->domain.empty() && n->op_type == op; }

// Q(view(y)) -> view(Q(y)): the Q now reads y and writes a fresh int8 value of y's shape; the view reads that and
// writes the Q's old output.
bool MoveQuantizeUp(Graph& g, const Uses& u, Node* q, PassReport& report) {
  if (!IsOp(q, "QuantizeLinear") || !PerTensor(q)) return false;
  Value* t = q->inputs[0];
  Node* view = u.Producer(t);
  if (!Moves(view) || !u.OnlyBy(t, q)) return false;
  Value* y = view->inputs[0];
  if (!u.OnlyBy(y, view) || u.IsOutput(y)) return false;
  Value* out = q->outputs[0];
  Value* yq = g.AddValue(y->name + "/quantized");
  yq->dtype = out->dtype;
  yq->shape = y->shape;
  yq->has_shape = y->has_shape;
  q->inputs[0] = y;
  q->outputs[0] = yq;
  yq->producer = q;
  view->inputs[0] = yq;
  view->outputs[0] = out;
  out->producer = view;
  t->producer = nullptr;  // t is read and written by nothing now
  // The view now runs after the Q: move it just after the Q in the node order.
  auto& nodes = g.mutable_nodes();
  size_t iq = 0, iv = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].get() == q) iq = k;
    if (nodes[k].get() == view) iv = k;
  }
  if (iv < iq) {
    auto moved = std::move(nodes[iv]);
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(iv));
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(iq), std::move(moved));
  }
  report.details.push_back(fmt::format("moved {} ({}) before {} ({})", q->name, q->op_type, view->name, view->op_type));
  return true;
}

// view(DQ(x)) -> DQ(view(x)).
bool MoveDequantizeDown(Graph& g, const Uses& u, Node* view, PassReport& report) {
  if (!Moves(view)) return false;
  Value* d = view->inputs[0];
  Node* dq = u.Producer(d);
  if (!IsOp(dq, "DequantizeLinear") || !PerTensor(dq) || !u.OnlyBy(d, view) || u.IsOutput(d)) return false;
  Value* x = dq->inputs[0];
  Value* out = view->outputs[0];
  Value* xv = g.AddValue(out->name + "/quantized");
  xv->dtype = x->dtype;
  xv->shape = out->shape;
  xv->has_shape = out->has_shape;
  view->inputs[0] = x;
  view->outputs[0] = xv;
  xv->producer = view;
  dq->inputs[0] = xv;
  dq->outputs[0] = out;
  out->producer = dq;
  d->producer = nullptr;
  auto& nodes = g.mutable_nodes();
  size_t idq = 0, iv = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].get() == dq) idq = k;
    if (nodes[k].get() == view) iv = k;
  }
  if (idq < iv) {  // the DQ now runs after the view
    auto moved = std::move(nodes[idq]);
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(idq));
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(iv), std::move(moved));
  }
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
