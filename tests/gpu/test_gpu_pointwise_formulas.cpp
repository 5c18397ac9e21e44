// Differential tests of the pointwise formulas (ops/pointwise_formulas.h) on the GPU against the CPU reference, for
// every row of the formula lists, so that a new formula is covered by adding its input range below: the CUDA layer
// of every ONNX unary formula op (float32/float16/bfloat16/float64, odd shapes, default and other attribute
// values), and every formula as a FusedPointwise step under both tactics ("nvrtc": the generated source, which
// starts with the formula header's text; "interp": the interpreter kernel).
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_util.h"
#include "ops/pointwise_op.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;
constexpr DataType kF32 = DataType::kFloat32, kF16 = DataType::kFloat16, kBF16 = DataType::kBFloat16;

struct Case {
  double lo = -4, hi = 4;  // input range (both operands of binary formulas)
  std::vector<std::pair<float, float>> attr_values = {};  // non-default attribute values (attr_a, attr_b)
};

// The input range of every formula; a formula missing here fails EveryFormulaHasACase.
const std::map<std::string, Case>& Cases() {
  static const std::map<std::string, Case> c = {
      {"Relu", {}},
      {"Neg", {}},
      {"Abs", {}},
      {"Sign", {}},
      {"Erf", {}},
      {"Sqrt", {0.01, 9}},
      {"Reciprocal", {0.1, 5}},
      {"Exp", {}},
      {"Log", {0.01, 9}},
      {"Tanh", {}},
      {"Sigmoid", {-12, 12}},
      {"Floor", {}},
      {"Ceil", {}},
      {"Round", {}},
      {"Softplus", {-10, 10}},
      {"Mish", {-6, 6}},
      {"HardSwish", {-5, 5}},
      {"HardSigmoid", {-5, 5, {{0.3f, 0.4f}}}},
      {"LeakyRelu", {-4, 4, {{0.3f, 0}}}},
      {"Elu", {-4, 4, {{0.7f, 0}}}},
      {"Selu", {-4, 4, {{1.5f, 0.9f}}}},
      {"Sin", {-7, 7}},
      {"Cos", {-7, 7}},
      {"Tan", {-1.4, 1.4}},
      {"Asin", {-1, 1}},
      {"Acos", {-1, 1}},
      {"Atan", {-8, 8}},
      {"Sinh", {-5, 5}},
      {"Cosh", {-5, 5}},
      {"Asinh", {-8, 8}},
      {"Acosh", {1, 8}},
      {"Atanh", {-0.98, 0.98}},
      {"Softsign", {-10, 10}},
      {"Celu", {-4, 4, {{2.f, 0}}}},
      {"ThresholdedRelu", {-3, 3, {{0.4f, 0}}}},
      {"Swish", {-10, 10, {{1.7f, 0}}}},
      {"Shrink", {-3, 3, {{1.f, 0.25f}}}},
      // steps of ops with kernels of their own
      {"Clip", {}},
      {"Gelu", {}},
      {"GeluTanh", {}},
      {"Add", {}},
      {"Sub", {}},
      {"Mul", {}},
      {"Div", {0.2, 4}},
      {"Pow", {0.2, 3}},
      {"Max", {}},
      {"Min", {}},
      {"PRelu", {}},
  };
  return c;
}

const std::vector<Shape>& OddShapes() {
  static const std::vector<Shape> s = {{1}, {7}, {33}, {3, 517}, {2, 3, 5}, {2, 1, 3, 4, 5}, {1031}};
  return s;
}

// float32 tight; float16/bfloat16 against a float32 reference with a tolerance of their precision.
::testing::AssertionResult CheckFloat(OneNode node, DataType t) {
  if (t == kF32) return node.MatchesCpu(1e-5, 1e-5);
  const double tol = t == kF16 ? 2e-3 : 1.6e-2;
  return node.ReferenceInFloat32().MatchesCpu(tol, tol);
}

Attribute Strings(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = std::move(v);
  return a;
}

TEST(GpuPointwiseFormulas, EveryFormulaHasACase) {
  for (const PwOpInfo& p : kPwOps) EXPECT_TRUE(Cases().count(p.name)) << p.name << " has no case in this test";
}

TEST(GpuPointwiseFormulas, UnaryOpLayers) {
  uint32_t seed = 1;
  for (const PwOpInfo& p : kPwOps) {
    if (!p.onnx_unary) continue;
    const Case& c = Cases().at(p.name);
    std::vector<std::optional<std::pair<float, float>>> attrs = {std::nullopt};
    for (const auto& v : c.attr_values) attrs.push_back(v);
    for (const auto& av : attrs)
      for (DataType t : {kF32, kF16, kBF16})
        for (const Shape& s : OddShapes()) {
          OneNode n(p.name);
          n.Input(Random(t, s, seed++, c.lo, c.hi));
          if (av && *p.attr_a) n.Attr(p.attr_a, Attribute::Float(av->first));
          if (av && *p.attr_b) n.Attr(p.attr_b, Attribute::Float(av->second));
          EXPECT_TRUE(CheckFloat(n, t)) << p.name << " " << DataTypeName(t) << " " << ShapeToString(s)
                                        << (av ? " (attributes set)" : "");
        }
  }
}

// The same layers on float64, computed in double like the CPU reference: 1e-12 relative (and absolute, for
// results near zero); Gelu with both approximations.
TEST(GpuPointwiseFormulas, UnaryOpLayersFloat64) {
  const DataType f64 = DataType::kFloat64;
  uint32_t seed = 5000;
  for (const PwOpInfo& p : kPwOps) {
    if (!p.onnx_unary) continue;
    const Case& c = Cases().at(p.name);
    std::vector<std::optional<std::pair<float, float>>> attrs = {std::nullopt};
    for (const auto& v : c.attr_values) attrs.push_back(v);
    for (const auto& av : attrs)
      for (const Shape& s : OddShapes()) {
        OneNode n(p.name);
        n.Input(Random(f64, s, seed++, c.lo, c.hi));
        if (av && *p.attr_a) n.Attr(p.attr_a, Attribute::Float(av->first));
        if (av && *p.attr_b) n.Attr(p.attr_b, Attribute::Float(av->second));
        EXPECT_TRUE(n.MatchesCpu(1e-12, 1e-12)) << p.name << " float64 " << ShapeToString(s)
                                                << (av ? " (attributes set)" : "");
      }
  }
  for (const char* approximate : {"none", "tanh"})
    for (const Shape& s : OddShapes())
      EXPECT_TRUE(OneNode("Gelu")
                      .Input(Random(f64, s, seed++, -4, 4))
                      .Attr("approximate", Attribute::String(approximate))
                      .MatchesCpu(1e-12, 1e-12))
          << "Gelu " << approximate << " float64 " << ShapeToString(s);
}

// y = Add(f(in0[, in1]), in1) with in1 broadcast per channel or along the last axis, both tactics.
TEST(GpuPointwiseFormulas, FusedStepsBothTactics) {
  const std::vector<std::pair<Shape, Shape>> patterns = {
      {{2, 16, 4, 6}, {1, 16, 1, 1}}, {{2, 3, 5, 7}, {3, 1, 1}}, {{5, 24}, {24}}, {{6, 175}, {175}}, {{1031}, {1}}};
  uint32_t seed = 7000;
  for (const std::string tactic : {"nvrtc", "interp"})
    for (const PwOpInfo& p : kPwOps) {
      const Case& c = Cases().at(p.name);
      float a = p.default_a, b = p.default_b;
      if (!c.attr_values.empty()) std::tie(a, b) = c.attr_values[0];
      if (std::string(p.name) == "Clip") a = -0.3f, b = 0.6f;
      for (DataType t : {kF32, kF16, kBF16})
        for (const auto& [s0, s1] : patterns) {
          OneNode n("FusedPointwise", "kiln");
          n.Input(Random(t, s0, seed++, c.lo, c.hi)).Input(Random(t, s1, seed++, c.lo, c.hi));
          n.Attr("kiln_ops", Strings({p.name, "Add"}))
              .Attr("kiln_args", Attribute::Ints({0, p.arity == 2 ? 1 : 0, -1, 1}))
              .Attr("kiln_alpha", Attribute::Floats({a, 0}))
              .Attr("kiln_beta", Attribute::Floats({b, 0}))
              .Tactic(tactic);
          EXPECT_TRUE(CheckFloat(n, t)) << tactic << " " << p.name << " " << DataTypeName(t) << " "
                                        << ShapeToString(s0) << " " << ShapeToString(s1);
        }
    }
}

}  // namespace
}  // namespace kiln::gputest
