// Differential tests of the CUDA reduce family on float64 (computed in double, as the CPU reference does):
// Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax, TopK and CumSum against the CPU reference on random data and odd
// shapes, through every kernel path (rows/columns, warp/block per output, scan/sequential, shared/global sort),
// with NaN and infinities. Tolerance 1e-12 (absolute and relative), exact where nothing is rounded.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;
constexpr DataType kF64 = DataType::kFloat64;
constexpr double kTol = 1e-12;

Tensor Axes(const std::vector<int64_t>& axes) {
  std::vector<double> v(axes.begin(), axes.end());
  return FromValues(DataType::kInt64, {static_cast<int64_t>(axes.size())}, v);
}

// Small integers stored as float64 (ties for the arg/sort tests).
Tensor IntValues(const Shape& shape, uint32_t seed, double lo, double hi) {
  return CastTensor(Random(DataType::kInt32, shape, seed, lo, hi), kF64);
}

TEST(GpuReduceF64, AllOpsAllShapes) {
  const char* ops[] = {"ReduceSum", "ReduceMean",      "ReduceMax",    "ReduceMin",      "ReduceProd",
                       "ReduceL1",  "ReduceL2",        "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{1000}, {0}},         {{7, 33}, {1}},          {{7, 33}, {0}},           {{7, 33}, {-1}},
      {{7, 33}, {}},         {{3, 5000}, {1}},        {{4097, 3}, {0}},         {{2, 3, 4, 5}, {1, 3}},
      {{2, 3, 4, 5}, {0, 2}}, {{2, 3, 1, 4, 5}, {2, 4}}, {{2, 3, 1, 4, 5}, {0, 3}}, {{3, 2, 2}, {1}},
      {{1}, {0}},            {{0, 4}, {0}},           {{3, 0}, {0}},            {{5, 8}, {0}}};
  uint32_t seed = 1;
  for (const char* op : ops) {
    const std::string name = op;
    const double lo = name == "ReduceProd" ? 0.97 : name == "ReduceLogSum" ? 0.1 : -1;
    const double hi = name == "ReduceProd" ? 1.03 : 1;
    for (const auto& [shape, axes] : cases) {
      for (int keepdims : {0, 1}) {
        SCOPED_TRACE(name + " " + ShapeToString(shape) + " keepdims " + std::to_string(keepdims));
        EXPECT_TRUE(OneNode(op)
                        .Input(Random(kF64, shape, seed++, lo, hi))
                        .Const(Axes(axes))
                        .Attr("keepdims", Attribute::Int(keepdims))
                        .MatchesCpu(kTol, kTol));
      }
    }
  }
  // Log-sum-exp of large values (exp alone would overflow), axes as a runtime input, no axes input.
  EXPECT_TRUE(OneNode("ReduceLogSumExp").Input(Random(kF64, {4, 300}, 7, 600, 800)).Const(Axes({1})).MatchesCpu(
      kTol, kTol));
  EXPECT_TRUE(OneNode("ReduceSum").Input(Random(kF64, {5, 7, 3}, 8)).Input(Axes({0, 2})).MatchesCpu(kTol, kTol));
  EXPECT_TRUE(OneNode("ReduceMean").Input(Random(kF64, {5, 7, 3}, 9)).MatchesCpu(kTol, kTol));
}

TEST(GpuReduceF64, NaNAndInfinities) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = FromValues(kF64, {4, 4}, {1, nan, 3, 4, -inf, -inf, -inf, -inf, 5, inf, 2, 1, -inf, -2, -inf, 7});
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceSum", "ReduceLogSumExp"}) {
    for (int64_t axis : {0, 1}) {
      SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis));
      EXPECT_TRUE(OneNode(op).Input(x).Const(Axes({axis})).MatchesCpu(kTol, kTol));
    }
  }
}

TEST(GpuReduceF64, ArgMaxArgMin) {
  uint32_t seed = 100;
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
             {{1000}, 0}, {{7, 33}, 1}, {{7, 33}, 0}, {{3, 5000}, 1}, {{4097, 3}, 0}, {{2, 3, 4, 5, 6}, 2}}) {
      for (int last : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " " + ShapeToString(shape) + " axis " + std::to_string(axis));
        for (const Tensor& x : {Random(kF64, shape, seed), IntValues(shape, seed, -4, 4)}) {
          EXPECT_TRUE(OneNode(op)
                          .Input(x)
                          .Attr("axis", Attribute::Int(axis))
                          .Attr("select_last_index", Attribute::Int(last))
                          .MatchesCpu());
        }
        ++seed;
      }
    }
  }
}

TEST(GpuSoftmaxF64, ShapesAxesAndSpecialValues) {
  uint32_t seed = 200;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
             {{7, 33}, -1}, {{5, 1}, -1}, {{4, 32}, 1}, {{3, 1000}, -1}, {{2, 1025}, -1}, {{3, 4096}, -1},
             {{3, 17, 5}, 1}, {{3, 17, 5}, 0}, {{2, 3, 4, 5, 6}, 2}, {{2, 4, 8, 6}, 3}, {{1000}, 0}, {{0, 5}, 1}}) {
      SCOPED_TRACE(std::string(op) + " " + ShapeToString(shape) + " axis " + std::to_string(axis));
      EXPECT_TRUE(OneNode(op)
                      .Input(Random(kF64, shape, seed++, -50, 50))
                      .Attr("axis", Attribute::Int(axis))
                      .MatchesCpu(kTol, kTol));
      EXPECT_TRUE(OneNode(op)
                      .Input(Random(kF64, shape, seed++, -3, 3))
                      .Attr("axis", Attribute::Int(axis))
                      .Tactic("block_rows")
                      .MatchesCpu(kTol, kTol));
    }
    EXPECT_TRUE(OneNode(op).Input(FromValues(kF64, {}, {3})).Attr("axis", Attribute::Int(-1)).MatchesCpu());
    for (int64_t axis : {0, 1, 2, 3, -1}) {
      SCOPED_TRACE(std::string(op) + " flatten_2d axis " + std::to_string(axis));
      EXPECT_TRUE(OneNode(op)
                      .Input(Random(kF64, {2, 3, 40}, seed++))
                      .Attr("axis", Attribute::Int(axis))
                      .Attr("kiln_flatten_2d", Attribute::Int(1))
                      .MatchesCpu(kTol, kTol));
    }
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const Tensor special = FromValues(kF64, {3, 3}, {-inf, -inf, -inf, 1, nan, 2, 1, 2, -inf});
    EXPECT_TRUE(OneNode(op).Input(special).Attr("axis", Attribute::Int(1)).MatchesCpu(kTol, kTol));
    EXPECT_TRUE(OneNode(op).Input(special).Attr("axis", Attribute::Int(0)).MatchesCpu(kTol, kTol));
  }
}

::testing::AssertionResult TopKMatches(const Tensor& x, int64_t k, int64_t axis, int largest) {
  return OneNode("TopK")
      .Input(x)
      .Const(FromValues(DataType::kInt64, {1}, {static_cast<double>(k)}))
      .Attr("axis", Attribute::Int(axis))
      .Attr("largest", Attribute::Int(largest))
      .Outputs(2)
      .MatchesCpu(0, 0);
}

TEST(GpuTopKF64, SharedAndGlobalSortTiesAndNaN) {
  uint32_t seed = 300;
  for (int largest : {1, 0}) {
    for (const auto& [shape, axis, k] : std::vector<std::tuple<Shape, int64_t, int64_t>>{
             {{7, 33}, -1, 5}, {{5, 17, 3}, 1, 4}, {{2, 2048}, 1, 100}, {{2, 3000}, 1, 10}, {{3000, 2}, 0, 17}}) {
      SCOPED_TRACE(ShapeToString(shape) + " k " + std::to_string(k) + " largest " + std::to_string(largest));
      EXPECT_TRUE(TopKMatches(Random(kF64, shape, seed++), k, axis, largest));
      EXPECT_TRUE(TopKMatches(IntValues(shape, seed++, 0, 9), k, axis, largest));
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = FromValues(kF64, {2, 6}, {1, nan, 3, -inf, nan, 3, inf, 0, nan, 0, -1, inf});
  for (int largest : {1, 0})
    for (int64_t k : {1, 3, 6}) EXPECT_TRUE(TopKMatches(x, k, 1, largest));
}

TEST(GpuCumSumF64, ShapesAxesAndFlags) {
  uint32_t seed = 400;
  for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
           {{1000}, 0}, {{5}, 0}, {{7, 33}, 1}, {{7, 33}, 0}, {{3, 1000}, 1}, {{3, 1000}, 0}, {{3, 65}, -1},
           {{2, 3, 4, 5, 6}, 2}, {{2, 3, 4, 5, 6}, 4}, {{1}, 0}, {{0, 5}, 1}}) {
    for (int exclusive : {0, 1}) {
      for (int reverse : {0, 1}) {
        SCOPED_TRACE(ShapeToString(shape) + " axis " + std::to_string(axis) + " exclusive " +
                     std::to_string(exclusive) + " reverse " + std::to_string(reverse));
        for (DataType axis_type : {DataType::kInt64, DataType::kInt32}) {
          EXPECT_TRUE(OneNode("CumSum")
                          .Input(Random(kF64, shape, seed++))
                          .Const(FromValues(axis_type, {}, {static_cast<double>(axis)}))
                          .Attr("exclusive", Attribute::Int(exclusive))
                          .Attr("reverse", Attribute::Int(reverse))
                          .MatchesCpu(kTol, kTol));
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::gputest
