// Differential tests of the normalization and pooling CUDA layers (LayerNormalization, GroupNormalization,
// InstanceNormalization, BatchNormalization; MaxPool, AveragePool, LpPool, Global*Pool) against the CPU
// reference: odd shapes, ranks 1..5, attribute variants, float32 tight, float16/bfloat16 against a float32
// reference, int8/uint8 MaxPool exact.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cuda/graph_runner.h"
#include "gpu_test_util.h"
#include "ops/infer.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

struct Tol {
  double atol, rtol;
};
// Per storage type: float32 tight; float16/bfloat16 outputs are rounded to their type.
Tol NormTol(DataType t) {
  if (t == DataType::kFloat16) return {1e-2, 1e-2};
  if (t == DataType::kBFloat16) return {3e-2, 2e-2};
  return {1e-4, 1e-4};
}
Tol PoolTol(DataType t) {
  if (t == DataType::kFloat16) return {5e-3, 5e-3};
  if (t == DataType::kBFloat16) return {2e-2, 1e-2};
  return {1e-5, 1e-5};
}

const DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

OneNode Ref(OneNode n, DataType t) {
  if (t != DataType::kFloat32) n.ReferenceInFloat32();
  return n;
}

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }

// ---- LayerNormalization ----

TEST(GpuNorm, LayerNormShapesAndDtypes) {
  // (shape, axis): small and odd rows, hidden 768 (vectorized, cached row), rows beyond the shared-memory cache.
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{1, 7}, -1},        {{3, 33}, -1},  {{1000}, 0},        {{2, 5, 768}, -1}, {{4, 10000}, -1},
      {{3, 9001}, 1},      {{2, 3, 4, 5, 6}, 2}, {{5, 1, 17}, 1}, {{64, 1024}, -1}, {{7, 129}, -1}};
  for (DataType t : kFloatTypes) {
    for (const auto& [shape, axis] : cases) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape) + " axis " + std::to_string(axis));
      const int64_t na = axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis;
      const Shape norm(shape.begin() + na, shape.end());
      const Tol tol = NormTol(t);
      EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                      .Input(Random(t, shape, 1, -2, 3))
                      .Const(Random(t, norm, 2, 0.5, 1.5))
                      .Const(Random(t, norm, 3))
                      .Attr("axis", Attribute::Int(axis))
                      .MatchesCpu(tol.atol, tol.rtol));
    }
  }
}

TEST(GpuNorm, LayerNormRowsInRegisters) {
  // Rows of cols % 8 == 0 take the register kernel: one warp per row (several rows per block, a partial last
  // block), 64..512 threads per row combining warps through shared memory, and packs that do not fill the last
  // thread. Beyond 16384 columns (and for odd columns) the block-per-row kernel runs.
  const std::vector<Shape> cases = {{1000, 8},  {37, 16},   {33, 768},  {5, 800},    {6, 1032},  {4, 2048},
                                    {3, 4096},  {3, 4104},  {2, 8192},  {2, 16384},  {2, 16392}, {2, 40000},
                                    {9, 3, 24}, {130, 256}, {3, 1, 64}};
  for (DataType t : kFloatTypes) {
    for (const Shape& shape : cases) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape));
      const Shape norm{shape.back()};
      const Tol tol = NormTol(t);
      EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                      .Input(Random(t, shape, 21, -2, 3))
                      .Const(Random(t, norm, 22, 0.5, 1.5))
                      .Const(Random(t, norm, 23))
                      .MatchesCpu(tol.atol, tol.rtol));
      // Runtime Scale without B, and the Mean / InvStdDev outputs.
      EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                      .Input(Random(t, shape, 24, 1, 2))
                      .Input(Random(t, norm, 25, 0.5, 1.5))
                      .Omitted()
                      .Outputs(3)
                      .MatchesCpu(tol.atol, tol.rtol));
    }
  }
}

// RMSNormalization (opset 23) on the three LayerNorm kernels (register, cached block-per-row, uncached), every
// float type, a non-last axis, a runtime Scale.
TEST(GpuNorm, RmsNormalization) {
  const std::vector<std::pair<Shape, int64_t>> cases = {{{4, 4096}, -1}, {{33, 768}, -1}, {{3, 129}, -1},
                                                        {{2, 20001}, -1}, {{2, 3, 4, 8}, 2}};
  for (DataType t : kFloatTypes) {
    for (const auto& [shape, axis] : cases) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape) + " axis " + std::to_string(axis));
      const int64_t na = axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis;
      const Shape norm(shape.begin() + na, shape.end());
      const Tol tol = NormTol(t);
      EXPECT_TRUE(Ref(OneNode("RMSNormalization"), t)
                      .Opset(23)
                      .Input(Random(t, shape, 41, -2, 3))
                      .Const(Random(t, norm, 42, 0.5, 1.5))
                      .Attr("axis", Attribute::Int(axis))
                      .Attr("epsilon", Attribute::Float(1e-6f))
                      .MatchesCpu(tol.atol, tol.rtol));
    }
    EXPECT_TRUE(Ref(OneNode("RMSNormalization"), t)
                    .Opset(23)
                    .Input(Random(t, {5, 64}, 43, -1, 1))
                    .Input(Random(t, {64}, 44, 0.5, 1.5))
                    .MatchesCpu(NormTol(t).atol, NormTol(t).rtol));
  }
}

// Output 3 (kiln's, from plan/fold_quantized_casts.cpp): Y quantized per tensor as it is written, on the register
// kernel, the vectorized block-per-row kernel and the scalar one, int8 and uint8. The GPU's Y may differ from the
// CPU's by a rounding step, and then its quantized value by one step: a few percent of them at most.
TEST(GpuNorm, LayerNormQuantizedOutput) {
  const std::vector<Shape> cases = {{33, 768}, {3, 20000}, {5, 37}};
  for (DataType t : {DataType::kFloat16, DataType::kFloat32}) {
    for (const Shape& shape : cases) {
      for (DataType q : {DataType::kInt8, DataType::kUInt8}) {
        SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape) + " to " + DataTypeName(q));
        const Shape norm{shape.back()};
        EXPECT_TRUE(OneNode("LayerNormalization")
                        .Input(Random(t, shape, 41, -2, 3))
                        .Const(Random(t, norm, 42, 0.5, 1.5))
                        .Const(Random(t, norm, 43))
                        .Outputs(4)
                        .Attr("kiln_q_scale", Attribute::Float(0.0119f))
                        .Attr("kiln_q_zero_point", Attribute::Int(q == DataType::kUInt8 ? 120 : -5))
                        .Attr("kiln_q_type", Attribute::Int(static_cast<int64_t>(q)))
                        .IntegersOneOff(0.03)
                        .MatchesCpu(1e-2, 1e-2));
      }
    }
  }
}

// Output 3 with Mean and InvStdDev omitted (as plan/fold_quantized_casts.cpp leaves a LayerNormalization), run node
// by node as `kiln compare --markAll` runs an engine: the omitted outputs get no buffer, Y and its quantized copy
// agree with the CPU.
TEST(GpuNorm, LayerNormQuantizedOutputWithoutStats) {
  Graph g;
  g.opsets[""] = 21;
  Value* x = g.GetOrAddValue("x");
  x->dtype = DataType::kFloat16;
  x->shape = FromStatic({16, 768});
  x->has_shape = true;
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Node* n = g.AddNode("LayerNormalization", "ln");
  n->opset = 21;
  n->inputs = {x, g.AddConstant("gamma", Random(DataType::kFloat16, {768}, 52, 0.5, 1.5)),
               g.AddConstant("beta", Random(DataType::kFloat16, {768}, 53))};
  Value* y = g.GetOrAddValue("y");
  Value* q = g.GetOrAddValue("q");
  n->outputs = {y, nullptr, nullptr, q};
  y->producer = q->producer = n;
  n->attrs["kiln_q_scale"] = Attribute::Float(0.0119f);
  n->attrs["kiln_q_zero_point"] = Attribute::Int(-5);
  n->attrs["kiln_q_type"] = Attribute::Int(static_cast<int64_t>(DataType::kInt8));
  for (Value* o : {y, q}) {
    o->is_graph_output = true;
    g.outputs.push_back(o);
  }
  ASSERT_TRUE(InferGraph(g, InferOptions{}).ok());
  const std::map<std::string, Tensor> feeds = {{"x", Random(DataType::kFloat16, {16, 768}, 51, -2, 3)}};
  auto cpu = cpu::RunGraph(g, feeds);
  auto gpu = cuda::RunGraph(g, feeds);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  const Tensor &cq = cpu->at("q"), &gq = gpu->at("q");
  ASSERT_EQ(gq.dtype(), DataType::kInt8);
  ASSERT_EQ(gq.numel(), cq.numel());
  int64_t off = 0;
  for (int64_t i = 0; i < cq.numel(); ++i) {
    const double d = std::fabs(cq.GetAsDouble(i) - gq.GetAsDouble(i));
    EXPECT_LE(d, 1) << "element " << i;
    off += d != 0;
  }
  EXPECT_LE(off, cq.numel() / 30);  // one step off where the GPU's Y is a rounding step from the CPU's
}

TEST(GpuNorm, LayerNormNoBiasEpsilonAndStatsOutputs) {
  for (DataType t : kFloatTypes) {
    SCOPED_TRACE(DataTypeName(t));
    const Tol tol = NormTol(t);
    EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                    .Input(Random(t, {6, 100}, 4))
                    .Const(Random(t, {100}, 5))
                    .Attr("epsilon", Attribute::Float(1e-2f))
                    .MatchesCpu(tol.atol, tol.rtol));
    // Mean and InvStdDev (stash_type float32) of a rank-3 input normalized over the last two dims.
    EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                    .Input(Random(t, {3, 7, 24}, 6, -1, 2))
                    .Const(Random(t, {7, 24}, 7))
                    .Const(Random(t, {7, 24}, 8))
                    .Attr("axis", Attribute::Int(1))
                    .Outputs(3)
                    .MatchesCpu(tol.atol, tol.rtol));
  }
}

TEST(GpuNorm, LayerNormRuntimeAndBroadcastParameters) {
  for (DataType t : kFloatTypes) {
    SCOPED_TRACE(DataTypeName(t));
    const Tol tol = NormTol(t);
    // Scale and B as runtime inputs (converted into the workspace on every run).
    EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                    .Input(Random(t, {9, 64}, 9))
                    .Input(Random(t, {64}, 10))
                    .Input(Random(t, {64}, 11))
                    .MatchesCpu(tol.atol, tol.rtol));
    // Broadcast Scale/B onto normalized dims [4, 5, 6]: constant (folded on the host) and runtime (on device).
    EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                    .Input(Random(t, {2, 4, 5, 6}, 12))
                    .Const(Random(t, {5, 1}, 13))
                    .Const(Random(t, {1, 6}, 14))
                    .Attr("axis", Attribute::Int(1))
                    .MatchesCpu(tol.atol, tol.rtol));
    EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                    .Input(Random(t, {2, 4, 5, 6}, 15))
                    .Input(Random(t, {5, 1}, 16))
                    .Input(Random(t, {4, 1, 6}, 17))
                    .Attr("axis", Attribute::Int(1))
                    .MatchesCpu(tol.atol, tol.rtol));
    // Scale with leading 1s (same size as the normalized dims).
    EXPECT_TRUE(Ref(OneNode("LayerNormalization"), t)
                    .Input(Random(t, {3, 5, 48}, 18))
                    .Const(Random(t, {1, 1, 48}, 19))
                    .Omitted()
                    .MatchesCpu(tol.atol, tol.rtol));
  }
}

TEST(GpuNorm, LayerNormEmptyRows) {
  EXPECT_TRUE(OneNode("LayerNormalization")
                  .Input(Random(DataType::kFloat32, {0, 8}, 1))
                  .Const(Random(DataType::kFloat32, {8}, 2))
                  .MatchesCpu(0, 0));
}

// ---- GroupNormalization / InstanceNormalization ----

TEST(GpuNorm, GroupNorm) {
  // (shape, groups)
  const std::vector<std::pair<Shape, int64_t>> cases = {{{2, 6, 5, 7}, 3},   {{1, 32, 16, 16}, 8},
                                                        {{3, 4, 9}, 4},       {{2, 8, 1}, 2},
                                                        {{1, 4, 3, 4, 5}, 2}, {{2, 64, 33, 33}, 32}};
  for (DataType t : kFloatTypes) {
    for (const auto& [shape, groups] : cases) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape) + " groups " + std::to_string(groups));
      const Tol tol = NormTol(t);
      const int64_t c = shape[1];
      EXPECT_TRUE(Ref(OneNode("GroupNormalization"), t)
                      .Input(Random(t, shape, 1, -1, 2))
                      .Const(Random(t, {c}, 2, 0.5, 1.5))
                      .Const(Random(t, {c}, 3))
                      .Attr("num_groups", Attribute::Int(groups))
                      .MatchesCpu(tol.atol, tol.rtol));
      // Opset < 21 semantics (scale/bias per group), runtime parameters, another epsilon.
      EXPECT_TRUE(Ref(OneNode("GroupNormalization"), t)
                      .Input(Random(t, shape, 4, -1, 2))
                      .Input(Random(t, {groups}, 5, 0.5, 1.5))
                      .Input(Random(t, {groups}, 6))
                      .Attr("num_groups", Attribute::Int(groups))
                      .Attr("kiln_scale_per_group", Attribute::Int(1))
                      .Attr("epsilon", Attribute::Float(1e-3f))
                      .MatchesCpu(tol.atol, tol.rtol));
    }
  }
}

TEST(GpuNorm, InstanceNorm) {
  const std::vector<Shape> shapes = {{2, 3, 17}, {1, 4, 8, 8}, {3, 5, 2}, {2, 3, 4, 5, 6}, {1, 2, 1000}};
  for (DataType t : kFloatTypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape));
      const Tol tol = NormTol(t);
      EXPECT_TRUE(Ref(OneNode("InstanceNormalization"), t)
                      .Input(Random(t, shape, 7, -1, 2))
                      .Const(Random(t, {shape[1]}, 8, 0.5, 1.5))
                      .Const(Random(t, {shape[1]}, 9))
                      .MatchesCpu(tol.atol, tol.rtol));
    }
  }
}

// ---- BatchNormalization ----

TEST(GpuNorm, BatchNormInference) {
  const std::vector<Shape> shapes = {{2, 3, 5, 7}, {4, 3}, {1, 16, 8, 8}, {2, 5, 1001}, {1, 2, 3, 4, 5}};
  for (DataType t : kFloatTypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape));
      const Tol tol = NormTol(t);
      const int64_t c = shape[1];
      // Constant parameters (folded at creation).
      EXPECT_TRUE(Ref(OneNode("BatchNormalization"), t)
                      .Input(Random(t, shape, 1, -2, 2))
                      .Const(Random(t, {c}, 2, 0.5, 1.5))
                      .Const(Random(t, {c}, 3))
                      .Const(Random(t, {c}, 4))
                      .Const(Random(t, {c}, 5, 0.2, 2))
                      .MatchesCpu(tol.atol, tol.rtol));
      // Runtime float32 parameters with X in any type; another epsilon.
      EXPECT_TRUE(Ref(OneNode("BatchNormalization"), t)
                      .Input(Random(t, shape, 6, -2, 2))
                      .Input(Random(DataType::kFloat32, {c}, 7, 0.5, 1.5))
                      .Input(Random(DataType::kFloat32, {c}, 8))
                      .Input(Random(DataType::kFloat32, {c}, 9))
                      .Input(Random(DataType::kFloat32, {c}, 10, 0.2, 2))
                      .Attr("epsilon", Attribute::Float(1e-3f))
                      .MatchesCpu(tol.atol, tol.rtol));
    }
  }
}

TEST(GpuNorm, BatchNormPerElement) {
  // spatial = 0: parameters per (channel, position). (Training mode: test_gpu_compress_bn.cpp.)
  EXPECT_TRUE(OneNode("BatchNormalization")
                  .Input(Random(DataType::kFloat32, {2, 3, 5}, 1))
                  .Const(Random(DataType::kFloat32, {3, 5}, 2))
                  .Const(Random(DataType::kFloat32, {3, 5}, 3))
                  .Const(Random(DataType::kFloat32, {3, 5}, 4))
                  .Const(Random(DataType::kFloat32, {3, 5}, 5, 0.2, 2))
                  .Attr("spatial", Attribute::Int(0))
                  .MatchesCpu(1e-5, 1e-5));
}

// ---- Windowed pools ----

struct PoolCase {
  Shape shape;
  std::map<std::string, Attribute> attrs;
};

std::vector<PoolCase> PoolCases() {
  return {
      {{2, 3, 9, 11}, {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}}},
      {{1, 2, 10, 10}, {{"kernel_shape", Ints({2, 2})}}},
      {{2, 2, 8, 9}, {{"kernel_shape", Ints({3, 2})}, {"dilations", Ints({2, 2})}, {"pads", Ints({0, 1, 2, 0})}}},
      // ceil_mode: the last window starts inside the input and runs past it.
      {{1, 3, 7, 8},
       {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 3})}, {"ceil_mode", Attribute::Int(1)}}},
      {{1, 2, 6, 6},
       {{"kernel_shape", Ints({3, 3})},
        {"strides", Ints({2, 2})},
        {"pads", Ints({1, 1, 1, 1})},
        {"ceil_mode", Attribute::Int(1)}}},
      {{2, 3, 7, 10},
       {{"kernel_shape", Ints({3, 4})}, {"strides", Ints({2, 3})}, {"auto_pad", Attribute::String("SAME_UPPER")}}},
      {{2, 3, 7, 10},
       {{"kernel_shape", Ints({4, 3})}, {"strides", Ints({2, 2})}, {"auto_pad", Attribute::String("SAME_LOWER")}}},
      {{2, 3, 7, 10}, {{"kernel_shape", Ints({3, 3})}, {"auto_pad", Attribute::String("VALID")}}},
      {{2, 3, 17}, {{"kernel_shape", Ints({4})}, {"strides", Ints({3})}, {"pads", Ints({2, 1})}}},
      {{1, 2, 1000}, {{"kernel_shape", Ints({5})}, {"strides", Ints({2})}, {"ceil_mode", Attribute::Int(1)}}},
      {{1, 2, 5, 6, 7}, {{"kernel_shape", Ints({2, 3, 2})}, {"pads", Ints({1, 0, 1, 0, 1, 1})}}},
      {{2, 1, 6, 7, 5},
       {{"kernel_shape", Ints({3, 3, 3})}, {"strides", Ints({2, 2, 2})}, {"ceil_mode", Attribute::Int(1)}}},
      {{1, 2, 10, 11},  // ceil_mode with dilations and uneven pads: windows overhang the end pads
       {{"kernel_shape", Ints({3, 3})},
        {"strides", Ints({3, 2})},
        {"dilations", Ints({2, 2})},
        {"pads", Ints({1, 0, 0, 1})},
        {"ceil_mode", Attribute::Int(1)}}},
      {{8, 64, 56, 56}, {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}}},
  };
}

OneNode WithAttrs(OneNode n, const std::map<std::string, Attribute>& attrs) {
  for (const auto& [k, v] : attrs) n.Attr(k, v);
  return n;
}

TEST(GpuPool, MaxPoolFloat) {
  for (DataType t : kFloatTypes) {
    for (const PoolCase& c : PoolCases()) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(c.shape));
      // The maximum is one of the inputs: exact in every type.
      EXPECT_TRUE(Ref(WithAttrs(OneNode("MaxPool"), c.attrs), t).Input(Random(t, c.shape, 1)).MatchesCpu(0, 0));
    }
  }
}

TEST(GpuPool, MaxPoolIndicesAndStorageOrder) {
  for (const PoolCase& c : PoolCases()) {
    for (int64_t order : {0, 1}) {
      SCOPED_TRACE(ShapeToString(c.shape) + " storage_order " + std::to_string(order));
      EXPECT_TRUE(WithAttrs(OneNode("MaxPool"), c.attrs)
                      .Input(Random(DataType::kFloat32, c.shape, 2))
                      .Attr("storage_order", Attribute::Int(order))
                      .Outputs(2)
                      .MatchesCpu(0, 0));
    }
  }
}

TEST(GpuPool, MaxPoolInt8UInt8) {
  for (DataType t : {DataType::kInt8, DataType::kUInt8}) {
    for (const PoolCase& c : PoolCases()) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(c.shape));
      const double lo = t == DataType::kInt8 ? -128 : 0, hi = t == DataType::kInt8 ? 127 : 255;
      EXPECT_TRUE(WithAttrs(OneNode("MaxPool"), c.attrs).Input(Random(t, c.shape, 3, lo, hi)).MatchesCpu(0, 0));
    }
  }
}

// At opset 21 and 22 (AveragePool-22: count_include_pad leaves out a ceil_mode window's overhang past the end pads).
TEST(GpuPool, AveragePool) {
  for (DataType t : kFloatTypes) {
    for (const PoolCase& c : PoolCases()) {
      for (int64_t count_pad : {0, 1}) {
        for (int64_t opset : {21, 22}) {
          SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(c.shape) + " count_include_pad " +
                       std::to_string(count_pad) + " opset " + std::to_string(opset));
          const Tol tol = PoolTol(t);
          EXPECT_TRUE(Ref(WithAttrs(OneNode("AveragePool"), c.attrs), t)
                          .Opset(opset)
                          .Input(Random(t, c.shape, 4))
                          .Attr("count_include_pad", Attribute::Int(count_pad))
                          .MatchesCpu(tol.atol, tol.rtol));
        }
      }
    }
  }
}

TEST(GpuPool, LpPool) {
  for (DataType t : kFloatTypes) {
    for (const PoolCase& c : PoolCases()) {
      for (int64_t p : {1, 2, 3}) {
        SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(c.shape) + " p " + std::to_string(p));
        const Tol tol = t == DataType::kFloat32 ? Tol{1e-4, 1e-4} : PoolTol(t);
        EXPECT_TRUE(Ref(WithAttrs(OneNode("LpPool"), c.attrs), t)
                        .Input(Random(t, c.shape, 5))
                        .Attr("p", Attribute::Int(p))
                        .MatchesCpu(tol.atol, tol.rtol));
      }
    }
  }
}

TEST(GpuPool, UnsupportedDtypeIsAClearError) {
  auto r = OneNode("MaxPool")
               .Input(Random(DataType::kFloat64, {1, 2, 5, 5}, 1))
               .Attr("kernel_shape", Ints({2, 2}))
               .MatchesCpu();
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("float64"), std::string::npos) << r.message();
}

// ---- Global pools ----

TEST(GpuPool, GlobalPools) {
  // Small planes (one warp per plane), large planes (one block per plane), ranks 3..5, a 0-size spatial dim.
  const std::vector<Shape> shapes = {{2, 3, 7, 7},  {1, 2, 100, 100}, {3, 5, 1000}, {1, 3, 4, 5, 6},
                                     {4, 2048, 1, 1}, {2, 3, 1}, {1, 1, 70000}, {2, 3, 0}};
  for (DataType t : kFloatTypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + ShapeToString(shape));
      const Tol tol = PoolTol(t);
      EXPECT_TRUE(Ref(OneNode("GlobalMaxPool"), t).Input(Random(t, shape, 1)).MatchesCpu(0, 0));
      EXPECT_TRUE(Ref(OneNode("GlobalAveragePool"), t).Input(Random(t, shape, 2)).MatchesCpu(tol.atol, tol.rtol));
      for (int64_t p : {1, 2, 3}) {
        const Tol lp = t == DataType::kFloat32 ? Tol{1e-4, 1e-4} : tol;
        EXPECT_TRUE(Ref(OneNode("GlobalLpPool"), t)
                        .Input(Random(t, shape, 3))
                        .Attr("p", Attribute::Int(p))
                        .MatchesCpu(lp.atol, lp.rtol));
      }
    }
  }
}

}  // namespace
}  // namespace kiln::gputest
