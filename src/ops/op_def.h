// One definition per op: what is true of an op whatever backend runs it.
//
// An OpDef is keyed by (domain, name, opset range). It holds the ONNX converter (canonicalization at import),
// the shape/type function (symbolic at build time, concrete at run time), the traits the planner, memory
// planner, layout pass, fusion passes and conformance scope read, and, for pointwise ops, the formula's id.
// Backends register kernels against an OpDef's (domain, name); tests check that the tables agree.
//
// Domains: "" is ONNX's default domain (a model's "ai.onnx" is read as ""), "kiln" holds the internal ops the
// optimizer creates (FusedConv, Attention...), so ONNX's opset-23 Attention and kiln's never collide. Plugins
// add OpDefs in their own domains at run time (AddExternalOp).
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ops/infer_context.h"
#include "ops/pointwise_id.h"

namespace kiln {

inline constexpr const char* kOnnxDomain = "";
inline constexpr const char* kKilnDomain = "kiln";
// "ai.onnx" and "" are the same domain.
inline std::string_view CanonicalDomain(std::string_view d) { return d == "ai.onnx" ? std::string_view() : d; }

// The key backends register kernels under: "Relu" for ONNX ops, "kiln.FusedConv" for others.
inline std::string QualifiedOpName(std::string_view domain, std::string_view name) {
  domain = CanonicalDomain(domain);
  return domain.empty() ? std::string(name) : std::string(domain) + "." + std::string(name);
}
inline std::string QualifiedOpName(const Node& n) { return QualifiedOpName(n.domain, n.op_type); }

// ---- import: ONNX -> kiln's canonical form ----
struct ConvertContext {
  Graph& graph;
  Node& node;
  int64_t opset;  // default-domain opset of the model
};
using ConverterFn = std::function<Status(ConvertContext&)>;

// What the planner and passes may assume about an op.
struct OpTraits {
  // Output 0 is input 0's bytes reinterpreted (Reshape, Flatten, Squeeze, Unsqueeze, Identity): the memory
  // planner may alias them.
  bool view = false;
  // Elementwise over same-shaped operands (after broadcasting): runs unchanged in any memory layout, so the
  // layout pass may move it between NHWC producers and consumers.
  bool layout_neutral = false;
  // Elementwise in input 0 with parameters (the other inputs) that may be per-axis: layout-neutral when every
  // parameter is a scalar (per-tensor QuantizeLinear / DequantizeLinear; per-channel ones are not).
  bool layout_neutral_scalar_params = false;
  // Never computes in a reduced type (Cast, Shape, Range, quantization, random...): FP16/BF16 planning keeps
  // its float inputs and outputs float32.
  bool keeps_fp32 = false;
  // Bit i set: float input i is a parameter (Resize's roi and scales), not data; it keeps float32 when the
  // node computes in a reduced type.
  uint64_t parameter_inputs = 0;
  // May draw random numbers (random ops, Dropout in training mode): never folded into a constant nor merged
  // with an identical node.
  bool nondeterministic = false;
  // The converter always rewrites the node to another op (Upsample -> Resize, Scatter -> ScatterElements):
  // no kernel runs it, so backends need none.
  bool import_only = false;
  // INT8 kernels take this op with input 0 quantized (an activation) and input 1 a constant weight quantized per
  // output channel (Conv, MatMul, Gemm): implicit INT8 quantizes input 0 where calibration gave its range.
  bool int8_layer = false;
  // DequantizeLinear: not folded when its input is an 8-bit or 4-bit constant (a quantized weight stays quantized for the
  // INT8 layers that read it; passes/fold_dequantized_weights.cpp folds the rest after fusion).
  bool keeps_quantized_constant = false;
  // Fusable into a FusedPointwise chain: the step's formula (ops/pointwise_op.h; kNoPwOp when not fusable) and
  // arity.
  PwOp pointwise = kNoPwOp;
  int pointwise_arity = 0;

  bool is_parameter_input(size_t i) const { return i < 64 && ((parameter_inputs >> i) & 1) != 0; }
  bool fusable_pointwise() const { return pointwise != kNoPwOp; }
};

struct OpDef {
  std::string domain;  // "" (ONNX), "kiln", or a plugin's domain
  std::string name;
  int64_t since_version = 1;         // first opset version (of `domain`) this definition covers
  int64_t until_version = INT64_MAX;  // last one
  ConverterFn convert;               // may be empty: an imported node is already canonical
  ShapeFn infer;                     // required
  OpTraits traits;

  // "Relu" for ONNX ops, "kiln.FusedConv" otherwise.
  std::string QualifiedName() const { return QualifiedOpName(domain, name); }
  bool Covers(int64_t opset) const { return opset >= since_version && opset <= until_version; }

  // Builder-style setters, so an op family lists its ops one line each.
  OpDef& Since(int64_t v) { since_version = v; return *this; }
  OpDef& Until(int64_t v) { until_version = v; return *this; }
  OpDef& Convert(ConverterFn f) { convert = std::move(f); return *this; }
  OpDef& Shape(ShapeFn f) { infer = std::move(f); return *this; }
  OpDef& View() { traits.view = true; return *this; }
  OpDef& LayoutNeutral() { traits.layout_neutral = true; return *this; }
  OpDef& LayoutNeutralWithScalarParams() { traits.layout_neutral_scalar_params = true; return *this; }
  OpDef& KeepsFp32() { traits.keeps_fp32 = true; return *this; }
  OpDef& ParameterInputsFrom(size_t first) {
    traits.parameter_inputs = first >= 64 ? 0 : ~uint64_t{0} << first;
    return *this;
  }
  OpDef& Nondeterministic() { traits.nondeterministic = true; return *this; }
  OpDef& ImportOnly() { traits.import_only = true; return *this; }
  OpDef& Int8Layer() { traits.int8_layer = true; return *this; }
  OpDef& KeepsQuantizedConstant() { traits.keeps_quantized_constant = true; return *this; }
  OpDef& Pointwise(PwOp op, int arity) {
    traits.pointwise = op;
    traits.pointwise_arity = arity;
    return *this;
  }
};

// A table of OpDefs. The built-in table is filled once by the op families (src/ops/registry.cpp lists them).
class OpRegistry {
 public:
  // A new definition of (domain, name) covering every opset; the family then sets its fields.
  OpDef& Define(std::string domain, std::string name);
  OpDef& Onnx(std::string name) { return Define(kOnnxDomain, std::move(name)); }
  OpDef& Kiln(std::string name) { return Define(kKilnDomain, std::move(name)); }
  // The definition of (domain, name) covering `opset`; opset <= 0 asks for the newest definition.
  const OpDef* Find(std::string_view domain, std::string_view name, int64_t opset = 0) const;
  // Every definition, in registration order.
  std::vector<const OpDef*> All() const;
  // Checks the table: every definition has a shape function, and no two definitions of one op overlap.
  Status Validate() const;

 private:
  std::vector<std::unique_ptr<OpDef>> defs_;
};

// The built-in ops (validated once; a failure is a programming error caught by the unit tests).
const OpRegistry& BuiltinOps();

// Looks an op up among the built-in ops, then among the external (plugin) ops.
const OpDef* FindOp(std::string_view domain, std::string_view name, int64_t opset = 0);
// The definition a graph node runs under (its domain, op type and import opset).
const OpDef* FindOp(const Node& n);
// The definition (any version) of an op of a node, or nullptr; traits are read through this.
const OpTraits& TraitsOf(const Node& n);

// A DequantizeLinear (OpTraits::keeps_quantized_constant) of an 8-bit (int8, uint8, float8e4m3fn) or 4-bit
// constant: not folded into a float constant.
bool KeepsQuantizedConstant(const Node& n);

// Adds an op defined outside the library (a plugin). Refused, with a sentence, when it has no shape function
// or collides with a built-in op or another external one. Thread-safe.
Status AddExternalOp(OpDef def);
// Removes an external op (a plugin deregistered, or a test's temporary op): later lookups no longer find it, and
// its definition stays alive, so a pointer an import or build on another thread holds stays valid.
void RemoveExternalOp(std::string_view domain, std::string_view name);
// Every external op.
std::vector<OpDef> ExternalOps();

}  // namespace kiln
