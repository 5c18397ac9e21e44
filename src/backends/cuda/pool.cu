// Pooling kernels (see pool_kernels.h). Windowed pools: X is seen as [images, spatial..., C] (NCHW: images =
// N * C planes and C = 1; channels-last: images = N); one thread per output position and W consecutive channels
// (one 16-byte pack when C allows, else 1) walks the taps inside the input in the same row-major order as the
// CPU reference. Global pools: one warp per plane for small planes, one block per plane for large ones.
#include <cmath>

#include "backends/cuda/norm_pool_util.cuh"
#include "backends/cuda/pool_kernels.h"

namespace kiln::cuda {

namespace {

constexpr int64_t kMaxGrid = 1 << 20;

// Splits unit u = ((img * out_size) + pos) * groups + g and pos into its coordinates o[] (row-major over the
// output dims). I: uint32_t when every unit index fits (cheaper division), else uint64_t.
template <typename I, int D>
__device__ __forceinline__ void SplitUnit(uint64_t u, uint64_t groups, const PoolWindowArgs& a, int nsp,
                                          int64_t& img, int64_t& g, int64_t (&o)[D]) {
  I r = static_cast<I>(u);
  const I gs = static_cast<I>(groups), os = static_cast<I>(a.out_size);
  I q = r / gs;
  g = static_cast<int64_t>(r - q * gs);
  r = q;
  q = r / os;
  img = static_cast<int64_t>(q);
  r -= q * os;
#pragma unroll
  for (int d = D - 1; d >= 0; --d) {
    if (d >= nsp) continue;
    const I od = static_cast<I>(a.out[d]);
    q = r / od;
    o[d] = static_cast<int64_t>(r - q * od);
    r = q;
  }
}

// NSP > 0: the number of spatial dims is known at compile time; 0: a.nsp at run time (up to 6). W: channels per
// thread (W > 1: C % W == 0 and x, y 16-byte aligned). kIdx: MaxPool Indices (W == 1, C == 1).
template <typename T, int kKind, int NSP, int W, bool kIdx>
__global__ void WindowPoolKernel(PoolWindowArgs a, int64_t C, uint64_t units, bool small) {
  constexpr int D = NSP > 0 ? NSP : kPoolMaxSpatialDims;
  using P = Pack16<T>;
  static_assert(W == 1 || W == P::kN, "W is 1 or a whole pack");
  const int nsp = NSP > 0 ? NSP : a.nsp;
  const T* __restrict__ x = static_cast<const T*>(a.x);
  T* __restrict__ y = static_cast<T*>(a.y);
  const uint64_t groups = static_cast<uint64_t>(C / W);
  for (uint64_t u = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; u < units;
       u += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    int64_t img, g, o[D];
    if (small) SplitUnit<uint32_t, D>(u, groups, a, nsp, img, g, o);
    else SplitUnit<uint64_t, D>(u, groups, a, nsp, img, g, o);
    // Per dim: the taps k in [lo, hi) land inside the input, `step` elements apart; e: elements between
    // neighbouring input coordinates along the dim.
    int64_t lo[D], hi[D], k[D], step[D];
    int64_t off = img * a.in_size * C + g * W, count = 1, padded = 1;
    int64_t e = C;
#pragma unroll
    for (int d = D - 1; d >= 0; --d) {
      if (d >= nsp) continue;
      const int64_t start = o[d] * a.stride[d] - a.pad_begin[d], dil = a.dilation[d];
      // lo = ceil(-start / dil) when start < 0; hi - 1 = floor((in - 1 - start) / dil). No division when dil == 1.
      const int64_t before = start < 0 ? -start + dil - 1 : 0, inside = a.in[d] - 1 - start;
      lo[d] = dil == 1 ? before : before / dil;
      hi[d] = inside < 0 ? 0 : (dil == 1 ? inside : inside / dil) + 1;
      if (hi[d] > a.kernel[d]) hi[d] = a.kernel[d];
      if (hi[d] < lo[d]) hi[d] = lo[d];
      count *= hi[d] - lo[d];
      if (a.uncount_overhang) {  // taps before in + pad_end: k < ceil((in + pad_end - start) / dil)
        const int64_t room = a.in[d] + a.pad_end[d] - start;
        const int64_t taps = room <= 0 ? 0 : (room + dil - 1) / dil;
        padded *= taps < a.kernel[d] ? taps : a.kernel[d];
      }
      k[d] = lo[d];
      step[d] = dil * e;
      off += (start + lo[d] * dil) * e;
      e *= a.in[d];
    }
    float acc[W], best[W];
#pragma unroll
    for (int i = 0; i < W; ++i) acc[i] = best[i] = 0.f;
    int64_t best_off = -1;  // kIdx: element offset (in the image) of the maximum
    bool first = true;
    const int last = nsp - 1;
    const T* xi = x + img * a.in_size * C;
    while (count > 0) {
      // One run of taps along the last dim, then an odometer step over the outer dims.
      int64_t hl = 0, ll = 0, sl = 0;
#pragma unroll
      for (int d = 0; d < D; ++d) {
        if (d == last) {
          hl = hi[d];
          ll = lo[d];
          sl = step[d];
        }
      }
      const T* p = x + off;
#pragma unroll 4
      for (int64_t t = ll; t < hl; ++t, p += sl) {
        float v[W];
        if constexpr (W > 1) {
          const P pk = *reinterpret_cast<const P*>(p);
#pragma unroll
          for (int i = 0; i < W; ++i) v[i] = ToF32(pk.v[i]);
        } else {
          v[0] = ToF32(*p);
        }
#pragma unroll
        for (int i = 0; i < W; ++i) {
          if (kKind == kPoolMax) {
            if (first || v[i] > best[i]) {
              best[i] = v[i];
              if constexpr (kIdx) best_off = p - xi;
            }
          } else if (kKind == kPoolAvg) {
            acc[i] += v[i];
          } else {
            const float m = fabsf(v[i]);
            acc[i] += a.p == 1 ? m : a.p == 2 ? m * m : powf(m, static_cast<float>(a.p));
          }
        }
        first = false;
      }
      bool carry = true;
#pragma unroll
      for (int d = D - 1; d >= 0; --d) {
        if (d >= last || !carry) continue;
        if (++k[d] < hi[d]) {
          off += step[d];
          carry = false;
        } else {
          off -= (hi[d] - 1 - lo[d]) * step[d];
          k[d] = lo[d];
        }
      }
      if (carry) break;
    }
    const int64_t yo = static_cast<int64_t>(u) * W;  // = ((img * out_size) + pos) * C + g * W
    float r[W];
#pragma unroll
    for (int i = 0; i < W; ++i) {
      if (kKind == kPoolMax) {
        r[i] = first ? 0.f : best[i];
      } else if (kKind == kPoolAvg) {
        const int64_t div = !a.count_include_pad ? count : a.uncount_overhang ? padded : a.ksize;
        r[i] = div > 0 ? acc[i] / static_cast<float>(div) : 0.f;
      } else {
        r[i] = a.p == 1 ? acc[i] : a.p == 2 ? sqrtf(acc[i]) : powf(acc[i], 1.f / static_cast<float>(a.p));
      }
    }
    if constexpr (W > 1) {
      P out;
#pragma unroll
      for (int i = 0; i < W; ++i) out.v[i] = FromF32<T>(r[i]);
      *reinterpret_cast<P*>(y + yo) = out;
    } else {
      y[yo] = FromF32<T>(r[0]);
    }
    if constexpr (kIdx) {
      // best_off is the row-major flat spatial index (C == 1); storage_order 1 wants it column-major.
      int64_t flat = best_off;
      if (a.column_major_indices && flat >= 0) {
        int64_t rem = flat, col = 0;
#pragma unroll
        for (int d = D - 1; d >= 0; --d) {
          if (d >= nsp) continue;
          const int64_t c = rem % a.in[d];
          rem /= a.in[d];
          int64_t cs = 1;
#pragma unroll
          for (int d2 = 0; d2 < D; ++d2)
            if (d2 < d) cs *= a.in[d2];
          col += c * cs;
        }
        flat = col;
      }
      a.indices[u] = flat < 0 ? 0 : img * a.in_size + flat;
    }
  }
}

template <typename T, int kKind, int NSP, int W, bool kIdx>
void LaunchWindow(const PoolWindowArgs& a, int64_t C, uint64_t units, cudaStream_t stream) {
  const bool small = units <= 0xffffffffull;
  WindowPoolKernel<T, kKind, NSP, W, kIdx>
      <<<GridFor(static_cast<int64_t>(units), 256), 256, 0, stream>>>(a, C, units, small);
}

template <typename T, int kKind, int W, bool kIdx>
void WindowPoolByRank(const PoolWindowArgs& a, int64_t C, uint64_t units, cudaStream_t stream) {
  if (a.nsp == 2) LaunchWindow<T, kKind, 2, W, kIdx>(a, C, units, stream);
  else LaunchWindow<T, kKind, 0, W, kIdx>(a, C, units, stream);
}

template <typename T, int kKind>
cudaError_t WindowPoolKind(const PoolWindowArgs& a, cudaStream_t stream) {
  constexpr int V = Pack16<T>::kN;
  const int64_t C = a.channels_last > 0 ? a.channels_last : 1;
  const uint64_t positions = static_cast<uint64_t>(a.planes / C) * static_cast<uint64_t>(a.out_size);
  if constexpr (kKind == kPoolMax) {
    if (a.indices) {
      if (C != 1) return cudaErrorInvalidValue;  // channels-last has no Indices
      WindowPoolByRank<T, kKind, 1, true>(a, C, positions, stream);
      return cudaGetLastError();
    }
  }
  if (C % V == 0 && Aligned16(a.x) && Aligned16(a.y)) {
    WindowPoolByRank<T, kKind, V, false>(a, C, positions * static_cast<uint64_t>(C / V), stream);
  } else {
    WindowPoolByRank<T, kKind, 1, false>(a, C, positions * static_cast<uint64_t>(C), stream);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t WindowPoolTyped(const PoolWindowArgs& a, cudaStream_t stream) {
  switch (a.kind) {
    case kPoolMax: return WindowPoolKind<T, kPoolMax>(a, stream);
    case kPoolAvg: return WindowPoolKind<T, kPoolAvg>(a, stream);
    case kPoolLp: return WindowPoolKind<T, kPoolLp>(a, stream);
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
  if (a.dtype == kI8) return WindowPoolKind<int8_t, kPoolMax>(a, stream);
  if (a.dtype == kU8) return WindowPoolKind<uint8_t, kPoolMax>(a, stream);
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
