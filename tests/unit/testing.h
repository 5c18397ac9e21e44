// Shared harness of the unit tests that build small graphs with the Graph API and run them on the CPU
// reference: a seeded random tensor, a graph under construction with random feeds for its inputs, and an
// output comparison. Header-only; a test file derives its own TestGraph from testing::TestGraph to set the
// seed, dtype or input range and to add the helpers only it needs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "ops/infer.h"

namespace kiln::testing {

// A tensor of `dt` with values uniform in [lo, hi) from std::mt19937(seed), drawn as `Real` (float draws give
// other values than double ones).
template <class Real = double>
inline Tensor Random(std::vector<int64_t> shape, uint32_t seed, double lo = -1, double hi = 1,
                     DataType dt = DataType::kFloat32) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<Real> u(static_cast<Real>(lo), static_cast<Real>(hi));
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, u(rng));
  return t;
}

// An integer uniform in [lo, hi] drawn from `rng`.
inline int64_t RandInt(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
// A tensor of `dt` holding integers uniform in [lo, hi] drawn from `rng`.
inline Tensor RandomInts(std::mt19937& rng, DataType dt, std::vector<int64_t> shape, int64_t lo, int64_t hi) {
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, static_cast<double>(RandInt(rng, lo, hi)));
  return t;
}

// Row-major multi-index of flat offset `flat` in `shape`, and back.
inline std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
// Element of `t` at output multi-index `idx` under numpy broadcasting (`t` may have fewer dims, or 1s).
inline double BroadcastAt(const Tensor& t, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t lead = idx.size() - t.shape().size();
  for (size_t d = 0; d < t.shape().size(); ++d) {
    const int64_t n = t.shape()[d];
    off = off * n + (n == 1 ? 0 : idx[lead + d]);
  }
  return t.GetAsDouble(off);
}
inline int64_t Ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

// One node in its own graph, evaluated by the CPU executor (shape inference + kernel). Inputs are named in0,
// in1, ..., outputs out0, out1, ...; `name` empty names the node test_<op>.
struct OneNode {
  Graph g;
  Node* n;
  OneNode(const std::string& op, size_t ins, size_t outs = 1, int64_t opset = 0, const std::string& name = "") {
    n = g.AddNode(op, name.empty() ? "test_" + op : name);
    n->opset = opset;
    for (size_t i = 0; i < ins; ++i) n->inputs.push_back(g.AddValue("in" + std::to_string(i)));
    for (size_t i = 0; i < outs; ++i) n->outputs.push_back(g.AddValue("out" + std::to_string(i)));
  }
  void Ints(const std::string& k, std::vector<int64_t> v) { n->attrs[k] = Attribute::Ints(std::move(v)); }
  Result<std::vector<Tensor>> Run(const std::vector<const Tensor*>& in) { return cpu::EvaluateNode(*n, in); }
};

// Same dtype, shape and values (compared as doubles).
inline void ExpectEqualTensor(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape()) << ShapeToString(got.shape()) << " vs " << ShapeToString(want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.GetAsDouble(i), want.GetAsDouble(i)) << "at " << i;
}

// A graph under construction plus random feeds for its inputs. Random inputs and constants take their seeds
// from `seed` (incremented per tensor), their type from `dt` and inputs their range from [lo, hi).
struct TestGraph {
  Graph g;
  std::map<std::string, Tensor> feeds;
  uint32_t seed = 11;
  DataType dt = DataType::kFloat32;
  double lo = -1, hi = 1;
  int64_t opset = 17;
  bool drop_folded = false;  // Finish removes the nodes whose outputs all folded to constants

  Value* Input(const std::string& name, std::vector<int64_t> dims) { return Input(name, std::move(dims), dt, lo, hi); }
  Value* Input(const std::string& name, std::vector<int64_t> dims, DataType type) {
    return Input(name, std::move(dims), type, lo, hi);
  }
  Value* Input(const std::string& name, std::vector<int64_t> dims, DataType type, double from, double to) {
    Value* v = g.GetOrAddValue(name);
    v->dtype = type;
    v->shape = FromStatic(dims);
    v->has_shape = true;
    v->is_graph_input = true;
    g.inputs.push_back(v);
    feeds[name] = Random(dims, seed++, from, to, type);
    return v;
  }
  Value* Const(const std::string& name, Tensor t) { return g.AddConstant(name, std::move(t)); }
  // A random constant of `dt`, uniform in [from, to).
  Value* Const(const std::string& name, std::vector<int64_t> dims, double from = -1, double to = 1) {
    return g.AddConstant(name, Random(std::move(dims), seed++, from, to, dt));
  }
  Value* Ints(const std::string& name, std::vector<int64_t> v) { return Const(name, Tensor::FromInt64(v)); }
  Value* Ints(std::vector<int64_t> v) { return Ints("axes", std::move(v)); }
  Value* F(float v) { return g.AddConstant("c", Tensor::FromFloat({v}, {})); }

  // A node with `outs` outputs named name_out, name_out1, ...; `node_opset` 0 takes the graph's `opset`.
  Node* OpNode(const std::string& op, const std::string& name, std::vector<Value*> ins,
               std::map<std::string, Attribute> attrs = {}, size_t outs = 1, const std::string& domain = "",
               int64_t node_opset = 0) {
    Node* n = g.AddNode(op, name);
    n->opset = node_opset ? node_opset : opset;
    n->domain = domain;
    n->inputs = std::move(ins);
    n->attrs = std::move(attrs);
    for (size_t i = 0; i < outs; ++i) n->outputs.push_back(g.AddValue(name + (i ? "_out" + std::to_string(i) : "_out")));
    return n;
  }
  Value* Op(const std::string& op, const std::string& name, std::vector<Value*> ins,
            std::map<std::string, Attribute> attrs = {}) {
    return OpNode(op, name, std::move(ins), std::move(attrs))->outputs[0];
  }
  Value* Out(Node* n, size_t i = 0) { return n->outputs[i]; }
  void Output(Value* v) {
    v->is_graph_output = true;
    g.outputs.push_back(v);
  }
  // Sorts, infers (folding constants like the importer when `fold`), and verifies.
  void Finish(bool fold = true) {
    ASSERT_TRUE(g.TopoSort().ok());
    InferOptions io;
    if (fold) io.evaluator = cpu::MakeConstEvaluator();
    Status st = InferGraph(g, io);
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (drop_folded)
      std::erase_if(g.mutable_nodes(), [](const std::unique_ptr<Node>& n) {
        for (Value* o : n->outputs)
          if (o && !o->is_const()) return false;
        for (Value* o : n->outputs)
          if (o) o->producer = nullptr;
        return true;
      });
    st = VerifyGraph(g);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::map<std::string, Tensor> Run() {
    auto r = cpu::RunGraph(g, feeds);
    EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << PrintGraph(g);
    return r.ok() ? *r : std::map<std::string, Tensor>{};
  }
  // Nodes of `op` (with `n_inputs` inputs, where given).
  int Count(const std::string& op, size_t n_inputs = SIZE_MAX) const {
    int c = 0;
    for (const auto& n : g.nodes()) c += n->op_type == op && (n_inputs == SIZE_MAX || n->inputs.size() == n_inputs);
    return c;
  }
  const Node* Find(const std::string& op) const {
    for (const auto& n : g.nodes())
      if (n->op_type == op) return n.get();
    return nullptr;
  }
  const Node* Named(const std::string& node_name) const {
    for (const auto& n : g.nodes())
      if (n->name == node_name) return n.get();
    return nullptr;
  }
  bool Has(const std::string& node_name) const { return Named(node_name) != nullptr; }
};

// Same output names, shapes and dtypes; values within rtol * |a| + atol.
inline void ExpectSameOutputs(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b,
                              double rtol = 1e-4, double atol = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (const auto& [name, ta] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << "output " << name << " missing after the pass";
    const Tensor& tb = it->second;
    ASSERT_EQ(ta.shape(), tb.shape()) << name;
    ASSERT_EQ(ta.dtype(), tb.dtype()) << name;
    for (int64_t i = 0; i < ta.numel(); ++i) {
      const double x = ta.GetAsDouble(i), y = tb.GetAsDouble(i);
      ASSERT_LE(std::fabs(x - y), rtol * std::fabs(x) + atol) << name << " at " << i << ": " << x << " vs " << y;
    }
  }
}

// Shapes cleared (producers relinked, nodes sorted) and inferred again, as the builder does between its planning
// steps; then the graph is verified.
inline void Reinfer(Graph& g) {
  for (const auto& n : g.nodes())
    for (Value* o : n->outputs)
      if (o) o->producer = n.get();
  ASSERT_TRUE(g.TopoSort().ok());
  for (Value* v : g.values())
    if (!v->is_const() && !v->is_graph_input) {
      v->shape.clear();
      v->has_shape = false;
    }
  InferOptions io;
  io.evaluator = cpu::MakeConstEvaluator();
  Status st = InferGraph(g, io);
  ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << PrintGraph(g);
  st = VerifyGraph(g);
  ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << PrintGraph(g);
}

}  // namespace kiln::testing
