// LRN and MeanVarianceNormalization kernels (see lrn_mvn_kernels.h).
//  - LRN: one thread per element, summing the squares of its channel window (read through the caches).
//  - MVN: three launches. Partial sums of x and x^2 in double per (group, chunk of the group's elements), one
//    block each; then per group the mean and sqrt(variance + 1e-9); then every element normalized. The partials
//    are added in chunk order, so the result does not depend on scheduling.
#include <algorithm>
#include <cmath>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/lrn_mvn_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

// ---- LRN ----

// The compute type: float32 for the 32- and 16-bit floats, double for double.
template <typename T>
using LrnAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
__device__ __forceinline__ LrnAcc<T> LrnLoad(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, double>) return p[i];
  else return ToF32(p[i]);
}

template <typename T>
__global__ void LrnKernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, int64_t c, int64_t spatial,
                          int64_t lo, int64_t hi, LrnAcc<T> alpha_over_size, LrnAcc<T> beta, LrnAcc<T> bias) {
  using A = LrnAcc<T>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = i % spatial, rest = i / spatial;
    const int64_t k = rest % c, b = rest / c;
    const int64_t base = b * c * spatial + s;
    const int64_t j0 = k - lo < 0 ? 0 : k - lo, j1 = k + hi > c - 1 ? c - 1 : k + hi;
    A sq = 0;
    for (int64_t j = j0; j <= j1; ++j) {
      const A v = LrnLoad(x, base + j * spatial);
      sq += v * v;
    }
    const A v = LrnLoad(x, i);
    const A r = v / pow(bias + alpha_over_size * sq, beta);
    if constexpr (std::is_same_v<T, double>) y[i] = r;
    else y[i] = FromF32<T>(r);
  }
}

// ---- MeanVarianceNormalization ----

constexpr int kMvnThreads = 256;
constexpr int64_t kMvnChunk = 8192;  // elements of a group per block of the statistics pass

// The kept dims (the groups) and the reduced dims (the elements of a group), each with its stride in x, and for
// every dim its stride in the group index (0 for reduced dims).
struct MvnGeom {
  int rank = 0, nk = 0, nr = 0;
  int64_t dim[8] = {}, gstride[8] = {};
  int64_t kdim[8] = {}, kstride[8] = {}, rdim[8] = {}, rstride[8] = {};
  int64_t groups = 1, count = 1, chunks = 1, per_chunk = 1;
};

MvnGeom MakeGeom(const MvnArgs& a) {
  MvnGeom g;
  g.rank = a.rank;
  int64_t strides[8] = {};
  int64_t stride = 1, gstride = 1;
  for (int d = a.rank - 1; d >= 0; --d) {
    g.dim[d] = a.dims[d];
    strides[d] = stride;
    stride *= a.dims[d];
    g.gstride[d] = a.reduced[d] ? 0 : gstride;
    if (!a.reduced[d]) gstride *= a.dims[d];
  }
  for (int d = 0; d < a.rank; ++d) {
    if (a.reduced[d]) {
      g.rdim[g.nr] = a.dims[d];
      g.rstride[g.nr++] = strides[d];
      g.count *= a.dims[d];
    } else {
      g.kdim[g.nk] = a.dims[d];
      g.kstride[g.nk++] = strides[d];
      g.groups *= a.dims[d];
    }
  }
  // Enough blocks to fill the GPU: groups of many elements are split into chunks.
  const int64_t want = (g.count + kMvnChunk - 1) / kMvnChunk;
  g.chunks = g.groups >= 1024 ? 1 : std::min<int64_t>(std::max<int64_t>(want, 1), 256);
  g.per_chunk = (g.count + g.chunks - 1) / g.chunks;
  return g;
}

// Offset in x of element r of group q.
__device__ __forceinline__ int64_t MvnOffset(const MvnGeom& g, int64_t q, int64_t r) {
  int64_t off = 0;
  for (int d = g.nk - 1; d >= 0; --d) {
    off += (q % g.kdim[d]) * g.kstride[d];
    q /= g.kdim[d];
  }
  for (int d = g.nr - 1; d >= 0; --d) {
    off += (r % g.rdim[d]) * g.rstride[d];
    r /= g.rdim[d];
  }
  return off;
}

// Block b: group b / chunks, chunk b % chunks; partial[2b] = sum of x, partial[2b + 1] = sum of x^2.
template <typename T>
__global__ void MvnPartialKernel(const T* __restrict__ x, const MvnGeom g, double* __restrict__ partial) {
  __shared__ double red[32];
  const int64_t blocks = g.groups * g.chunks;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {  // uniform across the block
    const int64_t q = b / g.chunks, ch = b % g.chunks;
    const int64_t r0 = ch * g.per_chunk, r1 = r0 + g.per_chunk < g.count ? r0 + g.per_chunk : g.count;
    double s = 0, sq = 0;
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
      const double v = LoadF64(x, MvnOffset(g, q, r));
      s += v;
      sq += v * v;
    }
    s = BlockSumF64(s, red);
    sq = BlockSumF64(sq, red);
    if (threadIdx.x == 0) {
      partial[2 * b] = s;
      partial[2 * b + 1] = sq;
    }
  }
}

// stats[2q] = mean, stats[2q + 1] = sqrt(mean of squares - mean^2 + 1e-9), as the CPU reference.
__global__ void MvnStatsKernel(const double* __restrict__ partial, const MvnGeom g, double* __restrict__ stats) {
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < g.groups;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0, sq = 0;
    for (int64_t ch = 0; ch < g.chunks; ++ch) {
      s += partial[2 * (q * g.chunks + ch)];
      sq += partial[2 * (q * g.chunks + ch) + 1];
    }
    const double n = static_cast<double>(g.count);
    const double mean = s / n;
    const double var = sq / n - mean * mean;
    stats[2 * q] = mean;
    stats[2 * q + 1] = sqrt(var + 1e-9);
  }
}

template <typename T>
__global__ void MvnApplyKernel(const T* __restrict__ x, T* __restrict__ y, const MvnGeom g, int64_t total,
                               const double* __restrict__ stats) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, q = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      q += (rest % g.dim[d]) * g.gstride[d];
      rest /= g.dim[d];
    }
    y[i] = FromF64<T>((LoadF64(x, i) - stats[2 * q]) / stats[2 * q + 1]);
  }
}

constexpr size_t AlignUp(size_t v) { return (v + 255) / 256 * 256; }

}  // namespace

cudaError_t LaunchLrn(int dtype, const void* x, void* y, int64_t n, int64_t c, int64_t spatial, int64_t size,
                      float alpha, float beta, float bias, cudaStream_t stream) {
  const int64_t total = n * c * spatial;
  if (total <= 0) return cudaSuccess;
  if (size < 1) return cudaErrorInvalidValue;
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  const bool ok = DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = LrnAcc<T>;
    const A alpha_over_size = static_cast<A>(alpha) / static_cast<A>(size);
    LrnKernel<T><<<GridFor(total), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), total, c, spatial,
                                                    lo, hi, alpha_over_size, static_cast<A>(beta),
                                                    static_cast<A>(bias));
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

size_t MvnWorkspaceBytes(const MvnArgs& a) {
  if (a.rank < 1 || a.rank > 8) return 0;
  const MvnGeom g = MakeGeom(a);
  return AlignUp(static_cast<size_t>(g.groups * g.chunks) * 2 * sizeof(double)) +
         AlignUp(static_cast<size_t>(g.groups) * 2 * sizeof(double));
}

cudaError_t LaunchMvn(const MvnArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (a.rank < 1 || a.rank > 8) return cudaErrorInvalidValue;
  const MvnGeom g = MakeGeom(a);
  const int64_t total = g.groups * g.count;
  if (total <= 0) return cudaSuccess;
  if (workspace_bytes < MvnWorkspaceBytes(a)) return cudaErrorInvalidValue;
  double* partial = static_cast<double*>(workspace);
  double* stats = reinterpret_cast<double*>(static_cast<char*>(workspace) +
                                            AlignUp(static_cast<size_t>(g.groups * g.chunks) * 2 * sizeof(double)));
  const int64_t threads = (std::min(g.per_chunk, static_cast<int64_t>(kMvnThreads)) + 31) / 32 * 32;
  const int64_t blocks = std::min<int64_t>(g.groups * g.chunks, 65535LL * 32);
  const bool ok = DispatchFloat(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(a.x);
    MvnPartialKernel<T><<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads), 0, stream>>>(x, g, partial);
    MvnStatsKernel<<<GridFor(g.groups), 256, 0, stream>>>(partial, g, stats);
    MvnApplyKernel<T><<<GridFor(total), 256, 0, stream>>>(x, static_cast<T*>(a.y), g, total, stats);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
