// CumSum kernels over x seen as [outer, n, inner] (exclusive / reverse as in ONNX). Accumulation in float for
// float32/float16/bfloat16, double for float64, int64 (uint64) for signed (unsigned) integers, cast back to the
// storage type.
//  - inner == 1 and n > kSequentialMaxN: one block per row scans chunks of blockDim elements (warp shuffles, then
//    the warp totals) and carries the running sum from chunk to chunk.
//  - otherwise: one thread per (outer, inner) column walks the axis sequentially (coalesced across threads).
#include <algorithm>

#include "backends/cuda/reduce_common.cuh"
#include "backends/cuda/reduce_kernels.h"

namespace kiln::cuda {

namespace {

using reduce_detail::LoadValue;
using reduce_detail::StoreValue;
using reduce_detail::ValueT;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kScanThreads = 256;  // 8 warps
constexpr int64_t kSequentialMaxN = 64;
constexpr int64_t kMaxBlocks = 65535LL * 32;

template <typename T>
__global__ void CumSumRowsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t n, bool exclusive,
                                 bool reverse) {
  using A = ValueT<T>;
  __shared__ A warp_offset[32];
  __shared__ A chunk_total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    A carry = A(0);
    for (int64_t c0 = 0; c0 < n; c0 += blockDim.x) {
      const int64_t step = c0 + threadIdx.x;
      const int64_t pos = reverse ? n - 1 - step : step;
      const A v = step < n ? LoadValue(xr, pos) : A(0);
      // Inclusive and exclusive scans within the warp.
      A inc = v;
      for (int d = 1; d < 32; d <<= 1) {
        const A t = __shfl_up_sync(kFullMask, inc, d);
        if (lane >= d) inc += t;
      }
      A exc = __shfl_up_sync(kFullMask, inc, 1);
      if (lane == 0) exc = A(0);
      if (lane == 31) warp_offset[warp] = inc;  // the warp's total, turned into its offset below
      __syncthreads();
      if (warp == 0) {
        const A t = lane < nw ? warp_offset[lane] : A(0);
        A tinc = t;
        for (int d = 1; d < 32; d <<= 1) {
          const A u = __shfl_up_sync(kFullMask, tinc, d);
          if (lane >= d) tinc += u;
        }
        A texc = __shfl_up_sync(kFullMask, tinc, 1);
        if (lane == 0) texc = A(0);
        const A total = __shfl_sync(kFullMask, tinc, 31);
        if (lane < nw) warp_offset[lane] = texc;
        if (lane == 0) chunk_total = total;
      }
      __syncthreads();
      const A prefix = carry + warp_offset[warp];
      if (step < n) StoreValue(yr, pos, exclusive ? prefix + exc : prefix + inc);
      carry += chunk_total;
      __syncthreads();  // warp_offset / chunk_total are rewritten by the next chunk
    }
  }
}

template <typename T>
__global__ void CumSumColumnsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n,
                                    int64_t inner, bool exclusive, bool reverse) {
  using A = ValueT<T>;
  const int64_t columns = outer * inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, i = c - o * inner;
    const T* xc = x + o * n * inner + i;
    T* yc = y + o * n * inner + i;
    A acc = A(0);
    for (int64_t step = 0; step < n; ++step) {
      const int64_t off = (reverse ? n - 1 - step : step) * inner;
      const A v = LoadValue(xc, off);
      if (exclusive) {
        StoreValue(yc, off, acc);
        acc += v;
      } else {
        acc += v;
        StoreValue(yc, off, acc);
      }
    }
  }
}

}  // namespace

cudaError_t LaunchCumSum(int dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                         bool reverse, cudaStream_t stream) {
  if (dtype == kBool) return cudaErrorInvalidValue;
  if (outer * n * inner == 0) return cudaSuccess;
  const bool ok = KILN_REDUCE_DISPATCH(dtype, T, {
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (inner == 1 && n > kSequentialMaxN)
      CumSumRowsKernel<T><<<static_cast<unsigned>(std::min(outer, kMaxBlocks)), kScanThreads, 0, stream>>>(
          xt, yt, outer, n, exclusive, reverse);
    else
      CumSumColumnsKernel<T><<<GridFor(outer * inner), 256, 0, stream>>>(xt, yt, outer, n, inner, exclusive, reverse);
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace kiln::cuda
