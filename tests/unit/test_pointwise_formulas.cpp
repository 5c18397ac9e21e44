// Pointwise formulas (ops/pointwise_formulas.h): every formula against an independent reference in double (written
// from the ONNX definitions, not from kiln's formulas) on random data over odd shapes and float32/float64/float16/
// bfloat16, both as its op's CPU kernel and as a FusedPointwise step; the tables generated from the rows agree with
// the OpDefs and the CPU kernel table; the embedded text is the header; and the NVRTC code generator's source with
// every step compiles (where the CUDA backend is built: NVRTC needs no GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <sstream>

#include "backends/cpu/kernel.h"
#include "ops/fused_ops.h"
#include "ops/op_def.h"
#include "ops/pointwise_op.h"
#include "pointwise_formulas_text.h"
#include "testing.h"

#if defined(KILN_HAVE_CUDA)
#include "backends/cuda/fused_pointwise_codegen.h"
#include "backends/cuda/nvrtc_module.h"
#endif

namespace kiln {
namespace {

// y = f(x, y_or_a, b): unary references get the formula's a and b, binary ones the second operand (and 0).
using RefFn = std::function<double(double, double, double)>;
struct Reference {
  RefFn f;
  double lo = -4, hi = 4;  // input range (both operands of binary formulas)
  // Non-default attribute values to test as well (unary ONNX ops with attributes): attr_a, attr_b values.
  std::vector<std::pair<float, float>> attr_values = {};
};

Attribute Strings(const char* one) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = {one};
  return a;
}

double Clamp(double v, double lo, double hi) { return std::min(std::max(v, lo), hi); }
double Softplus(double x) { return std::log1p(std::exp(x)); }

// One reference per formula, by its name. A formula without one fails FormulasHaveReferences: add it here.
const std::map<std::string, Reference>& References() {
  static const double kSqrt2 = std::sqrt(2.0), kPi = std::acos(-1.0);
  static const std::map<std::string, Reference> refs = {
      {"Relu", {[](double x, double, double) { return std::max(x, 0.0); }}},
      {"Neg", {[](double x, double, double) { return -x; }}},
      {"Abs", {[](double x, double, double) { return std::fabs(x); }}},
      {"Sign", {[](double x, double, double) { return double((x > 0) - (x < 0)); }}},
      {"Erf", {[](double x, double, double) { return std::erf(x); }}},
      {"Sqrt", {[](double x, double, double) { return std::sqrt(x); }, 0.01, 9}},
      {"Reciprocal", {[](double x, double, double) { return 1 / x; }, 0.1, 5}},
      {"Exp", {[](double x, double, double) { return std::exp(x); }}},
      {"Log", {[](double x, double, double) { return std::log(x); }, 0.01, 9}},
      {"Tanh", {[](double x, double, double) { return std::tanh(x); }}},
      {"Sigmoid", {[](double x, double, double) { return 1 / (1 + std::exp(-x)); }, -12, 12}},
      {"Floor", {[](double x, double, double) { return std::floor(x); }}},
      {"Ceil", {[](double x, double, double) { return std::ceil(x); }}},
      {"Round", {[](double x, double, double) { return std::nearbyint(x); }}},  // ties to even
      {"Softplus", {[](double x, double, double) { return Softplus(x); }, -10, 10}},
      {"Mish", {[](double x, double, double) { return x * std::tanh(Softplus(x)); }, -6, 6}},
      {"HardSwish", {[](double x, double, double) { return x * Clamp(x + 3, 0, 6) / 6; }, -5, 5}},
      {"HardSigmoid", {[](double x, double a, double b) { return Clamp(a * x + b, 0, 1); }, -5, 5, {{0.3f, 0.4f}}}},
      {"LeakyRelu", {[](double x, double a, double) { return x >= 0 ? x : a * x; }, -4, 4, {{0.3f, 0}}}},
      {"Elu", {[](double x, double a, double) { return x > 0 ? x : a * (std::exp(x) - 1); }, -4, 4, {{0.7f, 0}}}},
      {"Selu",
       {[](double x, double a, double g) { return g * (x > 0 ? x : a * std::exp(x) - a); }, -4, 4, {{1.5f, 0.9f}}}},
      {"Sin", {[](double x, double, double) { return std::sin(x); }, -7, 7}},
      {"Cos", {[](double x, double, double) { return std::cos(x); }, -7, 7}},
      {"Tan", {[](double x, double, double) { return std::tan(x); }, -1.4, 1.4}},
      {"Asin", {[](double x, double, double) { return std::asin(x); }, -1, 1}},
      {"Acos", {[](double x, double, double) { return std::acos(x); }, -1, 1}},
      {"Atan", {[](double x, double, double) { return std::atan(x); }, -8, 8}},
      {"Sinh", {[](double x, double, double) { return std::sinh(x); }, -5, 5}},
      {"Cosh", {[](double x, double, double) { return std::cosh(x); }, -5, 5}},
      {"Asinh", {[](double x, double, double) { return std::asinh(x); }, -8, 8}},
      {"Acosh", {[](double x, double, double) { return std::acosh(x); }, 1, 8}},
      {"Atanh", {[](double x, double, double) { return std::atanh(x); }, -0.98, 0.98}},
      {"Softsign", {[](double x, double, double) { return x / (1 + std::fabs(x)); }, -10, 10}},
      {"Celu",
       {[](double x, double a, double) { return std::max(0.0, x) + std::min(0.0, a * (std::exp(x / a) - 1)); }, -4, 4,
        {{2.f, 0}}}},
      {"ThresholdedRelu", {[](double x, double a, double) { return x > a ? x : 0; }, -3, 3, {{0.4f, 0}}}},
      {"Swish", {[](double x, double a, double) { return x / (1 + std::exp(-a * x)); }, -10, 10, {{1.7f, 0}}}},
      {"Shrink",
       {[](double x, double l, double b) { return x < -l ? x + b : (x > l ? x - b : 0.0); }, -3, 3, {{1.f, 0.25f}}}},
      // steps of ops with their own kernels (tested as FusedPointwise steps here)
      {"Clip", {[](double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }}},
      {"Gelu", {[](double x, double, double) { return 0.5 * x * (1 + std::erf(x / kSqrt2)); }}},
      {"GeluTanh", {[](double x, double, double) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
       }}},
      {"Add", {[](double x, double y, double) { return x + y; }}},
      {"Sub", {[](double x, double y, double) { return x - y; }}},
      {"Mul", {[](double x, double y, double) { return x * y; }}},
      {"Div", {[](double x, double y, double) { return x / y; }, 0.2, 4}},
      {"Pow", {[](double x, double y, double) { return std::pow(x, y); }, 0.2, 3}},
      {"Max", {[](double x, double y, double) { return std::max(x, y); }}},
      {"Min", {[](double x, double y, double) { return std::min(x, y); }}},
      {"PRelu", {[](double x, double y, double) { return x < 0 ? x * y : x; }}},
  };
  return refs;
}

const std::vector<std::vector<int64_t>>& OddShapes() {
  static const std::vector<std::vector<int64_t>> s = {{1}, {7}, {33}, {3, 517}, {2, 3, 5}, {2, 1, 3, 4, 5}, {1031},
                                                       {2, 0}};
  return s;
}

// Tolerance of a result of `t` against the reference at the same (rounded) input: |got - want| <= tol * (1 + |want|).
double Tolerance(DataType t) {
  switch (t) {
    case DataType::kFloat64: return 1e-12;
    case DataType::kFloat32: return 1e-5;
    case DataType::kFloat16: return 2e-3;
    default: return 1.6e-2;  // bfloat16
  }
}

// Checks y = ref(x, y_or_a, b) elementwise; `second` (binary formulas) is broadcast like the kernels do.
::testing::AssertionResult Matches(const Tensor& got, const Tensor& x, const Tensor* second, double a, double b,
                                   const RefFn& ref) {
  if (got.shape() != x.shape() || got.dtype() != x.dtype())
    return ::testing::AssertionFailure() << "got " << got.Describe() << " for " << x.Describe();
  const double tol = Tolerance(x.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double xv = x.GetAsDouble(i);
    const double want = second ? ref(xv, testing::BroadcastAt(*second, testing::Unravel(i, x.shape())), 0)
                               : ref(xv, a, b);
    const double v = got.GetAsDouble(i);
    if (std::isnan(want) ? !std::isnan(v) : !(std::fabs(v - want) <= tol * (1 + std::fabs(want))))
      return ::testing::AssertionFailure() << "element " << i << ": x = " << xv << ", got " << v << ", want " << want
                                           << " (" << DataTypeName(x.dtype()) << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(PointwiseFormulas, FormulasHaveReferences) {
  for (const PwOpInfo& p : kPwOps)
    EXPECT_TRUE(References().count(p.name)) << p.name << " has no reference in this test";
}

// The CPU kernel of every ONNX unary formula op, with default and other attribute values.
TEST(PointwiseFormulas, CpuKernelsMatchReference) {
  uint32_t seed = 1;
  for (const PwOpInfo& p : kPwOps) {
    if (!p.onnx_unary) continue;
    const Reference& ref = References().at(p.name);
    std::vector<std::optional<std::pair<float, float>>> attrs = {std::nullopt};  // nullopt: the defaults
    for (const auto& v : ref.attr_values) attrs.push_back(v);
    for (const auto& av : attrs)
      for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16})
        for (const auto& shape : OddShapes()) {
          testing::OneNode n(p.name, 1, 1, 21);
          double a = p.default_a, b = p.default_b;
          if (av) {
            a = av->first;
            b = av->second;
            if (*p.attr_a) n.n->attrs[p.attr_a] = Attribute::Float(av->first);
            if (*p.attr_b) n.n->attrs[p.attr_b] = Attribute::Float(av->second);
          }
          // a and b as the kernel sees them: float attributes
          a = static_cast<float>(a);
          b = static_cast<float>(b);
          Tensor x = testing::Random(shape, seed++, ref.lo, ref.hi, t);
          auto r = n.Run({&x});
          ASSERT_TRUE(r.ok()) << p.name << ": " << r.status().ToString();
          EXPECT_TRUE(Matches((*r)[0], x, nullptr, a, b, ref.f))
              << p.name << " " << ShapeToString(shape) << (av ? " (attributes set)" : "");
        }
  }
}

// Every formula as a one-step FusedPointwise program (computed in float for float32/float16/bfloat16).
TEST(PointwiseFormulas, FusedStepsMatchReference) {
  uint32_t seed = 5000;
  for (const PwOpInfo& p : kPwOps) {
    const Reference& ref = References().at(p.name);
    // Clip's a/b are its bounds; the others' a/b their attributes' defaults or the first tested values.
    float a = p.default_a, b = p.default_b;
    if (!ref.attr_values.empty()) std::tie(a, b) = ref.attr_values[0];
    if (std::string(p.name) == "Clip") a = -0.7f, b = 1.3f;
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16})
      for (const auto& shape : OddShapes()) {
        testing::OneNode n("FusedPointwise", p.arity, 1, 1);
        n.n->domain = kKilnDomain;
        n.n->attrs["kiln_ops"] = Strings(p.name);
        n.n->attrs["kiln_args"] = Attribute::Ints({0, p.arity == 2 ? 1 : 0});
        n.n->attrs["kiln_alpha"] = Attribute::Floats({a});
        n.n->attrs["kiln_beta"] = Attribute::Floats({b});
        Tensor x = testing::Random(shape, seed++, ref.lo, ref.hi, t);
        // the second operand broadcasts along the last axis
        const std::vector<int64_t> yshape = shape.empty() ? shape : std::vector<int64_t>{shape.back()};
        Tensor y = testing::Random(yshape, seed++, ref.lo, ref.hi, t);
        std::vector<const Tensor*> in = {&x};
        if (p.arity == 2) in.push_back(&y);
        auto r = n.Run(in);
        ASSERT_TRUE(r.ok()) << p.name << ": " << r.status().ToString();
        EXPECT_TRUE(Matches((*r)[0], x, p.arity == 2 ? &y : nullptr, a, b, ref.f))
            << p.name << " " << ShapeToString(shape);
      }
  }
}

// NaN in, NaN out, through every unary formula but the ones that map NaN to a number by definition.
TEST(PointwiseFormulas, NaNPropagates) {
  for (const PwOpInfo& p : kPwOps) {
    if (p.arity != 1) continue;
    Tensor x = Tensor::FromFloat({std::nanf(""), 1.f}, {2});
    testing::OneNode n("FusedPointwise", 1, 1, 1);
    n.n->domain = kKilnDomain;
    n.n->attrs["kiln_ops"] = Strings(p.name);
    n.n->attrs["kiln_args"] = Attribute::Ints({0, 0});
    n.n->attrs["kiln_alpha"] = Attribute::Floats({std::string(p.name) == "Clip" ? -1.f : p.default_a});
    n.n->attrs["kiln_beta"] = Attribute::Floats({std::string(p.name) == "Clip" ? 1.f : p.default_b});
    auto r = n.Run({&x});
    ASSERT_TRUE(r.ok()) << p.name << ": " << r.status().ToString();
    // ThresholdedRelu is x > alpha ? x : 0 by definition (NaN > alpha is false), Shrink 0 where neither
    // x < -lambd nor x > lambd
    const std::string name = p.name;
    if (name != "ThresholdedRelu" && name != "Shrink") EXPECT_TRUE(std::isnan((*r)[0].GetAsDouble(0))) << p.name;
    else EXPECT_EQ((*r)[0].GetAsDouble(0), 0.0) << p.name;
  }
}

// Shrink's integer path: computed in double, truncated toward zero, saturated to the type's range.
TEST(PointwiseFormulas, ShrinkIntegers) {
  auto run = [](DataType t, const std::vector<double>& x, float lambd, float bias) -> Tensor {
    testing::OneNode n("Shrink", 1, 1, 21);
    n.n->attrs["lambd"] = Attribute::Float(lambd);
    n.n->attrs["bias"] = Attribute::Float(bias);
    Tensor in(t, {static_cast<int64_t>(x.size())});
    for (size_t i = 0; i < x.size(); ++i) in.SetFromDouble(static_cast<int64_t>(i), x[i]);
    auto r = n.Run({&in});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)[0] : Tensor();
  };
  auto values = [](const Tensor& t) {
    std::vector<double> v;
    for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetAsDouble(i));
    return v;
  };
  const Tensor a = run(DataType::kInt8, {-5, -1, 0, 1, 5, 127, -128}, 1.5f, 1.5f);
  EXPECT_EQ(a.dtype(), DataType::kInt8);
  EXPECT_EQ(values(a), (std::vector<double>{-3, 0, 0, 0, 3, 125, -126}));
  // Past the type's range: saturated.
  EXPECT_EQ(values(run(DataType::kInt8, {100, -100, 1}, 0.5f, -100.f)), (std::vector<double>{127, -128, 101}));
  EXPECT_EQ(values(run(DataType::kUInt8, {0, 1, 2, 250}, 1.f, 3.f)), (std::vector<double>{0, 0, 0, 247}));
  EXPECT_EQ(values(run(DataType::kInt64, {-7, 7, 2}, 2.f, 0.5f)), (std::vector<double>{-6, 6, 0}));
}

// The tables generated from the rows agree with the OpDefs, the step names and the CPU kernel table.
TEST(PointwiseFormulas, GeneratedTablesAgree) {
  int unary = 0;
  for (int i = 0; i < kNumPwOps; ++i) {
    const PwOpInfo& p = kPwOps[i];
    EXPECT_EQ(static_cast<int>(p.op), i) << p.name;
    EXPECT_EQ(&PwInfo(p.op), &p);
    EXPECT_EQ(PwIsBinary(p.op), p.arity == 2) << p.name;
    EXPECT_EQ(fused::FindPointwiseOp(p.name), &p) << p.name;
    unary += p.arity == 1;
    if (!p.onnx_unary) continue;
    const OpDef* d = FindOp(kOnnxDomain, p.name);
    ASSERT_NE(d, nullptr) << p.name;
    EXPECT_EQ(d->since_version, p.since) << p.name;
    EXPECT_EQ(d->traits.pointwise, p.op) << p.name;
    EXPECT_EQ(d->traits.pointwise_arity, 1) << p.name;
    EXPECT_TRUE(d->traits.layout_neutral) << p.name;
    EXPECT_NE(cpu::Kernels().Find(p.name), nullptr) << p.name;
  }
  EXPECT_EQ(unary, kNumUnaryPwOps);
  EXPECT_EQ(fused::FindPointwiseOp("NoSuchOp"), nullptr);
  // The ops with their own OpDefs carry the formula of their step.
  EXPECT_EQ(FindOp(kOnnxDomain, "Gelu")->traits.pointwise, PwOp::kGelu);
  EXPECT_EQ(FindOp(kOnnxDomain, "Clip")->traits.pointwise, PwOp::kClip);
  EXPECT_EQ(FindOp(kOnnxDomain, "Add")->traits.pointwise, PwOp::kAdd);
  EXPECT_EQ(FindOp(kOnnxDomain, "Max")->traits.pointwise_arity, 2);
}

TEST(PointwiseFormulas, EmbeddedTextIsTheHeader) {
  std::ifstream f(std::string(KILN_SOURCE_DIR) + "/src/ops/pointwise_formulas.h");
  ASSERT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  const std::string pragma = "#pragma once\n";
  text.erase(text.find(pragma), pragma.size());
  EXPECT_EQ(std::string(kPointwiseFormulasText), text);
}

#if defined(KILN_HAVE_CUDA)
// The generated source of a program with every step (each dtype) compiles with NVRTC for sm_90: the formula
// header compiles as NVRTC sees it. No GPU needed.
TEST(PointwiseFormulas, NvrtcCompilesEveryStep) {
  fused::PwProgram prog;
  for (int i = 0; i < kNumPwOps; ++i) {
    const PwOp op = static_cast<PwOp>(i);
    const int64_t prev = i == 0 ? 0 : -i;
    prog.ops.push_back(op);
    prog.arity.push_back(PwInfo(op).arity);
    prog.args.insert(prog.args.end(), {prev, PwIsBinary(op) ? 1 : prev});
    prog.alpha.push_back(0.5f);
    prog.beta.push_back(1.5f);
  }
  for (int dtype : {1, 10, 16}) {
    cuda::FpwCodegenOptions opts;
    opts.dtype = dtype;
    opts.sm = 90;
    opts.operands = {cuda::FpwKind::kFull, cuda::FpwKind::kBroadcast};
    const std::string src = cuda::FusedPointwiseSource(prog, opts);
    auto image = cuda::CompileNvrtcImage("test", src, 90);
    EXPECT_TRUE(image.ok()) << image.status().ToString();
  }
}
#endif

}  // namespace
}  // namespace kiln
