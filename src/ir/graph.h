// kiln's IR: a typed graph of Nodes connected by Values.
//
// A Value is a tensor edge: a graph input, an initializer (const_value set), or a node output. A Node is an
// operation in kiln's op set (ONNX op types after the importer's canonicalization: attribute forms of
// opset-dependent operands become constant inputs, see src/onnx/canonicalize.cpp). Nodes are kept in
// topological order.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dims.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "kiln/status.h"

namespace kiln {

class Graph;

struct Attribute {
  enum class Kind { kUndefined, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings };
  Kind kind = Kind::kUndefined;
  float f = 0.f;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  // kGraph: a control-flow body (If's branches, Loop's and Scan's body). Shared by clones of the node; never
  // written after import (passes that rewrite a body replace the pointer).
  std::shared_ptr<const Graph> g;

  static Attribute Int(int64_t v) { Attribute a; a.kind = Kind::kInt; a.i = v; return a; }
  static Attribute Float(float v) { Attribute a; a.kind = Kind::kFloat; a.f = v; return a; }
  static Attribute String(std::string v) { Attribute a; a.kind = Kind::kString; a.s = std::move(v); return a; }
  static Attribute Ints(std::vector<int64_t> v) { Attribute a; a.kind = Kind::kInts; a.ints = std::move(v); return a; }
  static Attribute Floats(std::vector<float> v) { Attribute a; a.kind = Kind::kFloats; a.floats = std::move(v); return a; }
  static Attribute TensorValue(Tensor v) { Attribute a; a.kind = Kind::kTensor; a.t = std::move(v); return a; }
};
const char* AttributeKindName(Attribute::Kind k);

struct Node;

// What a value holds: a tensor (every value outside control flow), or, in and around Loop/If/Scan bodies, a
// sequence of tensors or an optional (dtype is then the element type).
enum class ValueKind : uint8_t { kTensor = 0, kSequence = 1, kOptionalTensor = 2, kOptionalSequence = 3 };

struct Value {
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  bool has_shape = false;            // false when even the rank is unknown
  Node* producer = nullptr;          // null for graph inputs and initializers
  std::optional<Tensor> const_value; // initializers and folded constants
  // For small int64 shape tensors whose elements are known symbolically (Shape of a [batch,3] tensor):
  std::optional<std::vector<Dim>> sym_value;
  bool is_graph_input = false;
  bool is_graph_output = false;
  ValueKind kind = ValueKind::kTensor;

  bool is_const() const { return const_value.has_value(); }
  std::string TypeString() const;  // "float32[batch,3,224,224]"
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int64_t opset = 0;   // the opset version this node was imported under
  std::vector<Value*> inputs;   // nullptr where an optional input is omitted
  std::vector<Value*> outputs;  // nullptr where an optional output is omitted
  std::map<std::string, Attribute> attrs;

  // "node 'conv1' (Conv)": the prefix every error about this node carries.
  std::string Where() const;

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  // Typed attribute access. The checked form returns an error naming the node and attribute when the
  // attribute has another type; the plain form returns the default in that case (use it only after the
  // node passed shape inference, which uses the checked form).
  Result<int64_t> attr_int(const std::string& k, int64_t def) const;
  Result<float> attr_float(const std::string& k, float def) const;
  Result<std::string> attr_string(const std::string& k, const std::string& def) const;
  Result<std::vector<int64_t>> attr_ints(const std::string& k, const std::vector<int64_t>& def = {}) const;
  Result<std::vector<float>> attr_floats(const std::string& k, const std::vector<float>& def = {}) const;
  int64_t geti(const std::string& k, int64_t def) const;
  float getf(const std::string& k, float def) const;
  std::string gets(const std::string& k, const std::string& def) const;
  std::vector<int64_t> getints(const std::string& k, const std::vector<int64_t>& def = {}) const;
  std::vector<float> getfloats(const std::string& k, const std::vector<float>& def = {}) const;

  // Input i or nullptr when it is omitted or beyond the list.
  Value* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs.size() ? outputs[i] : nullptr; }
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;  // values live in a deque: their addresses survive a move
  Graph& operator=(Graph&&) = default;
  // A deep copy (constants share their buffers, which are never written).
  std::unique_ptr<Graph> Clone() const;

  std::string name;
  std::map<std::string, int64_t> opsets;  // domain -> version ("" is the default domain)
  std::vector<Value*> inputs;   // real inputs (not initializers), in model order
  std::vector<Value*> outputs;  // in model order

  Value* FindValue(const std::string& name) const;
  // Returns the value with this name, creating it when missing.
  Value* GetOrAddValue(const std::string& name);
  // Creates a value with a fresh name derived from `hint`.
  Value* AddValue(const std::string& hint);
  Value* AddConstant(const std::string& hint, Tensor t);
  Node* AddNode(std::string op_type, std::string name);
  // Inserts a node before position `pos` in the node order (for canonicalization that splits a node).
  Node* InsertNode(size_t pos, std::string op_type, std::string name);

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::vector<std::unique_ptr<Node>>& mutable_nodes() { return nodes_; }
  size_t num_values() const { return values_.size(); }
  // Every value, in creation order.
  std::vector<Value*> values() const;

  // Re-derives producer links and sorts nodes topologically; fails naming a node on a cycle or on an
  // input that nothing produces.
  Status TopoSort();
  // Removes nodes whose outputs nobody uses (graph outputs are used).
  size_t RemoveDeadNodes();
  // Removes nodes whose every output became a constant (folded by shape inference); returns how many.
  size_t RemoveFoldedNodes();

 private:
  std::deque<Value> values_;
  std::unordered_map<std::string, Value*> by_name_;
  std::vector<std::unique_ptr<Node>> nodes_;
  int64_t fresh_ = 0;
};

// Checks structural invariants (every input produced before use, unique output names, types set where
// shape inference ran); returns the first violation naming the node.
Status VerifyGraph(const Graph& g);
// Human-readable dump: inputs, initializers (summarized), nodes with typed outputs, outputs.
std::string PrintGraph(const Graph& g, bool with_constants = false);

}  // namespace kiln
