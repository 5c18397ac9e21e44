#include <unordered_set>

#include "core/error.h"
#include "ir/graph.h"

namespace kiln {

Status VerifyGraph(const Graph& g) {
  std::unordered_set<const Value*> available;
  for (Value* v : g.values())
    if (v->is_const() || v->is_graph_input) available.insert(v);
  for (const auto& n : g.nodes()) {
    if (n->op_type.empty()) return Err(StatusCode::kInvalidModel, "a node named '{}' has no op type", n->name);
    for (Value* in : n->inputs)
      if (in && !available.count(in))
        return Err(StatusCode::kInvalidModel, "{}: input '{}' is used before it is produced", n->Where(), in->name);
    for (Value* o : n->outputs) {
      if (!o) continue;
      if (o->producer != n.get())
        return Err(StatusCode::kInternal, "{}: output '{}' does not point back to its producer", n->Where(),
                   o->name);
      if (!available.insert(o).second)
        return Err(StatusCode::kInvalidModel, "{}: output '{}' is produced twice", n->Where(), o->name);
    }
  }
  for (Value* o : g.outputs)
    if (!available.count(o))
      return Err(StatusCode::kInvalidModel, "graph output '{}' is produced by no node", o->name);
  return Status::Ok();
}

}  // namespace kiln
