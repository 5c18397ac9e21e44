// Differential tests of the CUDA reduce family (reduce_layers.cpp): Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax,
// TopK and CumSum against the CPU reference, on odd shapes, ranks 0..5, every kernel path (rows/columns,
// warp/block, shared/global sort, scan/sequential), float32/float16/bfloat16 and the integer types (float64:
// test_gpu_reduce_f64.cpp).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

Tensor Axes(const std::vector<int64_t>& axes) {
  std::vector<double> v(axes.begin(), axes.end());
  return FromValues(DataType::kInt64, {static_cast<int64_t>(axes.size())}, v);
}

// Small integer values stored as `dtype` (lots of ties for the arg/sort tests).
Tensor Ints(DataType dtype, const Shape& shape, uint32_t seed, double lo = -4, double hi = 4) {
  return CastTensor(Random(DataType::kInt32, shape, seed, lo, hi), dtype);
}

const char* kReduceOps[] = {"ReduceSum", "ReduceMean",      "ReduceMax",    "ReduceMin",      "ReduceProd",
                            "ReduceL1",  "ReduceL2",        "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};

// Inputs each op is well-conditioned on (positive for the logs, near 1 for the product).
Tensor ReduceInput(const std::string& op, DataType dtype, const Shape& shape, uint32_t seed) {
  if (op == "ReduceProd") return Random(dtype, shape, seed, 0.97, 1.03);
  if (op == "ReduceLogSum") return Random(dtype, shape, seed, 0.1, 1.0);
  return Random(dtype, shape, seed);
}

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> axes;
};

const std::vector<ReduceCase> kReduceCases = {
    {{1000}, {0}},                       // one row
    {{7, 33}, {1}},                      // rows, warp per output
    {{7, 33}, {0}},                      // columns
    {{7, 33}, {-1}},                     // negative axis
    {{7, 33}, {}},                       // empty axes: everything
    {{3, 5000}, {1}},                    // rows, block per output
    {{4097, 3}, {0}},                    // columns, long reduction
    {{2, 3, 4, 5}, {1, 3}},              // two reduced groups, innermost reduced
    {{2, 3, 4, 5}, {0, 2}},              // two reduced groups, innermost kept
    {{2, 3, 4, 5}, {0, 1, 2, 3}},        // all (merged into one)
    {{2, 3, 1, 4, 5}, {2, 4}},           // rank 5 with a size-1 reduced dim
    {{2, 3, 1, 4, 5}, {0, 3}},           // rank 5, strided
    {{1}, {0}},                          // one element
    {{0, 4}, {0}},                       // empty reduction: the identity
    {{3, 0}, {0}},                       // no outputs
};

TEST(GpuReduce, Float32AllOpsAllShapes) {
  uint32_t seed = 1;
  for (const char* op : kReduceOps) {
    for (const ReduceCase& c : kReduceCases) {
      for (int keepdims : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " shape " + ShapeToString(c.shape) + " keepdims " + std::to_string(keepdims));
        const double rtol = std::string(op) == "ReduceProd" ? 1e-4 : 1e-5;
        EXPECT_TRUE(OneNode(op)
                        .Input(ReduceInput(op, DataType::kFloat32, c.shape, seed++))
                        .Const(Axes(c.axes))
                        .Attr("keepdims", Attribute::Int(keepdims))
                        .MatchesCpu(1e-4, rtol));
      }
    }
  }
}

TEST(GpuReduce, OmittedAxesAndNoop) {
  const Tensor x = Random(DataType::kFloat32, {5, 7, 3}, 11);
  EXPECT_TRUE(OneNode("ReduceSum").Input(x).MatchesCpu(1e-4, 1e-5));  // no axes input: everything
  EXPECT_TRUE(OneNode("ReduceMax").Input(x).Attr("keepdims", Attribute::Int(0)).MatchesCpu(0, 0));
  EXPECT_TRUE(
      OneNode("ReduceSum").Input(x).Attr("noop_with_empty_axes", Attribute::Int(1)).MatchesCpu(0, 0));  // a copy
  EXPECT_TRUE(OneNode("ReduceMean")
                  .Input(x)
                  .Const(Axes({}))
                  .Attr("noop_with_empty_axes", Attribute::Int(1))
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("ReduceMean")
                  .Input(x)
                  .Const(Axes({2}))
                  .Attr("noop_with_empty_axes", Attribute::Int(1))
                  .MatchesCpu(1e-5, 1e-5));
  // Axes as a runtime input (the runner keeps a host copy of small int64 tensors).
  EXPECT_TRUE(OneNode("ReduceL2").Input(x).Input(Axes({0, 2})).MatchesCpu(1e-4, 1e-5));
  // A scalar input.
  EXPECT_TRUE(OneNode("ReduceSum").Input(FromValues(DataType::kFloat32, {}, {2.5})).MatchesCpu(0, 0));
}

TEST(GpuReduce, NaNAndInfinities) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = FromValues(DataType::kFloat32, {3, 4}, {1, nan, 3, 4, -inf, -inf, -inf, -inf, 5, inf, 2, 1});
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceSum", "ReduceLogSumExp"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(OneNode(op).Input(x).Const(Axes({1})).MatchesCpu(1e-5, 1e-5));
  }
}

TEST(GpuReduce, HalfAndBFloat16) {
  uint32_t seed = 100;
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    for (const char* op : kReduceOps) {
      for (const ReduceCase& c : {ReduceCase{{7, 33}, {1}}, ReduceCase{{33, 7}, {0}}, ReduceCase{{3, 3000}, {1}},
                                  ReduceCase{{2, 3, 4, 5}, {0, 2}}}) {
        SCOPED_TRACE(std::string(op) + " " + DataTypeName(t) + " " + ShapeToString(c.shape));
        EXPECT_TRUE(OneNode(op)
                        .Input(ReduceInput(op, t, c.shape, seed++))
                        .Const(Axes(c.axes))
                        .ReferenceInFloat32()
                        .MatchesCpu(2e-2, 1e-2));
      }
    }
  }
}

// Columns whose innermost kept dim holds whole 16-byte packs (8 halves, 4 floats) and whose reduced dims merge
// into one: the GAP of an NHWC tensor, narrow outputs with long reductions, an empty reduction; and shapes next
// to them that keep the one-output-per-thread kernel (odd inner dim, two separate reduced dims).
TEST(GpuReduce, ColumnPacks) {
  const std::vector<ReduceCase> cases = {
      {{4, 7, 7, 64}, {1, 2}}, {{3, 50, 16}, {1}},  {{2, 5, 3, 8}, {1, 2}}, {{1000, 8}, {0}},
      {{9, 24}, {0}},          {{5, 12}, {0}},      {{2, 3, 4, 40}, {0, 2}}, {{4, 0, 16}, {1}},
      {{130, 2, 32}, {0}},     {{3, 1, 4, 1, 16}, {1, 2, 3}},
      // Few packs and long reductions (an NHWC global average pool over a large image): narrow blocks, many rows.
      {{2, 45, 47, 16}, {1, 2}}, {{3, 60, 61, 64}, {1, 2}}};
  uint32_t seed = 150;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (const char* op : kReduceOps) {
      for (const ReduceCase& c : cases) {
        SCOPED_TRACE(std::string(op) + " " + DataTypeName(t) + " " + ShapeToString(c.shape));
        OneNode n(op);
        n.Input(ReduceInput(op, t, c.shape, seed++)).Const(Axes(c.axes)).Attr("keepdims", Attribute::Int(1));
        if (t != DataType::kFloat32) n.ReferenceInFloat32();
        const bool prod = std::string(op) == "ReduceProd";
        EXPECT_TRUE(t == DataType::kFloat32 ? n.MatchesCpu(1e-4, prod ? 1e-4 : 1e-5) : n.MatchesCpu(2e-2, 1e-2));
      }
    }
  }
  // NaN propagates through Max/Min/Sum of a column; ArgMax/ArgMin over the leading axis with many ties.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v(6 * 8, 1.0);
  v[2 * 8 + 3] = nan;
  const Tensor x = FromValues(DataType::kFloat32, {6, 8}, v);
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceSum"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(OneNode(op).Input(x).Const(Axes({0})).MatchesCpu(0, 0));
  }
  for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
    for (const char* op : {"ArgMax", "ArgMin"}) {
      for (int last : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " " + DataTypeName(t) + " select_last_index " + std::to_string(last));
        EXPECT_TRUE(OneNode(op)
                        .Input(Ints(t, {37, 3, 16}, seed++, 0, 5))
                        .Attr("axis", Attribute::Int(0))
                        .Attr("select_last_index", Attribute::Int(last))
                        .MatchesCpu());
      }
    }
  }
}

TEST(GpuReduce, IntegerTypesExact) {
  uint32_t seed = 200;
  for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kInt8, DataType::kUInt8}) {
    const double lo = t == DataType::kUInt8 ? 0 : -3, hi = 3;
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceSumSquare"}) {
      for (const ReduceCase& c : {ReduceCase{{7, 9}, {1}}, ReduceCase{{9, 7}, {0}}, ReduceCase{{2, 3, 4}, {0, 2}},
                                  ReduceCase{{0, 3}, {0}}}) {
        // An empty integer mean is NaN cast to an integer (undefined), skipped.
        if (std::string(op) == "ReduceMean" && c.shape[0] == 0) continue;
        SCOPED_TRACE(std::string(op) + " " + DataTypeName(t) + " " + ShapeToString(c.shape));
        EXPECT_TRUE(OneNode(op).Input(Ints(t, c.shape, seed++, lo, hi)).Const(Axes(c.axes)).MatchesCpu());
      }
    }
  }
  // Long int64 sums.
  EXPECT_TRUE(OneNode("ReduceSum")
                  .Input(Ints(DataType::kInt64, {3, 5000}, 7, -1000, 1000))
                  .Const(Axes({1}))
                  .MatchesCpu());
  EXPECT_TRUE(OneNode("ReduceSum").Input(Ints(DataType::kInt32, {4097, 3}, 8, -1000, 1000)).Const(Axes({0})).MatchesCpu());
}

TEST(GpuReduce, BoolMaxMin) {
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    for (const ReduceCase& c : {ReduceCase{{7, 33}, {1}}, ReduceCase{{33, 7}, {0}}, ReduceCase{{0, 3}, {0}}}) {
      SCOPED_TRACE(std::string(op) + " " + ShapeToString(c.shape));
      EXPECT_TRUE(OneNode(op).Input(Random(DataType::kBool, c.shape, 5)).Const(Axes(c.axes)).MatchesCpu());
    }
  }
}

TEST(GpuReduce, UnsupportedConfigurationsAreClearErrors) {
  Graph g;
  Value* x = g.GetOrAddValue("x");
  x->dtype = DataType::kBool;
  x->shape = FromStatic({4});
  x->has_shape = true;
  Node* n = g.AddNode("ReduceSum", "sum_of_bools");
  n->inputs.push_back(x);
  cuda::LayerSpec spec{*n, {{4}}, {{}}};
  auto r = cuda::TacticsFor(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sum_of_bools"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("bool"), std::string::npos) << r.status().ToString();

  x->dtype = DataType::kFloat64;  // Softmax runs float64 (test_gpu_reduce_f64.cpp); Hardmax does not
  n->op_type = "Hardmax";
  auto s = cuda::CreateLayer(spec, "default");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("float64"), std::string::npos) << s.status().ToString();
}

// ---------------- ArgMax / ArgMin ----------------
TEST(GpuArgReduce, AxesKeepdimsAndTies) {
  uint32_t seed = 300;
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
             {{1000}, 0}, {{7, 33}, 1}, {{7, 33}, 0}, {{7, 33}, -1}, {{3, 5000}, 1}, {{4097, 3}, 0},
             {{2, 3, 4, 5, 6}, 2}, {{5, 1, 3}, 1}}) {
      for (int keepdims : {0, 1}) {
        for (int last : {0, 1}) {
          SCOPED_TRACE(std::string(op) + " " + ShapeToString(shape) + " axis " + std::to_string(axis));
          // Random floats (no ties) and small integers stored as float (many ties).
          for (const Tensor& x : {Random(DataType::kFloat32, shape, seed), Ints(DataType::kFloat32, shape, seed)}) {
            EXPECT_TRUE(OneNode(op)
                            .Input(x)
                            .Attr("axis", Attribute::Int(axis))
                            .Attr("keepdims", Attribute::Int(keepdims))
                            .Attr("select_last_index", Attribute::Int(last))
                            .MatchesCpu());
          }
          ++seed;
        }
      }
    }
  }
}

TEST(GpuArgReduce, TypesAndNaN) {
  uint32_t seed = 400;
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16, DataType::kInt32, DataType::kInt64, DataType::kInt8,
                     DataType::kUInt8, DataType::kBool}) {
    for (const char* op : {"ArgMax", "ArgMin"}) {
      for (int last : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " " + DataTypeName(t));
        const Tensor x = t == DataType::kBool ? Random(t, {9, 33}, seed++) : Ints(t, {9, 33}, seed++, 0, 6);
        EXPECT_TRUE(OneNode(op).Input(x).Attr("axis", Attribute::Int(1)).Attr("select_last_index",
                                                                              Attribute::Int(last)).MatchesCpu());
        EXPECT_TRUE(OneNode(op).Input(x).Attr("axis", Attribute::Int(0)).Attr("select_last_index",
                                                                              Attribute::Int(last)).MatchesCpu());
      }
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = FromValues(DataType::kFloat32, {4, 5},
                              {nan, 1, 7, 2, 7,  1, nan, 3, 3, 0,  nan, nan, nan, nan, nan,  2, 2, nan, 1, 2});
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int last : {0, 1})
      EXPECT_TRUE(OneNode(op).Input(x).Attr("axis", Attribute::Int(1)).Attr("select_last_index",
                                                                            Attribute::Int(last)).MatchesCpu());
}

// ---------------- Softmax / LogSoftmax ----------------
TEST(GpuSoftmax, Float32ShapesAndAxes) {
  uint32_t seed = 500;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
             {{7, 33}, -1}, {{5, 1}, -1}, {{4, 32}, 1}, {{4, 128}, -1}, {{3, 1000}, -1}, {{2, 1024}, -1},
             {{2, 1025}, -1}, {{3, 4096}, -1}, {{3, 17, 5}, 1}, {{3, 17, 5}, 0}, {{2, 3, 4, 5, 6}, 2},
             {{1000}, 0}, {{0, 5}, 1}}) {
      SCOPED_TRACE(std::string(op) + " " + ShapeToString(shape) + " axis " + std::to_string(axis));
      EXPECT_TRUE(OneNode(op)
                      .Input(Random(DataType::kFloat32, shape, seed++, -50, 50))
                      .Attr("axis", Attribute::Int(axis))
                      .MatchesCpu(1e-5, 1e-4));
      EXPECT_TRUE(OneNode(op)
                      .Input(Random(DataType::kFloat32, shape, seed++, -3, 3))
                      .Attr("axis", Attribute::Int(axis))
                      .Tactic("block_rows")
                      .MatchesCpu(1e-5, 1e-4));
    }
    // Scalar input, opset < 13 flattening (axis == rank too), -inf and NaN rows.
    EXPECT_TRUE(OneNode(op).Input(FromValues(DataType::kFloat32, {}, {3})).Attr("axis", Attribute::Int(-1)).MatchesCpu());
    for (int64_t axis : {0, 1, 2, 3, -1}) {
      SCOPED_TRACE(std::string(op) + " flatten_2d axis " + std::to_string(axis));
      EXPECT_TRUE(OneNode(op)
                      .Input(Random(DataType::kFloat32, {2, 3, 40}, seed++))
                      .Attr("axis", Attribute::Int(axis))
                      .Attr("kiln_flatten_2d", Attribute::Int(1))
                      .MatchesCpu(1e-5, 1e-4));
    }
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    EXPECT_TRUE(OneNode(op)
                    .Input(FromValues(DataType::kFloat32, {3, 3}, {-inf, -inf, -inf, 1, nan, 2, 1, 2, -inf}))
                    .Attr("axis", Attribute::Int(1))
                    .MatchesCpu(1e-6, 1e-5));
  }
}

TEST(GpuSoftmax, HalfAndBFloat16) {
  uint32_t seed = 600;
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
               {{7, 33}, -1}, {{4, 128}, -1}, {{3, 1000}, -1}, {{3, 4096}, -1}, {{3, 17, 5}, 1}}) {
        SCOPED_TRACE(std::string(op) + " " + DataTypeName(t) + " " + ShapeToString(shape));
        EXPECT_TRUE(OneNode(op)
                        .Input(Random(t, shape, seed++, -5, 5))
                        .Attr("axis", Attribute::Int(axis))
                        .ReferenceInFloat32()
                        .MatchesCpu(2e-3, 1e-2));
      }
    }
  }
}

// ---------------- TopK ----------------
::testing::AssertionResult TopKMatches(const Tensor& x, int64_t k, int64_t axis, int largest, double tol = 0,
                                       bool ref_f32 = false) {
  OneNode node("TopK");
  node.Input(x)
      .Const(FromValues(DataType::kInt64, {1}, {static_cast<double>(k)}))
      .Attr("axis", Attribute::Int(axis))
      .Attr("largest", Attribute::Int(largest))
      .Outputs(2);
  if (ref_f32) node.ReferenceInFloat32();
  return node.MatchesCpu(tol, tol);
}

TEST(GpuTopK, ShapesKAndOrder) {
  uint32_t seed = 700;
  for (int largest : {1, 0}) {
    for (const auto& [shape, axis, k] : std::vector<std::tuple<Shape, int64_t, int64_t>>{
             {{7, 33}, -1, 5}, {{7, 33}, 1, 33}, {{7, 33}, 0, 7}, {{1}, 0, 1}, {{5, 17, 3}, 1, 4},
             {{3, 1000}, 1, 1000}, {{3, 1000}, 1, 1}, {{2, 2048}, 1, 100}, {{2, 3000}, 1, 10},
             {{2, 3000}, -1, 3000}, {{3000, 2}, 0, 17}, {{2, 3, 4, 5, 6}, 3, 2}, {{4, 6}, 1, 0}, {{0, 6}, 1, 3}}) {
      SCOPED_TRACE("shape " + ShapeToString(shape) + " axis " + std::to_string(axis) + " k " + std::to_string(k) +
                   " largest " + std::to_string(largest));
      EXPECT_TRUE(TopKMatches(Random(DataType::kFloat32, shape, seed++), k, axis, largest));
      EXPECT_TRUE(TopKMatches(Ints(DataType::kFloat32, shape, seed++), k, axis, largest));  // ties
    }
  }
}

TEST(GpuTopK, TypesAndNaN) {
  uint32_t seed = 800;
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16, DataType::kInt32, DataType::kInt64, DataType::kInt8,
                     DataType::kUInt8, DataType::kInt16, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64}) {
    for (int largest : {1, 0}) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + " largest " + std::to_string(largest));
      const bool low = t == DataType::kFloat16 || t == DataType::kBFloat16;
      EXPECT_TRUE(TopKMatches(Ints(t, {9, 40}, seed++, 0, 9), 7, 1, largest, 0, low));
      EXPECT_TRUE(TopKMatches(Ints(t, {2, 2500}, seed++, 0, 100), 20, 1, largest, 0, low));
      if (low) EXPECT_TRUE(TopKMatches(Random(t, {5, 300}, seed++), 50, 1, largest, 0, true));
    }
  }
  // uint64 values at and above 2^63 order as unsigned numbers (test_top_k_uint64's type).
  const Tensor big = FromValues(DataType::kUInt64, {2, 5},
                                {0, 9223372036854775808.0, 1, 18446744073709549568.0, 9223372036854774784.0, 7,
                                 18446744073709549568.0, 3, 9223372036854775808.0, 0});
  for (int largest : {1, 0})
    for (int64_t k : {1, 3, 5}) EXPECT_TRUE(TopKMatches(big, k, 1, largest));
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = FromValues(DataType::kFloat32, {2, 6}, {1, nan, 3, -inf, nan, 3, inf, 0, nan, 0, -1, inf});
  for (int largest : {1, 0})
    for (int64_t k : {1, 3, 6}) EXPECT_TRUE(TopKMatches(x, k, 1, largest));
}

// ---------------- CumSum ----------------
TEST(GpuCumSum, ShapesAxesAndFlags) {
  uint32_t seed = 900;
  for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
           {{1000}, 0}, {{7, 33}, 1}, {{7, 33}, 0}, {{3, 1000}, 1}, {{3, 1000}, 0}, {{3, 65}, -1}, {{1}, 0},
           {{2, 3, 4, 5, 6}, 2}, {{2, 3, 4, 5, 6}, 4}, {{0, 5}, 1}}) {
    for (int exclusive : {0, 1}) {
      for (int reverse : {0, 1}) {
        SCOPED_TRACE(ShapeToString(shape) + " axis " + std::to_string(axis) + " exclusive " +
                     std::to_string(exclusive) + " reverse " + std::to_string(reverse));
        const Tensor ax = FromValues(DataType::kInt64, {}, {static_cast<double>(axis)});
        EXPECT_TRUE(OneNode("CumSum")
                        .Input(Random(DataType::kFloat32, shape, seed++))
                        .Const(ax)
                        .Attr("exclusive", Attribute::Int(exclusive))
                        .Attr("reverse", Attribute::Int(reverse))
                        .MatchesCpu(1e-3, 1e-4));
        for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kInt8, DataType::kUInt8}) {
          EXPECT_TRUE(OneNode("CumSum")
                          .Input(Ints(t, shape, seed++, 0, 3))
                          .Const(ax)
                          .Attr("exclusive", Attribute::Int(exclusive))
                          .Attr("reverse", Attribute::Int(reverse))
                          .MatchesCpu());
        }
        for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
          EXPECT_TRUE(OneNode("CumSum")
                          .Input(Random(t, shape, seed++))
                          .Const(ax)
                          .Attr("exclusive", Attribute::Int(exclusive))
                          .Attr("reverse", Attribute::Int(reverse))
                          .ReferenceInFloat32()
                          .MatchesCpu(2e-2, 1e-2));
        }
      }
    }
  }
  // An int32 axis given as a runtime input.
  EXPECT_TRUE(OneNode("CumSum")
                  .Input(Random(DataType::kFloat32, {4, 300}, 3))
                  .Input(FromValues(DataType::kInt32, {1}, {-1}))
                  .MatchesCpu(1e-3, 1e-4));
}

}  // namespace
}  // namespace kiln::gputest
