// Differential GPU tests of Compress (every axis, negative axes, no axis, conditions shorter and longer than the axis,
// all-false conditions, many dtypes, conditions known on the host and computed on the device) and of
// BatchNormalization in training mode (2-D to 5-D inputs, odd channel counts and spatial sizes, values per channel
// beyond one block's chunk, the running-statistics outputs, float16/bfloat16/float64 data, mixed parameter types)
// against the CPU reference.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cuda/graph_runner.h"
#include "gpu_test_util.h"
#include "ops/infer.h"

namespace kiln::gputest {
namespace {

using A = Attribute;
using Shape = std::vector<int64_t>;
constexpr DataType kF32 = DataType::kFloat32, kF16 = DataType::kFloat16, kBF16 = DataType::kBFloat16;
constexpr DataType kF64 = DataType::kFloat64, kI64 = DataType::kInt64, kI32 = DataType::kInt32;
constexpr DataType kI8 = DataType::kInt8, kU8 = DataType::kUInt8, kBool = DataType::kBool;

// A bool condition of n entries, each true with probability p.
Tensor Condition(int64_t n, double p, uint32_t seed) {
  Tensor t(kBool, {n});
  std::mt19937 rng(seed);
  std::bernoulli_distribution b(p);
  for (int64_t i = 0; i < n; ++i) t.data<bool>()[i] = b(rng);
  return t;
}

OneNode Compress(const Tensor& x, const Tensor& cond, std::optional<int64_t> axis, bool cond_const = false) {
  OneNode n("Compress");
  n.Input(x);
  if (cond_const) n.Const(cond);
  else n.Input(cond);
  if (axis) n.Attr("axis", A::Int(*axis));
  return n;
}

// ---- Compress ----

TEST(GpuCompress, EveryAxisAndNegativeAxes) {
  uint32_t seed = 1;
  for (const Shape& shape : std::vector<Shape>{{7}, {3, 5}, {3, 5, 7}, {2, 3, 4, 5}, {1, 9, 1, 3}}) {
    const int64_t rank = static_cast<int64_t>(shape.size());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      const int64_t dim = shape[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
      SCOPED_TRACE(ShapeToString(shape) + " axis " + std::to_string(axis));
      const Tensor x = Random(kF32, shape, seed++, -3, 3);
      EXPECT_TRUE(Compress(x, Condition(dim, 0.5, seed++), axis).MatchesCpu(0, 0));
      EXPECT_TRUE(Compress(x, Condition(dim, 0.5, seed++), axis, true).MatchesCpu(0, 0)) << "constant condition";
      EXPECT_TRUE(Compress(x, Condition(dim, 1.0, seed++), axis).MatchesCpu(0, 0)) << "all true";
    }
  }
}

TEST(GpuCompress, NoAxisFlattens) {
  uint32_t seed = 100;
  for (const Shape& shape : std::vector<Shape>{{1}, {6}, {3, 2}, {2, 3, 4}, {4, 1, 5, 3}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    SCOPED_TRACE(ShapeToString(shape));
    const Tensor x = Random(kF32, shape, seed++);
    EXPECT_TRUE(Compress(x, Condition(n, 0.4, seed++), std::nullopt).MatchesCpu(0, 0));
    EXPECT_TRUE(Compress(x, Condition(n, 0.4, seed++), std::nullopt, true).MatchesCpu(0, 0)) << "constant";
    if (n > 1) EXPECT_TRUE(Compress(x, Condition(n - 1, 0.6, seed++), std::nullopt).MatchesCpu(0, 0)) << "shorter";
  }
  // test_compress_default_axis: [3, 2] and 5 entries [0, 1, 0, 0, 1].
  EXPECT_TRUE(Compress(FromValues(kF32, {3, 2}, {1, 2, 3, 4, 5, 6}), FromValues(kBool, {5}, {0, 1, 0, 0, 1}),
                       std::nullopt)
                  .MatchesCpu(0, 0));
}

TEST(GpuCompress, ShorterLongerAndAllFalseConditions) {
  const Tensor x = Random(kF32, {4, 9, 3}, 200);
  for (int64_t axis : {0, 1, 2, -2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const int64_t dim = x.shape()[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
    // Shorter: the entries past its end select nothing.
    EXPECT_TRUE(Compress(x, Condition(dim - 1, 0.7, 201), axis).MatchesCpu(0, 0));
    EXPECT_TRUE(Compress(x, Condition(1, 1.0, 202), axis).MatchesCpu(0, 0));
    EXPECT_TRUE(Compress(x, Condition(dim - 1, 0.7, 203), axis, true).MatchesCpu(0, 0)) << "constant";
    // Longer, its extra entries false.
    Tensor longer = Condition(dim + 3, 0.5, 204);
    for (int64_t j = dim; j < dim + 3; ++j) longer.data<bool>()[j] = false;
    EXPECT_TRUE(Compress(x, longer, axis).MatchesCpu(0, 0)) << "longer";
    // All false: an empty output.
    EXPECT_TRUE(Compress(x, Condition(dim, 0.0, 205), axis).MatchesCpu(0, 0)) << "all false";
    EXPECT_TRUE(Compress(x, Condition(dim, 0.0, 206), axis, true).MatchesCpu(0, 0)) << "all false, constant";
  }
  EXPECT_TRUE(Compress(x, Condition(x.numel(), 0.0, 207), std::nullopt).MatchesCpu(0, 0)) << "no axis, all false";
  // An empty condition and an empty input.
  EXPECT_TRUE(Compress(x, Tensor(kBool, {0}), 1).MatchesCpu(0, 0)) << "empty condition";
  EXPECT_TRUE(Compress(Tensor(kF32, {0, 5}), Condition(5, 0.5, 208), 1).MatchesCpu(0, 0)) << "empty input";
}

TEST(GpuCompress, EveryElementSizeAndRowWidth) {
  uint32_t seed = 300;
  // Rows of 1..N elements: copy units of 16, 8, 4, 2 and 1 bytes.
  for (DataType t : {kF32, kF16, kBF16, kF64, kI64, kI32, kI8, kU8, kBool}) {
    for (const Shape& shape : std::vector<Shape>{{5, 6, 3}, {3, 7, 8}, {2, 11, 1}, {6, 4, 16}, {3, 5, 33}}) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape));
      const Tensor x = Random(t, shape, seed++, 0, 100);
      EXPECT_TRUE(Compress(x, Condition(shape[1], 0.5, seed++), 1).MatchesCpu(0, 0));
      EXPECT_TRUE(Compress(x, Condition(shape[0], 0.5, seed++), 0).MatchesCpu(0, 0));
      EXPECT_TRUE(Compress(x, Condition(x.numel(), 0.3, seed++), std::nullopt).MatchesCpu(0, 0));
    }
  }
  // test_compress_bfloat16: [3, 2] along axis 0 by [0, 1, 1].
  EXPECT_TRUE(Compress(FromValues(kBF16, {3, 2}, {1, 2, 3, 4, 5, 6}), FromValues(kBool, {3}, {0, 1, 1}), 0)
                  .MatchesCpu(0, 0));
}

TEST(GpuCompress, LongConditionsSpanManyScanChunks) {
  // The selection walks the condition 4096 entries at a time.
  uint32_t seed = 400;
  for (int64_t n : {4095, 4096, 4097, 10000, 70001}) {
    SCOPED_TRACE(n);
    const Tensor x = Random(kF16, {n}, seed++);
    EXPECT_TRUE(Compress(x, Condition(n, 0.5, seed++), std::nullopt).Repeat(2).MatchesCpu(0, 0));
    EXPECT_TRUE(Compress(x, Condition(n, 0.02, seed++), 0).MatchesCpu(0, 0));
  }
  EXPECT_TRUE(Compress(Random(kF32, {2, 5000, 3}, seed++), Condition(5000, 0.5, seed++), 1).MatchesCpu(0, 0));
}

// Compress whose condition comes from a node on the device (Greater(c, 0); bool tensors of more than one element
// are not mirrored on the host), so the layer reads its count back and its output shape is open until it runs.
::testing::AssertionResult DeviceConditionMatchesCpu(const Tensor& x, const Tensor& c, std::optional<int64_t> axis) {
  auto build = [&]() -> Result<std::unique_ptr<Graph>> {
    auto g = std::make_unique<Graph>();
    g->opsets[""] = 21;
    auto input = [&](const std::string& name, const Tensor& t) {
      Value* v = g->GetOrAddValue(name);
      v->dtype = t.dtype();
      v->shape = FromStatic(t.shape());
      v->has_shape = true;
      v->is_graph_input = true;
      g->inputs.push_back(v);
      return v;
    };
    Value* vx = input("x", x);
    Value* vc = input("c", c);
    Value* zero = g->AddConstant("zero", Tensor(c.dtype(), {}));
    Node* gt = g->AddNode("Greater", "gt");
    gt->opset = 21;
    gt->inputs = {vc, zero};
    Value* cond = g->GetOrAddValue("cond");
    cond->producer = gt;
    gt->outputs = {cond};
    Node* n = g->AddNode("Compress", "compress");
    n->opset = 21;
    if (axis) n->attrs["axis"] = A::Int(*axis);
    n->inputs = {vx, cond};
    Value* out = g->GetOrAddValue("out");
    out->producer = n;
    out->is_graph_output = true;
    n->outputs = {out};
    g->outputs.push_back(out);
    KILN_RETURN_IF_ERROR(InferGraph(*g, InferOptions{}));
    return g;
  };
  auto g = build();
  if (!g.ok()) return ::testing::AssertionFailure() << "building the graph: " << g.status().ToString();
  const std::map<std::string, Tensor> feeds = {{"x", x}, {"c", c}};
  auto cpu = cpu::RunGraph(**g, feeds);
  if (!cpu.ok()) return ::testing::AssertionFailure() << "CPU: " << cpu.status().ToString();
  for (int repeat : {1, 2}) {
    cuda::GpuRunOptions o;
    o.repeat = repeat;
    o.poison_workspace = repeat > 1;
    auto gpu = cuda::RunGraph(**g, feeds, o);
    if (!gpu.ok()) return ::testing::AssertionFailure() << "GPU: " << gpu.status().ToString();
    const Tensor& want = cpu->at("out");
    const Tensor& got = gpu->at("out");
    if (got.dtype() != want.dtype() || got.shape() != want.shape())
      return ::testing::AssertionFailure() << "GPU " << got.Describe() << " vs CPU " << want.Describe();
    if (want.nbytes() > 0 && std::memcmp(got.raw(), want.raw(), want.nbytes()) != 0)
      return ::testing::AssertionFailure() << "GPU and CPU values differ (" << want.Describe() << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(GpuCompress, ConditionComputedOnTheDevice) {
  uint32_t seed = 500;
  EXPECT_TRUE(DeviceConditionMatchesCpu(Random(kF32, {4, 6, 5}, seed++), Random(kF32, {6}, seed++), 1));
  EXPECT_TRUE(DeviceConditionMatchesCpu(Random(kF32, {4, 6, 5}, seed++), Random(kF32, {5}, seed++), -1));
  EXPECT_TRUE(DeviceConditionMatchesCpu(Random(kI64, {4, 6, 5}, seed++, -9, 9), Random(kF32, {3}, seed++), 0))
      << "shorter";
  EXPECT_TRUE(DeviceConditionMatchesCpu(Random(kBF16, {3, 4}, seed++), Random(kF32, {12}, seed++), std::nullopt));
  EXPECT_TRUE(DeviceConditionMatchesCpu(Random(kBool, {3, 4}, seed++), Random(kF32, {4}, seed++), 1)) << "bool";
  EXPECT_TRUE(DeviceConditionMatchesCpu(Random(kF32, {3, 4}, seed++), Random(kF32, {4}, seed++, -2, -1), 1))
      << "all false";
  EXPECT_TRUE(DeviceConditionMatchesCpu(Random(kF16, {20000}, seed++), Random(kF32, {20000}, seed++), 0))
      << "many chunks";
}

// ---- BatchNormalization, training_mode = 1 ----

struct Tol {
  double atol, rtol;
};
Tol TrainingTol(DataType t) {
  if (t == kF16) return {1e-2, 1e-2};
  if (t == kBF16) return {3e-2, 2e-2};
  if (t == kF64) return {1e-12, 1e-12};
  return {1e-5, 1e-5};
}

// X of `shape` and type t, parameters of type p (input or constant), `outputs` of Y, running_mean, running_var.
OneNode BatchNormTraining(const Shape& shape, DataType t, DataType p, int outputs, uint32_t seed, bool consts = false) {
  const int64_t c = shape[1];
  OneNode n("BatchNormalization");
  if (t == kF16 || t == kBF16 || p == kF16 || p == kBF16) n.ReferenceInFloat32();
  n.Input(Random(t, shape, seed, -2, 3));
  const Tensor params[4] = {Random(p, {c}, seed + 1, 0.5, 1.5), Random(p, {c}, seed + 2),
                            Random(p, {c}, seed + 3), Random(p, {c}, seed + 4, 0.2, 2)};
  for (const Tensor& q : params) {
    if (consts) n.Const(q);
    else n.Input(q);
  }
  n.Attr("training_mode", A::Int(1)).Outputs(outputs);
  return n;
}

TEST(GpuBatchNormTraining, ShapesAndOutputs) {
  const std::vector<Shape> shapes = {{2, 3, 4, 5}, {4, 3},     {5, 7},        {1, 1, 1},       {3, 5, 9, 11},
                                     {2, 1, 7},    {8, 300, 7}, {1, 17, 3, 5, 2}, {2, 3, 20000}, {50000, 3}};
  uint32_t seed = 1000;
  for (const Shape& shape : shapes) {
    for (int outputs : {1, 2, 3}) {
      SCOPED_TRACE(ShapeToString(shape) + " outputs " + std::to_string(outputs));
      EXPECT_TRUE(BatchNormTraining(shape, kF32, kF32, outputs, seed).MatchesCpu(1e-5, 1e-5));
      seed += 10;
    }
    SCOPED_TRACE(ShapeToString(shape) + " constant parameters, poisoned workspace");
    EXPECT_TRUE(BatchNormTraining(shape, kF32, kF32, 3, seed, true).Repeat(2).MatchesCpu(1e-5, 1e-5));
    seed += 10;
  }
}

TEST(GpuBatchNormTraining, EpsilonMomentumAndNodeTestShapes) {
  // test_batchnorm_epsilon_training_mode / test_batchnorm_example_training_mode: [2, 3, 4, 5], three outputs.
  EXPECT_TRUE(BatchNormTraining({2, 3, 4, 5}, kF32, kF32, 3, 2000)
                  .Attr("epsilon", A::Float(1e-2f))
                  .MatchesCpu(1e-5, 1e-5));
  EXPECT_TRUE(BatchNormTraining({2, 3, 4, 5}, kF32, kF32, 3, 2010)
                  .Attr("momentum", A::Float(0.3f))
                  .Attr("epsilon", A::Float(1e-3f))
                  .MatchesCpu(1e-5, 1e-5));
  EXPECT_TRUE(BatchNormTraining({6, 5}, kF32, kF32, 3, 2020).Attr("momentum", A::Float(0.f)).MatchesCpu(1e-5, 1e-5));
  // A channel of one repeated value: variance 0.
  OneNode flat("BatchNormalization");
  flat.Input(FromValues(kF32, {2, 2, 2}, {1, 1, 3, 4, 1, 1, 5, 6}))
      .Input(FromValues(kF32, {2}, {1, 2}))
      .Input(FromValues(kF32, {2}, {0, 1}))
      .Input(FromValues(kF32, {2}, {0.5, 0.5}))
      .Input(FromValues(kF32, {2}, {1, 1}))
      .Attr("training_mode", A::Int(1))
      .Outputs(3);
  EXPECT_TRUE(flat.MatchesCpu(1e-5, 1e-5));
}

TEST(GpuBatchNormTraining, ReducedAndDoublePrecision) {
  uint32_t seed = 3000;
  for (DataType t : {kF16, kBF16, kF64}) {
    for (const Shape& shape : std::vector<Shape>{{2, 3, 4, 5}, {7, 5}, {3, 9, 33}, {2, 4, 20001}}) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape));
      const Tol tol = TrainingTol(t);
      // Parameters and statistics in X's type, then in float32 (opset 15's separate parameter types).
      EXPECT_TRUE(BatchNormTraining(shape, t, t, 3, seed).MatchesCpu(tol.atol, tol.rtol));
      EXPECT_TRUE(BatchNormTraining(shape, t, kF32, 3, seed + 10).MatchesCpu(tol.atol, tol.rtol)) << "float32 params";
      seed += 20;
    }
  }
  // float32 X with float16 and float64 statistics.
  EXPECT_TRUE(BatchNormTraining({3, 4, 5}, kF32, kF16, 3, seed).MatchesCpu(1e-2, 1e-2));
  EXPECT_TRUE(BatchNormTraining({3, 4, 5}, kF32, kF64, 3, seed + 10).MatchesCpu(1e-5, 1e-5));
}

}  // namespace
}  // namespace kiln::gputest
