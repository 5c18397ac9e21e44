// ReverseSequence, MaxUnpool and Col2Im kernels (see rearrange_kernels.h).
//  - ReverseSequence: one thread per output element, reading its source step.
//  - MaxUnpool: the winner of every unpooled position (the largest input index naming it, by atomicMax over an
//    int64 table set to -1 first), then one thread per output element copying its winner's value or writing 0. The
//    result does not depend on scheduling.
//  - Col2Im: one thread per output element gathering the column values that cover it (no atomics; the sum in the
//    CPU reference's order).
#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/rearrange_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

constexpr int kBlock = 256;

// ---- ReverseSequence ----

template <typename E>
__global__ void ReverseSequenceKernel(const E* __restrict__ x, E* __restrict__ y, const int64_t* __restrict__ lens,
                                      int64_t d0, int64_t d1, int64_t inner, bool batch_first) {
  const int64_t total = d0 * d1 * inner;
  const int64_t steps = batch_first ? d1 : d0, batch = batch_first ? d0 : d1;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = i % inner, rest = i / inner;
    const int64_t p1 = rest % d1, p0 = rest / d1;
    const int64_t b = batch_first ? p0 : p1, t = batch_first ? p1 : p0;
    int64_t len = lens[b];
    len = len < 0 ? 0 : (len > steps ? steps : len);
    const int64_t from = t < len ? len - 1 - t : t;
    const int64_t src = batch_first ? b * steps + from : from * batch + b;
    y[i] = x[src * inner + e];
  }
}

// ---- MaxUnpool ----

template <typename I>
__global__ void MaxUnpoolWinnersKernel(const I* __restrict__ idx, int64_t count, int64_t volume,
                                       long long* __restrict__ winner) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = static_cast<int64_t>(idx[i]);
    if (at >= 0 && at < volume) atomicMax(winner + at, static_cast<long long>(i));
  }
}

template <typename E>
__global__ void MaxUnpoolWriteKernel(const E* __restrict__ x, const long long* __restrict__ winner, E* __restrict__ y,
                                     int rank, Dims8 unpooled, Dims8 out, int64_t total) {
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // o's index in each dim, and the same position in the unpooled tensor where it lies inside.
    int64_t rest = o, u = 0, ustride = 1;
    bool inside = true;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t k = rest % out.d[d];
      rest /= out.d[d];
      inside = inside && k < unpooled.d[d];
      u += k * ustride;
      ustride *= unpooled.d[d];
    }
    const long long w = inside ? winner[u] : -1;
    y[o] = w >= 0 ? x[w] : E(0);
  }
}

// ---- Col2Im ----

template <typename T>
__global__ void Col2ImKernel(const Col2ImArgs a, int64_t block_volume, int64_t positions, int64_t image_volume) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const int64_t total = a.n * a.c * image_volume;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bc = o / image_volume;  // b * c + channel
    int64_t pos[kCol2ImMaxDims];
    int64_t rest = o % image_volume;
    for (int d = a.rank - 1; d >= 0; --d) {
      pos[d] = rest % a.image[d];
      rest /= a.image[d];
    }
    double acc = 0;
    const T* col = x + bc * block_volume * positions;  // the rows of this (b, channel)
    for (int64_t k = 0; k < block_volume; ++k) {
      // Block offset k per dim; the block position covering pos there, if any.
      int64_t kr = k, p = 0, pstride = 1;
      bool hit = true;
      for (int d = a.rank - 1; d >= 0 && hit; --d) {
        const int64_t kd = kr % a.block[d];
        kr /= a.block[d];
        const int64_t num = pos[d] + a.pad[d] - kd * a.dilation[d];
        if (num < 0 || num % a.stride[d] != 0) {
          hit = false;
        } else {
          const int64_t pd = num / a.stride[d];
          hit = pd < a.blocks[d];
          p += pd * pstride;
          pstride *= a.blocks[d];
        }
      }
      if (hit) acc += LoadF64(col, k * positions + p);
    }
    y[o] = FromF64<T>(acc);
  }
}

}  // namespace

cudaError_t LaunchReverseSequence(const void* x, void* y, const int64_t* lens, int64_t d0, int64_t d1, int64_t inner,
                                  bool batch_first, int elem_size, cudaStream_t stream) {
  const int64_t total = d0 * d1 * inner;
  if (total <= 0) return cudaSuccess;
  const bool ok = DispatchElemBytes(elem_size, [&](auto tag) {
    using E = typename decltype(tag)::type;
    ReverseSequenceKernel<E><<<GridFor(total, kBlock), kBlock, 0, stream>>>(
        static_cast<const E*>(x), static_cast<E*>(y), lens, d0, d1, inner, batch_first);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

size_t MaxUnpoolWorkspaceBytes(int64_t unpooled_volume) {
  return unpooled_volume > 0 ? static_cast<size_t>(unpooled_volume) * sizeof(long long) : 0;
}

cudaError_t LaunchMaxUnpool(const void* x, const void* idx, int idx_dtype, int64_t count, void* y, int rank,
                            const int64_t* unpooled, const int64_t* out, int elem_size, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream) {
  if (rank < 1 || rank > kMaxDims) return cudaErrorInvalidValue;
  Dims8 u{}, o{};
  int64_t volume = 1, total = 1;
  for (int d = 0; d < rank; ++d) {
    u.d[d] = unpooled[d];
    o.d[d] = out[d];
    volume *= unpooled[d];
    total *= out[d];
  }
  if (total <= 0) return cudaSuccess;
  if (volume < 0) volume = 0;
  if (workspace_bytes < MaxUnpoolWorkspaceBytes(volume)) return cudaErrorInvalidValue;
  auto* winner = static_cast<long long*>(workspace);
  if (volume > 0) {
    cudaError_t e = cudaMemsetAsync(winner, 0xff, static_cast<size_t>(volume) * sizeof(long long), stream);
    if (e != cudaSuccess) return e;
    if (count > 0) {
      bool ok = true;
      if (idx_dtype == kI64)
        MaxUnpoolWinnersKernel<<<GridFor(count, kBlock), kBlock, 0, stream>>>(static_cast<const int64_t*>(idx), count,
                                                                              volume, winner);
      else if (idx_dtype == kI32)
        MaxUnpoolWinnersKernel<<<GridFor(count, kBlock), kBlock, 0, stream>>>(static_cast<const int32_t*>(idx), count,
                                                                              volume, winner);
      else
        ok = false;
      if (!ok) return cudaErrorInvalidValue;
    }
  }
  const bool ok = DispatchElemBytes(elem_size, [&](auto tag) {
    using E = typename decltype(tag)::type;
    MaxUnpoolWriteKernel<E><<<GridFor(total, kBlock), kBlock, 0, stream>>>(static_cast<const E*>(x), winner,
                                                                          static_cast<E*>(y), rank, u, o, total);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

bool Col2ImSupports(int dtype) { return DispatchNumeric(dtype, [](auto) {}); }

cudaError_t LaunchCol2Im(const Col2ImArgs& a, cudaStream_t stream) {
  if (a.rank < 1 || a.rank > kCol2ImMaxDims) return cudaErrorInvalidValue;
  int64_t block_volume = 1, positions = 1, image_volume = 1;
  for (int d = 0; d < a.rank; ++d) {
    if (a.stride[d] < 1) return cudaErrorInvalidValue;
    block_volume *= a.block[d];
    positions *= a.blocks[d];
    image_volume *= a.image[d];
  }
  const int64_t total = a.n * a.c * image_volume;
  if (total <= 0) return cudaSuccess;
  const bool ok = DispatchNumeric(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Col2ImKernel<T><<<GridFor(total, kBlock), kBlock, 0, stream>>>(a, block_volume, positions, image_volume);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
