// Device helpers shared by the reduce family's kernels (reduce.cu, softmax.cu, topk.cu, cumsum.cu): the value type
// elements are compared and accumulated in, loads/stores through it, and a dispatch over the storage types the
// family supports. Bool is stored as uint8_t (0/1).
#pragma once

#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda::reduce_detail {

template <typename T>
constexpr bool kIsFloatStorage =
    std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// float for float32/float16/bfloat16 storage, double for float64, int64 for signed integers, uint64 for unsigned
// ones.
template <typename T>
using ValueT = std::conditional_t<
    kIsFloatStorage<T>, float,
    std::conditional_t<std::is_same_v<T, double>, double,
                       std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>>;

template <typename T>
__device__ __forceinline__ ValueT<T> LoadValue(const T* p, int64_t i) {
  if constexpr (kIsFloatStorage<T>) return ToF32(p[i]);
  else return static_cast<ValueT<T>>(p[i]);
}

template <typename T, typename V>
__device__ __forceinline__ void StoreValue(T* p, int64_t i, V v) {
  if constexpr (kIsFloatStorage<T>) p[i] = FromF32<T>(static_cast<float>(v));
  else p[i] = static_cast<T>(v);
}

}  // namespace kiln::cuda::reduce_detail

// Calls BODY with `T` bound to the storage type of `code` among float32, float16, bfloat16, float64, int32, int64,
// int8, uint8 and bool (as uint8_t); returns false for other codes.
#define KILN_REDUCE_DISPATCH(code, T, ...)                                               \
  [&]() -> bool {                                                                        \
    switch (code) {                                                                      \
      case ::kiln::cuda::kF32: { using T = float; __VA_ARGS__; return true; }            \
      case ::kiln::cuda::kF16: { using T = __half; __VA_ARGS__; return true; }           \
      case ::kiln::cuda::kBF16: { using T = __nv_bfloat16; __VA_ARGS__; return true; }   \
      case ::kiln::cuda::kF64: { using T = double; __VA_ARGS__; return true; }           \
      case ::kiln::cuda::kI32: { using T = int32_t; __VA_ARGS__; return true; }          \
      case ::kiln::cuda::kI64: { using T = int64_t; __VA_ARGS__; return true; }          \
      case ::kiln::cuda::kI8: { using T = int8_t; __VA_ARGS__; return true; }            \
      case ::kiln::cuda::kU8: { using T = uint8_t; __VA_ARGS__; return true; }           \
      case ::kiln::cuda::kBool: { using T = uint8_t; __VA_ARGS__; return true; }         \
      default: return false;                                                             \
    }                                                                                    \
  }()
