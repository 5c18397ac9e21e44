// CumProd, LpNormalization and BitCast-to-bool kernels (see cumprod_lpnorm_bitcast_kernels.h).
//  - CumProd, inner == 1 and n > kSequentialMaxN: one block per row scans chunks of blockDim elements (warp shuffles,
//    then the warp products) and carries the running product from chunk to chunk; otherwise one thread per
//    (outer, inner) column walks the axis in order (coalesced across threads).
//  - LpNormalization, inner == 1: one warp per line (the norm's partial sums in double, added across the warp);
//    otherwise one thread per column, two passes.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/cumprod_lpnorm_bitcast_kernels.h"
#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kScanThreads = 256;
constexpr int64_t kSequentialMaxN = 64;
constexpr int64_t kMaxBlocks = 65535LL * 32;

// ---- CumProd ----

template <typename T>
using ProdAcc = std::conditional_t<std::is_integral_v<T>, unsigned long long, double>;

template <typename T>
__device__ __forceinline__ ProdAcc<T> ProdLoad(const T* p, int64_t i) {
  if constexpr (std::is_integral_v<T>) return static_cast<unsigned long long>(static_cast<long long>(p[i]));
  else return LoadF64(p, i);
}

template <typename T>
__device__ __forceinline__ void ProdStore(T* p, int64_t i, ProdAcc<T> v) {
  if constexpr (std::is_integral_v<T>) p[i] = static_cast<T>(v);  // the low bits
  else p[i] = FromF64<T>(v);
}

template <typename T>
__global__ void CumProdRowsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t n, bool exclusive,
                                  bool reverse) {
  using A = ProdAcc<T>;
  __shared__ A warp_prefix[32];
  __shared__ A chunk_total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    A carry = A(1);
    for (int64_t c0 = 0; c0 < n; c0 += blockDim.x) {
      const int64_t step = c0 + threadIdx.x;
      const int64_t pos = reverse ? n - 1 - step : step;
      const A v = step < n ? ProdLoad(xr, pos) : A(1);
      A inc = v;
      for (int d = 1; d < 32; d <<= 1) {
        const A t = __shfl_up_sync(kFullMask, inc, d);
        if (lane >= d) inc *= t;
      }
      A exc = __shfl_up_sync(kFullMask, inc, 1);
      if (lane == 0) exc = A(1);
      if (lane == 31) warp_prefix[warp] = inc;
      __syncthreads();
      if (warp == 0) {
        const A t = lane < nw ? warp_prefix[lane] : A(1);
        A tinc = t;
        for (int d = 1; d < 32; d <<= 1) {
          const A u = __shfl_up_sync(kFullMask, tinc, d);
          if (lane >= d) tinc *= u;
        }
        A texc = __shfl_up_sync(kFullMask, tinc, 1);
        if (lane == 0) texc = A(1);
        const A total = __shfl_sync(kFullMask, tinc, 31);
        if (lane < nw) warp_prefix[lane] = texc;
        if (lane == 0) chunk_total = total;
      }
      __syncthreads();
      const A prefix = carry * warp_prefix[warp];
      if (step < n) ProdStore(yr, pos, exclusive ? prefix * exc : prefix * inc);
      carry *= chunk_total;
      __syncthreads();  // warp_prefix / chunk_total are rewritten by the next chunk
    }
  }
}

template <typename T>
__global__ void CumProdColumnsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n,
                                     int64_t inner, bool exclusive, bool reverse) {
  using A = ProdAcc<T>;
  const int64_t columns = outer * inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, i = c - o * inner;
    const T* xc = x + o * n * inner + i;
    T* yc = y + o * n * inner + i;
    A acc = A(1);
    for (int64_t step = 0; step < n; ++step) {
      const int64_t off = (reverse ? n - 1 - step : step) * inner;
      const A v = ProdLoad(xc, off);
      if (exclusive) ProdStore(yc, off, acc);
      acc *= v;
      if (!exclusive) ProdStore(yc, off, acc);
    }
  }
}

// ---- LpNormalization ----

template <typename T>
__device__ __forceinline__ double NormTerm(const T* p, int64_t i, int pw) {
  const double v = LoadF64(p, i);
  return pw == 1 ? fabs(v) : v * v;
}

template <typename T>
__global__ void LpNormRowsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t n, int pw) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < rows; row += warps) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    double s = 0;
    for (int64_t k = lane; k < n; k += 32) s += NormTerm(xr, k, pw);
    s = WarpSumF64(s);
    const double norm = pw == 2 ? sqrt(s) : s;
    for (int64_t k = lane; k < n; k += 32) yr[k] = FromF64<T>(norm == 0 ? 0.0 : LoadF64(xr, k) / norm);
  }
}

template <typename T>
__global__ void LpNormColumnsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n,
                                    int64_t inner, int pw) {
  const int64_t columns = outer * inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, i = c - o * inner;
    const int64_t base = o * n * inner + i;
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += NormTerm(x, base + k * inner, pw);
    const double norm = pw == 2 ? sqrt(s) : s;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = base + k * inner;
      y[at] = FromF64<T>(norm == 0 ? 0.0 : LoadF64(x, at) / norm);
    }
  }
}

// ---- BitCast ----

__global__ void BytesToBoolKernel(const uint8_t* __restrict__ x, uint8_t* __restrict__ y, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] != 0 ? 1 : 0;
}

}  // namespace

bool CumProdSupports(int dtype) {
  bool ok = false;
  DispatchNumeric(dtype, [&](auto) { ok = true; });
  return ok;
}

cudaError_t LaunchCumProd(int dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                          bool reverse, cudaStream_t stream) {
  if (outer < 0 || n < 0 || inner < 0) return cudaErrorInvalidValue;
  if (outer * n * inner == 0) return CumProdSupports(dtype) ? cudaSuccess : cudaErrorInvalidValue;
  const bool ok = DispatchNumeric(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (inner == 1 && n > kSequentialMaxN)
      CumProdRowsKernel<T><<<static_cast<unsigned>(std::min(outer, kMaxBlocks)), kScanThreads, 0, stream>>>(
          xt, yt, outer, n, exclusive, reverse);
    else
      CumProdColumnsKernel<T><<<GridFor(outer * inner), 256, 0, stream>>>(xt, yt, outer, n, inner, exclusive,
                                                                          reverse);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

bool LpNormSupports(int dtype) { return dtype == kF32 || dtype == kF16 || dtype == kBF16 || dtype == kF64; }

cudaError_t LaunchLpNorm(int dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, int p,
                         cudaStream_t stream) {
  if ((p != 1 && p != 2) || outer < 0 || n < 0 || inner < 0 || !LpNormSupports(dtype)) return cudaErrorInvalidValue;
  if (outer * n * inner == 0) return cudaSuccess;
  DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (inner == 1)
      LpNormRowsKernel<T><<<GridFor(outer * 32), 256, 0, stream>>>(xt, yt, outer, n, p);
    else
      LpNormColumnsKernel<T><<<GridFor(outer * inner), 256, 0, stream>>>(xt, yt, outer, n, inner, p);
  });
  return cudaGetLastError();
}

cudaError_t LaunchBytesToBool(const void* x, void* y, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  BytesToBoolKernel<<<GridFor(count), 256, 0, stream>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y),
                                                        count);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
