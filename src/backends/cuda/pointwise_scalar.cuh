// One element of any dtype as a value, for pointwise kernels (*.cu, C++17): Scalar, loaded by dtype code (a
// uniform branch per element), and the float8 formats and decoding that needs.
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/narrow_types.cuh"

namespace kiln::cuda::pw {

// ---- float8 ----
constexpr int kF8E4M3FNUZ = 18, kF8E5M2 = 19, kF8E5M2FNUZ = 20;

__host__ __device__ inline bool IsFloat8(int code) { return code >= kF8E4M3 && code <= kF8E5M2FNUZ; }

struct F8Format {
  int man_bits;
  int bias;
  bool has_inf;  // E5M2 only
  bool uz;       // FNUZ: no negative zero; 0x80 is the only NaN
  float max;     // largest finite value
  uint8_t max_code;
};

__device__ __forceinline__ F8Format FormatOf(int code) {
  switch (code) {
    case kF8E4M3: return {3, 7, false, false, 448.0f, 0x7e};
    case kF8E4M3FNUZ: return {3, 8, false, true, 240.0f, 0x7f};
    case kF8E5M2: return {2, 15, true, false, 57344.0f, 0x7b};
    default: return {2, 16, false, true, 57344.0f, 0x7f};  // E5M2FNUZ
  }
}

__device__ inline float Float8ToFloat(int code, uint8_t v) {
  const F8Format f = FormatOf(code);
  const int exp_bits = 7 - f.man_bits;
  const uint32_t exp = (v >> f.man_bits) & ((1u << exp_bits) - 1);
  const uint32_t man = v & ((1u << f.man_bits) - 1);
  const bool neg = (v & 0x80) != 0;
  const float nan = __int_as_float(0x7fc00000);
  if (f.uz) {
    if (v == 0x80) return nan;
  } else if (code == kF8E4M3) {
    if (exp == 0xf && man == 0x7) return nan;
  } else if (exp == 0x1f) {  // E5M2
    if (man == 0) return neg ? -INFINITY : INFINITY;
    return nan;
  }
  float r;
  if (exp == 0) r = ldexpf(static_cast<float>(man), 1 - f.bias - f.man_bits);
  else r = ldexpf(1.0f + ldexpf(static_cast<float>(man), -f.man_bits), static_cast<int>(exp) - f.bias);
  return neg ? -r : r;
}

// ---- any dtype as a value ----
// kind 0: signed integer (in i); 1: unsigned integer or bool (bits in i); 2: a float32-precision value
// (float32/16, bfloat16, float8, float4e2m1, float8e8m0; in d); 3: float64 (in d).
struct Scalar {
  int kind;
  int64_t i;
  double d;
};

__device__ __forceinline__ Scalar LoadScalar(int code, const void* p, int64_t k) {
  switch (code) {
    case kI8: case kI4: case kI2: return {0, static_cast<const int8_t*>(p)[k], 0.0};
    case kI16: return {0, static_cast<const int16_t*>(p)[k], 0.0};
    case kI32: return {0, static_cast<const int32_t*>(p)[k], 0.0};
    case kI64: return {0, static_cast<const int64_t*>(p)[k], 0.0};
    case kBool:
    case kU8: case kU4: case kU2: return {1, static_cast<const uint8_t*>(p)[k], 0.0};
    case kU16: return {1, static_cast<const uint16_t*>(p)[k], 0.0};
    case kU32: return {1, static_cast<const uint32_t*>(p)[k], 0.0};
    case kU64: return {1, static_cast<int64_t>(static_cast<const uint64_t*>(p)[k]), 0.0};
    case kF32: return {2, 0, static_cast<const float*>(p)[k]};
    case kF16: {  // cvt.f32.f16 makes every NaN the positive canonical one: keep the half's sign, as the CPU does
      const __half h = static_cast<const __half*>(p)[k];
      const float f = __half2float(h);
      return {2, 0, f != f && (__half_as_ushort(h) & 0x8000u) ? __int_as_float(__float_as_int(f) | 0x80000000) : f};
    }
    case kBF16: return {2, 0, __bfloat162float(static_cast<const __nv_bfloat16*>(p)[k])};
    case kF64: return {3, 0, static_cast<const double*>(p)[k]};
    case kF4E2M1: return {2, 0, Float4E2M1ToFloat(static_cast<const uint8_t*>(p)[k])};
    case kF8E8M0: return {2, 0, Float8E8M0ToDouble(static_cast<const uint8_t*>(p)[k])};
    default: return {2, 0, Float8ToFloat(code, static_cast<const uint8_t*>(p)[k])};
  }
}

__device__ __forceinline__ float ScalarAsFloat(const Scalar& s) {
  if (s.kind == 0) return static_cast<float>(s.i);
  if (s.kind == 1) return static_cast<float>(static_cast<uint64_t>(s.i));
  return static_cast<float>(s.d);
}

__device__ __forceinline__ double ScalarAsDouble(const Scalar& s) {
  if (s.kind == 0) return static_cast<double>(s.i);
  if (s.kind == 1) return static_cast<double>(static_cast<uint64_t>(s.i));
  return s.d;
}

}  // namespace kiln::cuda::pw
