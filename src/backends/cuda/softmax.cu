// Softmax / LogSoftmax kernels (and Hardmax's, at the end) over x seen as [outer, n, inner], computed in float32 like the CPU reference
// (max-subtract, sum of exp, then scale or subtract the log of the sum).
//  - inner == 1, n <= 1024: one warp per row, the row held in registers (kPerLane values per lane).
//  - inner == 1, any n: one block per row, three passes over the row (max, sum, write).
//  - inner > 1: one thread per (outer, inner) column, three strided passes (coalesced across threads).
// float64 computes in double (as the CPU reference does), with kernels of its own: a block per row (inner == 1), a
// thread per column otherwise.
#include <algorithm>
#include <cmath>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/reduce_common.cuh"
#include "backends/cuda/reduce_kernels.h"

namespace kiln::cuda {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpRowsPerBlock = 8;
constexpr int kBlockRowThreads = 512;
constexpr int64_t kMaxBlocks = 65535LL * 32;

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
// Block-wide max/sum returned to every thread; `red` holds 32 floats. The leading barrier keeps a previous call's
// readers from racing with this call's writers.
__device__ __forceinline__ float BlockMax(float v, float* red) {
  v = WarpMax(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  return WarpMax(lane < nw ? red[lane] : -INFINITY);
}
__device__ __forceinline__ float BlockSum(float v, float* red) {
  v = WarpSum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  return WarpSum(lane < nw ? red[lane] : 0.f);
}

// blockDim = (32, kWarpRowsPerBlock); n <= 32 * kPerLane.
template <typename T, bool kLog, int kPerLane>
__global__ void SoftmaxWarpRowsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int n) {
  const int lane = threadIdx.x;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kWarpRowsPerBlock) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    float v[kPerLane];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int j = lane + i * 32;
      v[i] = j < n ? ToF32(xr[j]) : -INFINITY;
      m = fmaxf(m, v[i]);
    }
    m = WarpMax(m);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (lane + i * 32 < n) {
        const float d = v[i] - m;
        if (kLog) {
          v[i] = d;
          sum += expf(d);
        } else {
          v[i] = expf(d);
          sum += v[i];
        }
      }
    }
    sum = WarpSum(sum);
    const float scale = kLog ? logf(sum) : 1.f / sum;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int j = lane + i * 32;
      if (j < n) yr[j] = FromF32<T>(kLog ? v[i] - scale : v[i] * scale);
    }
  }
}

// blockDim = kBlockRowThreads; one block per row.
template <typename T, bool kLog>
__global__ void SoftmaxBlockRowsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t n) {
  __shared__ float red[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, ToF32(xr[j]));
    m = BlockMax(m, red);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(ToF32(xr[j]) - m);
    sum = BlockSum(sum, red);
    const float scale = kLog ? logf(sum) : 1.f / sum;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float d = ToF32(xr[j]) - m;
      yr[j] = FromF32<T>(kLog ? d - scale : expf(d) * scale);
    }
  }
}

// One thread per column (o, i) of [outer, n, inner].
template <typename T, bool kLog>
__global__ void SoftmaxStridedKernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n,
                                     int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, i = c - o * inner;
    const T* xc = x + o * n * inner + i;
    T* yc = y + o * n * inner + i;
    float m = -INFINITY;
    for (int64_t r = 0; r < n; ++r) m = fmaxf(m, ToF32(xc[r * inner]));
    float sum = 0.f;
    for (int64_t r = 0; r < n; ++r) sum += expf(ToF32(xc[r * inner]) - m);
    const float shift = m + logf(sum), inv = 1.f / sum;
    for (int64_t r = 0; r < n; ++r) {
      const float v = ToF32(xc[r * inner]);
      yc[r * inner] = FromF32<T>(kLog ? v - shift : expf(v - m) * inv);
    }
  }
}

template <typename T, bool kLog, int kPerLane>
void LaunchWarpRows(const T* x, T* y, int64_t rows, int64_t n, cudaStream_t stream) {
  const int64_t blocks = std::min((rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock, kMaxBlocks);
  SoftmaxWarpRowsKernel<T, kLog, kPerLane>
      <<<static_cast<unsigned>(blocks), dim3(32, kWarpRowsPerBlock), 0, stream>>>(x, y, rows, static_cast<int>(n));
}

template <typename T, bool kLog>
void LaunchTyped(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool force_block_rows,
                 cudaStream_t stream) {
  if (inner == 1 && !force_block_rows && n <= 1024) {
    if (n <= 32) LaunchWarpRows<T, kLog, 1>(x, y, outer, n, stream);
    else if (n <= 64) LaunchWarpRows<T, kLog, 2>(x, y, outer, n, stream);
    else if (n <= 128) LaunchWarpRows<T, kLog, 4>(x, y, outer, n, stream);
    else if (n <= 256) LaunchWarpRows<T, kLog, 8>(x, y, outer, n, stream);
    else if (n <= 512) LaunchWarpRows<T, kLog, 16>(x, y, outer, n, stream);
    else LaunchWarpRows<T, kLog, 32>(x, y, outer, n, stream);
  } else if (inner == 1) {
    SoftmaxBlockRowsKernel<T, kLog>
        <<<static_cast<unsigned>(std::min(outer, kMaxBlocks)), kBlockRowThreads, 0, stream>>>(x, y, outer, n);
  } else {
    SoftmaxStridedKernel<T, kLog><<<GridFor(outer * inner), 256, 0, stream>>>(x, y, outer, n, inner);
  }
}

// ---- float64, computed in double ----
// Block-wide max of doubles returned to every thread (a NaN is skipped, as fmaxf does in the float kernels);
// `red` holds 32 doubles. blockDim.x a multiple of 32, at most 1024.
__device__ __forceinline__ double WarpMaxF64(double v) {
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ __forceinline__ double BlockMaxF64(double v, double* red) {
  v = WarpMaxF64(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  return WarpMaxF64(lane < nw ? red[lane] : -INFINITY);
}

// One block per contiguous row (inner == 1).
template <bool kLog>
__global__ void SoftmaxRowsF64Kernel(const double* __restrict__ x, double* __restrict__ y, int64_t rows, int64_t n) {
  __shared__ double red[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const double* xr = x + row * n;
    double* yr = y + row * n;
    double m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmax(m, xr[j]);
    m = BlockMaxF64(m, red);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp(xr[j] - m);
    sum = BlockSumF64(sum, red);
    const double lse = log(sum), inv = 1.0 / sum;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double d = xr[j] - m;
      yr[j] = kLog ? d - lse : exp(d) * inv;
    }
  }
}

// One thread per column (o, i) of [outer, n, inner].
template <bool kLog>
__global__ void SoftmaxStridedF64Kernel(const double* __restrict__ x, double* __restrict__ y, int64_t outer,
                                        int64_t n, int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, i = c - o * inner;
    const double* xc = x + o * n * inner + i;
    double* yc = y + o * n * inner + i;
    double m = -INFINITY;
    for (int64_t r = 0; r < n; ++r) m = fmax(m, xc[r * inner]);
    double sum = 0.0;
    for (int64_t r = 0; r < n; ++r) sum += exp(xc[r * inner] - m);
    const double shift = m + log(sum), inv = 1.0 / sum;
    for (int64_t r = 0; r < n; ++r) {
      const double v = xc[r * inner];
      yc[r * inner] = kLog ? v - shift : exp(v - m) * inv;
    }
  }
}

template <bool kLog>
void LaunchF64(const double* x, double* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream) {
  if (inner == 1) {
    const int threads = static_cast<int>(std::min<int64_t>(256, (n + 31) / 32 * 32));
    SoftmaxRowsF64Kernel<kLog><<<static_cast<unsigned>(std::min(outer, kMaxBlocks)), threads, 0, stream>>>(x, y,
                                                                                                           outer, n);
  } else {
    SoftmaxStridedF64Kernel<kLog><<<GridFor(outer * inner), 256, 0, stream>>>(x, y, outer, n, inner);
  }
}

// ---- Hardmax: one warp per row of [outer, n, inner] (row r = (o, i), element k at o*n*inner + k*inner + i) ----
// (value, index) pairs ordered as the CPU reference picks: a NaN loses to any number, a larger value wins, equal
// values (or two NaNs) go to the lower index.
__device__ __forceinline__ bool HardmaxBetter(float v, int64_t i, float bv, int64_t bi) {
  const bool vn = v != v, bn = bv != bv;
  if (vn != bn) return bn;
  if (!vn && v != bv) return v > bv;
  return i < bi;
}

template <typename T>
__global__ void HardmaxKernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n, int64_t inner) {
  const int lane = threadIdx.x;
  const int64_t rows = outer * inner;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kWarpRowsPerBlock) {
    const int64_t o = row / inner, in = row - o * inner;
    const T* xr = x + o * n * inner + in;
    T* yr = y + o * n * inner + in;
    float bv = NAN;
    int64_t bi = INT64_MAX;
    for (int64_t k = lane; k < n; k += 32) {
      const float v = ToF32(xr[k * inner]);
      if (HardmaxBetter(v, k, bv, bi)) bv = v, bi = k;
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(kFullMask, bv, off);
      const int64_t oi = __shfl_xor_sync(kFullMask, bi, off);
      if (HardmaxBetter(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    for (int64_t k = lane; k < n; k += 32) yr[k * inner] = FromF32<T>(k == bi ? 1.f : 0.f);
  }
}

}  // namespace

cudaError_t LaunchHardmax(int dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t stream) {
  if (outer * n * inner == 0) return cudaSuccess;
  const int64_t rows = outer * inner;
  const unsigned blocks =
      static_cast<unsigned>(std::min((rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock, kMaxBlocks));
  const bool ok = KILN_DISPATCH_FLOAT(dtype, T, {
    HardmaxKernel<T><<<blocks, dim3(32, kWarpRowsPerBlock), 0, stream>>>(static_cast<const T*>(x),
                                                                         static_cast<T*>(y), outer, n, inner);
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t LaunchSoftmax(int dtype, bool log, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                          bool force_block_rows, cudaStream_t stream) {
  if (outer * n * inner == 0) return cudaSuccess;
  if (dtype == kF64) {
    const double* xd = static_cast<const double*>(x);
    double* yd = static_cast<double*>(y);
    if (log) LaunchF64<true>(xd, yd, outer, n, inner, stream);
    else LaunchF64<false>(xd, yd, outer, n, inner, stream);
    return cudaGetLastError();
  }
  const bool ok = KILN_DISPATCH_FLOAT(dtype, T, {
    if (log)
      LaunchTyped<T, true>(static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner, force_block_rows, stream);
    else
      LaunchTyped<T, false>(static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner, force_block_rows, stream);
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace kiln::cuda
