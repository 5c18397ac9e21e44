// Pass eliminate-identity: takes out nodes that compute nothing.
//   Identity(x)                                   -> x
//   Dropout(x) in inference (mask unused)         -> x
//   Cast(x, to = dtype of x), CastLike same types -> x
//   Reshape/Flatten/Squeeze/Unsqueeze(x) whose output shape equals x's shape -> x
//   Pad by zeros, Slice with positive steps, Expand, Tile, all to x's shape; Concat of one input -> x
// Before: a -> Identity(id1) -> b -> Relu     After: a -> Relu   (id1 is left dead for dead-code elimination)
// A node whose output is a graph output stays unless its input is an ordinary intermediate: then the input's
// producer writes the graph output directly (the output keeps its name).
#include <unordered_set>

#include "core/error.h"
#include "passes/cleanup_util.h"
#include "passes/pass_list.h"

namespace kiln {

namespace {

bool IsReshapeLike(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

// Dropout in inference mode: no training_mode input, or a constant false one; the mask output unused.
bool IsInferenceDropout(const Graph& g, const Node& n, const std::unordered_set<const Node*>& dead) {
  if (const Value* tm = n.input(2)) {
    if (!tm->is_const() || tm->const_value->numel() != 1 || tm->const_value->GetAsDouble(0) != 0) return false;
  }
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    const Value* mask = n.outputs[i];
    if (mask && (IsGraphOutput(g, mask) || !LiveConsumers(g, mask, dead).empty())) return false;
  }
  return true;
}

// Why `n` computes nothing (empty when it does compute something).
std::string NoOpReason(const Graph& g, const Node& n, const std::unordered_set<const Node*>& dead) {
  if (!n.domain.empty() || n.inputs.empty() || !n.input(0) || n.outputs.empty() || !n.output(0)) return {};
  const Value* in = n.input(0);
  const Value* out = n.output(0);
  if (n.op_type == "Identity") return "Identity";
  if (n.op_type == "Dropout")
    return IsInferenceDropout(g, n, dead) && in->dtype == out->dtype ? "Dropout in inference" : "";
  if (n.op_type == "Cast") {
    auto to = n.attr_int("to", 0);
    return to.ok() && static_cast<DataType>(*to) == in->dtype && out->dtype == in->dtype ? "Cast to the same type"
                                                                                        : "";
  }
  if (n.op_type == "CastLike")
    return n.input(1) && n.input(1)->dtype == in->dtype && out->dtype == in->dtype ? "CastLike to the same type" : "";
  if (IsReshapeLike(n.op_type) && n.outputs.size() == 1 && SameTypeAndShape(in, out))
    return n.op_type + " to the same shape " + ShapeToString(in->shape);
  if (n.outputs.size() != 1 || !SameTypeAndShape(in, out)) return {};
  // Copies that keep every element where it was (exporters write them for sizes that happen to need nothing:
  // Swin's F.pad to a multiple of the window and the crop back, torch.roll-free shifts).
  if (n.op_type == "Pad") {
    auto pads = ConstInts(n.input(1));
    if (!pads) return {};
    for (int64_t v : *pads)
      if (v != 0) return {};
    return "Pad by zero";
  }
  if (n.op_type == "Slice") {
    // With positive steps, an output as long as the input on every axis can only be the whole input in order.
    if (n.input(4)) {
      auto steps = ConstInts(n.input(4));
      if (!steps) return {};
      for (int64_t v : *steps)
        if (v <= 0) return {};
    }
    return "Slice of the whole input";
  }
  if (n.op_type == "Expand" || n.op_type == "Tile") return n.op_type + " to the same shape " + ShapeToString(in->shape);
  if (n.op_type == "Concat" && n.inputs.size() == 1) return "Concat of one input";
  return {};
}

}  // namespace

Result<PassReport> EliminateIdentityPass(Graph& g, const PassOptions& o) {
  PassReport report;
  std::unordered_set<const Node*> dead;  // bypassed nodes
  std::unordered_set<const Node*> remove;  // renamed: must go before the pass returns
  std::vector<Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());
  for (Node* n : order) {
    const std::string why = NoOpReason(g, *n, dead);
    if (why.empty()) continue;
    Value* in = n->inputs[0];
    Value* out = n->outputs[0];
    const std::string in_name = in->name, out_name = out->name;
    switch (BypassValue(g, in, out)) {
      case Bypass::kRedirected:
        dead.insert(n);
        report.details.push_back(fmt::format("removed {} ({}): readers of '{}' read '{}'", n->name, why, out_name,
                                             in_name));
        break;
      case Bypass::kRenamed:
        dead.insert(n);
        remove.insert(n);
        report.details.push_back(fmt::format("removed {} ({}): graph output '{}' is now written by {}", n->name, why,
                                             out_name, out->producer ? out->producer->name : "?"));
        break;
      case Bypass::kKept:
        continue;
    }
    ++report.rewrites;
  }
  if (!remove.empty()) RemoveNodes(g, [&](const Node* n) { return remove.count(n) != 0; });
  return report;
}

}  // namespace kiln
