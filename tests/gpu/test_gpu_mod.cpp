// Differential test of the CUDA Mod layer (pointwise_layers.cpp, ModKernel in pointwise_binary.cu) against the
// CPU reference: every integer dtype with fmod 0 and 1, negative operands and 0 divisors; float32/16, bfloat16,
// float64 with fmod=1 (exact); broadcasting over odd shapes; refused configurations name the node.
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;
constexpr DataType kF32 = DataType::kFloat32, kF16 = DataType::kFloat16, kBF16 = DataType::kBFloat16;

// Same-shape, scalar, and general broadcasts (both operands broadcasting), with odd sizes.
const std::vector<std::pair<Shape, Shape>>& BroadcastPairs() {
  static const std::vector<std::pair<Shape, Shape>> p = {
      {{33}, {33}},    {{1031}, {}},           {{1}, {7}},          {{4, 37}, {37}},
      {{2, 3, 4, 5}, {3, 1, 1}}, {{4, 1, 7}, {3, 1}}, {{2, 1, 3, 1, 5}, {1, 4, 1, 6, 1}}, {{3, 1}, {3, 517}},
  };
  return p;
}

TEST(GpuMod, MatchesTheCpuReference) {
  uint32_t seed = 250;
  // Integers, floored (fmod=0) and truncated (fmod=1) remainders: negative operands and 0 divisors (x mod 0 = 0).
  for (int64_t fmod : {0, 1})
    for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kUInt16, DataType::kInt32,
                       DataType::kUInt32, DataType::kInt64, DataType::kUInt64})
      for (const auto& [a, b] : BroadcastPairs()) {
        const bool u = !IsSignedType(t);
        EXPECT_TRUE(OneNode("Mod")
                        .Input(Random(t, a, seed++, u ? 0 : -120, 120))
                        .Input(Random(t, b, seed++, u ? 0 : -9, 9))
                        .Attr("fmod", Attribute::Int(fmod))
                        .MatchesCpu())
            << "fmod=" << fmod << " " << DataTypeName(t) << " " << ShapeToString(a) << " " << ShapeToString(b);
      }
  // Edge values: MIN mod -1, x mod 0, the extremes.
  for (int64_t fmod : {0, 1})
    for (DataType t : {DataType::kInt32, DataType::kInt64})
      EXPECT_TRUE(OneNode("Mod")
                      .Input(FromValues(t, {9}, {7, -7, 7, -7, -2147483648.0, 5, 2147483647, -2147483648.0, 0}))
                      .Input(FromValues(t, {9}, {3, 3, -3, -3, -1, 0, -2, 7, -4}))
                      .Attr("fmod", Attribute::Int(fmod))
                      .MatchesCpu())
          << "fmod=" << fmod << " " << DataTypeName(t);
  // Floats take fmod=1; fmod is exact in every format, so the comparison is exact too (NaN for x mod 0).
  for (DataType t : {kF32, kF16, kBF16, DataType::kFloat64}) {
    for (const auto& [a, b] : BroadcastPairs())
      EXPECT_TRUE(OneNode("Mod")
                      .Input(Random(t, a, seed++, -50, 50))
                      .Input(Random(t, b, seed++, -6, 6))
                      .Attr("fmod", Attribute::Int(1))
                      .MatchesCpu(0, 0))
          << DataTypeName(t) << " " << ShapeToString(a) << " " << ShapeToString(b);
    EXPECT_TRUE(OneNode("Mod")
                    .Input(FromValues(t, {5}, {-5.5, 5.5, -5.5, 5.5, 3}))
                    .Const(FromValues(t, {5}, {2, -2, -2, 2, 0}))
                    .Attr("fmod", Attribute::Int(1))
                    .MatchesCpu(0, 0))
        << DataTypeName(t);
  }
}

// Mod-28: floats with fmod = 0, the floored remainder (numpy's mod), signed zeros and infinities included.
TEST(GpuMod, FloatsWithFmodZeroAtOpset28) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DataType t : {kF32, kF16, DataType::kFloat64}) {
    EXPECT_TRUE(OneNode("Mod")
                    .Opset(28)
                    .Input(FromValues(t, {10}, {-5.5, 5.5, -5.5, 5.5, 4, -4, 0, -0.0, 3, -3}))
                    .Const(FromValues(t, {10}, {2, -2, -2, 2, 2, 2, -3, 3, inf, inf}))
                    .MatchesCpu(0, 0))
        << DataTypeName(t);
    EXPECT_TRUE(OneNode("Mod").Opset(28).Input(Random(t, {7, 33}, 5, -50, 50)).Const(Random(t, {33}, 6, -7, 7))
                    .MatchesCpu(0, 0))
        << DataTypeName(t);
  }
}

TEST(GpuMod, RefusesFmodTwoAndNonNumericInputs) {
  // Shape inference refuses these too, so build the nodes by hand and ask the layer factory.
  auto refused = [](DataType t, int64_t fmod, const char* what) {
    Graph g;
    Node* n = g.AddNode("Mod", "mod0");
    n->inputs = {g.AddConstant("a", Random(t, {3, 4}, 1)), g.AddConstant("b", Random(t, {4}, 2, 1, 3))};
    n->attrs["fmod"] = Attribute::Int(fmod);
    auto layer = cuda::CreateLayer(cuda::LayerSpec{*n, {}, {}}, "default");
    ASSERT_FALSE(layer.ok()) << DataTypeName(t) << " fmod=" << fmod;
    EXPECT_NE(layer.status().message().find("mod0"), std::string::npos) << layer.status().ToString();
    EXPECT_NE(layer.status().message().find(what), std::string::npos) << layer.status().ToString();
  };
  refused(DataType::kInt32, 2, "fmod must be 0 or 1");
  refused(DataType::kBool, 1, "input dtype bool");
}

}  // namespace
}  // namespace kiln::gputest
