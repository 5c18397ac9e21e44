// Device helpers shared by the normalization (norm.cu) and pooling (pool.cu) kernels: warp/block reductions,
// block-strided sums, and float loads/stores by dtype code.
#pragma once

#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum of v over the block, returned to every thread. Every thread of the block must call it (blockDim.x a
// multiple of 32); `red` is 32 floats of shared memory, reusable by consecutive calls.
__device__ __forceinline__ float BlockSum(float v, float* red) {
  v = WarpSum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // readers of a previous call are done with `red`
  if (lane == 0) red[warp] = v;
  __syncthreads();
  const int nw = (blockDim.x + 31) >> 5;
  return WarpSum(lane < nw ? red[lane] : 0.f);
}

// The mean over n elements of the parts `v` the block's threads hold (0 when n is 0); every thread of the block
// calls it, as BlockSum.
__device__ __forceinline__ float BlockMean(float v, int64_t n, float* red) {
  const float total = BlockSum(v, red);
  return n > 0 ? total / static_cast<float>(n) : 0.f;
}

// This thread's part of the sum of term(j, x[j] as float) over n contiguous elements, the block's threads taking
// turns. kVec: x is read in 16-byte packs (n a multiple of the pack size, x 16-byte aligned).
template <typename T, bool kVec, typename Term>
__device__ __forceinline__ float ThreadSum(const T* x, int64_t n, Term&& term) {
  float s = 0.f;
  if constexpr (kVec) {
    constexpr int V = Pack16<T>::kN;
    const Pack16<T>* xv = reinterpret_cast<const Pack16<T>*>(x);
    for (int64_t k = threadIdx.x; k < n / V; k += blockDim.x) {
      const Pack16<T> p = xv[k];
#pragma unroll
      for (int i = 0; i < V; ++i) s += term(k * V + i, ToF32(p.v[i]));
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += term(j, ToF32(x[j]));
  }
  return s;
}

// Element i of a float tensor of any floating dtype code, as float.
__device__ __forceinline__ float LoadAsF32(const void* p, int code, int64_t i) {
  switch (code) {
    case kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case kF64: return static_cast<float>(static_cast<const double*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void StoreFromF32(void* p, int code, int64_t i, float v) {
  switch (code) {
    case kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case kF64: static_cast<double*>(p)[i] = static_cast<double>(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

inline bool IsFloatCode(int code) { return code == kF32 || code == kF16 || code == kBF16; }
inline bool IsParamCode(int code) { return IsFloatCode(code) || code == kF64; }

// Threads for a block that walks `units` items: a multiple of 32 in [32, max_threads].
inline int BlockThreadsFor(int64_t units, int max_threads) {
  int64_t t = (units + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > max_threads) t = max_threads;
  return static_cast<int>(t);
}

}  // namespace kiln::cuda
