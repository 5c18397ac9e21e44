// Differential tests of the CUDA MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv and Det layers
// (integer_ops_layers.cpp, integer_ops.cu) against the CPU reference: int8/uint8 operand pairs, sizes off the 64 x 64
// x 32 tiles, 1-D operands and batch broadcasting, zero points and scales per tensor and per row / column / output
// channel (constants and run-time inputs), float16/bfloat16 scales, rounding ties, sums past 32 bits, groups, pads,
// auto_pad, strides, dilations, 1 to 3 spatial dims, bias, empty tensors; Det of batches, of singular matrices, of
// matrices past the shared-memory size. Integer outputs must match exactly, Det's float32/float64 within rounding of
// the same double arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

double Lo(DataType t) { return t == DataType::kUInt8 ? 0 : -128; }
double Hi(DataType t) { return t == DataType::kUInt8 ? 255 : 127; }

Tensor Random8(DataType t, const Shape& s, uint32_t seed) { return Random(t, s, seed, Lo(t), Hi(t)); }

// A zero point of type t: `len` < 0 a scalar (rank 0), 0 a one-element vector, else a vector of len values.
Tensor ZeroPoint(DataType t, int64_t len, uint32_t seed) {
  if (len < 0) return Random(t, {}, seed, Lo(t) + 20, Hi(t) - 20);
  return Random(t, {len == 0 ? 1 : len}, seed, Lo(t) + 20, Hi(t) - 20);
}

Tensor Scale(DataType t, int64_t len, uint32_t seed, double lo = 0.002, double hi = 0.02) {
  if (len < 0) return Random(t, {}, seed, lo, hi);
  return Random(t, {len == 0 ? 1 : len}, seed, lo, hi);
}

const DataType k8[] = {DataType::kUInt8, DataType::kInt8};

// ---- MatMulInteger ----

struct MmCase {
  Shape a, b;
  int64_t a_zp = -1, b_zp = -1;  // -2: omitted; -1: scalar; 0: one-element vector; else per row / column
};

TEST(GpuMatMulInteger, MatchesTheCpuReference) {
  const std::vector<MmCase> cases = {
      {{4, 3}, {3, 2}, 0, 0},          {{1, 1}, {1, 1}, -2, -2},         {{65, 33}, {33, 67}, 65, 67},
      {{130, 97}, {97, 129}, -1, 129}, {{7, 300}, {300, 5}, 7, -2},      {{37}, {37, 9}, -1, 9},
      {{6, 37}, {37}, 6, -1},          {{40}, {40}, -1, -1},             {{2, 1, 5, 7}, {3, 7, 6}, 5, 6},
      {{5, 7}, {4, 7, 3}, -2, 3},      {{3, 2, 9, 11}, {11, 4}, 9, -1},  {{2, 3, 1, 70}, {1, 1, 70, 66}, 1, 66},
      {{64, 32}, {32, 64}, 64, 64},    {{3, 0, 5}, {5, 4}, -1, -1},      {{3, 6, 0}, {0, 4}, 6, 4},
  };
  uint32_t seed = 1;
  for (const MmCase& c : cases)
    for (DataType ta : k8)
      for (DataType tb : k8)
        for (bool consts : {false, true}) {
          OneNode n("MatMulInteger");
          n.Input(Random8(ta, c.a, seed++));
          if (consts) n.Const(Random8(tb, c.b, seed++));
          else n.Input(Random8(tb, c.b, seed++));
          const bool any_zp = c.a_zp != -2 || c.b_zp != -2;
          if (c.a_zp != -2) {
            Tensor z = ZeroPoint(ta, c.a_zp, seed++);
            consts ? n.Const(z) : n.Input(z);
          } else if (any_zp) {
            n.Omitted();
          }
          if (c.b_zp != -2) {
            Tensor z = ZeroPoint(tb, c.b_zp, seed++);
            consts ? n.Const(z) : n.Input(z);
          }
          EXPECT_TRUE(n.MatchesCpu(0, 0)) << ShapeToString(c.a) << " x " << ShapeToString(c.b) << " "
                                          << DataTypeName(ta) << " x " << DataTypeName(tb) << " zero points "
                                          << c.a_zp << " " << c.b_zp << (consts ? " (constants)" : "");
        }
}

TEST(GpuMatMulInteger, SumsPast32BitsKeepTheirLowBits) {
  // 40000 products of 255 * 255 pass 2^31: the CPU sums in int64 and stores the low 32 bits.
  EXPECT_TRUE(OneNode("MatMulInteger")
                  .Input(Random(DataType::kUInt8, {2, 40000}, 3, 250, 255))
                  .Input(Random(DataType::kUInt8, {40000, 3}, 4, 250, 255))
                  .MatchesCpu(0, 0));
}

// ---- QLinearMatMul ----

struct QmmCase {
  Shape a, b;
  int64_t a_per = -1, b_per = -1;  // scale and zero point: -1 scalar, 0 one-element vector, else per row / column
};

TEST(GpuQLinearMatMul, MatchesTheCpuReference) {
  const std::vector<QmmCase> cases = {
      {{2, 4}, {4, 3}, 0, 0},         {{2, 2, 4}, {2, 4, 3}, 0, 0}, {{65, 33}, {33, 67}, 65, 67},
      {{3, 130, 97}, {97, 129}, -1, 129}, {{2, 1, 5, 70}, {3, 70, 6}, 5, 6}, {{37}, {37, 9}, -1, 9},
      {{6, 37}, {37}, 6, -1},         {{1, 1}, {1, 1}, -1, -1},     {{9, 200}, {200, 64}, 9, -1},
  };
  uint32_t seed = 1000;
  for (const QmmCase& c : cases)
    for (DataType ta : k8)
      for (DataType tb : k8)
        for (DataType ty : k8)
          for (DataType ts : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
            const int64_t k = c.a.back();
            // y_scale near the typical |sum| * a_scale * b_scale / 60: outputs spread over the 8-bit range.
            const double typical = std::sqrt(static_cast<double>(k)) * 5000 * 0.01 * 0.01 / 60;
            OneNode n("QLinearMatMul");
            n.Input(Random8(ta, c.a, seed++))
                .Input(Scale(ts, c.a_per, seed++, 0.005, 0.015))
                .Input(ZeroPoint(ta, c.a_per, seed++))
                .Input(Random8(tb, c.b, seed++))
                .Const(Scale(ts, c.b_per, seed++, 0.005, 0.015))
                .Const(ZeroPoint(tb, c.b_per, seed++))
                .Input(Scale(ts, 0, seed++, typical * 0.5, typical * 1.5))
                .Input(ZeroPoint(ty, 0, seed++));
            EXPECT_TRUE(n.MatchesCpu(0, 0)) << ShapeToString(c.a) << " x " << ShapeToString(c.b) << " "
                                            << DataTypeName(ta) << " x " << DataTypeName(tb) << " -> "
                                            << DataTypeName(ty) << ", scales " << DataTypeName(ts) << " per "
                                            << c.a_per << " / " << c.b_per;
          }
}

TEST(GpuQLinearMatMul, RoundsTiesToEvenAndSaturates) {
  // a_scale * b_scale / y_scale = 0.5 or 0.25: many products land on .5; large sums saturate.
  uint32_t seed = 2000;
  for (double a_scale : {0.5, 0.25})
    for (DataType ty : k8) {
      EXPECT_TRUE(OneNode("QLinearMatMul")
                      .Input(Random(DataType::kInt8, {17, 3}, seed++, -6, 6))
                      .Input(FromValues(DataType::kFloat32, {}, {a_scale}))
                      .Input(FromValues(DataType::kInt8, {}, {1}))
                      .Input(Random(DataType::kInt8, {3, 19}, seed++, -6, 6))
                      .Input(FromValues(DataType::kFloat32, {}, {1.0}))
                      .Input(FromValues(DataType::kInt8, {}, {-2}))
                      .Input(FromValues(DataType::kFloat32, {}, {1.0}))
                      .Input(FromValues(ty, {}, {ty == DataType::kUInt8 ? 100.0 : 3.0}))
                      .MatchesCpu(0, 0))
          << a_scale << " " << DataTypeName(ty);
      EXPECT_TRUE(OneNode("QLinearMatMul")
                      .Input(Random8(DataType::kUInt8, {5, 300}, seed++))
                      .Input(FromValues(DataType::kFloat32, {}, {a_scale}))
                      .Input(FromValues(DataType::kUInt8, {}, {0}))
                      .Input(Random8(DataType::kUInt8, {300, 7}, seed++))
                      .Input(FromValues(DataType::kFloat32, {}, {1.0}))
                      .Input(FromValues(DataType::kUInt8, {}, {0}))
                      .Input(FromValues(DataType::kFloat32, {}, {1.0}))
                      .Input(FromValues(ty, {}, {0}))
                      .MatchesCpu(0, 0))
          << "saturating " << a_scale << " " << DataTypeName(ty);
    }
  // Sums past 2^31: the CPU converts its int64 sum to float.
  EXPECT_TRUE(OneNode("QLinearMatMul")
                  .Input(Random(DataType::kUInt8, {2, 40000}, seed++, 250, 255))
                  .Input(FromValues(DataType::kFloat32, {}, {1e-4}))
                  .Input(FromValues(DataType::kUInt8, {}, {0}))
                  .Input(Random(DataType::kUInt8, {40000, 3}, seed++, 250, 255))
                  .Input(FromValues(DataType::kFloat32, {}, {1e-4}))
                  .Input(FromValues(DataType::kUInt8, {}, {0}))
                  .Input(FromValues(DataType::kFloat32, {}, {1.0}))
                  .Input(FromValues(DataType::kUInt8, {}, {3}))
                  .MatchesCpu(0, 0));
}

// ---- ConvInteger / QLinearConv ----

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }

struct ConvCase {
  Shape x, w;
  std::map<std::string, Attribute> attrs;
  bool w_per_channel = true;
};

std::vector<ConvCase> ConvCases() {
  return {
      {{1, 1, 3, 3}, {2, 1, 2, 2}, {{"pads", Ints({1, 1, 1, 1})}}},
      {{1, 1, 3, 3}, {1, 1, 2, 2}, {}, false},
      {{2, 5, 9, 7}, {6, 5, 3, 3}, {{"pads", Ints({1, 2, 0, 1})}, {"strides", Ints({2, 1})}}},
      {{1, 8, 11, 13}, {8, 1, 3, 3},
       {{"group", Attribute::Int(8)}, {"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Ints({2, 2})}}},
      {{1, 6, 10, 9}, {9, 2, 3, 2},
       {{"group", Attribute::Int(3)}, {"auto_pad", Attribute::String("SAME_LOWER")}, {"dilations", Ints({2, 3})}},
       false},
      {{2, 4, 8, 8}, {4, 4, 3, 3}, {{"auto_pad", Attribute::String("VALID")}, {"strides", Ints({3, 2})}}},
      {{3, 4, 17}, {7, 4, 5}, {{"pads", Ints({2, 1})}, {"strides", Ints({3})}, {"dilations", Ints({2})}}},
      {{1, 3, 5, 6, 7}, {4, 3, 3, 2, 3}, {{"pads", Ints({1, 0, 1, 1, 1, 0})}, {"strides", Ints({1, 2, 1})}}},
      {{2, 67, 20, 19}, {70, 67, 3, 3}, {{"pads", Ints({1, 1, 1, 1})}}},  // K = 603, 380 positions, 70 channels
      {{1, 4, 5, 5}, {130, 2, 1, 1}, {{"group", Attribute::Int(2)}}},     // 65 output channels per group
      {{0, 3, 5, 5}, {4, 3, 3, 3}, {}},                                   // no images
  };
}

std::string Describe(const ConvCase& c) { return ShapeToString(c.x) + " * " + ShapeToString(c.w); }

TEST(GpuConvInteger, MatchesTheCpuReference) {
  uint32_t seed = 3000;
  for (const ConvCase& c : ConvCases())
    for (DataType tx : k8)
      for (DataType tw : k8)
        for (int zps : {0, 1, 2}) {  // none; x's only; both (w's per channel where the case says)
          OneNode n("ConvInteger");
          n.Input(Random8(tx, c.x, seed++));
          n.Const(Random8(tw, c.w, seed++));
          if (zps >= 1) n.Input(ZeroPoint(tx, -1, seed++));
          if (zps == 2) n.Const(ZeroPoint(tw, c.w_per_channel ? c.w[0] : -1, seed++));
          for (const auto& [k, v] : c.attrs) n.Attr(k, v);
          EXPECT_TRUE(n.MatchesCpu(0, 0)) << Describe(c) << " " << DataTypeName(tx) << " * " << DataTypeName(tw)
                                          << " zero points " << zps;
        }
}

TEST(GpuQLinearConv, MatchesTheCpuReference) {
  uint32_t seed = 4000;
  for (const ConvCase& c : ConvCases())
    for (DataType tx : k8)
      for (DataType tw : k8)
        for (DataType ty : k8)
          for (bool bias : {false, true}) {
            const int64_t m = c.w[0], per = c.w_per_channel ? m : -1;
            int64_t k = 1;
            for (size_t d = 1; d < c.w.size(); ++d) k *= c.w[d];
            const double typical = std::sqrt(static_cast<double>(k)) * 5000 * 0.01 * 0.01 / 60;
            OneNode n("QLinearConv");
            n.Input(Random8(tx, c.x, seed++))
                .Const(Scale(DataType::kFloat32, -1, seed++, 0.005, 0.015))
                .Input(ZeroPoint(tx, -1, seed++))
                .Const(Random8(tw, c.w, seed++))
                .Const(Scale(DataType::kFloat32, per, seed++, 0.005, 0.015))
                .Const(ZeroPoint(tw, per, seed++))
                .Input(Scale(DataType::kFloat32, -1, seed++, typical * 0.5, typical * 1.5))
                .Const(ZeroPoint(ty, -1, seed++));
            if (bias) n.Const(Random(DataType::kInt32, {m}, seed++, -20000, 20000));
            for (const auto& [a, v] : c.attrs) n.Attr(a, v);
            EXPECT_TRUE(n.MatchesCpu(0, 0)) << Describe(c) << " " << DataTypeName(tx) << " * " << DataTypeName(tw)
                                            << " -> " << DataTypeName(ty) << (bias ? " with bias" : "");
          }
}

TEST(GpuQLinearConv, RoundsTiesToEven) {
  // x_scale * w_scale / y_scale = 0.5: half the sums land on .5.
  uint32_t seed = 5000;
  for (DataType ty : k8)
    EXPECT_TRUE(OneNode("QLinearConv")
                    .Input(Random(DataType::kInt8, {1, 3, 6, 6}, seed++, -5, 5))
                    .Input(FromValues(DataType::kFloat32, {}, {0.5}))
                    .Input(FromValues(DataType::kInt8, {}, {0}))
                    .Input(Random(DataType::kInt8, {4, 3, 2, 2}, seed++, -3, 3))
                    .Input(FromValues(DataType::kFloat32, {4}, {1.0, 1.0, 1.0, 1.0}))
                    .Input(FromValues(DataType::kInt8, {4}, {0, 1, -1, 2}))
                    .Input(FromValues(DataType::kFloat32, {}, {1.0}))
                    .Input(FromValues(ty, {}, {ty == DataType::kUInt8 ? 128.0 : 0.0}))
                    .Input(FromValues(DataType::kInt32, {4}, {3, -3, 0, 1}))
                    .MatchesCpu(0, 0))
        << DataTypeName(ty);
}

// Convolutions of 4 spatial dims run on the CPU: the CUDA layer's tactics refuse them (kUnsupported, so a GPU engine
// falls back), naming the node.
TEST(GpuConvInteger, RefusesFourSpatialDims) {
  Graph g;
  Node* n = g.AddNode("ConvInteger", "conv4d");
  n->inputs = {g.AddConstant("x", Random8(DataType::kUInt8, {1, 1, 3, 3, 3, 3}, 1)),
               g.AddConstant("w", Random8(DataType::kUInt8, {1, 1, 2, 2, 2, 2}, 2))};
  auto t = cuda::TacticsFor(cuda::LayerSpec{*n, {}, {}});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupported) << t.status().ToString();
  EXPECT_NE(t.status().message().find("conv4d"), std::string::npos) << t.status().ToString();
  EXPECT_NE(t.status().message().find("1 to 3 spatial dims"), std::string::npos) << t.status().ToString();
}

// ---- Det ----

// Matrices with rows repeated (or a zero row): singular, of determinant 0 (or the rounding residue the CPU finds).
Tensor Singular(DataType t, const Shape& s, uint32_t seed) {
  Tensor r = Random(t, s, seed, -2, 2);
  const int64_t m = s.back(), count = r.numel() / (m * m);
  for (int64_t b = 0; b < count; ++b)
    for (int64_t k = 0; k < m; ++k) {
      const int64_t base = b * m * m;
      if (b % 2 == 0) r.SetFromDouble(base + (m - 1) * m + k, r.GetAsDouble(base + k));  // last row = first row
      else r.SetFromDouble(base + (m / 2) * m + k, 0.0);                                  // a zero row
    }
  return r;
}

TEST(GpuDet, MatchesTheCpuReference) {
  const std::vector<Shape> shapes = {{2, 2},       {3, 3},       {1, 1},      {3, 2, 2},   {5, 4, 4},
                                     {2, 3, 7, 7}, {4, 33, 33},  {2, 64, 64}, {3, 65, 65}, {2, 100, 100},
                                     {0, 3, 3},    {2, 0, 0},    {1000, 3, 3}};
  uint32_t seed = 6000;
  for (const Shape& s : shapes) {
    EXPECT_TRUE(OneNode("Det").Input(Random(DataType::kFloat32, s, seed++, -2, 2)).MatchesCpu(1e-6, 1e-5))
        << ShapeToString(s) << " float32";
    EXPECT_TRUE(OneNode("Det").Input(Random(DataType::kFloat64, s, seed++, -2, 2)).MatchesCpu(1e-12, 1e-12))
        << ShapeToString(s) << " float64";
    if (s.back() <= 8)  // larger determinants of such matrices pass float16's range (the float32 reference's not)
      EXPECT_TRUE(OneNode("Det").ReferenceInFloat32().Input(Random(DataType::kFloat16, s, seed++, -1, 1))
                      .MatchesCpu(1e-3, 1e-3))
          << ShapeToString(s) << " float16";
    EXPECT_TRUE(OneNode("Det").ReferenceInFloat32().Input(Random(DataType::kBFloat16, s, seed++, -1, 1))
                    .MatchesCpu(1e-2, 1e-2))
        << ShapeToString(s) << " bfloat16";
    if (s.back() >= 2 && s[0] > 0) {
      EXPECT_TRUE(OneNode("Det").Input(Singular(DataType::kFloat32, s, seed++)).MatchesCpu(1e-6, 1e-5))
          << ShapeToString(s) << " singular float32";
      EXPECT_TRUE(OneNode("Det").Input(Singular(DataType::kFloat64, s, seed++)).MatchesCpu(1e-12, 1e-12))
          << ShapeToString(s) << " singular float64";
    }
  }
  // Exact integer matrices (the node tests' kind), a permutation (pivoting flips signs), ties in the pivot column.
  EXPECT_TRUE(OneNode("Det").Input(FromValues(DataType::kFloat32, {3, 2, 2}, {1, 2, 3, 4, 1, 2, 2, 1, 2, 1, -2, 3}))
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("Det").Input(FromValues(DataType::kFloat32, {3, 3}, {0, 1, 0, 0, 0, 1, 1, 0, 0})).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("Det").Input(FromValues(DataType::kFloat64, {4, 4}, {1, 2, 3, 4, -1, 5, 6, 7, 1, -8, 9, 1, -1,
                                                                           2, 2, 3}))
                  .MatchesCpu(1e-12, 1e-12));
  // A workspace poisoned before each run must not matter (large matrices use it).
  EXPECT_TRUE(OneNode("Det").Input(Random(DataType::kFloat32, {3, 90, 90}, seed++, -2, 2)).Repeat(3)
                  .MatchesCpu(1e-6, 1e-5));
}

TEST(GpuDet, RefusesFloat8) {
  Graph g;
  Node* n = g.AddNode("Det", "det8");
  n->inputs = {g.AddConstant("x", Random(DataType::kFloat8E4M3FN, {2, 2}, 1))};
  auto t = cuda::TacticsFor(cuda::LayerSpec{*n, {}, {}});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupported) << t.status().ToString();
  EXPECT_NE(t.status().message().find("det8"), std::string::npos) << t.status().ToString();
}

}  // namespace
}  // namespace kiln::gputest
