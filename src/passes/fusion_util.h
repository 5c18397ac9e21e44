// Small matching helpers shared by the recognition and fusion passes (recognize_*.cpp, fuse_*.cpp):
// a consumer/producer index over the current graph, scalar-constant tests, symbolic shape equality, and
// removal of the pattern nodes a rewrite left without readers.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace kiln::fusion {

// Who reads and who writes each value, computed from the node list (independent of Value::producer).
class Uses {
 public:
  explicit Uses(const Graph& g);
  // Every node that reads v, once per input slot.
  const std::vector<Node*>& Readers(const Value* v) const;
  Node* Producer(const Value* v) const;
  bool IsOutput(const Value* v) const { return v && (v->is_graph_output || outputs_.count(v)); }
  // The one node that reads v (possibly in several slots), or nullptr when v has several readers, none, or is a
  // graph output.
  Node* Single(const Value* v) const;
  // v is read only by n and is not a graph output.
  bool OnlyBy(const Value* v, const Node* n) const { return v && Single(v) == n; }

 private:
  std::unordered_map<const Value*, std::vector<Node*>> readers_;
  std::unordered_map<const Value*, Node*> producers_;
  std::unordered_set<const Value*> outputs_;
};

// The value of a one-element constant (any numeric dtype), or nullopt.
std::optional<double> ScalarConst(const Value* v);
bool Near(double a, double b, double rtol = 1e-4);
bool IsScalarConst(const Value* v, double want, double rtol = 1e-4);
// n is `op` with exactly two inputs and one output; when the constant side is a scalar near `c`, returns the
// other input. Commutative ops (Add, Mul) accept the constant on either side; others only on input 1.
Value* OperandBesideConst(const Node* n, const char* op, double c, double rtol = 1e-4);
// Like OperandBesideConst, but any scalar constant; stores it in *c.
Value* OperandBesideAnyConst(const Node* n, const char* op, double* c);
bool Is(const Node* n, const char* op, size_t n_inputs);  // default domain, op type, input count
bool IsOp(const Node* n, const char* op);                 // default domain and op type (n may be null)
// A value standing for a constant a pass has not yet added to the graph: a candidate node the backend is asked
// about reads it (name, type, static shape and contents).
Value ConstantStandIn(const std::string& name, const Tensor& t);
// Both shapes are known with the same rank and each pair of dims is the same constant or symbol.
bool SameShape(const Value* a, const Value* b);
bool IsFloatType(DataType t);  // float32, float16, bfloat16
// MatMul(a, W) of the default domain with W a constant matrix of the output's type: a bias-less projection (T5's,
// LLaMA's), which the fusion passes give a zero bias to make it a kiln.FusedMatMul.
bool IsMatMulByConstMatrix(const Node* n);
// "/a/b/Mul_1" -> "/a/b"
std::string Scope(const std::string& node_name);
// Removes the given nodes when nothing reads their outputs any more (repeatedly, so chains go too); returns
// how many were removed.
size_t RemoveUnread(Graph& g, const std::vector<Node*>& candidates);
// Records that the graph now uses kiln's internal domain.
void UseKilnDomain(Graph& g);

// Applies `rewrite` until no node matches: each round builds a fresh Uses index and offers it every node in order;
// the first call that returns true (it changed the graph) ends the round, so patterns never see a half-rewritten
// graph or a stale index. Dead nodes (none of their outputs reaches a graph output) are removed first. Returns the
// number of rewrites.
int RewriteToFixpoint(Graph& g, const std::function<bool(const Uses& u, Node* n)>& rewrite);

}  // namespace kiln::fusion
