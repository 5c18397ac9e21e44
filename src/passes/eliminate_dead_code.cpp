// Pass eliminate-dead-code: removes nodes whose outputs reach no graph output, then drops the data of
// constants that nothing reads any more (weights replaced by fold-batchnorm, duplicates merged by CSE...).
// Before: x -> Relu(r1) -> y (graph output);  x -> Sigmoid(s1) -> unused      After: x -> Relu(r1) -> y
// Liveness runs backwards over the topological order from the graph outputs. A dropped constant stays in the
// value table as an empty, unused value (the Graph has no value removal); it is no longer an initializer.
#include <unordered_set>

#include "core/error.h"
#include "passes/pass_list.h"

namespace kiln {

Result<PassReport> EliminateDeadCodePass(Graph& g, const PassOptions& o) {
  PassReport report;
  std::unordered_set<const Value*> live(g.outputs.begin(), g.outputs.end());
  std::unordered_set<const Node*> dead;
  const auto& nodes = g.nodes();
  for (size_t k = nodes.size(); k-- > 0;) {
    const Node* n = nodes[k].get();
    bool used = false;
    for (const Value* out : n->outputs) used = used || (out && live.count(out));
    if (!used) {
      dead.insert(n);
      continue;
    }
    for (const Value* in : n->inputs)
      if (in) live.insert(in);
  }
  for (const auto& n : nodes)
    if (dead.count(n.get())) {
      report.details.push_back(fmt::format("removed {}: its outputs reach no graph output", n->Where()));
      ++report.rewrites;
    }
  if (!dead.empty()) RemoveNodes(g, [&](const Node* n) { return dead.count(n) != 0; });

  // Constants nothing reads (live now holds every input of every remaining node, plus the graph outputs).
  size_t dropped = 0, bytes = 0;
  for (Value* v : g.values()) {
    if (!v->is_const() || v->is_graph_input || live.count(v)) continue;
    ++dropped;
    bytes += v->const_value->nbytes();
    v->const_value.reset();
    v->sym_value.reset();
  }
  if (dropped > 0) {
    report.details.push_back(fmt::format("removed {} unused constant{} ({} bytes)", dropped, dropped == 1 ? "" : "s",
                                         bytes));
    report.rewrites += static_cast<int>(dropped);
  }
  return report;
}

}  // namespace kiln
