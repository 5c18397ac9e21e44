// Device conversions of ONNX 1.18+'s narrow types (float4e2m1, float8e8m0, int2, uint2; one value per byte) and the
// wrapping casts to int4/uint4, for pointwise_cast.cu (*.cu, C++17). Each mirrors the CPU reference bit for bit:
// core/dtype.cpp (Float4E2M1ToFloat, FloatToFloat4E2M1, Float8E8M0ToFloat, FloatToFloat8E8M0) and core/narrow_types.h
// (Wrap2Bit, Wrap4Bit, TruncatedForWrap, DoubleToFloat4E2M1, DoubleToFloat8E8M0). Float bits are read directly
// (no frexpf/ldexpf), so float32 subnormals are classified exactly.
#pragma once

#include <cmath>
#include <cstdint>

namespace kiln::cuda::pw {

// ---- int2 / uint2 / int4 / uint4: wrap ----
// The low `bits` bits of an integer, sign-extended when `is_signed` (int2: [-2, 1], int4: [-8, 7]).
__device__ __forceinline__ int8_t WrapLowBits(int64_t v, int bits, bool is_signed) {
  const int mask = (1 << bits) - 1, half = 1 << (bits - 1);
  const int low = static_cast<int>(static_cast<uint64_t>(v) & static_cast<uint64_t>(mask));
  return static_cast<int8_t>(is_signed && low >= half ? low - (1 << bits) : low);
}

// A float value as the integer that wraps into the narrow integer types: truncated toward zero; NaN, infinities and
// |v| >= 2^31 give 0 (the CPU's TruncatedForWrap).
__device__ __forceinline__ int64_t TruncatedForWrap(double v) {
  if (!(fabs(v) < 2147483648.0)) return 0;
  return static_cast<int64_t>(trunc(v));
}

// ---- float4e2m1 ----
__device__ __forceinline__ float E2M1Magnitude(int c) {
  switch (c & 7) {
    case 0: return 0.0f;
    case 1: return 0.5f;
    case 2: return 1.0f;
    case 3: return 1.5f;
    case 4: return 2.0f;
    case 5: return 3.0f;
    case 6: return 4.0f;
    default: return 6.0f;
  }
}

__device__ __forceinline__ float Float4E2M1ToFloat(uint8_t code) {
  const float m = E2M1Magnitude(code);
  return (code & 0x8) ? -m : m;
}

// Round half to even onto {0, 0.5, 1, 1.5, 2, 3, 4, 6}, saturating at 6 (infinity too); NaN: the zero code with the
// sign flipped (+NaN -> 0x8, -NaN -> 0x0), as ONNX's reference writes.
__device__ __forceinline__ uint8_t FloatToFloat4E2M1(float f) {
  if (isnan(f)) return signbit(f) ? 0x0 : 0x8;
  const uint8_t sign = signbit(f) ? 0x8 : 0;
  const float a = fabsf(f);
  int c = 0;
  while (c < 7) {
    const float mid = (E2M1Magnitude(c) + E2M1Magnitude(c + 1)) * 0.5f;  // exact
    if (a < mid || (a == mid && (c & 1) == 0)) break;
    ++c;
  }
  return static_cast<uint8_t>(sign | c);
}

// Of a double: rounded to float, except that a double within half a float ulp of a midpoint is kept on its side.
__device__ __forceinline__ uint8_t DoubleToFloat4E2M1(double v) {
  float f = static_cast<float>(v);
  if (isfinite(v) && static_cast<double>(f) != v) {
    const float a = fabsf(f);
    const bool midpoint = a == 0.25f || a == 0.75f || a == 1.25f || a == 1.75f || a == 2.5f || a == 3.5f || a == 5.0f;
    if (midpoint) f = nextafterf(f, v > static_cast<double>(f) ? INFINITY : -INFINITY);
  }
  return FloatToFloat4E2M1(f);
}

// ---- float8e8m0 ----
// round_mode as an int: 0 "up" (ONNX's default, and any other string, as the CPU reads it), 1 "down", 2 "nearest".
constexpr int kE8M0Up = 0, kE8M0Down = 1, kE8M0Nearest = 2;

// 2^(bits - 127); 0xff is NaN. In double: exact, 2^-127 included.
__device__ __forceinline__ double Float8E8M0ToDouble(uint8_t bits) {
  if (bits == 0xff) return __longlong_as_double(0x7ff8000000000000LL);
  // A double with biased exponent bits - 127 + 1023.
  return __longlong_as_double(static_cast<long long>(static_cast<uint64_t>(bits) + 896u) << 52);
}

// A positive finite nonzero float a = 1.frac * 2^k: k, and the 23 fraction bits after the leading one (subnormals
// normalized).
__device__ __forceinline__ void SplitFloat(float a, int* k, uint32_t* frac) {
  const uint32_t b = __float_as_uint(a) & 0x7fffffffu;
  const uint32_t exp = b >> 23, man = b & 0x7fffffu;
  if (exp != 0) {
    *k = static_cast<int>(exp) - 127;
    *frac = man;
  } else {
    const int p = 31 - __clz(static_cast<int>(man));  // leading bit: man = 1.x * 2^p, value = man * 2^-149
    *k = p - 149;
    *frac = (man << (23 - p)) & 0x7fffffu;
  }
}

__device__ __forceinline__ uint8_t FloatToFloat8E8M0(float f, int mode, bool saturate) {
  constexpr uint8_t kNaN = 0xff, kMax = 0xfe, kMin = 0x00;
  if (isnan(f)) return kNaN;
  const float a = fabsf(f);
  const bool up = mode != kE8M0Down && mode != kE8M0Nearest;
  if (isinf(a)) return saturate ? kMax : kNaN;
  if (a == 0.0f) return up || saturate ? kMin : kNaN;
  int k = 0;
  uint32_t frac = 0;
  SplitFloat(a, &k, &frac);  // mantissa m of frexp: m > 0.5 <=> frac != 0; m >= 0.75 <=> frac >= 2^22
  if (up ? frac != 0 : mode == kE8M0Nearest && frac >= 0x400000u) ++k;
  if (k > 127) return saturate ? kMax : kNaN;
  if (k < -127) return up || saturate ? kMin : kNaN;
  return static_cast<uint8_t>(k + 127);
}

// Of a double: rounded to float, except that a double within half a float ulp of a power of two or of 1.5 times one
// is kept on its side of it.
__device__ __forceinline__ uint8_t DoubleToFloat8E8M0(double v, int mode, bool saturate) {
  float f = static_cast<float>(v);
  if (isfinite(v) && isfinite(f) && f != 0.0f && static_cast<double>(f) != v) {
    int k = 0;
    uint32_t frac = 0;
    SplitFloat(fabsf(f), &k, &frac);
    if (frac == 0 || frac == 0x400000u) f = nextafterf(f, v > static_cast<double>(f) ? INFINITY : -INFINITY);
  }
  return FloatToFloat8E8M0(f, mode, saturate);
}

}  // namespace kiln::cuda::pw
