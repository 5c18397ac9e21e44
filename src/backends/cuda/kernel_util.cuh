// Device-side helpers shared by the CUDA kernels (*.cu, C++17): dtype codes as launchers take them, float
// conversion of every storage type, 16-byte packs, grid sizing, and a dispatch over the floating types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

// ONNX TensorProto codes (the same numbers as kiln::DataType) so launchers need not include the IR.
enum DTypeCode : int {
  kF32 = 1, kU8 = 2, kI8 = 3, kU16 = 4, kI16 = 5, kI32 = 6, kI64 = 7, kBool = 9, kF16 = 10, kF64 = 11,
  kU32 = 12, kU64 = 13, kBF16 = 16, kF8E4M3 = 17,
  kU4 = 21, kI4 = 22,  // one value per byte (uint8 / sign-extended int8 storage)
  // ONNX 1.18+'s narrow types, one value per byte: float4e2m1 (code in the low 4 bits), float8e8m0, uint2 (uint8
  // storage), int2 (sign-extended int8 storage). Only Cast/CastLike/QuantizeLinear/DequantizeLinear take them.
  kF4E2M1 = 23, kF8E8M0 = 24, kU2 = 25, kI2 = 26,
};

template <typename T>
__device__ __forceinline__ float ToF32(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float ToF32<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float ToF32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromF32(float v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half FromF32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 FromF32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// 16 bytes of T (4 floats, 8 halves...), for vectorized loads and stores of 16-byte-aligned data.
template <typename T>
struct alignas(16) Pack16 {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

template <typename T>
__host__ __device__ inline bool Aligned16(const T* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Whether p is a multiple of `bytes` (any positive size).
__host__ __device__ inline bool AlignedTo(const void* p, uint64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// QuantizeLinear's per-tensor rounding of a float value to an 8-bit integer's range [lo, hi]: x / scale divided as
// IEEE does, rounded half to even, plus the zero point, saturated; NaN gives 0. Shared by the QuantizeLinear kernel
// and the LayerNorm's quantized output, which must give the same bytes.
__device__ __forceinline__ float QuantizeRounded(float x, float scale, float zero_point, float lo, float hi) {
  const float r = rintf(__fdiv_rn(x, scale)) + zero_point;
  return isnan(r) ? 0.f : fminf(hi, fmaxf(lo, r));
}

// Kiln's quantized copy of an output (ops/quantized_ops.h: kQScale): a value as written, quantized per tensor as
// the QuantizeLinear kernels quantize it; the byte's bits. kind: 0 int8, 1 uint8 (with the zero point), 2
// float8e4m3fn (x / scale, saturated by the hardware conversion; zero point 0).
__device__ __forceinline__ uint32_t QuantizedBits(float v, float scale, int zero_point, int kind) {
  if (kind == 2) return static_cast<uint32_t>(__nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3));
  const float r = QuantizeRounded(v, scale, static_cast<float>(zero_point), kind == 1 ? 0.f : -128.f,
                                  kind == 1 ? 255.f : 127.f);
  return static_cast<uint32_t>(static_cast<int32_t>(r)) & 0xffu;
}

// Blocks for a grid-stride loop over n elements.
inline unsigned GridFor(int64_t n, int block = 256) {
  int64_t g = (n + block - 1) / block;
  if (g < 1) g = 1;
  if (g > 65535LL * 32) g = 65535LL * 32;
  return static_cast<unsigned>(g);
}

// Up to 8 dims, passed by value to kernels.
constexpr int kMaxDims = 8;
struct Dims8 {
  int64_t d[kMaxDims];
};

}  // namespace kiln::cuda

// Calls BODY with `T` bound to the storage type of a floating dtype code (F32, F16, BF16); returns false for
// other codes.
#define KILN_DISPATCH_FLOAT(code, T, ...)                  \
  [&]() -> bool {                                          \
    switch (code) {                                        \
      case ::kiln::cuda::kF32: { using T = float; __VA_ARGS__; return true; }          \
      case ::kiln::cuda::kF16: { using T = __half; __VA_ARGS__; return true; }         \
      case ::kiln::cuda::kBF16: { using T = __nv_bfloat16; __VA_ARGS__; return true; } \
      default: return false;                               \
    }                                                      \
  }()
