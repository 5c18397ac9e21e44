// Device helpers of the kernels that compute in double as their CPU reference does (lrn_mvn.cu, generators.cu,
// grid_sample.cu, rearrange.cu): loads of any numeric storage type as double, stores of a double as the CPU's Store
// and Tensor::SetFromDouble write it (16-bit floats through float32; integers truncated and saturated), and
// warp/block sums of doubles.
#pragma once

#include <limits>
#include <type_traits>

#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {

template <typename T>
__device__ __forceinline__ double LoadF64(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, double> || std::is_integral_v<T>) return static_cast<double>(p[i]);
  else return static_cast<double>(ToF32(p[i]));
}

// The CPU's conversion of a double result to T: float32 rounds once; float16/bfloat16 round to float32 first (as
// the CPU's Store and SetFromDouble do); integers truncate toward zero, saturating at the type's range (NaN: 0).
template <typename T>
__device__ __forceinline__ T FromF64(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    using Lim = std::numeric_limits<T>;
    if (v != v) return T(0);
    if (v <= static_cast<double>(Lim::min())) return Lim::min();
    if (v >= static_cast<double>(Lim::max())) return Lim::max();
    return static_cast<T>(v);
  } else {
    return FromF32<T>(static_cast<float>(v));
  }
}

__device__ __forceinline__ double WarpSumF64(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum of v over the block, returned to every thread (blockDim.x a multiple of 32, at most 1024). `red` is 32
// doubles of shared memory, reusable by consecutive calls.
__device__ __forceinline__ double BlockSumF64(double v, double* red) {
  v = WarpSumF64(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  const int nw = (blockDim.x + 31) >> 5;
  return WarpSumF64(lane < nw ? red[lane] : 0.0);
}

}  // namespace kiln::cuda
