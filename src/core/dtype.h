// Element types. The numeric values are ONNX's TensorProto.DataType codes, so import is a cast.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "kiln/types.h"

namespace kiln {

// DataType (the ONNX TensorProto codes), DataTypeSize, DataTypeName and IsFloatType are public: include/kiln/types.h.

// Parses "float32"/"fp32"/"float" etc.; kUndefined when unknown.
DataType DataTypeFromName(const std::string& name);
bool IsIntegerType(DataType t);  // signed and unsigned ints (int4/uint4 included)
bool Is4BitType(DataType t);     // int4, uint4
bool Is2BitType(DataType t);     // int2, uint2
// Integer types held one value per byte but packed below a byte in ONNX files (int4, uint4, int2, uint2).
bool IsSubByteIntegerType(DataType t);
// The range of an integer type's values (int4: [-8, 7]); {0, 0} for other types.
std::pair<int64_t, int64_t> IntegerRange(DataType t);
bool IsSignedType(DataType t);
// Types kiln holds (everything but string): graph inputs, initializers and tensor files of these types import.
bool IsSupportedType(DataType t);
// Bits of one element as ONNX defines the type (bool and the 8-bit floats: 8; int4, uint4, float4e2m1: 4; int2,
// uint2: 2), whatever kiln's storage; 0 for string and undefined. BitCast reinterprets between types of equal width.
inline int ElementBits(DataType t) {
  switch (t) {
    case DataType::kInt2: case DataType::kUInt2: return 2;
    case DataType::kInt4: case DataType::kUInt4: case DataType::kFloat4E2M1: return 4;
    case DataType::kFloat8E8M0: return 8;
    default: return static_cast<int>(DataTypeSize(t)) * 8;
  }
}

// ---- 16-bit and 8-bit float storage types ----
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};
struct Float8E4M3 {
  uint8_t bits = 0;
};

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);  // round to nearest even
inline float BFloat16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t FloatToBFloat16(float f);  // round to nearest even
float Float8E4M3ToFloat(uint8_t v);
uint8_t FloatToFloat8E4M3(float f, bool saturate = true);
// float4 E2M1 (1 sign, 2 exponent, 1 mantissa bits; no Inf or NaN; largest 6): the 4-bit code in the low bits.
float Float4E2M1ToFloat(uint8_t code);
uint8_t FloatToFloat4E2M1(float f);  // round to nearest even, saturating to +-6; NaN becomes +6 (ONNX's cast table)
// float8 E8M0 (an unsigned power of two, 2^(bits-127); 0xff is NaN).
float Float8E8M0ToFloat(uint8_t bits);
// Rounds |f| to a power of two: round_mode "up" (ONNX's default), "down" or "nearest"; saturate clamps to
// 2^127 / 2^-127 instead of NaN for out-of-range values.
uint8_t FloatToFloat8E8M0(float f, const std::string& round_mode = "up", bool saturate = true);

}  // namespace kiln
