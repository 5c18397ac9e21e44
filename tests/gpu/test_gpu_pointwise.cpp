// Differential tests of the pointwise CUDA layers (src/backends/cuda/pointwise_*.{cpp,cu}, fused_pointwise.cu)
// against the CPU reference: unary ops and activations (integer Shrink too), Clip, predicates, broadcasting binary
// ops, Pow, Where, variadic ops, Cast/CastLike, Q/DQ and kiln.FusedPointwise, over odd shapes and
// float32/float16/bfloat16/int dtypes.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"
#include "ops/infer.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;
constexpr DataType kF32 = DataType::kFloat32, kF16 = DataType::kFloat16, kBF16 = DataType::kBFloat16;

const std::vector<Shape>& OddShapes() {
  static const std::vector<Shape> s = {{1}, {7}, {33}, {3, 517}, {2, 3, 5}, {2, 1, 3, 4, 5}, {1031}};
  return s;
}

// float32 tight; float16/bfloat16 against a float32 reference with a tolerance of their precision.
::testing::AssertionResult CheckFloat(OneNode node, DataType t, double tol32 = 1e-5) {
  if (t == kF32) return node.MatchesCpu(tol32, tol32);
  const double tol = t == kF16 ? 2e-3 : 1.6e-2;
  return node.ReferenceInFloat32().MatchesCpu(tol, tol);
}

struct UnaryCase {
  const char* op;
  double lo, hi;
};

TEST(GpuPointwise, FloatUnaryOps) {
  const UnaryCase cases[] = {
      {"Abs", -3, 3},       {"Neg", -3, 3},        {"Sqrt", 0.01, 4},     {"Reciprocal", 0.1, 3},
      {"Exp", -4, 4},       {"Log", 0.01, 8},      {"Ceil", -5, 5},       {"Floor", -5, 5},
      {"Round", -5, 5},     {"Sign", -2, 2},       {"Erf", -3, 3},        {"Tanh", -4, 4},
      {"Sigmoid", -9, 9},   {"Relu", -2, 2},       {"LeakyRelu", -2, 2},  {"Elu", -3, 3},
      {"Selu", -3, 3},      {"HardSigmoid", -4, 4}, {"HardSwish", -5, 5}, {"Softplus", -8, 8},
      {"Mish", -5, 5},      {"Gelu", -4, 4},
  };
  uint32_t seed = 1;
  for (const auto& c : cases)
    for (DataType t : {kF32, kF16, kBF16})
      for (const Shape& s : OddShapes()) {
        // Ceil/Floor/Round/Sign are exact; the 16-bit cases compare the rounded input's result.
        EXPECT_TRUE(CheckFloat(OneNode(c.op).Input(Random(t, s, seed++, c.lo, c.hi)), t))
            << c.op << " " << DataTypeName(t) << " " << ShapeToString(s);
      }
}

TEST(GpuPointwise, ActivationAttributes) {
  const Shape s = {5, 67};
  for (DataType t : {kF32, kF16, kBF16}) {
    EXPECT_TRUE(CheckFloat(OneNode("LeakyRelu").Input(Random(t, s, 2, -3, 3)).Attr("alpha", Attribute::Float(0.3f)), t));
    EXPECT_TRUE(CheckFloat(OneNode("Elu").Input(Random(t, s, 3, -3, 3)).Attr("alpha", Attribute::Float(0.7f)), t));
    EXPECT_TRUE(CheckFloat(OneNode("Selu")
                               .Input(Random(t, s, 4, -3, 3))
                               .Attr("alpha", Attribute::Float(1.5f))
                               .Attr("gamma", Attribute::Float(0.9f)),
                           t));
    EXPECT_TRUE(CheckFloat(OneNode("HardSigmoid")
                               .Input(Random(t, s, 5, -6, 6))
                               .Attr("alpha", Attribute::Float(0.25f))
                               .Attr("beta", Attribute::Float(0.4f)),
                           t));
    EXPECT_TRUE(CheckFloat(OneNode("Gelu").Input(Random(t, s, 6, -4, 4)).Attr("approximate", Attribute::String("tanh")), t));
    EXPECT_TRUE(CheckFloat(OneNode("Gelu").Input(Random(t, s, 7, -4, 4)).Attr("approximate", Attribute::String("none")), t));
  }
}

TEST(GpuPointwise, IntegerUnaryOps) {
  for (const char* op : {"Abs", "Neg", "Sign", "Relu"})
    for (DataType t : {DataType::kInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64})
      EXPECT_TRUE(OneNode(op).Input(Random(t, {3, 37}, 11, -100, 100)).MatchesCpu()) << op << DataTypeName(t);
  for (const char* op : {"Abs", "Sign"})
    for (DataType t : {DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64})
      EXPECT_TRUE(OneNode(op).Input(Random(t, {41}, 12, 0, 200)).MatchesCpu()) << op << DataTypeName(t);
  // INT_MIN wraps under Abs and Neg, as on the CPU.
  EXPECT_TRUE(OneNode("Abs").Input(FromValues(DataType::kInt8, {3}, {-128, -1, 127})).MatchesCpu());
  EXPECT_TRUE(OneNode("Neg").Input(FromValues(DataType::kInt32, {2}, {-2147483648.0, 5})).MatchesCpu());
}

// Shrink on every integer type: computed in double, truncated, saturated (lambd on the data's integers, fractional
// and negative biases, results past the type's range).
TEST(GpuPointwise, ShrinkIntegers) {
  uint32_t seed = 60;
  const std::pair<float, float> attrs[] = {{0.5f, 0.f}, {1.f, 1.5f}, {2.5f, -0.75f}, {3.f, -200.f}};
  for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kUInt16, DataType::kInt32,
                     DataType::kUInt32, DataType::kInt64, DataType::kUInt64})
    for (const auto& [lambd, bias] : attrs) {
      const bool u = !IsSignedType(t);
      EXPECT_TRUE(OneNode("Shrink")
                      .Input(Random(t, {3, 337}, seed++, u ? 0 : -127, 127))
                      .Attr("lambd", Attribute::Float(lambd))
                      .Attr("bias", Attribute::Float(bias))
                      .MatchesCpu(0, 0))
          << DataTypeName(t) << " lambd " << lambd << " bias " << bias;
    }
  EXPECT_TRUE(OneNode("Shrink")
                  .Input(FromValues(DataType::kInt8, {7}, {-128, -2, -1, 0, 1, 2, 127}))
                  .Attr("lambd", Attribute::Float(1.f))
                  .Attr("bias", Attribute::Float(-1.5f))
                  .MatchesCpu(0, 0));
}

TEST(GpuPointwise, ZeroElements) {
  EXPECT_TRUE(OneNode("Relu").Input(Random(kF32, {0, 3}, 1)).MatchesCpu());
  EXPECT_TRUE(OneNode("Add").Input(Random(kF32, {0, 3}, 1)).Input(Random(kF32, {3}, 2)).MatchesCpu());
  EXPECT_TRUE(OneNode("Cast").Input(Random(kF32, {4, 0}, 1)).Attr("to", Attribute::Int(10)).MatchesCpu());
}

TEST(GpuPointwise, Clip) {
  for (DataType t : {kF32, kF16, kBF16}) {
    EXPECT_TRUE(CheckFloat(OneNode("Clip")
                               .Input(Random(t, {7, 33}, 1, -3, 3))
                               .Const(FromValues(t, {}, {-0.5}))
                               .Const(FromValues(t, {}, {1.25})),
                           t));
    EXPECT_TRUE(CheckFloat(OneNode("Clip").Input(Random(t, {1031}, 2, -3, 3)).Omitted().Const(FromValues(t, {}, {0.5})), t));
    EXPECT_TRUE(CheckFloat(OneNode("Clip").Input(Random(t, {5}, 3, -3, 3)), t));
  }
  // Bounds that are runtime inputs, not constants.
  EXPECT_TRUE(OneNode("Clip")
                  .Input(Random(kF32, {2, 3, 5}, 4, -3, 3))
                  .Input(FromValues(kF32, {}, {-1}))
                  .Input(FromValues(kF32, {}, {2}))
                  .MatchesCpu());
  for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt32, DataType::kInt64})
    EXPECT_TRUE(OneNode("Clip")
                    .Input(Random(t, {3, 41}, 5, 0, 100))
                    .Const(FromValues(t, {}, {10}))
                    .Const(FromValues(t, {}, {60}))
                    .MatchesCpu())
        << DataTypeName(t);
}

TEST(GpuPointwise, PredicatesAndNot) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<double> v = {1, -inf, inf, nan, 0, -2.5, inf};
  for (DataType t : {kF32, kF16, kBF16, DataType::kFloat64}) {
    EXPECT_TRUE(OneNode("IsNaN").Input(FromValues(t, {7}, v)).MatchesCpu()) << DataTypeName(t);
    EXPECT_TRUE(OneNode("IsInf").Input(FromValues(t, {7}, v)).MatchesCpu()) << DataTypeName(t);
    EXPECT_TRUE(OneNode("IsInf").Input(FromValues(t, {7}, v)).Attr("detect_negative", Attribute::Int(0)).MatchesCpu());
    EXPECT_TRUE(OneNode("IsInf").Input(FromValues(t, {7}, v)).Attr("detect_positive", Attribute::Int(0)).MatchesCpu());
  }
  EXPECT_TRUE(OneNode("Not").Input(Random(DataType::kBool, {3, 35}, 9)).MatchesCpu());
}

// Pairs of broadcasting shapes: same shape, scalar, trailing vector, middle axis, rank 5, both sides broadcast.
const std::vector<std::pair<Shape, Shape>>& BroadcastPairs() {
  static const std::vector<std::pair<Shape, Shape>> p = {
      {{33}, {33}},          {{1031}, {}},           {{1}, {7}},                {{4, 37}, {37}},
      {{2, 3, 4, 5}, {3, 1, 1}}, {{2, 3, 4, 5, 6}, {5, 1}}, {{4, 1, 7}, {3, 1}}, {{2, 1, 3, 1, 5}, {1, 4, 1, 6, 1}},
      {{3, 1}, {3, 517}},
  };
  return p;
}

TEST(GpuPointwise, FloatArithmeticBroadcasts) {
  uint32_t seed = 100;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "PRelu"})
    for (DataType t : {kF32, kF16, kBF16, DataType::kFloat64})
      for (const auto& [a, b] : BroadcastPairs()) {
        if (std::string(op) == "PRelu" && b.size() > a.size()) continue;  // slope broadcasts to x
        const double blo = std::string(op) == "Div" ? 0.5 : -2;
        OneNode node(op);
        node.Input(Random(t, a, seed++, -2, 2)).Input(Random(t, b, seed++, blo, 2));
        EXPECT_TRUE(t == DataType::kFloat64 ? node.MatchesCpu(1e-12, 1e-12) : CheckFloat(node, t))
            << op << " " << DataTypeName(t) << " " << ShapeToString(a) << " " << ShapeToString(b);
      }
  // A constant operand (the usual bias / scale case).
  EXPECT_TRUE(OneNode("Add").Input(Random(kF32, {2, 8, 5, 5}, 1)).Const(Random(kF32, {8, 1, 1}, 2)).MatchesCpu());
}

TEST(GpuPointwise, IntegerArithmeticIsExact) {
  uint32_t seed = 200;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "PRelu"})
    for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64,
                       DataType::kUInt32, DataType::kUInt64})
      for (const auto& [a, b] : BroadcastPairs()) {
        if (std::string(op) == "PRelu" && b.size() > a.size()) continue;
        const bool u = !IsSignedType(t);
        EXPECT_TRUE(OneNode(op)
                        .Input(Random(t, a, seed++, u ? 0 : -120, 120))
                        .Input(Random(t, b, seed++, u ? 0 : -9, 9))  // includes 0 divisors: x/0 = 0
                        .MatchesCpu())
            << op << " " << DataTypeName(t) << " " << ShapeToString(a) << " " << ShapeToString(b);
      }
  // Truncating division and the MIN / -1 wrap.
  EXPECT_TRUE(OneNode("Div")
                  .Input(FromValues(DataType::kInt32, {6}, {7, -7, 7, -7, -2147483648.0, 5}))
                  .Input(FromValues(DataType::kInt32, {6}, {2, 2, -2, -2, -1, 0}))
                  .MatchesCpu());
}

TEST(GpuPointwise, ComparisonsAndLogic) {
  uint32_t seed = 300;
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
    for (DataType t : {kF32, kF16, kBF16, DataType::kInt8, DataType::kUInt8, DataType::kInt32, DataType::kInt64})
      for (const auto& [a, b] : BroadcastPairs())  // small integer values make ties common
        EXPECT_TRUE(OneNode(op).Input(Random(t, a, seed++, 0, 3)).Input(Random(t, b, seed++, 0, 3)).MatchesCpu())
            << op << " " << DataTypeName(t) << " " << ShapeToString(a) << " " << ShapeToString(b);
  for (const char* op : {"Equal", "And", "Or", "Xor"})
    for (const auto& [a, b] : BroadcastPairs())
      EXPECT_TRUE(OneNode(op).Input(Random(DataType::kBool, a, seed++)).Input(Random(DataType::kBool, b, seed++)).MatchesCpu())
          << op << " " << ShapeToString(a) << " " << ShapeToString(b);
}

TEST(GpuPointwise, Pow) {
  for (DataType t : {kF32, kF16, kBF16}) {
    EXPECT_TRUE(CheckFloat(OneNode("Pow").Input(Random(t, {3, 33}, 1, 0.1, 3)).Input(Random(t, {33}, 2, -2, 2)), t, 1e-5));
    for (double e : {2.0, 3.0, 0.5, 1.0, 1.7})
      EXPECT_TRUE(CheckFloat(OneNode("Pow").Input(Random(t, {1031}, 3, 0.1, 3)).Const(FromValues(kF32, {}, {e})), t))
          << e;
    EXPECT_TRUE(CheckFloat(OneNode("Pow").Input(Random(t, {7, 5}, 4, -3, 3)).Input(Random(DataType::kInt64, {5}, 5, -3, 3)), t));
  }
  for (DataType t : {DataType::kInt32, DataType::kInt64}) {
    EXPECT_TRUE(OneNode("Pow").Input(Random(t, {4, 9}, 6, -5, 5)).Input(Random(t, {9}, 7, -3, 6)).MatchesCpu());
    EXPECT_TRUE(OneNode("Pow").Input(Random(t, {13}, 8, -5, 5)).Input(Random(kF32, {13}, 9, 0, 3)).MatchesCpu());
  }
}

TEST(GpuPointwise, Where) {
  uint32_t seed = 400;
  const std::vector<std::vector<Shape>> shapes = {
      {{33}, {33}, {33}}, {{4, 1}, {1, 5}, {}}, {{2, 3, 1, 5}, {3, 4, 1}, {1, 5}}, {{1031}, {1}, {1031}}};
  for (DataType t : {kF32, kF16, DataType::kInt64, DataType::kInt8, DataType::kBool, DataType::kFloat64})
    for (const auto& s : shapes)
      EXPECT_TRUE(OneNode("Where")
                      .Input(Random(DataType::kBool, s[0], seed++))
                      .Input(Random(t, s[1], seed++, -50, 50))
                      .Input(Random(t, s[2], seed++, -50, 50))
                      .MatchesCpu())
          << DataTypeName(t) << " " << ShapeToString(s[0]);
}

TEST(GpuPointwise, VariadicOps) {
  uint32_t seed = 500;
  for (const char* op : {"Sum", "Mean", "Max", "Min"})
    for (DataType t : {kF32, kF16, kBF16}) {
      EXPECT_TRUE(CheckFloat(OneNode(op).Input(Random(t, {3, 17}, seed++)), t)) << op;
      EXPECT_TRUE(CheckFloat(OneNode(op)
                                 .Input(Random(t, {3, 17}, seed++))
                                 .Input(Random(t, {17}, seed++))
                                 .Input(Random(t, {3, 1}, seed++)),
                             t))
          << op;
      OneNode many(op);  // more than one launch's operands: folded in several passes
      for (int i = 0; i < 11; ++i) many.Input(Random(t, i % 3 == 0 ? Shape{2, 1, 7} : Shape{2, 5, 7}, seed++));
      // The 16-bit cases round the partial result between passes, as the CPU rounds after every input.
      EXPECT_TRUE(t == kF32 ? many.MatchesCpu(1e-5, 1e-5) : many.ReferenceInFloat32().MatchesCpu(0.06, 0.02)) << op;
    }
  for (const char* op : {"Max", "Min"})
    for (DataType t : {DataType::kInt32, DataType::kUInt8, DataType::kInt64})
      EXPECT_TRUE(OneNode(op).Input(Random(t, {5, 9}, seed++, 0, 99)).Input(Random(t, {9}, seed++, 0, 99)).MatchesCpu());
  const double nan = std::nan("");
  EXPECT_TRUE(OneNode("Max").Input(FromValues(kF32, {3}, {nan, 1, 2})).Input(FromValues(kF32, {3}, {0, nan, 1})).MatchesCpu());
}

TEST(GpuPointwise, CastAllPairs) {
  const DataType types[] = {kF32, kF16, kBF16, DataType::kFloat64, DataType::kInt8, DataType::kUInt8,
                            DataType::kInt16, DataType::kUInt16, DataType::kInt32, DataType::kUInt32,
                            DataType::kInt64, DataType::kUInt64, DataType::kBool, DataType::kFloat8E4M3FN};
  uint32_t seed = 600;
  for (DataType from : types)
    for (DataType to : types) {
      // Values beyond every integer range (saturation), fractions (truncation), negatives (unsigned wrap).
      const bool f = IsFloatType(from);
      Tensor x = Random(from, {3, 347}, seed++, f ? -70000 : -300, f ? 70000 : 300);
      EXPECT_TRUE(OneNode("Cast").Input(x).Attr("to", Attribute::Int(static_cast<int64_t>(to))).MatchesCpu(0, 0))
          << DataTypeName(from) << " -> " << DataTypeName(to);
      Tensor small = Random(from, {33}, seed++, -3, 3);
      EXPECT_TRUE(OneNode("CastLike").Input(small).Const(Random(to, {1}, 1)).MatchesCpu(0, 0))
          << DataTypeName(from) << " -> " << DataTypeName(to);
    }
  // float8 without saturation: out-of-range values become NaN.
  EXPECT_TRUE(OneNode("Cast")
                  .Input(FromValues(kF32, {5}, {1000, -1000, 0.3, 448, 464}))
                  .Attr("to", Attribute::Int(static_cast<int64_t>(DataType::kFloat8E4M3FN)))
                  .Attr("saturate", Attribute::Int(0))
                  .MatchesCpu(0, 0));
  // Every float8 format, both saturate modes, with NaNs of both signs, infinities, signed zeros, subnormals and
  // out-of-range values: the bytes must equal the CPU's (E5M2's NaN is 0x7e, as ONNX writes it).
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DataType to : {DataType::kFloat8E4M3FN, DataType::kFloat8E4M3FNUZ, DataType::kFloat8E5M2,
                      DataType::kFloat8E5M2FNUZ})
    for (int64_t sat : {0, 1})
      EXPECT_TRUE(OneNode("Cast")
                      .Opset(21)
                      .Input(FromValues(kF32, {12}, {nan, -nan, inf, -inf, 0.0, -0.0, 1e-7, -3e-6, 1e6, -1e6, 0.3, 240}))
                      .Attr("to", Attribute::Int(static_cast<int64_t>(to)))
                      .Attr("saturate", Attribute::Int(sat))
                      .MatchesCpu(0, 0))
          << DataTypeName(to) << " saturate=" << sat;
}

// A 16-bit X marked kiln_x_widened (the optimizer's folded Cast) quantizes as its float32 value: the fast per-tensor
// kernel (float16, an int8 output, 16-byte aligned) and the generic one (bfloat16, per axis), against the CPU. The
// scale makes x / scale land near ties, where rounding it to X's type first would move the result.
TEST(GpuPointwise, QuantizeLinearOfAWidenedSixteenBitInput) {
  for (DataType t : {kF16, kBF16}) {
    EXPECT_TRUE(OneNode("QuantizeLinear")
                    .Input(Random(t, {4, 1000}, 31, -2, 2))
                    .Const(FromValues(kF32, {}, {0.0157}))
                    .Const(FromValues(DataType::kInt8, {}, {-3}))
                    .Attr("kiln_x_widened", Attribute::Int(1))
                    .MatchesCpu(0, 0));
    EXPECT_TRUE(OneNode("QuantizeLinear")
                    .Input(Random(t, {4, 10, 3}, 32, -2, 2))
                    .Const(Random(kF32, {10}, 33, 0.005, 0.02))
                    .Const(Random(DataType::kUInt8, {10}, 34, 100, 150))
                    .Attr("kiln_x_widened", Attribute::Int(1))
                    .MatchesCpu(0, 0));
  }
  // to float8e4m3fn (the per-tensor kernel's hardware conversion), saturated and not (the generic kernel)
  for (int64_t saturate : {1, 0})
    EXPECT_TRUE(OneNode("QuantizeLinear")
                    .Input(Random(kF16, {4003}, 35, -300, 300))
                    .Const(FromValues(kF32, {}, {0.37}))
                    .Const(FromValues(DataType::kFloat8E4M3FN, {}, {0}))
                    .Attr("kiln_x_widened", Attribute::Int(1))
                    .Attr("saturate", Attribute::Int(saturate))
                    .MatchesCpu(0, 0));
}

TEST(GpuPointwise, QuantizeLinear) {
  const Shape s = {2, 5, 7};
  for (DataType t : {kF32, kF16, kBF16}) {
    // per tensor, uint8 with zero point; default uint8 without zero point
    EXPECT_TRUE(OneNode("QuantizeLinear")
                    .Input(Random(t, s, 1, -3, 3))
                    .Const(FromValues(t, {}, {0.02}))
                    .Const(FromValues(DataType::kUInt8, {}, {128}))
                    .MatchesCpu());
    EXPECT_TRUE(OneNode("QuantizeLinear").Input(Random(t, s, 2, -1, 3)).Const(FromValues(kF32, {}, {0.05})).MatchesCpu());
    // per axis int8 (axis 1 and axis -1)
    EXPECT_TRUE(OneNode("QuantizeLinear")
                    .Input(Random(t, s, 3, -3, 3))
                    .Const(Random(kF32, {5}, 4, 0.01, 0.05))
                    .Const(Random(DataType::kInt8, {5}, 5, -10, 10))
                    .MatchesCpu());
    EXPECT_TRUE(OneNode("QuantizeLinear")
                    .Input(Random(t, s, 6, -3, 3))
                    .Const(Random(kF32, {7}, 7, 0.01, 0.05))
                    .Const(Random(DataType::kInt8, {7}, 8, -10, 10))
                    .Attr("axis", Attribute::Int(-1))
                    .MatchesCpu());
  }
  // blocked along axis 2 (block 3: ceil(7/3) = 3 scales), int16 output, float8 output
  EXPECT_TRUE(OneNode("QuantizeLinear")
                  .Input(Random(kF32, s, 9, -3, 3))
                  .Const(Random(kF32, {2, 5, 3}, 10, 0.001, 0.01))
                  .Const(Random(DataType::kInt16, {2, 5, 3}, 11, -100, 100))
                  .Attr("axis", Attribute::Int(2))
                  .Attr("block_size", Attribute::Int(3))
                  .MatchesCpu());
  EXPECT_TRUE(OneNode("QuantizeLinear")
                  .Input(Random(kF32, s, 12, -300, 300))
                  .Const(FromValues(kF32, {}, {0.5}))
                  .Const(FromValues(DataType::kFloat8E4M3FN, {}, {0}))
                  .MatchesCpu());
  // runtime scale
  EXPECT_TRUE(OneNode("QuantizeLinear")
                  .Input(Random(kF32, {1031}, 13, -3, 3))
                  .Input(FromValues(kF32, {}, {0.03}))
                  .Input(FromValues(DataType::kInt8, {}, {-3}))
                  .MatchesCpu());
}

TEST(GpuPointwise, DequantizeLinear) {
  const Shape s = {3, 4, 9};
  EXPECT_TRUE(OneNode("DequantizeLinear")
                  .Input(Random(DataType::kUInt8, s, 1, 0, 255))
                  .Const(FromValues(kF32, {}, {0.02}))
                  .Const(FromValues(DataType::kUInt8, {}, {128}))
                  .MatchesCpu());
  for (DataType st : {kF32, kF16, kBF16})
    EXPECT_TRUE(OneNode("DequantizeLinear")
                    .Input(Random(DataType::kInt8, s, 2, -128, 127))
                    .Const(Random(st, {4}, 3, 0.01, 0.1))
                    .Const(Random(DataType::kInt8, {4}, 4, -5, 5))
                    .MatchesCpu(1e-6, 1e-6))
        << DataTypeName(st);
  EXPECT_TRUE(OneNode("DequantizeLinear")
                  .Input(Random(DataType::kInt32, s, 5, -100000, 100000))
                  .Const(FromValues(kF32, {}, {0.001}))
                  .MatchesCpu());
  EXPECT_TRUE(OneNode("DequantizeLinear")
                  .Input(Random(DataType::kInt8, s, 6, -128, 127))
                  .Const(Random(kF32, {3, 4, 3}, 7, 0.01, 0.1))
                  .Const(Random(DataType::kInt8, {3, 4, 3}, 8, -5, 5))
                  .Attr("axis", Attribute::Int(2))
                  .Attr("block_size", Attribute::Int(4))
                  .MatchesCpu());
  EXPECT_TRUE(OneNode("DequantizeLinear")
                  .Input(Random(DataType::kFloat8E4M3FN, s, 9, -200, 200))
                  .Const(FromValues(kF32, {}, {0.5}))
                  .MatchesCpu());
}

// ---- kiln.FusedPointwise ----
Attribute Strings(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = std::move(v);
  return a;
}

OneNode& Program(OneNode& n, std::vector<std::string> ops, std::vector<int64_t> args, std::vector<float> alpha,
                 std::vector<float> beta) {
  return n.Attr("kiln_ops", Strings(std::move(ops)))
      .Attr("kiln_args", Attribute::Ints(std::move(args)))
      .Attr("kiln_alpha", Attribute::Floats(std::move(alpha)))
      .Attr("kiln_beta", Attribute::Floats(std::move(beta)));
}

TEST(GpuPointwise, FusedPointwiseEveryStepOp) {
  // step 0: op(in0) or op(in0, in1); step 1: Add(step0, in1)
  const std::vector<std::tuple<std::string, float, float>> ops = {
      {"Relu", 0, 0}, {"Sigmoid", 0, 0}, {"Tanh", 0, 0}, {"Exp", 0, 0}, {"Log", 0, 0}, {"Neg", 0, 0},
      {"Abs", 0, 0}, {"Sqrt", 0, 0}, {"Reciprocal", 0, 0}, {"Erf", 0, 0}, {"Floor", 0, 0}, {"Ceil", 0, 0},
      {"Softplus", 0, 0}, {"Softsign", 0, 0}, {"Sin", 0, 0}, {"Cos", 0, 0}, {"HardSwish", 0, 0},
      {"LeakyRelu", 0.1f, 0}, {"Elu", 0.8f, 0}, {"Selu", 1.6f, 1.05f}, {"HardSigmoid", 0.2f, 0.5f},
      {"Clip", -0.3f, 0.6f}, {"Gelu", 0, 0}, {"GeluTanh", 0, 0}, {"Add", 0, 0}, {"Sub", 0, 0}, {"Mul", 0, 0},
      {"Div", 0, 0}, {"Pow", 0, 0}, {"Max", 0, 0}, {"Min", 0, 0}, {"PRelu", 0, 0}};
  uint32_t seed = 700;
  for (const auto& [op, alpha, beta] : ops)
    for (DataType t : {kF32, kF16, kBF16}) {
      const bool positive = op == "Log" || op == "Sqrt" || op == "Pow" || op == "Reciprocal" || op == "Div";
      OneNode n("FusedPointwise", "kiln");
      n.Input(Random(t, {6, 175}, seed++, positive ? 0.2 : -2, 2)).Input(Random(t, {175}, seed++, positive ? 0.2 : -2, 2));
      Program(n, {op, "Add"}, {0, 1, -1, 1}, {alpha, 0}, {beta, 0});
      EXPECT_TRUE(CheckFloat(n, t)) << op << " " << DataTypeName(t);
    }
}

TEST(GpuPointwise, FusedPointwiseChainsAndBroadcasts) {
  // y = Sigmoid(Relu(x * scale + bias)) * x over an NCHW tensor with per-channel scale/bias and a scalar input.
  uint32_t seed = 800;
  const std::vector<std::vector<Shape>> shapes = {
      {{2, 8, 5, 7}, {8, 1, 1}, {1, 8, 1, 1}, {}},
      {{1031}, {1031}, {1}, {1031}},
      {{3, 1, 4}, {1, 5, 1}, {4}, {3, 5, 4}},  // output broadcast from several inputs
      {{2, 3, 4, 5, 6}, {5, 6}, {3, 1, 1, 1}, {1}},
  };
  for (DataType t : {kF32, kF16, kBF16})
    for (const auto& s : shapes) {
      OneNode n("FusedPointwise", "kiln");
      for (const Shape& sh : s) n.Input(Random(t, sh, seed++, -2, 2));
      Program(n, {"Mul", "Add", "Relu", "Sigmoid", "Mul", "Sub"}, {0, 1, -1, 2, -2, -2, -3, -3, -4, 0, -5, 3},
              {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0});
      EXPECT_TRUE(CheckFloat(n, t)) << DataTypeName(t) << " " << ShapeToString(s[0]);
    }
  // One input, a long chain, constants as operands.
  OneNode n("FusedPointwise", "kiln");
  n.Input(Random(kF32, {3, 517}, seed++, -2, 2)).Const(FromValues(kF32, {}, {0.5}));
  Program(n, {"Mul", "Tanh", "Add", "Exp", "Clip", "Neg", "Abs", "Sqrt"},
          {0, 1, -1, -1, -2, 1, -3, -3, -4, -4, -5, -5, -6, -6, -7, -7}, {0, 0, 0, 0, 0.5f, 0, 0, 0},
          {0, 0, 0, 0, 2.5f, 0, 0, 0});
  EXPECT_TRUE(n.MatchesCpu(1e-5, 1e-5));
}

// Both tactics ("nvrtc": generated code, "interp": the interpreter kernel) over every step op and the broadcast
// patterns the generated kernel handles differently: per-channel NCHW (chunk-uniform when H*W is a multiple of
// the 16-byte chunk, per element otherwise), trailing [C] (contiguous chunk or per element), a scalar, an input
// like the output (vector loads), and odd element counts (the scalar tail).
const std::vector<std::tuple<std::string, float, float>>& StepOps() {
  static const std::vector<std::tuple<std::string, float, float>> ops = {
      {"Relu", 0, 0}, {"Sigmoid", 0, 0}, {"Tanh", 0, 0}, {"Exp", 0, 0}, {"Log", 0, 0}, {"Neg", 0, 0},
      {"Abs", 0, 0}, {"Sqrt", 0, 0}, {"Reciprocal", 0, 0}, {"Erf", 0, 0}, {"Floor", 0, 0}, {"Ceil", 0, 0},
      {"Softplus", 0, 0}, {"Softsign", 0, 0}, {"Sin", 0, 0}, {"Cos", 0, 0}, {"HardSwish", 0, 0},
      {"LeakyRelu", 0.1f, 0}, {"Elu", 0.8f, 0}, {"Selu", 1.6f, 1.05f}, {"HardSigmoid", 0.2f, 0.5f},
      {"Clip", -0.3f, 0.6f}, {"Gelu", 0, 0}, {"GeluTanh", 0, 0}, {"Add", 0, 0}, {"Sub", 0, 0}, {"Mul", 0, 0},
      {"Div", 0, 0}, {"Pow", 0, 0}, {"Max", 0, 0}, {"Min", 0, 0}, {"PRelu", 0, 0}};
  return ops;
}

bool PositiveOp(const std::string& op) {
  return op == "Log" || op == "Sqrt" || op == "Pow" || op == "Reciprocal" || op == "Div";
}

TEST(GpuPointwise, FusedPointwiseTacticsEveryStepOpAndBroadcast) {
  // y = Add(op(in0[, in1]), in1): in0 like the output, in1 broadcast in the ways below.
  const std::vector<std::pair<Shape, Shape>> patterns = {
      {{2, 16, 4, 6}, {1, 16, 1, 1}},  // per channel, H*W = 24: one load per chunk
      {{2, 3, 5, 7}, {3, 1, 1}},       // per channel, H*W = 35: per element
      {{5, 24}, {24}},                 // trailing, 24 elements: contiguous chunks
      {{6, 175}, {175}},               // trailing, odd
      {{3, 1031}, {3, 1}},             // per row, odd
  };
  uint32_t seed = 900;
  for (const std::string tactic : {"nvrtc", "interp"})
    for (const auto& [op, alpha, beta] : StepOps())
      for (DataType t : {kF32, kF16, kBF16})
        for (const auto& [a, b] : patterns) {
          const bool positive = PositiveOp(op);
          OneNode n("FusedPointwise", "kiln");
          n.Input(Random(t, a, seed++, positive ? 0.2 : -2, 2)).Input(Random(t, b, seed++, positive ? 0.2 : -2, 2));
          Program(n, {op, "Add"}, {0, 1, -1, 1}, {alpha, 0}, {beta, 0}).Tactic(tactic);
          EXPECT_TRUE(CheckFloat(n, t)) << tactic << " " << op << " " << DataTypeName(t) << " " << ShapeToString(a)
                                        << " " << ShapeToString(b);
        }
}

TEST(GpuPointwise, FusedPointwiseTacticsSameShapeScalarAndOddSizes) {
  // Binary ops with the second operand like the output or a scalar, over odd element counts.
  const std::vector<Shape> shapes = {{1}, {7}, {1031}, {3, 517}, {2, 3, 64}, {8, 9, 17}};
  uint32_t seed = 1900;
  for (const std::string tactic : {"nvrtc", "interp"})
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"})
      for (DataType t : {kF32, kF16, kBF16})
        for (const Shape& s : shapes)
          for (bool scalar : {false, true}) {
            const bool positive = PositiveOp(op);
            OneNode n("FusedPointwise", "kiln");
            n.Input(Random(t, s, seed++, positive ? 0.2 : -2, 2))
                .Input(Random(t, scalar ? Shape{} : s, seed++, positive ? 0.2 : -2, 2));
            Program(n, {op, "Relu"}, {0, 1, -1, -1}, {0, 0}, {0, 0}).Tactic(tactic);
            EXPECT_TRUE(CheckFloat(n, t)) << tactic << " " << op << " " << DataTypeName(t) << " " << ShapeToString(s)
                                          << (scalar ? " scalar" : "");
          }
}

TEST(GpuPointwise, FusedPointwiseTacticsBothSidesBroadcast) {
  // Several broadcast operands, the output broadcast from both sides, and a long chain.
  const std::vector<std::vector<Shape>> shapes = {
      {{3, 1, 4}, {1, 5, 1}, {4}, {}},
      {{2, 1, 6, 8}, {1, 3, 1, 8}, {1, 3, 1, 1}, {1}},
      {{1, 16, 1, 1}, {4, 16, 2, 4}, {16, 1, 1}, {4, 16, 2, 4}},  // the first input broadcast, the rest vectorize
      {{2, 3, 4, 5, 6}, {5, 6}, {3, 1, 1, 1}, {2, 3, 4, 5, 6}},
      {{1031}, {1031}, {1}, {1031}},
  };
  uint32_t seed = 2900;
  for (const std::string tactic : {"nvrtc", "interp"})
    for (DataType t : {kF32, kF16, kBF16})
      for (const auto& s : shapes) {
        OneNode n("FusedPointwise", "kiln");
        for (const Shape& sh : s) n.Input(Random(t, sh, seed++, -2, 2));
        Program(n, {"Mul", "Add", "Relu", "Sigmoid", "Mul", "Sub"}, {0, 1, -1, 2, -2, -2, -3, -3, -4, 0, -5, 3},
                {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0})
            .Tactic(tactic);
        EXPECT_TRUE(CheckFloat(n, t)) << tactic << " " << DataTypeName(t) << " " << ShapeToString(s[0]) << " "
                                      << ShapeToString(s[1]);
      }
}

TEST(GpuPointwise, FusedPointwiseTacticsLongProgramManyInputs) {
  // 8 inputs and 48 steps (the interpreter's limits): alternating Add of the next input and a bounded op.
  std::vector<std::string> ops;
  std::vector<int64_t> args;
  std::vector<float> alpha, beta;
  const char* unary[] = {"Tanh", "Sigmoid", "Softsign", "Sin", "Cos", "Erf"};
  for (int s = 0; s < 48; ++s) {
    const int64_t prev = s == 0 ? 0 : -s;
    if (s % 2 == 0) {
      ops.push_back(s % 4 == 0 ? "Add" : "Mul");
      args.insert(args.end(), {prev, (s / 2) % 8});
    } else {
      ops.push_back(unary[(s / 2) % 6]);
      args.insert(args.end(), {prev, prev});
    }
    alpha.push_back(0);
    beta.push_back(0);
  }
  uint32_t seed = 3900;
  for (const std::string tactic : {"nvrtc", "interp"})
    for (DataType t : {kF32, kF16}) {
      OneNode n("FusedPointwise", "kiln");
      n.Input(Random(t, {3, 7, 33}, seed++, -2, 2));
      for (int k = 1; k < 8; ++k) n.Input(Random(t, k % 3 == 0 ? Shape{33} : Shape{3, 7, 33}, seed++, -2, 2));
      Program(n, ops, args, alpha, beta).Tactic(tactic);
      EXPECT_TRUE(CheckFloat(n, t, 1e-4)) << tactic << " " << DataTypeName(t);
    }
}

TEST(GpuPointwise, FloatArithmeticSameShapeVectorized) {
  // Add/Sub/Mul/Div/PRelu of same-shape or scalar float operands (the 16-byte vector path) over odd sizes.
  uint32_t seed = 4900;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "PRelu"})
    for (DataType t : {kF32, kF16, kBF16})
      for (const Shape& s : std::vector<Shape>{{1}, {7}, {1031}, {3, 517}, {4, 64}})
        for (bool scalar : {false, true}) {
          OneNode node(op);
          node.Input(Random(t, s, seed++, -2, 2)).Input(Random(t, scalar ? Shape{1} : s, seed++, 0.5, 2));
          EXPECT_TRUE(CheckFloat(node, t)) << op << " " << DataTypeName(t) << " " << ShapeToString(s)
                                           << (scalar ? " scalar" : "");
        }
}

// Whether b broadcasts to a without growing it (PRelu's slope against X).
bool BroadcastsTo(const Shape& b, const Shape& a) {
  if (b.size() > a.size()) return false;
  for (size_t i = 0; i < b.size(); ++i) {
    const int64_t bd = b[b.size() - 1 - i], ad = a[a.size() - 1 - i];
    if (bd != 1 && bd != ad) return false;
  }
  return true;
}

TEST(GpuPointwise, FloatArithmeticPerChannelRows) {
  // Per-channel broadcasts (the row path: an operand runs along 16-byte chunks of the inner dim or holds one value
  // per row): NHWC squeeze-excitation scales, biases, NCHW scales, either operand order, inner extents that are and
  // are not a multiple of the vector width, float32 and the 16-bit floats.
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{2, 5, 7, 24}, {2, 1, 1, 24}}, {{2, 1, 1, 40}, {2, 3, 3, 40}}, {{6, 64}, {64}}, {{64}, {6, 64}},
      {{2, 16, 3, 8}, {2, 16, 1, 1}}, {{2, 5, 7, 12}, {2, 1, 1, 12}}, {{3, 2, 16}, {1, 2, 16}}, {{3, 2, 16}, {3, 2, 1}},
  };
  uint32_t seed = 7100;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"})
    for (DataType t : {kF32, kF16, kBF16})
      for (const auto& [a, b] : pairs) {
        if (std::string(op) == "PRelu" && !BroadcastsTo(b, a)) continue;  // the slope broadcasts to X
        OneNode node(op);
        node.Input(Random(t, a, seed++, -2, 2)).Input(Random(t, b, seed++, 0.5, 2));
        EXPECT_TRUE(CheckFloat(node, t)) << op << " " << DataTypeName(t) << " " << ShapeToString(a) << " "
                                         << ShapeToString(b);
      }
}

// Bandwidth of FusedPointwise's tactics and of the plain Add on ResNet-50's residual shape (run with
// --gtest_also_run_disabled_tests; prints, asserts nothing about speed).
std::unique_ptr<Graph> OneNodeGraph(const std::string& op, const std::string& domain, DataType t,
                                    const std::vector<Shape>& in, const std::map<std::string, Attribute>& attrs) {
  auto g = std::make_unique<Graph>();
  g->opsets[""] = 21;
  g->opsets["kiln"] = 1;
  Node* n = g->AddNode(op, "bench");
  n->domain = domain;
  n->opset = 21;
  n->attrs = attrs;
  for (size_t i = 0; i < in.size(); ++i) {
    Value* v = g->GetOrAddValue("in" + std::to_string(i));
    v->dtype = t;
    v->shape = FromStatic(in[i]);
    v->has_shape = true;
    v->is_graph_input = true;
    g->inputs.push_back(v);
    n->inputs.push_back(v);
  }
  Value* o = g->GetOrAddValue("out0");
  o->producer = n;
  o->is_graph_output = true;
  n->outputs.push_back(o);
  g->outputs.push_back(o);
  EXPECT_TRUE(InferGraph(*g, InferOptions{}).ok());
  return g;
}

void Bench(const std::string& label, const std::string& op, const std::string& domain, DataType t,
           const std::vector<Shape>& in, const std::map<std::string, Attribute>& attrs, const std::string& tactic) {
  auto g = OneNodeGraph(op, domain, t, in, attrs);
  const Node& n = *g->nodes()[0];
  const Shape out = ToStatic(n.outputs[0]->shape);
  cuda::LayerSpec spec{n, in, {out}};
  const auto t0 = std::chrono::steady_clock::now();
  auto layer = cuda::CreateLayer(spec, tactic);
  const double create_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  std::vector<cuda::DeviceTensor> ins, outs(1);
  size_t bytes = 0;
  for (const Shape& s : in) {
    cuda::DeviceTensor d;
    d.dtype = t;
    d.shape = s;
    ASSERT_EQ(cudaMalloc(&d.data, std::max<size_t>(d.nbytes(), 16)), cudaSuccess);
    cudaMemset(d.data, 0, d.nbytes());
    bytes += d.nbytes();
    ins.push_back(d);
  }
  outs[0].dtype = t;
  outs[0].shape = out;
  ASSERT_EQ(cudaMalloc(&outs[0].data, outs[0].nbytes()), cudaSuccess);
  bytes += outs[0].nbytes();
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cuda::LaunchContext ctx;
  ctx.stream = stream;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*layer)->Enqueue(ctx, ins, outs).ok());
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const int iters = 50;
  cudaEventRecord(e0, stream);
  for (int i = 0; i < iters; ++i) (void)(*layer)->Enqueue(ctx, ins, outs);
  cudaEventRecord(e1, stream);
  ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  const double us = 1000.0 * ms / iters;
  int dev = 0;
  cudaDeviceProp prop;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&prop, dev);
  std::printf("[bench] %-44s %-7s %8.1f us  %7.1f GB/s  (%.1f MB moved, create %.1f ms, %s)\n", label.c_str(),
              tactic.c_str(), us, bytes / (us * 1e3), bytes / 1e6, create_ms, prop.name);
  for (auto& d : ins) cudaFree(d.data);
  cudaFree(outs[0].data);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
}

TEST(GpuPointwise, DISABLED_FusedPointwiseBandwidth) {
  auto prog = [](std::vector<std::string> ops, std::vector<int64_t> args, float alpha = 0) {
    std::map<std::string, Attribute> a;
    const size_t k = ops.size();
    a["kiln_ops"] = Strings(std::move(ops));
    a["kiln_args"] = Attribute::Ints(std::move(args));
    a["kiln_alpha"] = Attribute::Floats(std::vector<float>(k, alpha));
    a["kiln_beta"] = Attribute::Floats(std::vector<float>(k, 0.f));
    return a;
  };
  const Shape x = {64, 256, 56, 56}, c = {1, 256, 1, 1};
  for (DataType t : {kF16, kF32}) {
    const std::string dt = DataTypeName(t);
    for (const char* tac : {"nvrtc", "interp"}) {
      Bench("Add+Relu " + dt + " [64,256,56,56]", "FusedPointwise", "kiln", t, {x, x}, prog({"Add", "Relu"}, {0, 1, -1, -1}), tac);
      Bench("Mul+Add+Relu per-channel " + dt, "FusedPointwise", "kiln", t, {x, c, c},
            prog({"Mul", "Add", "Relu"}, {0, 1, -1, 2, -2, -2}), tac);
      Bench("Add+Add+Relu 3 full " + dt, "FusedPointwise", "kiln", t, {x, x, x},
            prog({"Add", "Add", "Relu"}, {0, 1, -1, 2, -2, -2}), tac);
      Bench("GeluTanh(x*y) " + dt, "FusedPointwise", "kiln", t, {x, x}, prog({"Mul", "GeluTanh"}, {0, 1, -1, -1}), tac);
    }
    Bench("plain Add " + dt, "Add", "", t, {x, x}, {}, "default");
    Bench("plain Mul " + dt, "Mul", "", t, {x, x}, {}, "default");
  }
  // Compile time of programs not seen before in this process (the first NVRTC call pays its fixed cost above).
  for (float alpha : {0.11f, 0.12f, 0.13f})
    Bench("LeakyRelu(x+y) new program " + std::to_string(alpha), "FusedPointwise", "kiln", kF16, {{8, 1024}, {8, 1024}},
          prog({"Add", "LeakyRelu"}, {0, 1, -1, -1}, alpha), "nvrtc");
}

}  // namespace
}  // namespace kiln::gputest
