// Core: dtype conversions, dims arithmetic, tensors, graph sort/verify.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dims.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace kiln {
namespace {

TEST(DType, HalfRoundTripsEveryHalfValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = HalfToFloat(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << "bits " << b;
  }
}

TEST(DType, HalfRoundsToNearestEven) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 1.0f / 2048)), 1.0f);            // tie -> even (down)
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);  // tie -> even (up)
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(70000.f))));
  EXPECT_EQ(HalfToFloat(FloatToHalf(5.9604645e-8f)), 5.9604645e-8f);  // smallest subnormal
}

TEST(DType, BFloat16AndFp8) {
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.5f)), 1.5f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(3.14159f)), 3.140625f);
  EXPECT_EQ(Float8E4M3ToFloat(FloatToFloat8E4M3(448.f)), 448.f);
  EXPECT_EQ(Float8E4M3ToFloat(FloatToFloat8E4M3(1000.f, true)), 448.f);
  EXPECT_TRUE(std::isnan(Float8E4M3ToFloat(FloatToFloat8E4M3(1000.f, false))));
  EXPECT_EQ(Float8E4M3ToFloat(FloatToFloat8E4M3(0.0625f)), 0.0625f);
}

// FloatToFloat8E4M3 against the definition: the nearest of the 127 finite magnitudes, ties to the even code. At
// every code, every midpoint between neighbours (the ties), one float either side of each, and random magnitudes.
TEST(DType, Fp8RoundsToNearestEven) {
  auto nearest = [](float f) -> uint8_t {
    const uint8_t sign = std::signbit(f) ? 0x80 : 0;
    const float a = std::fabs(f);
    uint8_t best = 0;
    float best_err = a;
    for (uint8_t code = 1; code < 0x7f; ++code) {
      const float err = std::fabs(Float8E4M3ToFloat(code) - a);
      if (err < best_err || (err == best_err && (code & 1) == 0 && (best & 1) == 1)) best = code, best_err = err;
    }
    return sign | best;
  };
  std::vector<float> probes;
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = Float8E4M3ToFloat(static_cast<uint8_t>(c)), hi = Float8E4M3ToFloat(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;
    for (float v : {lo, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1000.f), hi}) probes.push_back(v);
  }
  uint32_t seed = 12345;
  for (int i = 0; i < 20000; ++i) {
    seed = seed * 1664525u + 1013904223u;
    probes.push_back(std::ldexp(static_cast<float>(seed >> 8) / 16777216.f, static_cast<int>(seed % 20) - 11));
  }
  probes.push_back(448.f);
  for (float v : probes) {
    if (v > 448.f) continue;
    ASSERT_EQ(FloatToFloat8E4M3(v), nearest(v)) << v;
    ASSERT_EQ(FloatToFloat8E4M3(-v), nearest(-v)) << -v;
  }
  EXPECT_EQ(FloatToFloat8E4M3(460.f), 0x7e);  // past 448: saturated (the next step, 480, is no E4M3FN value)
  EXPECT_EQ(FloatToFloat8E4M3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(FloatToFloat8E4M3(std::nanf("")), 0x7f);
}

TEST(Dims, SymbolicArithmetic) {
  Dim b = Dim::Symbol("batch");
  EXPECT_EQ(DimMul(b, Dim(3)).ToString(), "batch*3");
  EXPECT_EQ(DimMul(b, Dim(1)).ToString(), "batch");
  EXPECT_TRUE(DimMul(b, Dim::Unknown()).unknown());
  EXPECT_EQ(DimAdd(Dim(2), Dim(3)).value, 5);
  EXPECT_EQ(DimSub(b, b).value, 0);
  EXPECT_EQ(DimDiv(DimMul(b, Dim(3)), Dim(1)).ToString(), "batch*3");
  EXPECT_EQ(ShapeToString(Shape{b, Dim(3), Dim::Unknown()}), "[batch,3,?]");
  EXPECT_EQ(NormalizeAxis(-1, 4).value(), 3);
  EXPECT_FALSE(NormalizeAxis(4, 4).has_value());
}

TEST(Dims, KnownArithmeticThatWouldOverflowIsUnknown) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(DimMul(Dim(int64_t{1} << 40), Dim(int64_t{1} << 30)).unknown());
  EXPECT_TRUE(DimAdd(Dim(big), Dim(1)).unknown());
  EXPECT_TRUE(DimSub(Dim(-big), Dim(2)).unknown());
  EXPECT_TRUE(DimDiv(Dim(std::numeric_limits<int64_t>::min()), Dim(-1)).unknown());
  EXPECT_EQ(DimMul(Dim(int64_t{1} << 31), Dim(int64_t{1} << 31)).value, int64_t{1} << 62);
}

TEST(Tensor, FloatsReadAsIntegersSaturate) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor t = Tensor::FromFloat({-inf, inf, std::nanf(""), 1e30f, -1e30f, -2.7f}, {6});
  EXPECT_EQ(t.GetAsInt(0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t.GetAsInt(1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.GetAsInt(2), 0);
  EXPECT_EQ(t.GetAsInt(3), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.GetAsInt(4), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t.GetAsInt(5), -2);
}

TEST(Tensor, CastAndAccess) {
  Tensor t = Tensor::FromFloat({1.5f, -2.7f, 300.f}, {3});
  Tensor i8 = CastTensor(t, DataType::kInt8);
  EXPECT_EQ(i8.GetAsInt(0), 1);
  EXPECT_EQ(i8.GetAsInt(1), -2);
  EXPECT_EQ(i8.GetAsInt(2), 127);
  Tensor h = CastTensor(t, DataType::kFloat16);
  EXPECT_FLOAT_EQ(static_cast<float>(h.GetAsDouble(0)), 1.5f);
  EXPECT_EQ(t.Reshaped({1, 3}).raw(), t.raw());
  EXPECT_NE(t.Clone().raw(), t.raw());
  EXPECT_EQ(t.Describe(), "float32[3]");
}

TEST(Graph, TopoSortReordersAndDetectsCycles) {
  Graph g;
  Value* x = g.GetOrAddValue("x");
  x->is_graph_input = true;
  Value* a = g.GetOrAddValue("a");
  Value* b = g.GetOrAddValue("b");
  Node* n2 = g.AddNode("Relu", "second");
  n2->inputs = {a};
  n2->outputs = {b};
  Node* n1 = g.AddNode("Relu", "first");
  n1->inputs = {x};
  n1->outputs = {a};
  g.outputs = {b};
  ASSERT_TRUE(g.TopoSort().ok());
  EXPECT_EQ(g.nodes()[0]->name, "first");
  EXPECT_TRUE(VerifyGraph(g).ok());

  Graph c;
  Value* p = c.GetOrAddValue("p");
  Value* q = c.GetOrAddValue("q");
  Node* m1 = c.AddNode("Relu", "m1");
  m1->inputs = {p};
  m1->outputs = {q};
  Node* m2 = c.AddNode("Relu", "m2");
  m2->inputs = {q};
  m2->outputs = {p};
  c.outputs = {q};
  Status st = c.TopoSort();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cycle"), std::string::npos) << st.ToString();
}

TEST(Graph, MissingProducerIsNamed) {
  Graph g;
  Value* w = g.GetOrAddValue("weights_missing");
  Value* y = g.GetOrAddValue("y");
  Node* n = g.AddNode("Relu", "r");
  n->inputs = {w};
  n->outputs = {y};
  g.outputs = {y};
  Status st = g.TopoSort();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("weights_missing"), std::string::npos);
  EXPECT_NE(st.message().find("'r'"), std::string::npos);
}

TEST(Graph, CheckedAttributeAccess) {
  Node n;
  n.name = "c";
  n.op_type = "Conv";
  n.attrs["group"] = Attribute::Float(2.f);
  auto r = n.attr_int("group", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("group"), std::string::npos);
  EXPECT_EQ(n.attr_int("missing", 7).value(), 7);
}

}  // namespace
}  // namespace kiln
