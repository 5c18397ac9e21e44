// Graph building for the planner tests (memory plan, streams): an activation value of a given shape and a node of
// any op type wired to given values.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::plan_testing {

inline Value* Act(Graph& g, const std::string& name, std::vector<int64_t> shape, DataType dt = DataType::kFloat32) {
  Value* v = g.AddValue(name);
  v->dtype = dt;
  v->shape = FromStatic(shape);
  v->has_shape = true;
  return v;
}

inline Node* Op(Graph& g, const std::string& op, std::vector<Value*> ins, std::vector<Value*> outs) {
  Node* n = g.AddNode(op, op + "_" + std::to_string(g.nodes().size()));
  n->inputs = std::move(ins);
  n->outputs = std::move(outs);
  for (Value* o : n->outputs)
    if (o) o->producer = n;
  return n;
}

}  // namespace kiln::plan_testing
