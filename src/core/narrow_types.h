// Conversions into the narrow types ONNX 1.18+ added (int2/uint2 and float4e2m1, held one value per byte) that Cast
// (backends/cpu) and CastTensor (core/tensor.cpp) share, beyond the per-value ones of core/dtype.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace kiln {

// An integer's two low bits as int2 (sign-extended: [-2, 1]) or uint2 ([0, 3]): Cast's integer conversion, which
// wraps (ONNX: "discard higher bits and reinterpret").
inline int8_t Wrap2Bit(int64_t v, bool is_signed) {
  const int low = static_cast<int>(static_cast<uint64_t>(v) & 3u);
  return static_cast<int8_t>(is_signed && low >= 2 ? low - 4 : low);
}

// An integer's four low bits as int4 ([-8, 7]) or uint4 ([0, 15]): Cast wraps into the 4-bit types as into the 2-bit
// ones (onnx 1.23's reference and node tests; 1.16's reference saturated, and the spec leaves a float out of range
// undefined).
inline int8_t Wrap4Bit(int64_t v, bool is_signed) {
  const int low = static_cast<int>(static_cast<uint64_t>(v) & 15u);
  return static_cast<int8_t>(is_signed && low >= 8 ? low - 16 : low);
}

// A float value as the integer Cast wraps into int2/uint2 (and int4/uint4): truncated toward zero. ONNX leaves out-of-range values
// undefined; its reference (onnx 1.23, ml_dtypes) converts through a 32-bit integer, whose out-of-range result (and
// NaN's, and infinity's) has zero low bits, so those become 0 here too.
inline int64_t TruncatedForWrap(double v) {
  if (!(std::fabs(v) < 2147483648.0)) return 0;  // NaN, infinities, |v| >= 2^31
  return static_cast<int64_t>(std::trunc(v));
}

// FloatToFloat4E2M1 of a double without rounding it to float first: a double within half a float ulp of one of
// float4's midpoints (0.25, 0.75, ... 5) would round onto it and take the tie's even code instead of its side's.
inline uint8_t DoubleToFloat4E2M1(double v) {
  float f = static_cast<float>(v);
  if (std::isfinite(v) && static_cast<double>(f) != v) {
    const float a = std::fabs(f);
    const bool midpoint = a == 0.25f || a == 0.75f || a == 1.25f || a == 1.75f || a == 2.5f || a == 3.5f || a == 5.0f;
    if (midpoint) f = std::nextafter(f, v > static_cast<double>(f) ? INFINITY : -INFINITY);
  }
  return FloatToFloat4E2M1(f);
}

// FloatToFloat8E8M0 of a double, likewise: a double within half a float ulp of a power of two (the boundary of "up"
// and "down") or of 1.5 times one ("nearest") is moved to its side of it. (ONNX's reference rounds to float first.)
inline uint8_t DoubleToFloat8E8M0(double v, const std::string& round_mode = "up", bool saturate = true) {
  float f = static_cast<float>(v);
  if (std::isfinite(v) && std::isfinite(f) && f != 0.0f && static_cast<double>(f) != v) {
    int e = 0;
    const float m = std::frexp(std::fabs(f), &e);
    if (m == 0.5f || m == 0.75f) f = std::nextafter(f, v > static_cast<double>(f) ? INFINITY : -INFINITY);
  }
  return FloatToFloat8E8M0(f, round_mode, saturate);
}

}  // namespace kiln
