// Differential tests of the CUDA BitwiseAnd/Or/Xor/Not and BitShift layers (pointwise_layers.cpp, BitwiseKernel in
// pointwise_binary.cu) and the Hardmax layer (reduce_layers.cpp, HardmaxKernel in softmax.cu) against the CPU
// reference: every integer dtype, broadcasting over odd shapes, shifts by negative and too-large amounts; Hardmax
// along every axis and with opset 11's 2-D flattening, ties, NaNs and rows longer than a warp.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

const std::vector<DataType>& IntTypes() {
  static const std::vector<DataType> t = {DataType::kInt8,  DataType::kUInt8,  DataType::kInt16, DataType::kUInt16,
                                          DataType::kInt32, DataType::kUInt32, DataType::kInt64, DataType::kUInt64};
  return t;
}

const std::vector<std::pair<Shape, Shape>>& Pairs() {
  static const std::vector<std::pair<Shape, Shape>> p = {
      {{37}, {37}}, {{1031}, {}}, {{4, 1, 7}, {3, 1}}, {{2, 1, 3, 1, 5}, {1, 4, 1, 6, 1}}, {{3, 1}, {3, 517}}};
  return p;
}

int Bits(DataType t) { return static_cast<int>(DataTypeSize(t) * 8); }

TEST(GpuBitwise, AndOrXorNotMatchTheCpuReference) {
  uint32_t seed = 900;
  for (DataType t : IntTypes()) {
    const bool u = !IsSignedType(t);
    const double lo = u ? 0 : -120, hi = 120 + (Bits(t) > 8 ? 30000 : 0) * (u ? 2 : 1);
    for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"})
      for (const auto& [a, b] : Pairs())
        EXPECT_TRUE(OneNode(op).Opset(18).Input(Random(t, a, seed++, lo, hi)).Input(Random(t, b, seed++, lo, hi))
                        .MatchesCpu(0, 0))
            << op << " " << DataTypeName(t) << " " << ShapeToString(a) << " " << ShapeToString(b);
    EXPECT_TRUE(OneNode("BitwiseNot").Opset(18).Input(Random(t, {3, 331}, seed++, lo, hi)).MatchesCpu(0, 0))
        << DataTypeName(t);
  }
}

TEST(GpuBitwise, BitShiftMatchesTheCpuReference) {
  uint32_t seed = 950;
  for (DataType t : IntTypes()) {
    const bool u = !IsSignedType(t);
    const int bits = Bits(t);
    for (const char* dir : {"LEFT", "RIGHT"}) {
      // Opset 11's unsigned shifts, and opset 28's signed ones with out-of-range amounts (negative, >= the width).
      const int64_t opset = u ? 11 : 28;
      for (const auto& [a, b] : Pairs())
        EXPECT_TRUE(OneNode("BitShift")
                        .Opset(opset)
                        .Input(Random(t, a, seed++, u ? 0 : -100, 100))
                        .Input(Random(t, b, seed++, u ? 0 : -3, bits + 3))
                        .Attr("direction", Attribute::String(dir))
                        .MatchesCpu(0, 0))
            << dir << " " << DataTypeName(t) << " " << ShapeToString(a) << " " << ShapeToString(b);
    }
  }
  // Edge values of int32: the sign bit shifted out, arithmetic right shifts of negatives, shifts by 31/32/-1.
  EXPECT_TRUE(OneNode("BitShift")
                  .Opset(28)
                  .Input(FromValues(DataType::kInt32, {6}, {-1, -2147483648.0, 2147483647, -7, 5, -5}))
                  .Const(FromValues(DataType::kInt32, {6}, {31, 1, 1, 32, -1, 40}))
                  .Attr("direction", Attribute::String("RIGHT"))
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("BitShift")
                  .Opset(28)
                  .Input(FromValues(DataType::kInt32, {6}, {-1, -2147483648.0, 2147483647, -7, 5, -5}))
                  .Const(FromValues(DataType::kInt32, {6}, {31, 1, 1, 32, -1, 40}))
                  .Attr("direction", Attribute::String("LEFT"))
                  .MatchesCpu(0, 0));
}

TEST(GpuBitwise, RefusesFloatsAndABadDirection) {
  // Shape inference refuses these too, so build the nodes by hand and ask the layer factory.
  auto refused = [](const char* op, DataType t, const char* direction, const char* what) {
    Graph g;
    Node* n = g.AddNode(op, "bits0");
    n->inputs = {g.AddConstant("a", Random(t, {3, 4}, 1, 0, 9)), g.AddConstant("b", Random(t, {4}, 2, 0, 3))};
    if (direction) n->attrs["direction"] = Attribute::String(direction);
    auto layer = cuda::CreateLayer(cuda::LayerSpec{*n, {}, {}}, "default");
    ASSERT_FALSE(layer.ok()) << op << " " << DataTypeName(t);
    EXPECT_NE(layer.status().message().find("bits0"), std::string::npos) << layer.status().ToString();
    EXPECT_NE(layer.status().message().find(what), std::string::npos) << layer.status().ToString();
  };
  refused("BitwiseAnd", DataType::kFloat32, nullptr, "input dtype float32");
  refused("BitShift", DataType::kUInt8, "UP", "direction must be LEFT or RIGHT");
}

TEST(GpuHardmax, MatchesTheCpuReference) {
  uint32_t seed = 990;
  // Every axis of an odd 4-D shape (inner > 1 and inner == 1), rows shorter and longer than a warp.
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (int64_t axis : {0, 1, 2, 3, -1})
      EXPECT_TRUE(OneNode("Hardmax").Opset(13).Input(Random(t, {3, 5, 7, 37}, seed++)).Attr("axis",
                                                                                             Attribute::Int(axis))
                      .MatchesCpu(0, 0))
          << DataTypeName(t) << " axis " << axis;
    EXPECT_TRUE(OneNode("Hardmax").Opset(13).Input(Random(t, {5, 1031}, seed++)).MatchesCpu(0, 0)) << DataTypeName(t);
    // Opset 11: the input flattened to 2-D at the axis.
    for (int64_t axis : {0, 1, 2})
      EXPECT_TRUE(OneNode("Hardmax").Opset(11).Input(Random(t, {2, 3, 45}, seed++)).Attr("axis", Attribute::Int(axis))
                      .MatchesCpu(0, 0))
          << DataTypeName(t) << " opset 11 axis " << axis;
  }
  // Ties go to the first index; a NaN is never the largest; a row of NaNs gives its first element.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(OneNode("Hardmax")
                  .Opset(13)
                  .Input(FromValues(DataType::kFloat32, {4, 5},
                                    {1, 3, 3, 0, 3, nan, -1, nan, -2, -1, nan, nan, nan, nan, nan, 2, 2, 2, 2, 2}))
                  .MatchesCpu(0, 0));
}

}  // namespace
}  // namespace kiln::gputest
