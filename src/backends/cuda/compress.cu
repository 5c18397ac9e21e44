// Compress kernels (see compress_kernels.h). The selection is one block: it walks the condition in chunks of
// kSelectThreads * kSelectPerThread entries, each thread counting its entries, a block-wide exclusive scan of the
// counts giving each true entry its place, and a running total carried from chunk to chunk. The gather copies the
// selected rows in the widest unit (16, 8, 4, 2 or 1 bytes) that divides a row and the addresses' alignment.
#include <cstdint>

#include "backends/cuda/compress_kernels.h"
#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {
namespace {

constexpr int kSelectThreads = 1024;
constexpr int kSelectPerThread = 4;
constexpr size_t kAlign = 256;

constexpr size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Inclusive scan of v over the warp.
__device__ __forceinline__ int WarpInclusiveScan(int v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += t;
  }
  return v;
}

__global__ void __launch_bounds__(kSelectThreads)
    CompressSelectKernel(const uint8_t* __restrict__ cond, int64_t n, int64_t* __restrict__ selected,
                         int64_t* __restrict__ count) {
  __shared__ int warp_sums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  int64_t carried = 0;  // true entries before this chunk
  const int64_t chunk = static_cast<int64_t>(blockDim.x) * kSelectPerThread;
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t first = base + static_cast<int64_t>(threadIdx.x) * kSelectPerThread;
    bool flag[kSelectPerThread];
    int mine = 0;
#pragma unroll
    for (int q = 0; q < kSelectPerThread; ++q) {
      flag[q] = first + q < n && cond[first + q] != 0;
      mine += flag[q] ? 1 : 0;
    }
    const int inclusive = WarpInclusiveScan(mine);
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
      const int w = lane < warps ? warp_sums[lane] : 0;
      warp_sums[lane] = WarpInclusiveScan(w);  // the warps' inclusive totals
    }
    __syncthreads();
    int64_t at = carried + (inclusive - mine) + (warp > 0 ? warp_sums[warp - 1] : 0);
#pragma unroll
    for (int q = 0; q < kSelectPerThread; ++q)
      if (flag[q]) selected[at++] = first + q;
    carried += warp_sums[warps - 1];
    __syncthreads();  // everyone has read warp_sums before the next chunk writes it
  }
  if (threadIdx.x == 0) *count = carried;
}

// U: the copy unit; a row holds `units` of them.
template <typename U>
__global__ void CompressGatherKernel(const U* __restrict__ x, U* __restrict__ out,
                                     const int64_t* __restrict__ selected, int64_t dim, int64_t count, int64_t units,
                                     int64_t total) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t u = t % units, rest = t / units;
    const int64_t k = rest % count, o = rest / count;
    out[t] = x[(o * dim + selected[k]) * units + u];
  }
}

template <typename U>
cudaError_t Gather(const void* x, void* out, const int64_t* selected, int64_t outer, int64_t dim, int64_t count,
                   int64_t row_bytes, cudaStream_t stream) {
  const int64_t units = row_bytes / static_cast<int64_t>(sizeof(U));
  const int64_t total = outer * count * units;
  CompressGatherKernel<U><<<GridFor(total), 256, 0, stream>>>(static_cast<const U*>(x), static_cast<U*>(out),
                                                              selected, dim, count, units, total);
  return cudaGetLastError();
}

}  // namespace

size_t CompressWorkspaceBytes(int64_t n) {
  return AlignUp(static_cast<size_t>(n > 0 ? n : 0) * sizeof(int64_t)) + kAlign;
}

int64_t* CompressSelected(void* workspace) { return static_cast<int64_t*>(workspace); }

int64_t* CompressCount(void* workspace, int64_t n) {
  return reinterpret_cast<int64_t*>(static_cast<char*>(workspace) +
                                    AlignUp(static_cast<size_t>(n > 0 ? n : 0) * sizeof(int64_t)));
}

cudaError_t LaunchCompressSelect(const void* cond, int64_t n, int64_t* selected, int64_t* count, cudaStream_t stream) {
  if (n < 0 || !count || (n > 0 && (!cond || !selected))) return cudaErrorInvalidValue;
  CompressSelectKernel<<<1, kSelectThreads, 0, stream>>>(static_cast<const uint8_t*>(cond), n, selected, count);
  return cudaGetLastError();
}

cudaError_t LaunchCompressGather(const void* x, void* out, const int64_t* selected, int64_t outer, int64_t dim,
                                 int64_t count, int64_t row_bytes, cudaStream_t stream) {
  if (outer <= 0 || count <= 0 || row_bytes <= 0) return cudaSuccess;
  if (!x || !out || !selected || dim < count) return cudaErrorInvalidValue;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out);
  auto fits = [&](int64_t w) { return row_bytes % w == 0 && addr % static_cast<uintptr_t>(w) == 0; };
  if (fits(16)) return Gather<uint4>(x, out, selected, outer, dim, count, row_bytes, stream);
  if (fits(8)) return Gather<unsigned long long>(x, out, selected, outer, dim, count, row_bytes, stream);
  if (fits(4)) return Gather<uint32_t>(x, out, selected, outer, dim, count, row_bytes, stream);
  if (fits(2)) return Gather<uint16_t>(x, out, selected, outer, dim, count, row_bytes, stream);
  return Gather<uint8_t>(x, out, selected, outer, dim, count, row_bytes, stream);
}

}  // namespace kiln::cuda
