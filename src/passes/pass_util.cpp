// Helpers shared by the optimizer passes (declared in pass.h): who reads a value, rewiring readers, graph
// outputs, removing nodes while keeping producer links right.
#include <algorithm>
#include <unordered_set>

#include "passes/pass.h"

namespace kiln {

std::vector<Node*> Consumers(const Graph& g, const Value* v) {
  std::vector<Node*> r;
  if (!v) return r;
  for (const auto& n : g.nodes())
    for (const Value* in : n->inputs)
      if (in == v) {
        r.push_back(n.get());
        break;
      }
  return r;
}

void ReplaceAllUses(Graph& g, Value* from, Value* to) {
  if (!from || from == to) return;
  for (const auto& n : g.nodes())
    for (Value*& in : n->inputs)
      if (in == from) in = to;
}

bool IsGraphOutput(const Graph& g, const Value* v) {
  if (!v) return false;
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

void RemoveNodes(Graph& g, const std::function<bool(const Node*)>& dead) {
  auto& nodes = g.mutable_nodes();
  std::erase_if(nodes, [&](const std::unique_ptr<Node>& n) {
    if (!dead(n.get())) return false;
    // A value another node now produces (a pass moved it) keeps that producer.
    for (Value* o : n->outputs)
      if (o && o->producer == n.get()) o->producer = nullptr;
    return true;
  });
}

}  // namespace kiln
