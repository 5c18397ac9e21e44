#include "core/dtype.h"

#include <cmath>
#include <limits>

namespace kiln {

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kInt32: case DataType::kUInt32: return 4;
    case DataType::kFloat64: case DataType::kInt64: case DataType::kUInt64: return 8;
    case DataType::kFloat16: case DataType::kBFloat16: case DataType::kInt16: case DataType::kUInt16: return 2;
    case DataType::kInt8: case DataType::kUInt8: case DataType::kBool: case DataType::kInt4: case DataType::kUInt4:
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ: case DataType::kFloat4E2M1: case DataType::kFloat8E8M0: case DataType::kUInt2:
    case DataType::kInt2: return 1;
    default: return 0;
  }
}

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float32";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kUInt16: return "uint16";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kString: return "string";
    case DataType::kBool: return "bool";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat64: return "float64";
    case DataType::kUInt32: return "uint32";
    case DataType::kUInt64: return "uint64";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat8E4M3FN: return "float8e4m3fn";
    case DataType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DataType::kFloat8E5M2: return "float8e5m2";
    case DataType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DataType::kUInt4: return "uint4";
    case DataType::kInt4: return "int4";
    case DataType::kFloat4E2M1: return "float4e2m1";
    case DataType::kFloat8E8M0: return "float8e8m0";
    case DataType::kUInt2: return "uint2";
    case DataType::kInt2: return "int2";
    default: return "undefined";
  }
}

DataType DataTypeFromName(const std::string& n) {
  if (n == "float32" || n == "fp32" || n == "float") return DataType::kFloat32;
  if (n == "float16" || n == "fp16" || n == "half") return DataType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DataType::kBFloat16;
  if (n == "float64" || n == "double") return DataType::kFloat64;
  if (n == "int8") return DataType::kInt8;
  if (n == "uint8") return DataType::kUInt8;
  if (n == "int16") return DataType::kInt16;
  if (n == "uint16") return DataType::kUInt16;
  if (n == "int32") return DataType::kInt32;
  if (n == "uint32") return DataType::kUInt32;
  if (n == "int64") return DataType::kInt64;
  if (n == "uint64") return DataType::kUInt64;
  if (n == "bool") return DataType::kBool;
  if (n == "int4") return DataType::kInt4;
  if (n == "uint4") return DataType::kUInt4;
  if (n == "fp8" || n == "float8e4m3fn") return DataType::kFloat8E4M3FN;
  if (n == "float4e2m1") return DataType::kFloat4E2M1;
  if (n == "float8e8m0") return DataType::kFloat8E8M0;
  if (n == "int2") return DataType::kInt2;
  if (n == "uint2") return DataType::kUInt2;
  return DataType::kUndefined;
}

bool IsFloatType(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kFloat16: case DataType::kFloat64: case DataType::kBFloat16:
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ: case DataType::kFloat4E2M1: case DataType::kFloat8E8M0: return true;
    default: return false;
  }
}

bool IsIntegerType(DataType t) {
  switch (t) {
    case DataType::kUInt8: case DataType::kInt8: case DataType::kUInt16: case DataType::kInt16:
    case DataType::kInt32: case DataType::kInt64: case DataType::kUInt32: case DataType::kUInt64:
    case DataType::kInt4: case DataType::kUInt4: case DataType::kInt2: case DataType::kUInt2: return true;
    default: return false;
  }
}

bool IsSignedType(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kInt4: case DataType::kInt2: return true;
    case DataType::kFloat8E8M0: return false;  // a power of two: no sign bit
    default: return IsFloatType(t);
  }
}

bool Is4BitType(DataType t) { return t == DataType::kInt4 || t == DataType::kUInt4; }
bool Is2BitType(DataType t) { return t == DataType::kInt2 || t == DataType::kUInt2; }
bool IsSubByteIntegerType(DataType t) { return Is4BitType(t) || Is2BitType(t); }

std::pair<int64_t, int64_t> IntegerRange(DataType t) {
  switch (t) {
    case DataType::kInt4: return {-8, 7};
    case DataType::kUInt4: return {0, 15};
    case DataType::kInt2: return {-2, 1};
    case DataType::kUInt2: return {0, 3};
    case DataType::kInt8: return {-128, 127};
    case DataType::kUInt8: return {0, 255};
    case DataType::kInt16: return {-32768, 32767};
    case DataType::kUInt16: return {0, 65535};
    case DataType::kInt32: return {INT32_MIN, INT32_MAX};
    case DataType::kUInt32: return {0, UINT32_MAX};
    case DataType::kInt64: return {INT64_MIN, INT64_MAX};
    default: return {0, 0};
  }
}

bool IsSupportedType(DataType t) { return DataTypeSize(t) != 0; }

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | (exp + 127 - 15) << 23 | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = abs >> 23;
    uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    // value = man * 2^(exp-150) and a half subnormal counts units of 2^-24: count = man >> (126 - exp)
    uint32_t shift = 126 - exp;
    uint32_t shifted = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    uint32_t r = shifted;
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t man = abs & 0x7fffffu;
  uint32_t r = (exp << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

uint16_t FloatToBFloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet nan
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

float Float8E4M3ToFloat(uint8_t v) {
  uint32_t sign = v >> 7;
  uint32_t exp = (v >> 3) & 0xf;
  uint32_t man = v & 0x7;
  float r;
  if (exp == 0xf && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) {
    r = std::ldexp(static_cast<float>(man) / 8.0f, -6);
  } else {
    r = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, static_cast<int>(exp) - 7);
  }
  return sign ? -r : r;
}

uint8_t FloatToFloat8E4M3(float f, bool saturate) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a > 448.0f) return saturate ? (sign | 0x7e) : (sign | 0x7f);  // E4M3FN has no inf: nan
  // Round to nearest even on the grid of a's binade: below 2^-6 the subnormals (steps of 2^-9), else 8 steps of
  // 2^(e-3) in [2^e, 2^(e+1)). Scaling by a power of two is exact, so nearbyint (the default rounding mode: half to
  // even) rounds as the format does; a step count of 16 carries into the next binade, which the code's layout
  // (exponent above mantissa) absorbs.
  if (a < 0.015625f) return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the binade is [2^(e-1), 2^e)
  const int binade = e - 1;
  const int steps = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - binade)));  // 8 .. 16
  return sign | static_cast<uint8_t>(((binade + 7) << 3) + (steps - 8));
}

namespace {
// The magnitudes of float4 E2M1 by the code's low three bits (exponent bias 1; codes 0 and 1 are 0 and the one
// subnormal, 0.5).
constexpr float kE2M1Magnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
}  // namespace

float Float4E2M1ToFloat(uint8_t code) {
  const float m = kE2M1Magnitude[code & 0x7];
  return (code & 0x8) ? -m : m;
}

uint8_t FloatToFloat4E2M1(float f) {
  // NaN: float4 has none. ONNX's reference (onnx 1.23, through ml_dtypes, and so its node tests) writes the code of
  // zero with the sign flipped: +NaN -> 0x8 (-0), -NaN -> 0x0 (+0). ONNX's float4 page (docs/technical/float4.md)
  // says +6 instead; kiln follows the reference, whose outputs the conformance tests compare byte for byte.
  if (std::isnan(f)) return std::signbit(f) ? 0x0 : 0x8;
  const uint8_t sign = std::signbit(f) ? 0x8 : 0;
  const float a = std::fabs(f);
  // Walk up the grid while |f| lies past the midpoint to the next magnitude; on a midpoint the even code wins (round
  // half to even). The midpoints are exact in float; past the last one (5) every value, infinity included, saturates
  // to 6.
  uint8_t c = 0;
  while (c < 7) {
    const float mid = (kE2M1Magnitude[c] + kE2M1Magnitude[c + 1]) / 2;
    if (a < mid || (a == mid && (c & 1) == 0)) break;
    ++c;
  }
  return static_cast<uint8_t>(sign | c);
}

float Float8E8M0ToFloat(uint8_t bits) {
  if (bits == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);  // 2^-127 (bits 0) is a float32 subnormal: exact
}

uint8_t FloatToFloat8E8M0(float f, const std::string& round_mode, bool saturate) {
  // The representable values are 2^-127 .. 2^127 (codes 0 .. 254); 255 is NaN. The sign is ignored (ONNX leaves
  // negative inputs unspecified; its reference drops the sign bit). Out of range (infinity, a rounding past 2^127,
  // below 2^-127 where the mode rounds down): the nearest end with `saturate`, else NaN (Cast-24's table).
  constexpr uint8_t kNaN = 0xff, kMax = 0xfe, kMin = 0x00;
  if (std::isnan(f)) return kNaN;
  const float a = std::fabs(f);
  const bool up = round_mode != "down" && round_mode != "nearest";  // "up", ONNX's default
  if (std::isinf(a)) return saturate ? kMax : kNaN;
  if (a == 0.0f) return up || saturate ? kMin : kNaN;  // "up": 2^-127 is the smallest value >= 0
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): a lies in the binade [2^(e-1), 2^e)
  int k = e - 1;
  if (up ? m > 0.5f : round_mode == "nearest" && m >= 0.75f) ++k;  // nearest: ties (1.5 * 2^k) round up
  if (k > 127) return saturate ? kMax : kNaN;
  if (k < -127) return up || saturate ? kMin : kNaN;  // "up" of a value below 2^-127 is 2^-127 itself
  return static_cast<uint8_t>(k + 127);
}

}  // namespace kiln
