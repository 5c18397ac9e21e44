// Pooling kernels (see pool_kernels.h). Windowed pools: one thread per output element walks its window taps
// in the same order as the CPU reference (row-major over the kernel), skipping taps in the padding. Global
// pools: one warp per plane for small planes, one block per plane for large ones.
#include <cmath>

#include "backends/cuda/norm_pool_util.cuh"
#include "backends/cuda/pool_kernels.h"

namespace kiln::cuda {

namespace {

constexpr int64_t kMaxGrid = 1 << 20;

// NSP > 0: the number of spatial dims is known at compile time (loops unroll); 0: a.nsp at run time.
template <typename T, int kKind, int NSP>
__global__ void WindowPoolKernel(PoolWindowArgs a) {
  const int nsp = NSP > 0 ? NSP : a.nsp;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const int64_t total = a.planes * a.out_size;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // NCHW: idx = plane * out_size + position. Channels-last: idx = (n * out_size + position) * C + c, and the
    // taps of one plane are C elements apart (consecutive threads read consecutive channels).
    const int64_t cl = a.channels_last;
    int64_t pl, rem, base, step = 1;
    if (cl > 0) {
      const int64_t c = idx % cl, r = idx / cl, img = r / a.out_size;
      rem = r - img * a.out_size;
      pl = img * cl + c;
      base = img * a.in_size * cl + c;
      step = cl;
    } else {
      pl = idx / a.out_size;
      rem = idx - pl * a.out_size;
      base = pl * a.in_size;
    }
    int64_t start[kPoolMaxSpatialDims], k[kPoolMaxSpatialDims];
#pragma unroll
    for (int d = kPoolMaxSpatialDims - 1; d >= 0; --d) {
      if (d >= nsp) continue;
      const int64_t o = rem % a.out[d];
      rem /= a.out[d];
      start[d] = o * a.stride[d] - a.pad_begin[d];
      k[d] = 0;
    }
    const T* xp = x + base;
    float acc = 0.f, best = 0.f;
    int64_t best_idx = -1, count = 0;
    for (int64_t t = 0; t < a.ksize; ++t) {
      bool valid = true;
      int64_t flat = 0, colflat = 0, colstride = 1;
#pragma unroll
      for (int d = 0; d < kPoolMaxSpatialDims; ++d) {
        if (d >= nsp) continue;
        const int64_t c = start[d] + k[d] * a.dilation[d];
        valid = valid && c >= 0 && c < a.in[d];
        flat = flat * a.in[d] + c;
        if (kKind == kPoolMax) {
          colflat += c * colstride;
          colstride *= a.in[d];
        }
      }
      if (valid) {
        const float v = ToF32(xp[flat * step]);
        ++count;
        if (kKind == kPoolMax) {
          if (best_idx < 0 || v > best) {
            best = v;
            best_idx = a.column_major_indices ? colflat : flat;
          }
        } else if (kKind == kPoolAvg) {
          acc += v;
        } else {
          const float m = fabsf(v);
          acc += a.p == 1 ? m : a.p == 2 ? m * m : powf(m, static_cast<float>(a.p));
        }
      }
      // Next tap: row-major increment of k.
#pragma unroll
      for (int d = kPoolMaxSpatialDims - 1; d >= 0; --d) {
        if (d >= nsp) continue;
        if (++k[d] < a.kernel[d]) break;
        k[d] = 0;
      }
    }
    float r;
    if (kKind == kPoolMax) {
      r = best_idx < 0 ? 0.f : best;
      if (a.indices) a.indices[idx] = best_idx < 0 ? 0 : pl * a.in_size + best_idx;
    } else if (kKind == kPoolAvg) {
      const int64_t div = a.count_include_pad ? a.ksize : count;
      r = div > 0 ? acc / static_cast<float>(div) : 0.f;
    } else {
      r = a.p == 1 ? acc : a.p == 2 ? sqrtf(acc) : powf(acc, 1.f / static_cast<float>(a.p));
    }
    y[idx] = FromF32<T>(r);
  }
}

template <typename T, int kKind>
cudaError_t WindowPoolByRank(const PoolWindowArgs& a, cudaStream_t stream) {
  const int64_t total = a.planes * a.out_size;
  const unsigned grid = GridFor(total, 256);
  switch (a.nsp) {
    case 1: WindowPoolKernel<T, kKind, 1><<<grid, 256, 0, stream>>>(a); break;
    case 2: WindowPoolKernel<T, kKind, 2><<<grid, 256, 0, stream>>>(a); break;
    case 3: WindowPoolKernel<T, kKind, 3><<<grid, 256, 0, stream>>>(a); break;
    default: WindowPoolKernel<T, kKind, 0><<<grid, 256, 0, stream>>>(a); break;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t WindowPoolTyped(const PoolWindowArgs& a, cudaStream_t stream) {
  switch (a.kind) {
    case kPoolMax: return WindowPoolByRank<T, kPoolMax>(a, stream);
    case kPoolAvg: return WindowPoolByRank<T, kPoolAvg>(a, stream);
    case kPoolLp: return WindowPoolByRank<T, kPoolLp>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

// ---- Global pools ----

template <int kKind>
__device__ __forceinline__ float Combine(float u, float v) {
  if (kKind == kPoolMax) return v > u ? v : u;
  return u + v;
}

template <int kKind>
__device__ __forceinline__ float WarpReduce(float v) {
  for (int o = 16; o > 0; o >>= 1) v = Combine<kKind>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <int kKind>
__device__ __forceinline__ float Identity() {
  return kKind == kPoolMax ? -INFINITY : 0.f;
}

template <int kKind>
__device__ __forceinline__ float Accumulate(float acc, float v, int p) {
  if (kKind == kPoolMax) return v > acc ? v : acc;
  if (kKind == kPoolAvg) return acc + v;
  const float m = fabsf(v);
  return acc + (p == 1 ? m : p == 2 ? m * m : powf(m, static_cast<float>(p)));
}

template <int kKind>
__device__ __forceinline__ float Finish(float acc, int64_t n, int p) {
  if (n <= 0) return 0.f;
  if (kKind == kPoolMax) return acc;
  if (kKind == kPoolAvg) return acc / static_cast<float>(n);
  return p == 1 ? acc : p == 2 ? sqrtf(acc) : powf(acc, 1.f / static_cast<float>(p));
}

// One warp per plane; blockDim.x / 32 planes per block.
template <typename T, int kKind>
__global__ void GlobalPoolWarpKernel(const T* x, T* y, int64_t planes, int64_t n, int p) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x >> 5;
  for (int64_t pl = blockIdx.x * warps_per_block + (threadIdx.x >> 5); pl < planes;
       pl += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const T* xp = x + pl * n;
    float acc = Identity<kKind>();
    for (int64_t i = lane; i < n; i += 32) acc = Accumulate<kKind>(acc, ToF32(xp[i]), p);
    acc = WarpReduce<kKind>(acc);
    if (lane == 0) y[pl] = FromF32<T>(Finish<kKind>(acc, n, p));
  }
}

// One block per plane.
template <typename T, int kKind>
__global__ void GlobalPoolBlockKernel(const T* x, T* y, int64_t planes, int64_t n, int p) {
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int64_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
    const T* xp = x + pl * n;
    float acc = Identity<kKind>();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc = Accumulate<kKind>(acc, ToF32(xp[i]), p);
    acc = WarpReduce<kKind>(acc);
    __syncthreads();  // the previous plane's readers are done with `red`
    if (lane == 0) red[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      float v = lane < nw ? red[lane] : Identity<kKind>();
      v = WarpReduce<kKind>(v);
      if (lane == 0) y[pl] = FromF32<T>(Finish<kKind>(v, n, p));
    }
  }
}

template <typename T, int kKind>
cudaError_t GlobalPoolKind(const T* x, T* y, int p, int64_t planes, int64_t n, cudaStream_t stream) {
  if (n <= 4096) {
    constexpr int kWarps = 8;
    const int64_t blocks = (planes + kWarps - 1) / kWarps;
    GlobalPoolWarpKernel<T, kKind><<<static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid), kWarps * 32, 0,
                                     stream>>>(x, y, planes, n, p);
  } else {
    GlobalPoolBlockKernel<T, kKind><<<static_cast<unsigned>(planes < kMaxGrid ? planes : kMaxGrid), 512, 0,
                                      stream>>>(x, y, planes, n, p);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t GlobalPoolTyped(const void* x, void* y, int kind, int p, int64_t planes, int64_t n, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  T* yt = static_cast<T*>(y);
  switch (kind) {
    case kPoolMax: return GlobalPoolKind<T, kPoolMax>(xt, yt, p, planes, n, stream);
    case kPoolAvg: return GlobalPoolKind<T, kPoolAvg>(xt, yt, p, planes, n, stream);
    case kPoolLp: return GlobalPoolKind<T, kPoolLp>(xt, yt, p, planes, n, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchWindowPool(const PoolWindowArgs& a, cudaStream_t stream) {
  if (a.planes * a.out_size <= 0) return cudaSuccess;
  if (a.nsp < 1 || a.nsp > kPoolMaxSpatialDims || a.p < 1) return cudaErrorInvalidValue;
  cudaError_t e = cudaErrorInvalidValue;
  if (KILN_DISPATCH_FLOAT(a.dtype, T, e = WindowPoolTyped<T>(a, stream))) return e;
  if (a.kind != kPoolMax) return cudaErrorInvalidValue;
  if (a.dtype == kI8) return WindowPoolByRank<int8_t, kPoolMax>(a, stream);
  if (a.dtype == kU8) return WindowPoolByRank<uint8_t, kPoolMax>(a, stream);
  return cudaErrorInvalidValue;
}

cudaError_t LaunchGlobalPool(const void* x, void* y, int dtype, int kind, int p, int64_t planes, int64_t plane_size,
                             cudaStream_t stream) {
  if (planes <= 0) return cudaSuccess;
  if (p < 1) return cudaErrorInvalidValue;
  cudaError_t e = cudaErrorInvalidValue;
  if (KILN_DISPATCH_FLOAT(dtype, T, e = GlobalPoolTyped<T>(x, y, kind, p, planes, plane_size, stream))) return e;
  if (kind != kPoolMax) return cudaErrorInvalidValue;
  if (dtype == kI8) return GlobalPoolKind<int8_t, kPoolMax>(static_cast<const int8_t*>(x), static_cast<int8_t*>(y), p,
                                                            planes, plane_size, stream);
  if (dtype == kU8) return GlobalPoolKind<uint8_t, kPoolMax>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y),
                                                             p, planes, plane_size, stream);
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
