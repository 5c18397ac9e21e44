// Graph building for the planner tests (memory plan, streams): an activation value of a given shape, a node of any op
// type wired to given values, and a random DAG with a size per value.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "plan/memory_plan.h"

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

// A random DAG of 3..72 nodes of ops the planner treats alike except views (Reshape, Identity, Flatten, Squeeze):
// 1..3 graph inputs, a constant, inputs mostly recent values (now and then an older one, or an omitted optional one),
// one or two outputs per node, two graph outputs near the end. `bytes` sizes every non-constant value (some 0; a view
// as large as its input).
struct RandomDag {
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  std::map<const Value*, int64_t> bytes;
};

inline RandomDag MakeRandomDag(std::mt19937& rng) {
  static const char* ops[] = {"Add", "Relu", "Reshape", "Identity", "Concat", "Mul", "Flatten", "Squeeze"};
  RandomDag d;
  Graph& g = *d.g;
  std::vector<Value*> pool;
  const int n_in = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < n_in; ++i) {
    Value* v = Act(g, "in" + std::to_string(i), {1});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    pool.push_back(v);
    d.bytes[v] = 1 + rng() % 5000;
  }
  pool.push_back(g.AddConstant("w", Tensor::FromFloat({1.f, 2.f}, {2})));
  const int n_nodes = 3 + static_cast<int>(rng() % 70);
  for (int k = 0; k < n_nodes; ++k) {
    std::vector<Value*> ins;
    const int ni = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < ni; ++i) {
      // Prefer recent values so lifetimes are realistic, but reach back now and then.
      size_t back = rng() % 4 == 0 ? rng() % pool.size() : std::min<size_t>(pool.size() - 1, rng() % 3);
      ins.push_back(pool[pool.size() - 1 - back]);
    }
    if (rng() % 7 == 0) ins.push_back(nullptr);  // an omitted optional input
    std::vector<Value*> outs;
    const int no = 1 + (rng() % 5 == 0 ? 1 : 0);
    for (int o = 0; o < no; ++o) {
      Value* v = Act(g, "v" + std::to_string(k) + "_" + std::to_string(o), {1});
      d.bytes[v] = rng() % 11 == 0 ? 0 : 1 + rng() % 100000;
      outs.push_back(v);
      pool.push_back(v);
    }
    const std::string op = ops[rng() % 8];
    Op(g, op, ins, outs);
    // Views keep their size (what the kernels do).
    if (IsViewOp(*g.nodes().back()) && ins[0] && !ins[0]->is_const()) d.bytes[outs[0]] = d.bytes[ins[0]];
  }
  for (size_t i = 0; i < 2; ++i) {
    Value* v = pool[pool.size() - 1 - (rng() % std::min<size_t>(pool.size() - 1, 8))];
    if (v->is_const() || v->is_graph_output) continue;
    v->is_graph_output = true;
    g.outputs.push_back(v);
  }
  return d;
}

}  // namespace kiln::plan_testing
