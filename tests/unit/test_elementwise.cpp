// Elementwise family: kernels vs independent naive computations (multi-index broadcasting in double) on random
// data with odd shapes and several dtypes; float8 conversions; Q/DQ per tensor / per axis / blocked; shape
// inference incl. symbolic broadcasting and sym_value propagation; the Clip converter; error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "backends/cpu/elementwise_internal.h"
#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "ops/op_def.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

Tensor Rand(std::vector<int64_t> shape, uint32_t seed, DataType dt = DataType::kFloat32, double lo = -3,
            double hi = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(rng);
    if (dt == DataType::kBool) v = v > (lo + hi) / 2;
    else if (!IsFloatType(dt)) v = std::round(v);
    t.SetFromDouble(i, v);
  }
  return t;
}

struct OneNode : testing::OneNode {
  OneNode(const std::string& op, size_t ins, int64_t opset = 21) : testing::OneNode(op, ins, 1, opset) {}
};

using testing::Unravel;

using NaryRef = std::function<double(const std::vector<double>&)>;

// Checks out == ref(inputs...) elementwise under broadcasting, with a relative tolerance.
void ExpectNary(const Tensor& out, const std::vector<const Tensor*>& ins, const NaryRef& ref, double tol) {
  for (int64_t i = 0; i < out.numel(); ++i) {
    const auto idx = Unravel(i, out.shape());
    std::vector<double> v;
    for (const Tensor* t : ins) v.push_back(testing::BroadcastAt(*t, idx));
    const double want = ref(v), got = out.GetAsDouble(i);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i;
      continue;
    }
    ASSERT_NEAR(got, want, tol * (1 + std::fabs(want))) << "element " << i << " of " << out.Describe();
  }
}

struct BinCase {
  std::string op;
  NaryRef ref;
};

TEST(Elementwise, BinaryBroadcastMatchesNaive) {
  const std::vector<BinCase> cases = {
      {"Add", [](auto& v) { return v[0] + v[1]; }},
      {"Sub", [](auto& v) { return v[0] - v[1]; }},
      {"Mul", [](auto& v) { return v[0] * v[1]; }},
      {"Div", [](auto& v) { return v[0] / v[1]; }},
      {"PRelu", [](auto& v) { return v[0] < 0 ? v[0] * v[1] : v[0]; }},
  };
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{7, 5}, {7, 5}},       {{3, 1, 5}, {4, 1}},     {{}, {2, 3}},       {{2, 3, 5, 7}, {3, 1, 1}},
      {{1}, {9}},             {{5, 1, 3}, {5, 4, 1}},  {{64, 1000}, {1000}}, {{3, 300, 257}, {3, 300, 257}},
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    for (const auto& [sa, sb] : shapes) {
      OneNode t(c.op, 2);
      Tensor a = Rand(sa, seed++), b = Rand(sb, seed++, DataType::kFloat32, 0.5, 3);
      auto r = t.Run({&a, &b});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ExpectNary((*r)[0], {&a, &b}, c.ref, 1e-6);
    }
  }
}

TEST(Elementwise, IntegerDivTruncatesAndNeverTraps) {
  OneNode t("Div", 2);
  Tensor a = Tensor::FromInt64({7, -7, 7, -7, 5, std::numeric_limits<int64_t>::min()}, {6});
  Tensor b = Tensor::FromInt64({2, 2, -2, -2, 0, -1}, {6});
  auto r = t.Run({&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{3, -3, -3, 3, 0, std::numeric_limits<int64_t>::min()}));
}

// BitShift (ONNX 28's rule): an arithmetic right shift for signed values, a left shift dropping the bits shifted
// out, and a shift by a negative amount or by the width or more gives -1 (a right shift of a negative value) or 0.
// The bitwise ops on mixed signs and broadcasting.
TEST(Elementwise, BitShiftAndBitwiseOps) {
  auto i8 = [](std::vector<double> v) {
    Tensor t(DataType::kInt8, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.SetFromDouble(static_cast<int64_t>(i), v[i]);
    return t;
  };
  Tensor x = i8({-16, 16, -1, 64, -128, 5, -5}), y = i8({2, 2, 7, 1, -1, 8, 9});
  for (const char* dir : {"LEFT", "RIGHT"}) {
    SCOPED_TRACE(dir);
    OneNode t("BitShift", 2, 28);
    t.n->attrs["direction"] = Attribute::String(dir);
    auto r = t.Run({&x, &y});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::vector<double> want = std::string(dir) == "LEFT" ? std::vector<double>{-64, 64, -128, -128, 0, 0, 0}
                                                                 : std::vector<double>{-4, 4, -1, 32, -1, 0, -1};
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ((*r)[0].GetAsDouble(i), want[i]) << "element " << i;
  }
  OneNode bad("BitShift", 2, 28);
  bad.n->attrs["direction"] = Attribute::String("UP");
  auto r = bad.Run({&x, &y});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("LEFT or RIGHT"), std::string::npos);

  Tensor a = Tensor::FromInt64({12, -1, 0x0f0f}, {3}), b = Tensor::FromInt64({10}, {1});
  const std::map<std::string, std::vector<int64_t>> want = {
      {"BitwiseAnd", {8, 10, 10}}, {"BitwiseOr", {14, -1, 0x0f0f}}, {"BitwiseXor", {6, -11, 0x0f05}}};
  for (const auto& [op, w] : want) {
    OneNode t(op, 2, 18);
    auto out = t.Run({&a, &b});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0].ToInt64Vector(), w) << op;
  }
  OneNode n("BitwiseNot", 1, 18);
  auto out = n.Run({&a});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].ToInt64Vector(), (std::vector<int64_t>{-13, 0, ~int64_t{0x0f0f}}));
  Tensor f = Tensor::FromFloat({1.f}, {1});
  OneNode fl("BitwiseAnd", 2, 18);
  EXPECT_FALSE(fl.Run({&f, &f}).ok());
}

TEST(Elementwise, DtypesHalfBf16IntsMatchNaive) {
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64, DataType::kInt8,
                      DataType::kUInt8, DataType::kInt32, DataType::kInt64}) {
    OneNode t("Mul", 2);
    Tensor a = Rand({3, 17}, 5, dt, 0, 9), b = Rand({17}, 6, dt, 0, 9);
    auto r = t.Run({&a, &b});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)[0].dtype(), dt);
    const double tol = dt == DataType::kBFloat16 ? 1e-2 : dt == DataType::kFloat16 ? 1e-3 : 0;
    ExpectNary((*r)[0], {&a, &b}, [dt](auto& v) {
      double p = v[0] * v[1];
      if (dt == DataType::kInt8) p = static_cast<int8_t>(static_cast<int64_t>(p));
      if (dt == DataType::kUInt8) p = static_cast<uint8_t>(static_cast<int64_t>(p));
      return p;
    }, tol);
  }
}

TEST(Elementwise, UnaryAndActivationsMatchNaive) {
  const double kSqrt2 = std::sqrt(2.0), kPi = std::acos(-1.0);
  auto softplus = [](double x) { return std::log(1 + std::exp(x)); };
  const std::vector<std::tuple<std::string, std::map<std::string, Attribute>, NaryRef>> cases = {
      {"Exp", {}, [](auto& v) { return std::exp(v[0]); }},
      {"Abs", {}, [](auto& v) { return std::fabs(v[0]); }},
      {"Neg", {}, [](auto& v) { return -v[0]; }},
      {"Sign", {}, [](auto& v) { return double((v[0] > 0) - (v[0] < 0)); }},
      {"Floor", {}, [](auto& v) { return std::floor(v[0]); }},
      {"Ceil", {}, [](auto& v) { return std::ceil(v[0]); }},
      {"Round", {}, [](auto& v) { double r = std::round(v[0]); return std::fabs(v[0] - std::trunc(v[0])) == 0.5 ? 2 * std::round(v[0] / 2) : r; }},
      {"Erf", {}, [](auto& v) { return std::erf(v[0]); }},
      {"Tanh", {}, [](auto& v) { return std::tanh(v[0]); }},
      {"Sigmoid", {}, [](auto& v) { return 1 / (1 + std::exp(-v[0])); }},
      {"Relu", {}, [](auto& v) { return std::max(v[0], 0.0); }},
      {"LeakyRelu", {{"alpha", Attribute::Float(0.3f)}}, [](auto& v) { return v[0] < 0 ? 0.3f * v[0] : v[0]; }},
      {"Elu", {{"alpha", Attribute::Float(0.7f)}}, [](auto& v) { return v[0] < 0 ? 0.7f * (std::exp(v[0]) - 1) : v[0]; }},
      {"Selu", {}, [](auto& v) { return 1.0507009873554805 * (v[0] > 0 ? v[0] : 1.6732632423543772 * (std::exp(v[0]) - 1)); }},
      {"HardSigmoid", {}, [](auto& v) { return std::clamp(0.2 * v[0] + 0.5, 0.0, 1.0); }},
      {"HardSwish", {}, [](auto& v) { return v[0] * std::clamp(v[0] / 6 + 0.5, 0.0, 1.0); }},
      {"Softplus", {}, [&](auto& v) { return softplus(v[0]); }},
      {"Mish", {}, [&](auto& v) { return v[0] * std::tanh(softplus(v[0])); }},
      {"Gelu", {}, [&](auto& v) { return 0.5 * v[0] * (1 + std::erf(v[0] / kSqrt2)); }},
      {"Gelu", {{"approximate", Attribute::String("tanh")}}, [&](auto& v) {
         return 0.5 * v[0] * (1 + std::tanh(std::sqrt(2 / kPi) * (v[0] + 0.044715 * std::pow(v[0], 3)))); }},
  };
  uint32_t seed = 100;
  for (const auto& [op, attrs, ref] : cases) {
    OneNode t(op, 1);
    t.n->attrs = attrs;
    Tensor x = Rand({3, 5, 67}, seed++);
    x.SetFromDouble(0, 2.5);  // a rounding tie
    x.SetFromDouble(1, -0.5);
    auto r = t.Run({&x});
    ASSERT_TRUE(r.ok()) << op << ": " << r.status().ToString();
    ExpectNary((*r)[0], {&x}, ref, 2e-6);
  }
}

TEST(Elementwise, SqrtLogReciprocalOnPositive) {
  for (auto [op, f] : std::vector<std::pair<std::string, double (*)(double)>>{
           {"Sqrt", [](double x) { return std::sqrt(x); }},
           {"Log", [](double x) { return std::log(x); }},
           {"Reciprocal", [](double x) { return 1 / x; }}}) {
    OneNode t(op, 1);
    Tensor x = Rand({1001}, 7, DataType::kFloat64, 0.1, 50);
    auto r = t.Run({&x});
    ASSERT_TRUE(r.ok());
    ExpectNary((*r)[0], {&x}, [fn = f](auto& v) { return fn(v[0]); }, 1e-12);
  }
}

TEST(Elementwise, PowMixedTypes) {
  OneNode t("Pow", 2);
  Tensor a = Rand({4, 9}, 8, DataType::kFloat32, 0.1, 3), b = Rand({9}, 9, DataType::kFloat32);
  auto r = t.Run({&a, &b});
  ASSERT_TRUE(r.ok());
  ExpectNary((*r)[0], {&a, &b}, [](auto& v) { return std::pow(v[0], v[1]); }, 1e-5);
  Tensor two = Tensor::Scalar(DataType::kFloat32, 2.0);
  r = t.Run({&a, &two});
  ASSERT_TRUE(r.ok());
  ExpectNary((*r)[0], {&a}, [](auto& v) { return v[0] * v[0]; }, 1e-6);
  Tensor ia = Tensor::FromInt64({2, -3, 5, 1}, {4}), ib = Tensor::FromInt64({10, 3, 0, -2}, {4});
  r = t.Run({&ia, &ib});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{1024, -27, 1, 1}));
}

TEST(Elementwise, CompareLogicWhere) {
  Tensor a = Rand({2, 3, 11}, 10, DataType::kInt32), b = Rand({3, 1}, 11, DataType::kInt32);
  for (auto [op, f] : std::vector<std::pair<std::string, std::function<bool(double, double)>>>{
           {"Equal", std::equal_to<double>()}, {"Less", std::less<double>()}, {"Greater", std::greater<double>()},
           {"LessOrEqual", std::less_equal<double>()}, {"GreaterOrEqual", std::greater_equal<double>()}}) {
    OneNode t(op, 2);
    auto r = t.Run({&a, &b});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)[0].dtype(), DataType::kBool);
    ExpectNary((*r)[0], {&a, &b}, [fn = f](auto& v) { return double(fn(v[0], v[1])); }, 0);
  }
  Tensor p = Rand({5, 1, 7}, 12, DataType::kBool), q = Rand({3, 7}, 13, DataType::kBool);
  for (auto [op, f] : std::vector<std::pair<std::string, std::function<bool(bool, bool)>>>{
           {"And", std::logical_and<bool>()}, {"Or", std::logical_or<bool>()},
           {"Xor", std::not_equal_to<bool>()}}) {
    OneNode t(op, 2);
    auto r = t.Run({&p, &q});
    ASSERT_TRUE(r.ok());
    ExpectNary((*r)[0], {&p, &q}, [fn = f](auto& v) { return double(fn(v[0] != 0, v[1] != 0)); }, 0);
  }
  OneNode w("Where", 3);
  Tensor x = Rand({1, 3, 7}, 14), y = Rand({5, 1, 1}, 15);
  auto r = w.Run({&p, &x, &y});
  ASSERT_TRUE(r.ok());
  ExpectNary((*r)[0], {&p, &x, &y}, [](auto& v) { return v[0] != 0 ? v[1] : v[2]; }, 0);
}

TEST(Elementwise, VariadicMinMaxSumMean) {
  Tensor a = Rand({4, 1, 6}, 20), b = Rand({3, 1}, 21), c = Rand({6}, 22);
  const std::vector<std::pair<std::string, NaryRef>> cases = {
      {"Min", [](auto& v) { return std::min({v[0], v[1], v[2]}); }},
      {"Max", [](auto& v) { return std::max({v[0], v[1], v[2]}); }},
      {"Sum", [](auto& v) { return v[0] + v[1] + v[2]; }},
      {"Mean", [](auto& v) { return (v[0] + v[1] + v[2]) / 3; }}};
  for (const auto& [op, ref] : cases) {
    OneNode t(op, 3);
    auto r = t.Run({&a, &b, &c});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{4, 3, 6}));
    ExpectNary((*r)[0], {&a, &b, &c}, ref, 1e-6);
  }
  OneNode one("Max", 1);
  auto r = one.Run({&b});
  ASSERT_TRUE(r.ok());
  ExpectNary((*r)[0], {&b}, [](auto& v) { return v[0]; }, 0);
}

TEST(Elementwise, ClipWithAndWithoutBounds) {
  Tensor x = Rand({5, 13}, 30);
  Tensor lo = Tensor::Scalar(DataType::kFloat32, -1), hi = Tensor::Scalar(DataType::kFloat32, 0.5);
  OneNode t("Clip", 3);
  auto r = t.Run({&x, &lo, &hi});
  ASSERT_TRUE(r.ok());
  ExpectNary((*r)[0], {&x}, [](auto& v) { return std::clamp(v[0], -1.0, 0.5); }, 1e-7);
  r = t.Run({&x, nullptr, &hi});
  ASSERT_TRUE(r.ok());
  ExpectNary((*r)[0], {&x}, [](auto& v) { return std::min(v[0], 0.5); }, 1e-7);
  Tensor xi = Rand({9}, 31, DataType::kInt8, -100, 100), li = Tensor::Scalar(DataType::kInt8, -5);
  r = t.Run({&xi, &li});
  ASSERT_TRUE(r.ok());
  ExpectNary((*r)[0], {&xi}, [](auto& v) { return std::max(v[0], -5.0); }, 0);
}

TEST(Elementwise, IsNaNIsInfNot) {
  Tensor x = Tensor::FromFloat({1.f, NAN, INFINITY, -INFINITY, 0.f}, {5});
  OneNode nan("IsNaN", 1);
  auto r = nan.Run({&x});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{0, 1, 0, 0, 0}));
  OneNode inf("IsInf", 1);
  inf.n->attrs["detect_negative"] = Attribute::Int(0);
  r = inf.Run({&x});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{0, 0, 1, 0, 0}));
  OneNode n("Not", 1);
  Tensor b = CastTensor(Tensor::FromInt64({1, 0, 1}), DataType::kBool);
  r = n.Run({&b});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{0, 1, 0}));
}

TEST(Elementwise, CastBetweenTypes) {
  Tensor x = Tensor::FromFloat({1.7f, -2.5f, 0.f, 300.f, 65504.f, 1e-8f}, {6});
  auto cast = [&](const Tensor& in, DataType to, int64_t saturate = 1) {
    OneNode t("Cast", 1);
    t.n->attrs["to"] = Attribute::Int(static_cast<int64_t>(to));
    t.n->attrs["saturate"] = Attribute::Int(saturate);
    auto r = t.Run({&in});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)[0] : Tensor();
  };
  EXPECT_EQ(cast(x, DataType::kInt32).ToInt64Vector(), (std::vector<int64_t>{1, -2, 0, 300, 65504, 0}));
  EXPECT_EQ(cast(x, DataType::kBool).ToInt64Vector(), (std::vector<int64_t>{1, 1, 0, 1, 1, 1}));
  Tensor h = cast(x, DataType::kFloat16);
  EXPECT_EQ(h.GetAsDouble(4), 65504.0);
  EXPECT_EQ(cast(h, DataType::kFloat32).GetAsDouble(1), -2.5);
  Tensor f8 = cast(x, DataType::kFloat8E4M3FN);
  EXPECT_EQ(f8.data<uint8_t>()[3], 0x79);  // 300 -> 288 (spacing 32 above 256)
  EXPECT_EQ(f8.data<uint8_t>()[4], 0x7e);  // saturates to 448
  EXPECT_EQ(cast(x, DataType::kFloat8E4M3FN, 0).data<uint8_t>()[4], 0x7f);  // NaN without saturation
  EXPECT_EQ(cast(f8, DataType::kFloat32).GetAsDouble(0), 1.75);
}

// Every finite float8 code survives decode -> encode; midpoints between neighbours round to the even code.
TEST(Elementwise, Float8FormatsRoundTripAndRoundToEven) {
  for (DataType t : {DataType::kFloat8E4M3FN, DataType::kFloat8E4M3FNUZ, DataType::kFloat8E5M2,
                     DataType::kFloat8E5M2FNUZ}) {
    for (int c = 0; c < 256; ++c) {
      const float v = cpu::elem::Float8ToFloat(t, static_cast<uint8_t>(c));
      if (std::isnan(v) || std::isinf(v)) continue;
      if (v == 0 && c == 0x80) continue;  // -0 (non-UZ formats) -- checked below
      EXPECT_EQ(cpu::elem::FloatToFloat8(t, v, true), c) << DataTypeName(t) << " code " << c;
      const int next = c + 1;
      if ((c & 0x7f) == 0x7f) continue;
      const float w = cpu::elem::Float8ToFloat(t, static_cast<uint8_t>(next));
      if (std::isnan(w) || std::isinf(w) || (c & 0x80) != (next & 0x80)) continue;
      const float mid = (v + w) / 2;
      EXPECT_EQ(cpu::elem::FloatToFloat8(t, mid, true), (c % 2 == 0) ? c : next) << DataTypeName(t) << " mid " << mid;
    }
    const bool uz = t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2FNUZ;
    EXPECT_EQ(cpu::elem::FloatToFloat8(t, -0.0f, true), uz ? 0 : 0x80);
    EXPECT_TRUE(std::isnan(cpu::elem::Float8ToFloat(t, cpu::elem::FloatToFloat8(t, NAN, true))));
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(std::isinf(cpu::elem::Float8ToFloat(t, cpu::elem::FloatToFloat8(t, inf, true))));
    const float ns = cpu::elem::Float8ToFloat(t, cpu::elem::FloatToFloat8(t, inf, false));
    EXPECT_TRUE(t == DataType::kFloat8E5M2 ? std::isinf(ns) : std::isnan(ns)) << DataTypeName(t);
  }
}

// Codes from the ONNX reference (onnx.helper.float32_to_float8e4m3 / e5m2) for the Cast test inputs and
// some edge values. Two reference quirks are not followed (the spec's overflow rule is): E4M3FN without
// saturation maps 490 to 448 (spec: NaN), E5M2 without saturation maps 61440 to NaN (spec: +Inf). E5M2's NaN is 126
// (0x7e), as onnx 1.23's reference (ml_dtypes) writes it; onnx 1.16's helper wrote 127, also a NaN.
TEST(Elementwise, Float8MatchesOnnxReferenceCodes) {
  const float kVals[] = {0.4789254665374756f, 0.48033666610717773f, 0.4996848702430725f, 0.8191054463386536f,
                         0.4703124761581421f, 0.7229037880897522f, 1000000.0f, 1.0000000116860974e-07f, NAN,
                         INFINITY, INFINITY, -INFINITY, -1.0000000116860974e-07f, 1.0000000116860974e-07f,
                         -1000000.0f, 449.0f, 460.0f, 470.0f, 490.0f, 250.0f, 241.0f, 60000.0f, 61440.0f,
                         9.999999717180685e-10f, -9.999999717180685e-10f, 0.000732421875f, -0.0f,
                         0.003000000026077032f, 68812.796875f};
  struct Row {
    DataType t;
    bool saturate;
    std::vector<int> codes;
  };
  const std::vector<Row> rows = {
      {DataType::kFloat8E4M3FN, true, {47, 47, 48, 53, 47, 52, 126, 0, 127, 126, 126, 254, 128, 0, 254, 126, 126, 126, 126, 120, 119, 126, 126, 0, 128, 0, 128, 2, 126}},
      {DataType::kFloat8E4M3FN, false, {47, 47, 48, 53, 47, 52, 127, 0, 127, 127, 127, 255, 128, 0, 255, 126, 126, 127, /*490*/ 127, 120, 119, 127, 127, 0, 128, 0, 128, 2, 127}},
      {DataType::kFloat8E4M3FNUZ, true, {55, 55, 56, 61, 55, 60, 127, 0, 128, 127, 127, 255, 0, 0, 255, 127, 127, 127, 127, 127, 127, 127, 127, 0, 0, 1, 0, 3, 127}},
      {DataType::kFloat8E4M3FNUZ, false, {55, 55, 56, 61, 55, 60, 128, 0, 128, 128, 128, 128, 0, 0, 128, 128, 128, 128, 128, 128, 127, 128, 128, 0, 0, 1, 0, 3, 128}},
      {DataType::kFloat8E5M2, true, {56, 56, 56, 59, 56, 58, 123, 0, 126, 123, 123, 251, 128, 0, 251, 95, 95, 95, 96, 92, 92, 123, 123, 0, 128, 18, 128, 26, 123}},
      {DataType::kFloat8E5M2, false, {56, 56, 56, 59, 56, 58, 124, 0, 126, 124, 124, 252, 128, 0, 252, 95, 95, 95, 96, 92, 92, 123, /*61440*/ 124, 0, 128, 18, 128, 26, 124}},
      {DataType::kFloat8E5M2FNUZ, true, {60, 60, 60, 63, 60, 62, 127, 0, 128, 127, 127, 255, 0, 0, 255, 99, 99, 99, 100, 96, 96, 127, 127, 0, 0, 22, 0, 30, 127}},
      {DataType::kFloat8E5M2FNUZ, false, {60, 60, 60, 63, 60, 62, 128, 0, 128, 128, 128, 128, 0, 0, 128, 99, 99, 99, 100, 96, 96, 127, 128, 0, 0, 22, 0, 30, 128}},
  };
  for (const Row& r : rows)
    for (size_t i = 0; i < std::size(kVals); ++i)
      EXPECT_EQ(cpu::elem::FloatToFloat8(r.t, kVals[i], r.saturate), r.codes[i])
          << DataTypeName(r.t) << " saturate=" << r.saturate << " value " << kVals[i];
}

TEST(Elementwise, QuantizeDequantizePerTensorAxisBlocked) {
  Tensor x = Rand({2, 6, 5}, 40, DataType::kFloat32, -20, 20);
  // Per tensor, uint8 default.
  {
    OneNode q("QuantizeLinear", 2);
    Tensor s = Tensor::Scalar(DataType::kFloat32, 0.25);
    auto r = q.Run({&x, &s});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)[0].dtype(), DataType::kUInt8);
    ExpectNary((*r)[0], {&x}, [](auto& v) { return std::clamp(std::nearbyint(v[0] / 0.25), 0.0, 255.0); }, 0);
  }
  // Per axis (axis 1) int8 with zero points, then dequantize back.
  Tensor s = Rand({6}, 41, DataType::kFloat32, 0.05, 0.3);
  Tensor zp = Rand({6}, 42, DataType::kInt8, -10, 10);
  OneNode q("QuantizeLinear", 3);
  auto r = q.Run({&x, &s, &zp});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor y = (*r)[0];
  ASSERT_EQ(y.dtype(), DataType::kInt8);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 5) % 6;
    const double want = std::clamp(std::nearbyint(x.GetAsDouble(i) / s.GetAsDouble(c)) + zp.GetAsDouble(c), -128.0, 127.0);
    ASSERT_EQ(y.GetAsDouble(i), want) << i;
  }
  OneNode dq("DequantizeLinear", 3);
  r = dq.Run({&y, &s, &zp});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 5) % 6;
    ASSERT_FLOAT_EQ(static_cast<float>((*r)[0].GetAsDouble(i)),
                    static_cast<float>((y.GetAsDouble(i) - zp.GetAsDouble(c)) * static_cast<float>(s.GetAsDouble(c))));
  }
  // Blocked along axis 1 with block 4: scales of shape [2, 2, 5] (ceil(6/4) = 2).
  OneNode qb("QuantizeLinear", 2);
  qb.n->attrs["block_size"] = Attribute::Int(4);
  qb.n->attrs["output_dtype"] = Attribute::Int(static_cast<int64_t>(DataType::kInt8));
  Tensor sb = Rand({2, 2, 5}, 43, DataType::kFloat32, 0.1, 0.5);
  r = qb.Run({&x, &sb});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto idx = Unravel(i, x.shape());
    const double sc = sb.GetAsDouble((idx[0] * 2 + idx[1] / 4) * 5 + idx[2]);
    ASSERT_EQ((*r)[0].GetAsDouble(i), std::clamp(std::nearbyint(x.GetAsDouble(i) / sc), -128.0, 127.0)) << i;
  }
  // Blocked scale of the wrong shape -> error, no crash.
  Tensor bad = Rand({2, 3, 5}, 44);
  auto e = qb.Run({&x, &bad});
  EXPECT_FALSE(e.ok());
}

TEST(Elementwise, ShapeInferenceBroadcastsSymbolicDims) {
  OneNode t("Add", 2);
  InferContext ctx{*t.n, {}, {}};
  TensorInfo a, b;
  a.dtype = b.dtype = DataType::kFloat32;
  a.shape = {Dim::Symbol("batch"), Dim(1), Dim(64)};
  b.shape = {Dim::Symbol("seq"), Dim(1)};
  a.has_shape = b.has_shape = true;
  ctx.inputs = {a, b};
  ctx.outputs.resize(1);
  ASSERT_TRUE(InferNode(ctx).ok());
  EXPECT_EQ(ShapeToString(ctx.out(0).shape), "[batch,seq,64]");
  EXPECT_EQ(ctx.out(0).dtype, DataType::kFloat32);

  OneNode c("Less", 2);
  InferContext cc{*c.n, {a, b}, {}};
  cc.outputs.resize(1);
  ASSERT_TRUE(InferNode(cc).ok());
  EXPECT_EQ(cc.out(0).dtype, DataType::kBool);

  // Mismatched static dims -> error naming the node.
  TensorInfo d = b;
  d.shape = {Dim(3), Dim(7)};
  InferContext bad{*t.n, {a, d}, {}};
  bad.outputs.resize(1);
  Status st = InferNode(bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("test_Add"), std::string::npos) << st.message();
}

TEST(Elementwise, SymValueFlowsThroughMulAndCast) {
  OneNode t("Mul", 2);
  TensorInfo shp, k;
  shp.dtype = k.dtype = DataType::kInt64;
  shp.shape = {Dim(2)};
  shp.has_shape = true;
  shp.sym_value = std::vector<Dim>{Dim::Symbol("batch"), Dim(8)};
  Tensor kv = Tensor::FromInt64({3}, {});
  k.has_shape = true;
  k.value = &kv;
  InferContext ctx{*t.n, {shp, k}, {}};
  ctx.outputs.resize(1);
  ASSERT_TRUE(InferNode(ctx).ok());
  ASSERT_TRUE(ctx.out(0).sym_value.has_value());
  EXPECT_EQ((*ctx.out(0).sym_value)[0].ToString(), DimMul(Dim::Symbol("batch"), Dim(3)).ToString());
  EXPECT_EQ((*ctx.out(0).sym_value)[1].value, 24);

  OneNode c("Cast", 1);
  c.n->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kInt64));
  InferContext cc{*c.n, {shp}, {}};
  cc.outputs.resize(1);
  ASSERT_TRUE(InferNode(cc).ok());
  ASSERT_TRUE(cc.out(0).sym_value.has_value());
  EXPECT_EQ((*cc.out(0).sym_value)[0].ToString(), "batch");
}

TEST(Elementwise, ErrorPathsDoNotCrash) {
  Tensor f = Rand({3, 4}, 50), i = Rand({3, 4}, 51, DataType::kInt32), g = Rand({5}, 52);
  {
    OneNode t("Add", 2);  // mixed types
    EXPECT_FALSE(t.Run({&f, &i}).ok());
    EXPECT_FALSE(t.Run({&f, &g}).ok());  // shapes do not broadcast
    EXPECT_FALSE(t.Run({&f, nullptr}).ok());
  }
  {
    OneNode t("LeakyRelu", 1);  // attribute of the wrong type
    t.n->attrs["alpha"] = Attribute::String("big");
    auto r = t.Run({&f});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("test_LeakyRelu"), std::string::npos);
  }
  {
    OneNode t("Gelu", 1);
    t.n->attrs["approximate"] = Attribute::String("cubic");
    EXPECT_FALSE(t.Run({&f}).ok());
  }
  {
    OneNode t("Exp", 1);  // integer input to a float-only op
    EXPECT_FALSE(t.Run({&i}).ok());
  }
  {
    OneNode t("Cast", 1);  // missing 'to', then an unknown type code
    EXPECT_FALSE(t.Run({&f}).ok());
    t.n->attrs["to"] = Attribute::Int(999);
    EXPECT_FALSE(t.Run({&f}).ok());
  }
  {
    OneNode t("Where", 3);  // non-bool condition
    EXPECT_FALSE(t.Run({&f, &f, &f}).ok());
  }
  {
    OneNode t("Clip", 3);  // non-scalar bound
    EXPECT_FALSE(t.Run({&f, &g, nullptr}).ok());
  }
  {
    OneNode t("DequantizeLinear", 2);  // per-axis scale of the wrong length
    Tensor q = Rand({3, 4}, 53, DataType::kUInt8, 0, 200);
    Tensor s = Rand({3}, 54, DataType::kFloat32, 0.1, 1);
    EXPECT_FALSE(t.Run({&q, &s}).ok());
  }
}

TEST(Elementwise, ClipConverterMovesOldAttributesToInputs) {
  Graph g;
  Node* n = g.AddNode("Clip", "old_clip");
  n->opset = 6;
  n->inputs.push_back(g.AddValue("x"));
  n->inputs[0]->dtype = DataType::kFloat32;
  n->outputs.push_back(g.AddValue("y"));
  n->attrs["max"] = Attribute::Float(6.0f);
  const OpDef* sup = FindOp(kOnnxDomain, "Clip");
  ASSERT_NE(sup, nullptr);
  ConvertContext c{g, *n, 6};
  ASSERT_TRUE(sup->convert(c).ok());
  ASSERT_EQ(n->inputs.size(), 3u);
  EXPECT_EQ(n->inputs[1], nullptr);
  ASSERT_NE(n->inputs[2], nullptr);
  ASSERT_TRUE(n->inputs[2]->is_const());
  EXPECT_EQ(n->inputs[2]->const_value->GetAsDouble(0), 6.0);
  EXPECT_FALSE(n->has_attr("max"));
  // Run it: min omitted, max 6.
  Tensor x = Tensor::FromFloat({-10.f, 3.f, 10.f}, {3});
  auto r = cpu::EvaluateNode(*n, {&x, nullptr, &*n->inputs[2]->const_value});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].ToFloatVector(), (std::vector<float>{-10.f, 3.f, 6.f}));
}

}  // namespace
}  // namespace kiln
