// Differential tests of the CUDA Cast/CastLike/QuantizeLinear/DequantizeLinear layers (pointwise_cast.cu,
// narrow_types.cuh) on ONNX 1.18+'s narrow types (float4e2m1, float8e8m0, int2, uint2; one value per byte) and the
// wrapping casts to int4/uint4, against the CPU reference, byte for byte: every float4 and e8m0 code as input, float
// inputs on and next to every rounding boundary (in float32, float16, bfloat16 and float64), NaN of both signs,
// infinities, signed zeros, subnormals, saturate on and off, e8m0's three round modes, integers wrapping from every
// integer type (their extremes included) and floats truncated then wrapped.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

constexpr DataType kF32 = DataType::kFloat32, kF16 = DataType::kFloat16, kBF16 = DataType::kBFloat16,
                   kF64 = DataType::kFloat64, kF4 = DataType::kFloat4E2M1, kE8M0 = DataType::kFloat8E8M0,
                   kI2 = DataType::kInt2, kU2 = DataType::kUInt2, kI4 = DataType::kInt4, kU4 = DataType::kUInt4;

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A 1-D tensor of raw bytes (one value per byte).
Tensor Bytes(DataType t, const std::vector<uint8_t>& v) {
  Tensor x(t, {static_cast<int64_t>(v.size())});
  if (!v.empty()) std::memcpy(x.raw(), v.data(), v.size());
  return x;
}

Tensor Values(DataType t, const std::vector<double>& v) { return FromValues(t, {static_cast<int64_t>(v.size())}, v); }

// Every target type of the casts from the narrow types.
const std::vector<DataType>& AllTargets() {
  static const std::vector<DataType> t = {kF32, kF16, kBF16, kF64, DataType::kInt8, DataType::kUInt8,
                                          DataType::kInt16, DataType::kUInt16, DataType::kInt32, DataType::kUInt32,
                                          DataType::kInt64, DataType::kUInt64, DataType::kBool,
                                          DataType::kFloat8E4M3FN, DataType::kFloat8E5M2, kI4, kU4, kI2, kU2, kF4,
                                          kE8M0};
  return t;
}

::testing::AssertionResult CastMatches(const Tensor& x, DataType to, int64_t saturate = 1,
                                       const std::string& round_mode = "") {
  OneNode n("Cast");
  n.Opset(25).Input(x).Attr("to", Attribute::Int(static_cast<int64_t>(to))).Attr("saturate", Attribute::Int(saturate));
  if (!round_mode.empty()) n.Attr("round_mode", Attribute::String(round_mode));
  return n.MatchesCpu(0, 0);
}

::testing::AssertionResult CastLikeMatches(const Tensor& x, DataType to) {
  Tensor like(to, {1});
  std::memset(like.raw(), 0, like.nbytes());
  return OneNode("CastLike").Opset(25).Input(x).Const(like).MatchesCpu(0, 0);
}

std::string Name(DataType from, DataType to) { return std::string(DataTypeName(from)) + " -> " + DataTypeName(to); }

// Float values on, just below and just above every float4e2m1 magnitude and midpoint, both signs, and the specials.
std::vector<double> Float4Boundaries(bool in_double) {
  std::vector<double> v = {0.0, -0.0, kNaN, -kNaN, kInf, -kInf, 1e30, -1e30, 1e-40, -1e-45, 7.0, -6.5, 100.0};
  for (double m : {0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0}) {
    for (double s : {1.0, -1.0}) {
      v.push_back(s * m);
      v.push_back(s * std::nextafter(static_cast<float>(m), 0.0f));
      v.push_back(s * std::nextafter(static_cast<float>(m), 10.0f));
      if (in_double) {  // within half a float ulp of the boundary: the double path must keep its side
        v.push_back(s * (m + m * 1e-12));
        v.push_back(s * (m - m * 1e-12));
      }
    }
  }
  return v;
}

// Values around every power of two 2^k (k = -150 .. 129) and 1.5 * 2^k: float8e8m0's rounding boundaries.
std::vector<double> E8M0Boundaries(bool in_double) {
  std::vector<double> v = {0.0, -0.0, kNaN, -kNaN, kInf, -kInf, -1.0, -3.0, -0.7, 1e-45, 3.4028234663852886e38};
  for (int k = -150; k <= 129; ++k) {
    for (double base : {std::ldexp(1.0, k), 1.5 * std::ldexp(1.0, k)}) {
      const auto f = static_cast<float>(base);
      v.push_back(base);
      v.push_back(std::nextafter(f, 0.0f));
      v.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
      if (in_double) {
        v.push_back(base * (1 + 1e-12));
        v.push_back(base * (1 - 1e-12));
      }
    }
  }
  return v;
}

std::vector<uint8_t> AllCodes(int n) {
  std::vector<uint8_t> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<uint8_t>(i));
  return v;
}

TEST(GpuCastNarrow, FromEveryFloat4AndE8M0Code) {
  const Tensor f4 = Bytes(kF4, AllCodes(16));
  const Tensor e8 = Bytes(kE8M0, AllCodes(256));
  for (DataType to : AllTargets()) {
    for (const Tensor* x : {&f4, &e8})
      for (int64_t sat : {0, 1}) EXPECT_TRUE(CastMatches(*x, to, sat)) << Name(x->dtype(), to) << " saturate=" << sat;
    EXPECT_TRUE(CastLikeMatches(f4, to)) << "CastLike " << Name(kF4, to);
    EXPECT_TRUE(CastLikeMatches(e8, to)) << "CastLike " << Name(kE8M0, to);
  }
  for (const char* mode : {"up", "down", "nearest"}) {
    EXPECT_TRUE(CastMatches(f4, kE8M0, 1, mode)) << mode;
    EXPECT_TRUE(CastMatches(f4, kE8M0, 0, mode)) << mode;
  }
}

TEST(GpuCastNarrow, FromEveryTwoBitValue) {
  const Tensor i2 = Bytes(kI2, {0xfe, 0xff, 0, 1});  // -2, -1, 0, 1 (sign-extended storage)
  const Tensor u2 = Bytes(kU2, {0, 1, 2, 3});
  for (DataType to : AllTargets())
    for (const Tensor* x : {&i2, &u2}) {
      EXPECT_TRUE(CastMatches(*x, to)) << Name(x->dtype(), to);
      EXPECT_TRUE(CastLikeMatches(*x, to)) << "CastLike " << Name(x->dtype(), to);
    }
}

TEST(GpuCastNarrow, FloatToFloat4E2M1AtEveryBoundary) {
  for (DataType from : {kF32, kF16, kBF16, kF64}) {
    const Tensor x = Values(from, Float4Boundaries(from == kF64));
    for (int64_t sat : {0, 1}) EXPECT_TRUE(CastMatches(x, kF4, sat)) << Name(from, kF4) << " saturate=" << sat;
    EXPECT_TRUE(CastLikeMatches(x, kF4)) << "CastLike " << Name(from, kF4);
  }
  // From integers (through double) and from float8.
  for (DataType from : {DataType::kInt8, DataType::kInt32, DataType::kInt64, DataType::kUInt8, DataType::kBool})
    EXPECT_TRUE(CastMatches(Random(from, {67}, 7, from == DataType::kUInt8 ? 0 : -9, 9), kF4)) << Name(from, kF4);
  EXPECT_TRUE(CastMatches(Bytes(DataType::kFloat8E4M3FN, AllCodes(256)), kF4));
  EXPECT_TRUE(CastMatches(Bytes(kI4, {0xf8, 0xf9, 0xfd, 0xff, 0, 1, 3, 7}), kF4));
}

TEST(GpuCastNarrow, FloatToE8M0EveryModeAndSaturate) {
  for (DataType from : {kF32, kF16, kBF16, kF64}) {
    const Tensor x = Values(from, E8M0Boundaries(from == kF64));
    for (const char* mode : {"up", "down", "nearest"})
      for (int64_t sat : {0, 1})
        EXPECT_TRUE(CastMatches(x, kE8M0, sat, mode)) << Name(from, kE8M0) << " " << mode << " saturate=" << sat;
    EXPECT_TRUE(CastLikeMatches(x, kE8M0)) << "CastLike " << Name(from, kE8M0);
  }
  // Integers, their extremes included (2^63 rounds up from int64 max; uint64 max to 2^64).
  Tensor i64(DataType::kInt64, {8});
  const int64_t iv[8] = {0, 1, -1, 3, 6, 12, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  std::memcpy(i64.raw(), iv, sizeof(iv));
  Tensor u64(DataType::kUInt64, {4});
  const uint64_t uv[4] = {0, 5, 1ull << 63, std::numeric_limits<uint64_t>::max()};
  std::memcpy(u64.raw(), uv, sizeof(uv));
  for (const char* mode : {"up", "down", "nearest"})
    for (int64_t sat : {0, 1}) {
      EXPECT_TRUE(CastMatches(i64, kE8M0, sat, mode)) << mode << " saturate=" << sat;
      EXPECT_TRUE(CastMatches(u64, kE8M0, sat, mode)) << mode << " saturate=" << sat;
      EXPECT_TRUE(CastMatches(Bytes(DataType::kFloat8E4M3FN, AllCodes(256)), kE8M0, sat, mode)) << mode;
    }
}

// Integers of every width, their extremes included, and floats (fractions, negatives, NaN, infinities, |x| around
// 2^31) into int4/uint4/int2/uint2: the low bits (floats truncated toward zero first; NaN, infinities, |x| >= 2^31: 0).
TEST(GpuCastNarrow, WrapIntoFourAndTwoBitIntegers) {
  const std::vector<DataType> targets = {kI4, kU4, kI2, kU2};
  Tensor i64(DataType::kInt64, {10});
  const int64_t iv[10] = {0,  -1, -8, 7, 8, -9, 0x123456789abcdefLL, std::numeric_limits<int64_t>::max(),
                          std::numeric_limits<int64_t>::min(), -0x123456789abcdefLL};
  std::memcpy(i64.raw(), iv, sizeof(iv));
  Tensor u64(DataType::kUInt64, {4});
  const uint64_t uv[4] = {0, 17, 1ull << 63, std::numeric_limits<uint64_t>::max()};
  std::memcpy(u64.raw(), uv, sizeof(uv));
  std::vector<Tensor> ints = {i64, u64};
  uint32_t seed = 900;
  for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kUInt16, DataType::kInt32,
                     DataType::kUInt32, DataType::kBool})
    ints.push_back(Random(t, {131}, seed++, IsSignedType(t) ? -200 : 0, 200));
  ints.push_back(Bytes(kI4, {0xf8, 0xf9, 0xfd, 0xff, 0, 1, 3, 7}));
  ints.push_back(Bytes(kU4, AllCodes(16)));
  const std::vector<double> fv = {0.0,   -0.0,  0.5,  -0.5,  0.99, -0.99, 1.5,  -1.5,  2.5,   -2.5,   7.9,
                                  -8.9,  8.0,   15.7, 16.0,  -17.3, 100.25, -1000.75, kNaN, -kNaN, kInf, -kInf,
                                  2147483520.0, -2147483520.0, 2147483648.0, -2147483648.0, 4294967296.0, 1e20, -1e20,
                                  65504.0, -65504.0, 1e-40};
  std::vector<Tensor> floats;
  for (DataType t : {kF32, kF16, kBF16}) floats.push_back(Values(t, fv));
  std::vector<double> dv = fv;
  for (double d : {2147483647.9, -2147483647.9, 2147483647.0, -2147483647.0, 2147483648.5, -2147483648.5, 1e300})
    dv.push_back(d);
  floats.push_back(Values(kF64, dv));
  floats.push_back(Bytes(DataType::kFloat8E4M3FN, AllCodes(256)));
  floats.push_back(Random(kF32, {3, 347}, seed++, -70000, 70000));
  for (DataType to : targets) {
    for (const Tensor& x : ints) {
      EXPECT_TRUE(CastMatches(x, to)) << Name(x.dtype(), to);
      EXPECT_TRUE(CastLikeMatches(x, to)) << "CastLike " << Name(x.dtype(), to);
    }
    for (const Tensor& x : floats) {
      for (int64_t sat : {0, 1}) EXPECT_TRUE(CastMatches(x, to, sat)) << Name(x.dtype(), to) << " saturate=" << sat;
      EXPECT_TRUE(CastLikeMatches(x, to)) << "CastLike " << Name(x.dtype(), to);
    }
  }
}

// A larger tensor through the grid-stride loop, and an empty one.
TEST(GpuCastNarrow, LargeAndEmpty) {
  const Tensor x = Random(kF32, {5, 4099}, 77, -8, 8);
  for (DataType to : {kF4, kE8M0, kI2, kU2, kI4, kU4}) EXPECT_TRUE(CastMatches(x, to)) << DataTypeName(to);
  std::vector<uint8_t> codes(20000);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 37) % 16);
  EXPECT_TRUE(CastMatches(Bytes(kF4, codes), kF32));
  for (DataType to : {kF4, kE8M0, kI2, kU2}) EXPECT_TRUE(CastMatches(Tensor(kF32, {0, 3}), to)) << DataTypeName(to);
}

// QuantizeLinear to int2/uint2/float4e2m1 (per tensor, per axis, with and without a zero point) and DequantizeLinear
// of them, as ONNX's node tests use them (axis 0, float32 scales).
TEST(GpuCastNarrow, QuantizeDequantize) {
  const Tensor x = Random(kF32, {6, 17}, 31, -9, 9);
  const Tensor xs = Values(kF32, {kNaN, -kNaN, kInf, -kInf, 0.0, -0.0, 0.26, -0.74, 2.5, 5.0, 5.1, -100.0});
  const Tensor scale = Random(kF32, {6}, 32, 0.5, 2.5);
  for (DataType t : {kI2, kU2}) {
    const Tensor zp = t == kI2 ? Bytes(t, {0xfe, 0xff, 0, 1, 0, 0xff}) : Bytes(t, {0, 1, 2, 3, 1, 2});
    EXPECT_TRUE(OneNode("QuantizeLinear").Opset(25).Input(x).Const(scale).Const(zp).Attr("axis", Attribute::Int(0))
                    .MatchesCpu(0, 0))
        << DataTypeName(t);
    EXPECT_TRUE(OneNode("QuantizeLinear").Opset(25).Input(x).Const(Values(kF32, {0.7})).Const(Bytes(t, {1}))
                    .MatchesCpu(0, 0))
        << DataTypeName(t);
    const Tensor q = t == kI2 ? Bytes(t, {0xfe, 0xff, 0, 1, 1, 0}) : Bytes(t, {0, 1, 2, 3, 3, 0});
    EXPECT_TRUE(OneNode("DequantizeLinear").Opset(25).Input(q).Const(Random(kF32, {6}, 33, 0.1, 2))
                    .Const(zp).Attr("axis", Attribute::Int(0)).MatchesCpu(0, 0))
        << DataTypeName(t);
  }
  // float4e2m1: saturate has no say; the zero point's value is added only when given (-0 / s stays -0 without).
  const Tensor zp4 = Bytes(kF4, {0, 8, 1, 9, 2, 15});
  EXPECT_TRUE(OneNode("QuantizeLinear").Opset(25).Input(x).Const(scale).Const(zp4).Attr("axis", Attribute::Int(0))
                  .MatchesCpu(0, 0));
  for (int64_t sat : {0, 1})
    EXPECT_TRUE(OneNode("QuantizeLinear").Opset(25).Input(xs).Const(Values(kF32, {0.5})).Const(Bytes(kF4, {0}))
                    .Attr("saturate", Attribute::Int(sat)).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("QuantizeLinear").Opset(25).Input(xs).Const(Values(kF32, {1.0})).Const(Bytes(kF4, {8}))
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("DequantizeLinear").Opset(25).Input(Bytes(kF4, AllCodes(16))).Const(Values(kF32, {1.5}))
                  .Const(Bytes(kF4, {3})).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("DequantizeLinear").Opset(25).Input(Bytes(kF4, AllCodes(16))).Const(Values(kF32, {0.25}))
                  .MatchesCpu(0, 0));
}

// Only the layers that handle the narrow types take them: another op with such a value is refused, naming it.
TEST(GpuCastNarrow, OtherLayersRefuseNarrowTypes) {
  for (DataType t : {kF4, kE8M0, kI2, kU2}) {
    const auto r = OneNode("Identity").Opset(25).Input(Bytes(t, {0, 1})).MatchesCpu(0, 0);
    EXPECT_FALSE(r) << DataTypeName(t);
    EXPECT_NE(std::string(r.message()).find(DataTypeName(t)), std::string::npos) << r.message();
  }
}

}  // namespace
}  // namespace kiln::gputest
