// Core: dtype conversions, dims arithmetic, tensors, graph sort/verify.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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
