// Differential tests of the CUDA DynamicQuantizeLinear layer (pointwise_cast_layers.cpp, dynamic_quantize.cu)
// against the CPU reference, all three outputs exactly (y, the float32 scale and the zero point): data of both
// signs, positive only (the range starts at 0), negative only, all zeros (scale 0), NaNs (skipped by min/max,
// quantized to the zero point), more blocks than the partial table holds, and no elements.
#include <cmath>
#include <limits>
#include <vector>

#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

TEST(GpuDynamicQuantizeLinear, MatchesTheCpuReferenceExactly) {
  uint32_t seed = 40;
  const std::vector<Shape> shapes = {{1}, {7}, {3, 517}, {1031}, {2, 3, 5, 7}, {300001}, {4, 1000, 97}};
  const std::pair<double, double> ranges[] = {{-3, 5}, {0.5, 2}, {-4, -1}, {-1e-3, 2e-3}, {-200, 100}};
  for (const Shape& s : shapes)
    for (const auto& [lo, hi] : ranges)
      EXPECT_TRUE(OneNode("DynamicQuantizeLinear")
                      .Input(Random(DataType::kFloat32, s, seed++, lo, hi))
                      .Outputs(3)
                      .MatchesCpu(0, 0))
          << ShapeToString(s) << " in [" << lo << ", " << hi << ")";
}

TEST(GpuDynamicQuantizeLinear, ZerosNaNsAndEmpty) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(OneNode("DynamicQuantizeLinear")
                  .Input(FromValues(DataType::kFloat32, {5, 9}, std::vector<double>(45, 0.0)))
                  .Outputs(3)
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("DynamicQuantizeLinear")
                  .Input(FromValues(DataType::kFloat32, {8}, {nan, -1.5, 0.25, nan, 3, -0.0, 2.5, 1}))
                  .Outputs(3)
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("DynamicQuantizeLinear").Input(FromValues(DataType::kFloat32, {3}, {nan, nan, nan})).Outputs(3)
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("DynamicQuantizeLinear").Input(Random(DataType::kFloat32, {0, 3}, 2)).Outputs(3)
                  .MatchesCpu(0, 0));
  // The node tests' data: the range's ends adjusted to include 0.
  EXPECT_TRUE(OneNode("DynamicQuantizeLinear")
                  .Input(FromValues(DataType::kFloat32, {6}, {0, 2, -3, -2.5, 1.34, 0.5}))
                  .Outputs(3)
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("DynamicQuantizeLinear")
                  .Input(FromValues(DataType::kFloat32, {2, 6}, {1, 2.1, 1.3, 2.5, 3.34, 4, 1.5, 2.6, 3.9, 4, 3, 2.345}))
                  .Outputs(3)
                  .MatchesCpu(0, 0));
}

}  // namespace
}  // namespace kiln::gputest
