// The narrow element types of ONNX 1.18+ (float4e2m1, float8e8m0, uint2, int2), held one value per byte: their
// conversions (core/dtype.cpp, core/narrow_types.h), tensor access, import from ONNX's packed form, and the CPU Cast,
// QuantizeLinear and DequantizeLinear kernels, against values worked out by hand and the codes onnx 1.23's reference
// (ml_dtypes, onnx.numpy_helper.to_float8e8m0) writes in its node tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/narrow_types.h"
#include "core/tensor.h"
#include "kiln/builder.h"
#include "kiln/debug.h"
#include "kiln/runtime.h"
#include "onnx.pb.h"
#include "onnx/tensor_proto.h"

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(NarrowTypes, NamesSizesAndCategories) {
  struct Row {
    DataType t;
    const char* name;
    bool is_float, is_int, is_signed;
  };
  for (const Row& r : {Row{DataType::kFloat4E2M1, "float4e2m1", true, false, true},
                       Row{DataType::kFloat8E8M0, "float8e8m0", true, false, false},
                       Row{DataType::kUInt2, "uint2", false, true, false},
                       Row{DataType::kInt2, "int2", false, true, true}}) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(DataTypeSize(r.t), 1u);
    EXPECT_TRUE(IsSupportedType(r.t));
    EXPECT_STREQ(DataTypeName(r.t), r.name);
    EXPECT_EQ(DataTypeFromName(r.name), r.t);
    EXPECT_EQ(IsFloatType(r.t), r.is_float);
    EXPECT_EQ(IsIntegerType(r.t), r.is_int);
    EXPECT_EQ(IsSignedType(r.t), r.is_signed);
    EXPECT_EQ(Is2BitType(r.t), r.is_int);
    EXPECT_EQ(IsSubByteIntegerType(r.t), r.is_int);
    EXPECT_FALSE(Is4BitType(r.t));
  }
  EXPECT_TRUE(IsSubByteIntegerType(DataType::kInt4));
  EXPECT_EQ(IntegerRange(DataType::kInt2), (std::pair<int64_t, int64_t>{-2, 1}));
  EXPECT_EQ(IntegerRange(DataType::kUInt2), (std::pair<int64_t, int64_t>{0, 3}));
}

// ---- float4 E2M1 ----

TEST(Float4E2M1, EveryCodeDecodesAndRoundTrips) {
  const float magnitudes[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const float v = Float4E2M1ToFloat(static_cast<uint8_t>(c));
    EXPECT_EQ(std::fabs(v), magnitudes[c & 7]) << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << c;  // code 8 is -0
    EXPECT_EQ(FloatToFloat4E2M1(v), c) << c;
    EXPECT_EQ(DoubleToFloat4E2M1(v), c) << c;
  }
}

// Against the definition: the nearest of the eight magnitudes, a tie to the even code; probes at every value, every
// midpoint, a float either side of each, and random values.
TEST(Float4E2M1, RoundsToNearestEven) {
  auto nearest = [](float f) -> uint8_t {
    const float a = std::fabs(f);
    int best = 0;
    for (int c = 1; c < 8; ++c) {
      const float err = std::fabs(Float4E2M1ToFloat(static_cast<uint8_t>(c)) - a);
      const float best_err = std::fabs(Float4E2M1ToFloat(static_cast<uint8_t>(best)) - a);
      if (err < best_err || (err == best_err && c % 2 == 0)) best = c;
    }
    return static_cast<uint8_t>((std::signbit(f) ? 8 : 0) | best);
  };
  std::vector<float> probes;
  for (int c = 0; c < 7; ++c) {
    const float lo = Float4E2M1ToFloat(static_cast<uint8_t>(c)), hi = Float4E2M1ToFloat(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;
    for (float v : {lo, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 10.f), hi}) probes.push_back(v);
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.f, 6.f);
  for (int i = 0; i < 5000; ++i) probes.push_back(u(rng));
  for (float v : probes) {
    ASSERT_EQ(FloatToFloat4E2M1(v), nearest(v)) << v;
    ASSERT_EQ(FloatToFloat4E2M1(-v), nearest(-v)) << -v;
  }
  // The ties, spelled out: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4.
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f};
  const float want[] = {0.f, 1.f, 1.f, 2.f, 2.f, 4.f, 4.f};
  for (int k = 0; k < 7; ++k) EXPECT_EQ(Float4E2M1ToFloat(FloatToFloat4E2M1(ties[k])), want[k]) << ties[k];
}

TEST(Float4E2M1, SaturatesAndMapsNaNAsOnnxReference) {
  EXPECT_EQ(FloatToFloat4E2M1(6.5f), 0x7);
  EXPECT_EQ(FloatToFloat4E2M1(1e6f), 0x7);
  EXPECT_EQ(FloatToFloat4E2M1(kInf), 0x7);
  EXPECT_EQ(FloatToFloat4E2M1(-kInf), 0xf);
  EXPECT_EQ(FloatToFloat4E2M1(-9.f), 0xf);
  EXPECT_EQ(FloatToFloat4E2M1(-0.0f), 0x8);
  EXPECT_EQ(FloatToFloat4E2M1(-0.1f), 0x8);  // rounds to -0
  EXPECT_EQ(FloatToFloat4E2M1(1e-7f), 0x0);
  // NaN: float4 has none; onnx 1.23's reference writes the zero of the other sign.
  EXPECT_EQ(FloatToFloat4E2M1(std::numeric_limits<float>::quiet_NaN()), 0x8);
  EXPECT_EQ(FloatToFloat4E2M1(-std::numeric_limits<float>::quiet_NaN()), 0x0);
  // test_cast_FLOAT_to_FLOAT4E2M1's input and the codes of its output (onnx 1.23).
  const float in[] = {0.48f, 0.25f, 1.05f, -3.5f, -8.f, 9.f, 1e6f, 1e-7f, NAN, kInf, kInf, -kInf, -4.f, 0.01f, -0.0f};
  const uint8_t out[] = {1, 0, 2, 0xe, 0xf, 7, 7, 0, 8, 7, 7, 0xf, 0xe, 0, 8};
  for (int i = 0; i < 15; ++i) EXPECT_EQ(FloatToFloat4E2M1(in[i]), out[i]) << i;
}

TEST(Float4E2M1, DoublesRoundWithoutGoingThroughFloat) {
  // Within half a float ulp of a midpoint: float rounding would make it the tie and pick the even code.
  EXPECT_EQ(DoubleToFloat4E2M1(0.25 + 1e-12), 0x1);
  EXPECT_EQ(DoubleToFloat4E2M1(0.75 - 1e-12), 0x1);
  EXPECT_EQ(DoubleToFloat4E2M1(-(2.5 + 1e-12)), 0xd);
  EXPECT_EQ(DoubleToFloat4E2M1(5.0 - 1e-12), 0x6);
  EXPECT_EQ(DoubleToFloat4E2M1(0.25), 0x0);
  EXPECT_EQ(DoubleToFloat4E2M1(1e300), 0x7);
}

// ---- float8 E8M0 ----

TEST(Float8E8M0, DecodesPowersOfTwoAndNaN) {
  EXPECT_EQ(Float8E8M0ToFloat(127), 1.0f);
  EXPECT_EQ(Float8E8M0ToFloat(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(Float8E8M0ToFloat(254), std::ldexp(1.0f, 127));
  EXPECT_EQ(Float8E8M0ToFloat(0x7c), 0.125f);
  EXPECT_TRUE(std::isnan(Float8E8M0ToFloat(255)));
  for (int c = 0; c < 255; ++c)
    for (const char* mode : {"up", "down", "nearest"})
      for (bool sat : {true, false})
        ASSERT_EQ(FloatToFloat8E8M0(Float8E8M0ToFloat(static_cast<uint8_t>(c)), mode, sat), c) << c << " " << mode;
}

TEST(Float8E8M0, RoundModes) {
  auto code = [](float f, const char* mode, bool sat = true) {
    return static_cast<int>(FloatToFloat8E8M0(f, mode, sat));
  };
  // up: the smallest power of two >= |x| (ONNX's default)
  EXPECT_EQ(code(1.0f, "up"), 127);
  EXPECT_EQ(code(1.1f, "up"), 128);
  EXPECT_EQ(code(1.9f, "up"), 128);
  EXPECT_EQ(code(0.124f, "up"), 0x7c);
  EXPECT_EQ(code(-3.0f, "up"), 129);  // the sign is dropped, as ONNX's reference does
  // down: the largest power of two <= |x|
  EXPECT_EQ(code(1.9f, "down"), 127);
  EXPECT_EQ(code(3.0f, "down"), 128);
  EXPECT_EQ(code(0.124f, "down"), 0x7b);
  // nearest: the threshold is 1.5 * 2^k, ties round up
  EXPECT_EQ(code(1.49f, "nearest"), 127);
  EXPECT_EQ(code(1.5f, "nearest"), 128);
  EXPECT_EQ(code(0.75f, "nearest"), 127);
  EXPECT_EQ(code(2.9f, "nearest"), 128);
  EXPECT_EQ(code(3.0f, "nearest"), 129);
  // test_cast_e8m0_FLOAT_to_FLOAT8E8M0 (round_mode up, saturate): the codes onnx 1.23 writes.
  const float in[] = {0.f, 0.124f, 0.25f, 0.5f, 1.1f, 2.f, 4.f, 8.f};
  const int out[] = {0x00, 0x7c, 0x7d, 0x7e, 0x80, 0x80, 0x81, 0x82};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(code(in[i], "up"), out[i]) << in[i];
}

// Cast-24's table: saturate clamps to 2^127 / 2^-127, without it out-of-range values are NaN; NaN stays NaN.
TEST(Float8E8M0, SaturationAndSpecialValues) {
  auto code = [](float f, const char* mode, bool sat) { return static_cast<int>(FloatToFloat8E8M0(f, mode, sat)); };
  const float big = std::ldexp(1.5f, 127);  // rounds up (and to nearest) past 2^127
  for (const char* mode : {"up", "nearest"}) {
    EXPECT_EQ(code(big, mode, true), 0xfe) << mode;
    EXPECT_EQ(code(big, mode, false), 0xff) << mode;
  }
  EXPECT_EQ(code(big, "down", false), 0xfe);  // 2^127 itself
  for (const char* mode : {"up", "down", "nearest"}) {
    EXPECT_EQ(code(kInf, mode, true), 0xfe) << mode;
    EXPECT_EQ(code(kInf, mode, false), 0xff) << mode;
    EXPECT_EQ(code(NAN, mode, true), 0xff) << mode;
    EXPECT_EQ(code(NAN, mode, false), 0xff) << mode;
    EXPECT_EQ(code(0.f, mode, true), 0x00) << mode;
  }
  // Zero and values below 2^-127: "up" reaches 2^-127 itself; "down" and "nearest" fall below the range.
  const float tiny = std::ldexp(1.0f, -130);
  EXPECT_EQ(code(0.f, "up", false), 0x00);
  EXPECT_EQ(code(tiny, "up", false), 0x00);
  EXPECT_EQ(code(0.f, "nearest", false), 0xff);
  EXPECT_EQ(code(tiny, "nearest", false), 0xff);
  EXPECT_EQ(code(tiny, "down", false), 0xff);
  EXPECT_EQ(code(tiny, "down", true), 0x00);
  EXPECT_EQ(code(std::ldexp(0.9f, -127), "nearest", false), 0x00);  // nearer 2^-127 than 2^-128
  // Doubles next to a power of two keep their side of it.
  EXPECT_EQ(DoubleToFloat8E8M0(1.0 + 1e-12, "up"), 128);
  EXPECT_EQ(DoubleToFloat8E8M0(2.0 - 1e-12, "down"), 127);
  EXPECT_EQ(DoubleToFloat8E8M0(1.5 - 1e-12, "nearest"), 127);
}

// ---- int2 / uint2 ----

TEST(Int2, CastWrapsAndTruncates) {
  // test_cast_FLOAT_to_INT2 / _UINT2: -3 .. 3 wrap to two bits (onnx 1.23).
  const int8_t as_int2[] = {1, -2, -1, 0, 1, -2, -1};
  const int8_t as_uint2[] = {1, 2, 3, 0, 1, 2, 3};
  for (int v = -3; v <= 3; ++v) {
    EXPECT_EQ(Wrap2Bit(v, true), as_int2[v + 3]) << v;
    EXPECT_EQ(Wrap2Bit(v, false), as_uint2[v + 3]) << v;
  }
  EXPECT_EQ(Wrap2Bit(std::numeric_limits<int64_t>::min() + 3, true), -1);
  EXPECT_EQ(TruncatedForWrap(1.7), 1);
  EXPECT_EQ(TruncatedForWrap(-1.7), -1);
  EXPECT_EQ(TruncatedForWrap(-2.5), -2);
  EXPECT_EQ(TruncatedForWrap(NAN), 0);
  EXPECT_EQ(TruncatedForWrap(-INFINITY), 0);
  EXPECT_EQ(TruncatedForWrap(3e9), 0);  // past int32: 0, as ONNX's reference (through int32) gives
}

TEST(NarrowTypes, TensorAccessAndCastTensor) {
  Tensor f4(DataType::kFloat4E2M1, {3});
  f4.SetFromDouble(0, 2.6);
  f4.SetFromDouble(1, -100);
  f4.SetFromDouble(2, 0.75);
  EXPECT_EQ(f4.GetAsDouble(0), 3.0);
  EXPECT_EQ(f4.GetAsDouble(1), -6.0);
  EXPECT_EQ(f4.GetAsDouble(2), 1.0);
  Tensor e(DataType::kFloat8E8M0, {2});
  e.SetFromDouble(0, 3.0);  // up
  e.SetFromDouble(1, 1.0 + 1e-12);
  EXPECT_EQ(e.GetAsDouble(0), 4.0);
  EXPECT_EQ(e.GetAsDouble(1), 2.0);
  Tensor i2(DataType::kInt2, {2}), u2(DataType::kUInt2, {2});
  i2.SetFromDouble(0, 5);  // SetFromDouble saturates, as for every integer type
  i2.SetFromDouble(1, -5);
  u2.SetFromDouble(0, 5);
  u2.SetFromDouble(1, -5);
  EXPECT_EQ(i2.GetAsInt(0), 1);
  EXPECT_EQ(i2.GetAsInt(1), -2);
  EXPECT_EQ(u2.GetAsInt(0), 3);
  EXPECT_EQ(u2.GetAsInt(1), 0);
  // CastTensor converts as Cast does: int2 wraps (from int64 and from float), float4 rounds half to even.
  const Tensor x = Tensor::FromFloat({-3.f, 2.f, 3.7f, 0.25f}, {4});
  EXPECT_EQ(CastTensor(x, DataType::kInt2).ToInt64Vector(), (std::vector<int64_t>{1, -2, -1, 0}));
  EXPECT_EQ(CastTensor(Tensor::FromInt64({-3, 2, 7}, {3}), DataType::kUInt2).ToInt64Vector(),
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(CastTensor(x, DataType::kFloat4E2M1).ToFloatVector(), (std::vector<float>{-3.f, 2.f, 4.f, 0.f}));
  EXPECT_EQ(CastTensor(CastTensor(x, DataType::kInt2), DataType::kFloat32).ToFloatVector(),
            (std::vector<float>{1.f, -2.f, -1.f, 0.f}));
}

TEST(NarrowTypes, ConstantsOutsideTheirRangeAreRefused) {
  NetworkDefinition net;
  const uint8_t two[2] = {0x01, 0x02};  // 2 is no int2 (kiln holds -2 as 0xfe)
  Status st = net.addConstant("i2", DataType::kInt2, {2}, two);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("element 1 is 2, outside int2"), std::string::npos) << st.ToString();
  EXPECT_TRUE(net.addConstant("u2", DataType::kUInt2, {2}, two).ok());
  const uint8_t f4[2] = {0x0f, 0x10};
  st = net.addConstant("f4", DataType::kFloat4E2M1, {2}, f4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("element 1 is the byte 16, not a float4e2m1 code"), std::string::npos)
      << st.ToString();
}

// ---- import from ONNX's packed form ----

TEST(NarrowTypes, ImportFromPackedRawDataAndInt32Data) {
  auto read = [](int code, const std::vector<int64_t>& dims, const std::string& raw, const std::vector<int>& i32) {
    onnx::TensorProto p;
    p.set_name("t");
    p.set_data_type(code);  // newer than the onnx.proto kiln compiles
    for (int64_t d : dims) p.add_dims(d);
    if (!raw.empty() || i32.empty()) p.set_raw_data(raw);
    for (int v : i32) p.add_int32_data(v);
    return TensorFromProto(p, {"."}, "initializer 't'");
  };
  // int2 / uint2: four per byte, the first in bits 0-1. test_quantizelinear_uint2's output (int32_data 228, 64, 165)
  // and test_dequantizelinear_int2's input (180).
  for (bool raw : {true, false}) {
    SCOPED_TRACE(raw ? "raw_data" : "int32_data");
    auto u2 = raw ? read(25, {3, 4}, std::string("\xe4\x40\xa5", 3), {}) : read(25, {3, 4}, "", {228, 64, 165});
    ASSERT_TRUE(u2.ok()) << u2.status().ToString();
    EXPECT_EQ(u2->dtype(), DataType::kUInt2);
    EXPECT_EQ(u2->ToInt64Vector(), (std::vector<int64_t>{0, 1, 2, 3, 0, 0, 0, 1, 1, 1, 2, 2}));
    auto i2 = raw ? read(26, {5}, std::string("\xb4\x03", 2), {}) : read(26, {5}, "", {180, 3});  // odd count
    ASSERT_TRUE(i2.ok()) << i2.status().ToString();
    EXPECT_EQ(i2->ToInt64Vector(), (std::vector<int64_t>{0, 1, -1, -2, -1}));
    // float4e2m1: two per byte (test_cast_FLOAT_to_FLOAT4E2M1's first bytes 0x01 0xe2 0x7f), held as codes.
    auto f4 = raw ? read(23, {5}, std::string("\x01\xe2\x7f", 3), {}) : read(23, {5}, "", {1, -30, 127});
    ASSERT_TRUE(f4.ok()) << f4.status().ToString();
    EXPECT_EQ(f4->dtype(), DataType::kFloat4E2M1);
    const std::vector<uint8_t> codes(f4->data<uint8_t>(), f4->data<uint8_t>() + 5);
    EXPECT_EQ(codes, (std::vector<uint8_t>{1, 0, 2, 0xe, 0xf}));
    EXPECT_EQ(f4->ToFloatVector(), (std::vector<float>{0.5f, 0.f, 1.f, -4.f, -6.f}));
    // float8e8m0: one per byte (int32_data: one per entry).
    auto e8 = raw ? read(24, {3}, std::string("\x00\x7f\xff", 3), {}) : read(24, {3}, "", {0, 127, 255});
    ASSERT_TRUE(e8.ok()) << e8.status().ToString();
    EXPECT_EQ(e8->GetAsDouble(1), 1.0);
    EXPECT_TRUE(std::isnan(e8->GetAsDouble(2)));
  }
  auto empty = read(23, {0}, "", {});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->numel(), 0);
  auto bad = read(26, {5}, std::string(5, '\0'), {});  // one byte per value: ONNX packs four
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("four values per byte"), std::string::npos) << bad.status().ToString();
  bad = read(23, {5}, "", {1, 2});  // 5 float4 values take 3 packed entries
  ASSERT_FALSE(bad.ok());
}

// ---- CPU kernels ----

Tensor Floats(const std::vector<float>& v) { return Tensor::FromFloat(v, {static_cast<int64_t>(v.size())}); }

Result<Tensor> RunCast(const Tensor& x, DataType to, const AttrMap& extra = {}) {
  NetworkDefinition net;
  net.setOpset(25);
  KILN_RETURN_IF_ERROR(net.addInput("x", x.dtype(), x.shape()));
  AttrMap attrs = extra;
  attrs["to"] = static_cast<int64_t>(to);
  KILN_RETURN_IF_ERROR(net.addOp("Cast", "cast", {"x"}, {"y"}, attrs));
  KILN_RETURN_IF_ERROR(net.markOutput("y"));
  KILN_ASSIGN_OR_RETURN(auto out, debug::RunNetwork(net, {{"x", x}}));
  return out.at("y");
}

TEST(NarrowTypes, CpuCastToAndFromEachType) {
  const Tensor x = Floats({-3.f, -2.f, -1.5f, 0.f, 1.7f, 2.f, 3.f, 0.3f});
  auto i2 = RunCast(x, DataType::kInt2);
  ASSERT_TRUE(i2.ok()) << i2.status().ToString();
  EXPECT_EQ(i2->ToInt64Vector(), (std::vector<int64_t>{1, -2, -1, 0, 1, -2, -1, 0}));
  auto u2 = RunCast(x, DataType::kUInt2);
  ASSERT_TRUE(u2.ok()) << u2.status().ToString();
  EXPECT_EQ(u2->ToInt64Vector(), (std::vector<int64_t>{1, 2, 3, 0, 1, 2, 3, 0}));
  auto back = RunCast(*i2, DataType::kInt8);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToInt64Vector(), (std::vector<int64_t>{1, -2, -1, 0, 1, -2, -1, 0}));
  auto u64 = RunCast(*i2, DataType::kUInt64);  // an integer conversion: -1 wraps
  ASSERT_TRUE(u64.ok()) << u64.status().ToString();
  EXPECT_EQ(u64->data<uint64_t>()[2], std::numeric_limits<uint64_t>::max());
  auto f4 = RunCast(x, DataType::kFloat4E2M1);
  ASSERT_TRUE(f4.ok()) << f4.status().ToString();
  EXPECT_EQ(f4->ToFloatVector(), (std::vector<float>{-3.f, -2.f, -1.5f, 0.f, 1.5f, 2.f, 3.f, 0.5f}));
  auto f4_half = RunCast(*f4, DataType::kFloat16);
  ASSERT_TRUE(f4_half.ok()) << f4_half.status().ToString();
  EXPECT_EQ(f4_half->ToFloatVector(), f4->ToFloatVector());
  auto f4_i2 = RunCast(*f4, DataType::kInt2);  // float values: truncated, then wrapped
  ASSERT_TRUE(f4_i2.ok()) << f4_i2.status().ToString();
  EXPECT_EQ(f4_i2->ToInt64Vector(), (std::vector<int64_t>{1, -2, -1, 0, 1, -2, -1, 0}));
  // To int4/uint4 as well: truncated, then wrapped (ml_dtypes: float4 -3 -> uint4 13, 1.5 -> 1), and int2 values
  // wrap (-2 -> uint4 14).
  auto f4_u4 = RunCast(*f4, DataType::kUInt4);
  ASSERT_TRUE(f4_u4.ok()) << f4_u4.status().ToString();
  EXPECT_EQ(f4_u4->ToInt64Vector(), (std::vector<int64_t>{13, 14, 15, 0, 1, 2, 3, 0}));
  auto i2_u4 = RunCast(*i2, DataType::kUInt4);
  ASSERT_TRUE(i2_u4.ok()) << i2_u4.status().ToString();
  EXPECT_EQ(i2_u4->ToInt64Vector(), (std::vector<int64_t>{1, 14, 15, 0, 1, 14, 15, 0}));
  // float8e8m0 by round_mode: |x| as a power of two.
  const Tensor pos = Floats({0.3f, 1.5f, 3.f, 6.f});
  const std::vector<std::pair<std::string, std::vector<float>>> modes = {
      {"up", {0.5f, 2.f, 4.f, 8.f}}, {"down", {0.25f, 1.f, 2.f, 4.f}}, {"nearest", {0.25f, 2.f, 4.f, 8.f}}};
  for (const auto& [mode, want] : modes) {
    auto e = RunCast(pos, DataType::kFloat8E8M0, {{"round_mode", mode}});
    ASSERT_TRUE(e.ok()) << mode << ": " << e.status().ToString();
    EXPECT_EQ(e->ToFloatVector(), want) << mode;
  }
  auto bad = RunCast(pos, DataType::kFloat8E8M0, {{"round_mode", std::string("sideways")}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("round_mode"), std::string::npos) << bad.status().ToString();
  Tensor e8(DataType::kFloat8E8M0, {3});
  std::memcpy(e8.raw(), "\x00\xfe\xff", 3);  // 2^-127, 2^127, NaN
  auto as_half = RunCast(e8, DataType::kFloat16);
  ASSERT_TRUE(as_half.ok()) << as_half.status().ToString();
  EXPECT_EQ(as_half->GetAsDouble(0), 0.0);        // below float16's range
  EXPECT_TRUE(std::isinf(as_half->GetAsDouble(1)));  // above it
  EXPECT_TRUE(std::isnan(as_half->GetAsDouble(2)));
  auto as_int = RunCast(e8, DataType::kInt32);
  ASSERT_TRUE(as_int.ok()) << as_int.status().ToString();
  EXPECT_EQ(as_int->ToInt64Vector(), (std::vector<int64_t>{0, std::numeric_limits<int32_t>::max(), 0}));
}

// QuantizeLinear-25 to int2/uint2 (rounded half to even, saturated) and float4e2m1 (per axis, with zero points, as in
// ONNX's node tests), with a float8e8m0 scale; DequantizeLinear of them back, with output_dtype for that scale.
TEST(NarrowTypes, CpuQuantizeAndDequantize) {
  const Tensor x = Tensor::FromFloat({0.f, 2.5f, 4.8f, 8.6f, -4.f, -3.f, 1.f, 2.f, -0.f, -2.5f, -4.8f, -8.6f}, {3, 4});
  Tensor scale(DataType::kFloat32, {3});
  for (int i = 0; i < 3; ++i) scale.SetFromDouble(i, 2.0 + i);
  struct Case {
    DataType type;
    std::vector<float> want;  // int2: test_quantizelinear_int2's (onnx 1.23); float4e2m1: rows 0 and 2 are
                              // test_quantizelinear_float4e2m1's, row 1 (x / 3) worked out by hand
  };
  for (const Case& c : {Case{DataType::kInt2, {0, 1, 1, 1, -1, -1, 0, 1, 0, -1, -1, -2}},
                        Case{DataType::kFloat4E2M1, {0, 1, 2, 4, -1.5f, -1, 0.5f, 0.5f, 0, -0.5f, -1, -2}}}) {
    SCOPED_TRACE(DataTypeName(c.type));
    NetworkDefinition net;
    net.setOpset(25);
    ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {3, 4}).ok());
    ASSERT_TRUE(net.addConstant("s", DataType::kFloat32, {3}, scale.raw()).ok());
    const Tensor zp(c.type, {3});
    ASSERT_TRUE(net.addConstant("z", c.type, {3}, zp.raw()).ok());
    ASSERT_TRUE(net.addOp("QuantizeLinear", "q", {"x", "s", "z"}, {"y"}, {{"axis", int64_t{0}}}).ok());
    ASSERT_TRUE(net.markOutput("y").ok());
    auto out = debug::RunNetwork(net, {{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->at("y").dtype(), c.type);
    EXPECT_EQ(out->at("y").ToFloatVector(), c.want);
    if (c.type == DataType::kFloat4E2M1) EXPECT_EQ(out->at("y").data<uint8_t>()[8], 0x0);  // -0 / 4 + 0 is +0
  }
  // A float8e8m0 scale (2^1 = code 128) with uint2 and float4e2m1 outputs, then back through DequantizeLinear.
  for (DataType t : {DataType::kUInt2, DataType::kFloat4E2M1}) {
    SCOPED_TRACE(DataTypeName(t));
    NetworkDefinition net;
    net.setOpset(25);
    ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {5}).ok());
    const uint8_t two = 128;
    ASSERT_TRUE(net.addConstant("s", DataType::kFloat8E8M0, {}, &two).ok());
    ASSERT_TRUE(net.addOp("QuantizeLinear", "q", {"x", "s"}, {"y"}, {{"output_dtype", static_cast<int64_t>(t)}}).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dq", {"y", "s"}, {"d"}, {{"output_dtype", int64_t{1}}}).ok());
    ASSERT_TRUE(net.markOutput("y").ok());
    ASSERT_TRUE(net.markOutput("d").ok());
    auto out = debug::RunNetwork(net, {{"x", Floats({1.f, 3.f, 5.f, -7.f, 20.f})}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    // x / 2 = 0.5, 1.5, 2.5, -3.5, 10: uint2 rounds half to even and saturates; float4 ties go to the even code
    const std::vector<float> q = t == DataType::kUInt2 ? std::vector<float>{0, 2, 2, 0, 3}
                                                       : std::vector<float>{0.5f, 1.5f, 2.f, -4.f, 6.f};
    EXPECT_EQ(out->at("y").ToFloatVector(), q);
    std::vector<float> d = q;
    for (float& v : d) v *= 2;
    EXPECT_EQ(out->at("d").dtype(), DataType::kFloat32);
    EXPECT_EQ(out->at("d").ToFloatVector(), d);
  }
  // Without output_dtype a float8e8m0 scale would make the output float8e8m0, which DequantizeLinear cannot produce.
  NetworkDefinition net;
  net.setOpset(25);
  ASSERT_TRUE(net.addInput("x", DataType::kInt2, {2}).ok());
  const uint8_t one = 127;
  ASSERT_TRUE(net.addConstant("s", DataType::kFloat8E8M0, {}, &one).ok());
  Status st = net.addOp("DequantizeLinear", "dq", {"x", "s"}, {"d"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("needs output_dtype"), std::string::npos) << st.ToString();
}

class QuietLogger : public ILogger {
 public:
  void log(Severity, const char*) noexcept override {}
};

// A cpu engine keeps the narrow types at its boundary and inside (engine files name them by their ONNX codes):
// an int2 input cast to float32, and a float32 input cast to float4e2m1 and float8e8m0 outputs.
TEST(NarrowTypes, CpuEnginesSaveLoadAndRunThem) {
  NetworkDefinition net;
  net.setOpset(25);
  ASSERT_TRUE(net.addInput("q", DataType::kInt2, {4}).ok());
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {4}).ok());
  ASSERT_TRUE(net.addOp("Cast", "q_to_float", {"q"}, {"qf"}, {{"to", int64_t{1}}}).ok());
  ASSERT_TRUE(net.addOp("Cast", "to_f4", {"x"}, {"x4"}, {{"to", int64_t{23}}}).ok());
  ASSERT_TRUE(
      net.addOp("Cast", "to_e8m0", {"x"}, {"xe"}, {{"to", int64_t{24}}, {"round_mode", std::string("down")}}).ok());
  for (const char* o : {"qf", "x4", "xe"}) ASSERT_TRUE(net.markOutput(o).ok());
  QuietLogger quiet;
  Builder b(quiet);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cpu");
  auto bytes = b.buildSerializedNetwork(net, *cfg);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Runtime rt(quiet);
  auto engine = rt.deserializeEngine(bytes->data(), bytes->size());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto ctx = (*engine)->createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  const std::vector<int8_t> q = {-2, -1, 0, 1};
  const std::vector<float> x = {0.3f, -2.6f, 5.f, 100.f};
  std::vector<float> qf(4);
  std::vector<uint8_t> x4(4), xe(4);
  ASSERT_TRUE((*ctx)->setTensorAddress("q", const_cast<int8_t*>(q.data())).ok());
  ASSERT_TRUE((*ctx)->setTensorAddress("x", const_cast<float*>(x.data())).ok());
  ASSERT_TRUE((*ctx)->setTensorAddress("qf", qf.data()).ok());
  ASSERT_TRUE((*ctx)->setTensorAddress("x4", x4.data()).ok());
  ASSERT_TRUE((*ctx)->setTensorAddress("xe", xe.data()).ok());
  ASSERT_TRUE((*ctx)->enqueue(nullptr).ok());
  EXPECT_EQ(qf, (std::vector<float>{-2, -1, 0, 1}));
  EXPECT_EQ(x4, (std::vector<uint8_t>{0x1, 0xd, 0x6, 0x7}));  // 0.5, -3, 4 (tie to even), 6 (saturated)
  EXPECT_EQ(xe, (std::vector<uint8_t>{125, 128, 129, 133}));  // 0.25, 2 (|x|), 4, 64 (rounded down)
}

}  // namespace
}  // namespace kiln
