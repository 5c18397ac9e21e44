// Cast / CastLike, QuantizeLinear, DequantizeLinear, and the float8 conversions they need. Conversions follow
// the CPU reference (src/backends/cpu/elementwise_cast.cpp, elementwise_cast_narrow.cpp) value for value: float ->
// int truncates and clamps to the target range (NaN -> 0), integer -> integer wraps, -> bool is "!= 0", float8
// rounds to nearest even with the ONNX saturate rules, -> int4/uint4/int2/uint2 wraps (floats truncated first),
// float4e2m1 and float8e8m0 as narrow_types.cuh. Casts among float32/float16/bfloat16 have their own typed kernel; every other pair
// goes through one kernel that switches on the dtype codes per element (uniform branches).
#include <cuda_fp8.h>

#include <cmath>
#include <algorithm>
#include <limits>
#include <type_traits>

#include "backends/cuda/pointwise_device.cuh"
#include "backends/cuda/pointwise_scalar.cuh"

namespace kiln::cuda {
namespace {

using pw::F8Format;
using pw::Float8ToFloat;
using pw::FormatOf;
using pw::IsFloat8;
using pw::LoadScalar;
using pw::Scalar;
using pw::ScalarAsDouble;
using pw::ScalarAsFloat;

// ---- float8 encoding ----
// NaN: as the CPU reference (elementwise_cast.cpp): 0x80 (FNUZ), sign | 0x7f (E4M3FN), sign | 0x7e (E5M2).
__device__ __forceinline__ uint8_t NanCode(const F8Format& f, uint8_t sign) {
  return f.uz ? 0x80 : static_cast<uint8_t>(sign | (f.has_inf ? 0x7e : 0x7f));
}

__device__ uint8_t FloatToFloat8(int code, float x, bool saturate) {
  const F8Format f = FormatOf(code);
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  if (isnan(x)) return NanCode(f, sign);
  const float a = fabsf(x);
  auto overflow = [&]() -> uint8_t {
    if (saturate) return static_cast<uint8_t>(sign | f.max_code);
    if (f.has_inf) return static_cast<uint8_t>(sign | 0x7c);
    return NanCode(f, sign);
  };
  if (isinf(a)) return overflow();
  if (a == 0.0f) return f.uz ? 0 : sign;
  const int emin = 1 - f.bias;  // exponent of the smallest normal
  int e;
  frexpf(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;         // a = 1.x * 2^e
  if (e < emin) e = emin;
  const double q = ldexp(1.0, e - f.man_bits);             // spacing of representable values at this exponent
  double n = rint(static_cast<double>(a) / q);              // round half to even (exact division by 2^k)
  const double v = n * q;
  if (v > f.max) return overflow();
  if (n == 0) return f.uz ? 0 : sign;
  const double one = ldexp(1.0, f.man_bits);
  if (n >= 2 * one) {  // rounding carried into the next binade
    n /= 2;
    ++e;
  }
  uint32_t c;
  if (n < one) c = static_cast<uint32_t>(n);  // subnormal (e == emin)
  else c = (static_cast<uint32_t>(e + f.bias) << f.man_bits) | (static_cast<uint32_t>(n) - (1u << f.man_bits));
  return static_cast<uint8_t>(sign | c);
}

template <typename U>
__device__ __forceinline__ U ToInt(const Scalar& s) {
  if (s.kind <= 1) return static_cast<U>(s.i);  // wraps like the C++ conversion of the source integer
  const double v = s.d;
  if (isnan(v)) return U(0);
  if (v <= static_cast<double>(std::numeric_limits<U>::lowest())) return std::numeric_limits<U>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<U>::max())) return std::numeric_limits<U>::max();
  return static_cast<U>(v);
}

// A cast to int4/uint4 (int2/uint2) keeps the integer's low 4 (2) bits; a float is truncated toward zero first (NaN,
// infinities and |x| >= 2^31 give 0), as the CPU reference does (core/narrow_types.h).
__device__ __forceinline__ int8_t ToWrapped(const Scalar& s, int bits, bool is_signed) {
  return pw::WrapLowBits(s.kind <= 1 ? s.i : pw::TruncatedForWrap(s.d), bits, is_signed);
}

// `mode`: float8e8m0's round_mode (narrow_types.cuh's kE8M0*).
__device__ __forceinline__ void StoreScalar(int code, void* p, int64_t k, const Scalar& s, bool saturate, int mode) {
  switch (code) {
    case kI4: static_cast<int8_t*>(p)[k] = ToWrapped(s, 4, true); return;
    case kU4: static_cast<uint8_t*>(p)[k] = static_cast<uint8_t>(ToWrapped(s, 4, false)); return;
    case kI2: static_cast<int8_t*>(p)[k] = ToWrapped(s, 2, true); return;
    case kU2: static_cast<uint8_t*>(p)[k] = static_cast<uint8_t>(ToWrapped(s, 2, false)); return;
    // Through double, as the CPU: exact for every float source and for integers up to 2^53.
    case kF4E2M1: static_cast<uint8_t*>(p)[k] = pw::DoubleToFloat4E2M1(ScalarAsDouble(s)); return;
    case kF8E8M0: static_cast<uint8_t*>(p)[k] = pw::DoubleToFloat8E8M0(ScalarAsDouble(s), mode, saturate); return;
    case kBool:
      static_cast<uint8_t*>(p)[k] = (s.kind <= 1 ? s.i != 0 : s.d != 0.0) ? 1 : 0;
      return;
    case kI8: static_cast<int8_t*>(p)[k] = ToInt<int8_t>(s); return;
    case kU8: static_cast<uint8_t*>(p)[k] = ToInt<uint8_t>(s); return;
    case kI16: static_cast<int16_t*>(p)[k] = ToInt<int16_t>(s); return;
    case kU16: static_cast<uint16_t*>(p)[k] = ToInt<uint16_t>(s); return;
    case kI32: static_cast<int32_t*>(p)[k] = ToInt<int32_t>(s); return;
    case kU32: static_cast<uint32_t*>(p)[k] = ToInt<uint32_t>(s); return;
    case kI64: static_cast<int64_t*>(p)[k] = ToInt<int64_t>(s); return;
    case kU64: static_cast<uint64_t*>(p)[k] = ToInt<uint64_t>(s); return;
    case kF32: static_cast<float*>(p)[k] = ScalarAsFloat(s); return;
    case kF16:  // float64 rounds directly to half (no double rounding through float), as the reference does
      static_cast<__half*>(p)[k] = s.kind == 3 ? __double2half(s.d) : __float2half_rn(ScalarAsFloat(s));
      return;
    case kBF16: static_cast<__nv_bfloat16*>(p)[k] = __float2bfloat16_rn(ScalarAsFloat(s)); return;
    case kF64: static_cast<double*>(p)[k] = ScalarAsDouble(s); return;
    default: static_cast<uint8_t*>(p)[k] = FloatToFloat8(code, ScalarAsFloat(s), saturate); return;
  }
}

#define KILN_PW_GRID_LOOP(i, n)                                                                      \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);            \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void CastAnyKernel(int from, int to, bool saturate, int mode, const void* __restrict__ x,
                              void* __restrict__ y, int64_t n) {
  KILN_PW_GRID_LOOP(i, n) StoreScalar(to, y, i, LoadScalar(from, x, i), saturate, mode);
}

template <typename From, typename To>
__global__ void CastFloatKernel(const From* __restrict__ x, To* __restrict__ y, int64_t n) {
  KILN_PW_GRID_LOOP(i, n) y[i] = FromF32<To>(ToF32(x[i]));
}

// ---- quantization ----
__device__ __forceinline__ int64_t ParamIndex(const QuantLayout& l, int64_t i) {
  if ((l.outer_step | l.axis_step | l.inner_step) == 0) return 0;
  const int64_t r = i / l.inner, j = i - r * l.inner;
  const int64_t o = r / l.dim, a = r - o * l.dim;
  return o * l.outer_step + (a / l.block) * l.axis_step + j * l.inner_step;
}

__device__ __forceinline__ void StoreFloat(int code, void* p, int64_t k, float v) {
  switch (code) {
    case kF16: static_cast<__half*>(p)[k] = __float2half_rn(v); return;
    case kBF16: static_cast<__nv_bfloat16*>(p)[k] = __float2bfloat16_rn(v); return;
    case kF64: static_cast<double*>(p)[k] = v; return;
    default: static_cast<float*>(p)[k] = v; return;
  }
}

template <typename U>
__device__ __forceinline__ U SaturateRound(double v, double lo = static_cast<double>(std::numeric_limits<U>::lowest()),
                                           double hi = static_cast<double>(std::numeric_limits<U>::max())) {
  if (isnan(v)) v = 0;
  return static_cast<U>(v < lo ? lo : (v > hi ? hi : v));
}

__global__ void QuantizeKernel(int x_code, int s_code, int out_code, bool saturate, int div_code,
                               const void* __restrict__ x, const void* __restrict__ scale, const QuantLayout sl,
                               const void* __restrict__ zp, const QuantLayout zl, void* __restrict__ y, int64_t n) {
  KILN_PW_GRID_LOOP(i, n) {
    // x / scale in the division's precision: both operands and the quotient rounded to it
    auto in_div = [div_code](float f) {
      if (div_code == kF16) return __half2float(__float2half_rn(f));
      if (div_code == kBF16) return __bfloat162float(__float2bfloat16_rn(f));
      return f;
    };
    const float xv = in_div(ScalarAsFloat(LoadScalar(x_code, x, i)));
    const float sv = in_div(ScalarAsFloat(LoadScalar(s_code, scale, ParamIndex(sl, i))));
    float v = in_div(xv / sv);
    // The GPU's division makes every NaN the positive canonical one; the CPU reference (x86) keeps a NaN operand's
    // sign and makes 0/0 or inf/inf negative. float4e2m1 writes a NaN's sign (as the zero code's flipped sign).
    if (v != v) {
      const bool negative = xv != xv ? signbit(xv) : sv != sv ? signbit(sv) : true;
      v = __int_as_float(negative ? (__float_as_int(v) | 0x80000000) : (__float_as_int(v) & 0x7fffffff));
    }
    if (IsFloat8(out_code)) {
      const float zv = zp ? Float8ToFloat(out_code, static_cast<const uint8_t*>(zp)[ParamIndex(zl, i)]) : 0.0f;
      static_cast<uint8_t*>(y)[i] = FloatToFloat8(out_code, v + zv, saturate);
      continue;
    }
    if (out_code == kF4E2M1) {  // half to even, saturated to +-6 (saturate has no say); the zero point added only
                                // when given, as the CPU reference (-0 / s stays -0 without one)
      float q = zp ? v + pw::Float4E2M1ToFloat(static_cast<const uint8_t*>(zp)[ParamIndex(zl, i)]) : v;
      if (q != q) q = v != v ? v : q;  // the addition makes a NaN positive again: keep v's sign, as x86 does
      static_cast<uint8_t*>(y)[i] = pw::FloatToFloat4E2M1(q);
      continue;
    }
    double r = rint(static_cast<double>(v));
    if (zp) r += ScalarAsDouble(LoadScalar(out_code, zp, ParamIndex(zl, i)));
    switch (out_code) {
      case kU8: static_cast<uint8_t*>(y)[i] = SaturateRound<uint8_t>(r); break;
      case kI8: static_cast<int8_t*>(y)[i] = SaturateRound<int8_t>(r); break;
      case kU4: static_cast<uint8_t*>(y)[i] = SaturateRound<uint8_t>(r, 0, 15); break;
      case kI4: static_cast<int8_t*>(y)[i] = SaturateRound<int8_t>(r, -8, 7); break;
      case kU2: static_cast<uint8_t*>(y)[i] = SaturateRound<uint8_t>(r, 0, 3); break;
      case kI2: static_cast<int8_t*>(y)[i] = SaturateRound<int8_t>(r, -2, 1); break;
      case kU16: static_cast<uint16_t*>(y)[i] = SaturateRound<uint16_t>(r); break;
      case kI16: static_cast<int16_t*>(y)[i] = SaturateRound<int16_t>(r); break;
      default: static_cast<int32_t*>(y)[i] = SaturateRound<int32_t>(r); break;
    }
  }
}

// The common case of QuantizeLinear: float32 (or a widened float16) to int8/uint8 with one scale and zero point,
// four elements per thread, in float (x / scale as the generic kernel computes it; rint is exact on float, and past
// 2^24 saturation decides).
template <typename X>
struct Four;
template <>
struct Four<float> {
  using Vec = float4;
  __device__ static float4 Get(Vec v) { return v; }
};
template <>
struct Four<__half> {
  struct alignas(8) Vec {
    __half2 a, b;
  };
  __device__ static float4 Get(Vec v) {
    const float2 a = __half22float2(v.a), b = __half22float2(v.b);
    return make_float4(a.x, a.y, b.x, b.y);
  }
};

template <typename X, typename U>
__global__ void QuantizePerTensorKernel(const X* __restrict__ x, const float* __restrict__ scale,
                                        const U* __restrict__ zp, U* __restrict__ y, int64_t n) {
  const float s = *scale;
  const float z = zp ? static_cast<float>(*zp) : 0.f;
  const float lo = static_cast<float>(std::numeric_limits<U>::lowest()), hi = static_cast<float>(std::numeric_limits<U>::max());
  auto q = [&](float v) { return static_cast<U>(QuantizeRounded(v, s, z, lo, hi)); };
  const int64_t n4 = n / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4; i += stride) {
    const float4 v = Four<X>::Get(reinterpret_cast<const typename Four<X>::Vec*>(x)[i]);
    U out[4] = {q(v.x), q(v.y), q(v.z), q(v.w)};
    *reinterpret_cast<uint32_t*>(y + 4 * i) =
        static_cast<uint32_t>(static_cast<uint8_t>(out[0])) | static_cast<uint32_t>(static_cast<uint8_t>(out[1])) << 8 |
        static_cast<uint32_t>(static_cast<uint8_t>(out[2])) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(out[3])) << 24;
  }
  for (int64_t i = 4 * n4 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    y[i] = q(static_cast<float>(x[i]));
}

// The same to float8e4m3fn, saturated: x / scale plus the zero point's value, converted by the hardware (round to
// nearest even, satfinite: the CPU's saturating conversion; a NaN stays NaN).
template <typename X>
__global__ void QuantizePerTensorFp8Kernel(const X* __restrict__ x, const float* __restrict__ scale,
                                           const uint8_t* __restrict__ zp, uint8_t* __restrict__ y, int64_t n) {
  const float s = *scale;
  const float z = zp ? Float8ToFloat(kF8E4M3, *zp) : 0.f;
  auto q = [&](float v) { return __fadd_rn(__fdiv_rn(v, s), z); };
  const int64_t n4 = n / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4; i += stride) {
    const float4 v = Four<X>::Get(reinterpret_cast<const typename Four<X>::Vec*>(x)[i]);
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(q(v.x), q(v.y)), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(q(v.z), q(v.w)), __NV_SATFINITE, __NV_E4M3);
    *reinterpret_cast<uint32_t*>(y + 4 * i) = (lo & 0xffffu) | (hi << 16);
  }
  for (int64_t i = 4 * n4 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    y[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(q(static_cast<float>(x[i])), __NV_SATFINITE, __NV_E4M3));
}

__global__ void DequantizeKernel(int x_code, int s_code, int out_code, const void* __restrict__ x,
                                 const void* __restrict__ scale,
                                 const QuantLayout sl, const void* __restrict__ zp, const QuantLayout zl,
                                 void* __restrict__ y, int64_t n) {
  const bool f8 = IsFloat8(x_code);
  KILN_PW_GRID_LOOP(i, n) {
    // float4e2m1: its zero point's value subtracted as the formula says (the CPU reference; LoadScalar decodes it)
    const double xv = ScalarAsDouble(LoadScalar(x_code, x, i));
    const double zv = zp && !f8 ? ScalarAsDouble(LoadScalar(x_code, zp, ParamIndex(zl, i))) : 0.0;
    const float d = static_cast<float>(xv - zv);
    StoreFloat(out_code, y, i, d * ScalarAsFloat(LoadScalar(s_code, scale, ParamIndex(sl, i))));
  }
}

bool IsCastCode(int c) {
  switch (c) {
    case kF32: case kU8: case kI8: case kU16: case kI16: case kI32: case kI64: case kBool: case kF16: case kF64:
    case kU32: case kU64: case kBF16: case kU4: case kI4: case kF4E2M1: case kF8E8M0: case kU2: case kI2:
      return true;
    default: return IsFloat8(c);
  }
}

}  // namespace

cudaError_t LaunchCast(int from, int to, bool saturate, int round_mode, const void* x, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (!IsCastCode(from) || !IsCastCode(to)) return cudaErrorInvalidValue;
  bool typed = false;
  DispatchLowFloat(from, [&](auto ft) {
    using From = typename decltype(ft)::type;
    typed = DispatchLowFloat(to, [&](auto tt) {
      using To = typename decltype(tt)::type;
      CastFloatKernel<From, To><<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(static_cast<const From*>(x),
                                                                                  static_cast<To*>(y), n);
    });
  });
  if (!typed)
    CastAnyKernel<<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(from, to, saturate, round_mode, x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchQuantize(int x_dtype, int scale_dtype, int out_dtype, bool saturate, const void* x,
                           const void* scale, const QuantLayout& scale_layout, const void* zero_point,
                           const QuantLayout& zp_layout, void* y, int64_t n, cudaStream_t stream, int div_dtype) {
  if (n <= 0) return cudaSuccess;
  const bool x_ok = x_dtype == kF32 || x_dtype == kF16 || x_dtype == kBF16 || x_dtype == kF64 || x_dtype == kI32;
  const bool s_ok = scale_dtype == kF32 || scale_dtype == kF16 || scale_dtype == kBF16 || scale_dtype == kF64;
  const bool o_ok = out_dtype == kU8 || out_dtype == kI8 || out_dtype == kU16 || out_dtype == kI16 ||
                    out_dtype == kI32 || out_dtype == kU4 || out_dtype == kI4 || out_dtype == kU2 ||
                    out_dtype == kI2 || out_dtype == kF4E2M1 || IsFloat8(out_dtype);
  if (!x_ok || !s_ok || !o_ok) return cudaErrorInvalidValue;
  const auto per_tensor = [](const QuantLayout& l) { return l.outer_step == 0 && l.axis_step == 0 && l.inner_step == 0; };
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 4 == 0;
  if ((x_dtype == kF32 || x_dtype == kF16) && div_dtype == kF32 && scale_dtype == kF32 &&
      (out_dtype == kI8 || out_dtype == kU8) && per_tensor(scale_layout) && (!zero_point || per_tensor(zp_layout)) &&
      aligned) {
    const int64_t threads = std::max<int64_t>(1, (n + 3) / 4);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((threads + 255) / 256, 65536));
    auto launch = [&](auto xt) {
      using X = decltype(xt);
      if (out_dtype == kI8)
        QuantizePerTensorKernel<X, int8_t><<<blocks, 256, 0, stream>>>(static_cast<const X*>(x),
            static_cast<const float*>(scale), static_cast<const int8_t*>(zero_point), static_cast<int8_t*>(y), n);
      else
        QuantizePerTensorKernel<X, uint8_t><<<blocks, 256, 0, stream>>>(static_cast<const X*>(x),
            static_cast<const float*>(scale), static_cast<const uint8_t*>(zero_point), static_cast<uint8_t*>(y), n);
    };
    if (x_dtype == kF32) launch(float{});
    else launch(__half{});
    return cudaGetLastError();
  }
  if ((x_dtype == kF32 || x_dtype == kF16) && div_dtype == kF32 && scale_dtype == kF32 && out_dtype == kF8E4M3 &&
      saturate && per_tensor(scale_layout) && (!zero_point || per_tensor(zp_layout)) && aligned) {
    const int64_t threads = std::max<int64_t>(1, (n + 3) / 4);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((threads + 255) / 256, 65536));
    auto launch = [&](auto xt) {
      using X = decltype(xt);
      QuantizePerTensorFp8Kernel<X><<<blocks, 256, 0, stream>>>(static_cast<const X*>(x),
          static_cast<const float*>(scale), static_cast<const uint8_t*>(zero_point), static_cast<uint8_t*>(y), n);
    };
    if (x_dtype == kF32) launch(float{});
    else launch(__half{});
    return cudaGetLastError();
  }
  QuantizeKernel<<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(x_dtype, scale_dtype, out_dtype, saturate,
                                                                   div_dtype, x, scale, scale_layout, zero_point,
                                                                   zp_layout, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchDequantize(int x_dtype, int scale_dtype, int out_dtype, const void* x, const void* scale,
                             const QuantLayout& scale_layout, const void* zero_point, const QuantLayout& zp_layout,
                             void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool x_ok = IsFloat8(x_dtype) || x_dtype == kU8 || x_dtype == kI8 || x_dtype == kU4 || x_dtype == kI4 ||
                    x_dtype == kU2 || x_dtype == kI2 || x_dtype == kF4E2M1 ||
                    x_dtype == kU16 || x_dtype == kI16 ||
                    x_dtype == kI32 || x_dtype == kU32 || x_dtype == kI64 || x_dtype == kU64;
  const bool s_ok = scale_dtype == kF32 || scale_dtype == kF16 || scale_dtype == kBF16 || scale_dtype == kF64;
  const bool o_ok = out_dtype == kF32 || out_dtype == kF16 || out_dtype == kBF16;
  if (!x_ok || !s_ok || !o_ok) return cudaErrorInvalidValue;
  DequantizeKernel<<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(x_dtype, scale_dtype, out_dtype, x, scale,
                                                                     scale_layout, zero_point, zp_layout, y, n);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
