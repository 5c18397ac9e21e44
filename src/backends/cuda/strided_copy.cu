// The strided copy behind the data-movement layers and the modulo-indexed Tile copy (see strided_copy_kernels.h).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/strided_copy_kernels.h"

namespace kiln::cuda {
namespace {

constexpr int kBlock = 256;

// ---- general strided copy: one thread per (vector) unit, 32- or 64-bit index math ----

template <typename I>
struct CopyParams {
  int rank;
  I shape[kMaxDims];
  I src_strides[kMaxDims];
  I dst_strides[kMaxDims];
  int64_t total;
};

template <typename U, typename I>
__global__ void StridedCopyKernel(const U* __restrict__ src, U* __restrict__ dst, CopyParams<I> p) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total; i += step) {
    I rem = static_cast<I>(i), so = 0, dof = 0;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d < p.rank) {
        const I q = rem / p.shape[d];
        const I idx = rem - q * p.shape[d];
        rem = q;
        so += idx * p.src_strides[d];
        dof += idx * p.dst_strides[d];
      }
    }
    dst[dof] = src[so];
  }
}

template <typename U, typename I>
cudaError_t LaunchGeneral(const void* src, void* dst, const std::vector<int64_t>& sh, const std::vector<int64_t>& ss,
                          const std::vector<int64_t>& ds, int64_t total, cudaStream_t stream) {
  CopyParams<I> p{};
  p.rank = static_cast<int>(sh.size());
  for (int d = 0; d < p.rank; ++d) {
    p.shape[d] = static_cast<I>(sh[d]);
    p.src_strides[d] = static_cast<I>(ss[d]);
    p.dst_strides[d] = static_cast<I>(ds[d]);
  }
  p.total = total;
  StridedCopyKernel<U, I><<<GridFor(total, kBlock), kBlock, 0, stream>>>(static_cast<const U*>(src),
                                                                          static_cast<U*>(dst), p);
  return cudaGetLastError();
}

template <typename U>
cudaError_t LaunchGeneralIndexed(const void* src, void* dst, const std::vector<int64_t>& sh,
                                 const std::vector<int64_t>& ss, const std::vector<int64_t>& ds, cudaStream_t stream) {
  int64_t total = 1, span_s = 0, span_d = 0;
  for (size_t d = 0; d < sh.size(); ++d) {
    total *= sh[d];
    span_s += (sh[d] - 1) * std::llabs(ss[d]);
    span_d += (sh[d] - 1) * std::llabs(ds[d]);
  }
  if (total < INT32_MAX && span_s < INT32_MAX && span_d < INT32_MAX)
    return LaunchGeneral<U, int32_t>(src, dst, sh, ss, ds, total, stream);
  return LaunchGeneral<U, int64_t>(src, dst, sh, ss, ds, total, stream);
}

// ---- tiled transpose: source contiguous along dim j, destination contiguous along the last dim ----

constexpr int kTile = 32, kTileRows = 8;
constexpr int kMaxOuter = kMaxDims - 2;

struct TransposeParams {
  int outer_rank;
  int64_t outer_shape[kMaxOuter], outer_src[kMaxOuter], outer_dst[kMaxOuter];
  int64_t nj, nl;       // lengths of dim j (source-contiguous) and of the last dim (destination-contiguous)
  int64_t dst_j;        // destination stride of dim j
  int64_t src_l;        // source stride of the last dim
  int64_t tiles_j, tiles_l, total_tiles;
};

template <typename T>
__global__ void TiledTransposeKernel(const T* __restrict__ src, T* __restrict__ dst, TransposeParams p) {
  __shared__ T tile[kTile][kTile + 1];
  for (int64_t t = blockIdx.x; t < p.total_tiles; t += gridDim.x) {
    int64_t rem = t;
    const int64_t tl = rem % p.tiles_l;
    rem /= p.tiles_l;
    const int64_t tj = rem % p.tiles_j;
    rem /= p.tiles_j;
    int64_t so = 0, dof = 0;
    for (int d = p.outer_rank - 1; d >= 0; --d) {
      const int64_t idx = rem % p.outer_shape[d];
      rem /= p.outer_shape[d];
      so += idx * p.outer_src[d];
      dof += idx * p.outer_dst[d];
    }
    const int64_t j0 = tj * kTile, l0 = tl * kTile;
    // Read: consecutive threads take consecutive j (contiguous in the source). tile[l - l0][j - j0].
    const int64_t jr = j0 + threadIdx.x;
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {
      const int64_t lr = l0 + r;
      if (jr < p.nj && lr < p.nl) tile[r][threadIdx.x] = src[so + jr + lr * p.src_l];
    }
    __syncthreads();
    // Write: consecutive threads take consecutive l (contiguous in the destination).
    const int64_t lw = l0 + threadIdx.x;
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {
      const int64_t jw = j0 + r;
      if (jw < p.nj && lw < p.nl) dst[dof + jw * p.dst_j + lw] = tile[threadIdx.x][r];
    }
    __syncthreads();
  }
}

template <typename T>
cudaError_t LaunchTiled(const void* src, void* dst, const std::vector<int64_t>& sh, const std::vector<int64_t>& ss,
                        const std::vector<int64_t>& ds, int j, cudaStream_t stream) {
  const int r = static_cast<int>(sh.size()), last = r - 1;
  TransposeParams p{};
  for (int d = 0; d < last; ++d) {
    if (d == j) continue;
    p.outer_shape[p.outer_rank] = sh[d];
    p.outer_src[p.outer_rank] = ss[d];
    p.outer_dst[p.outer_rank] = ds[d];
    ++p.outer_rank;
  }
  int64_t outer = 1;
  for (int d = 0; d < p.outer_rank; ++d) outer *= p.outer_shape[d];
  p.nj = sh[j];
  p.nl = sh[last];
  p.dst_j = ds[j];
  p.src_l = ss[last];
  p.tiles_j = (p.nj + kTile - 1) / kTile;
  p.tiles_l = (p.nl + kTile - 1) / kTile;
  p.total_tiles = outer * p.tiles_j * p.tiles_l;
  const int64_t blocks = std::min<int64_t>(p.total_tiles, 65535LL * 32);
  TiledTransposeKernel<T><<<static_cast<unsigned>(blocks), dim3(kTile, kTileRows), 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), p);
  return cudaGetLastError();
}

cudaError_t LaunchTiledBySize(int es, const void* src, void* dst, const std::vector<int64_t>& sh,
                              const std::vector<int64_t>& ss, const std::vector<int64_t>& ds, int j,
                              cudaStream_t stream) {
  switch (es) {
    case 1: return LaunchTiled<uint8_t>(src, dst, sh, ss, ds, j, stream);
    case 2: return LaunchTiled<uint16_t>(src, dst, sh, ss, ds, j, stream);
    case 4: return LaunchTiled<uint32_t>(src, dst, sh, ss, ds, j, stream);
    default: return LaunchTiled<uint64_t>(src, dst, sh, ss, ds, j, stream);
  }
}

cudaError_t LaunchGeneralBySize(int unit, const void* src, void* dst, const std::vector<int64_t>& sh,
                                const std::vector<int64_t>& ss, const std::vector<int64_t>& ds, cudaStream_t stream) {
  switch (unit) {
    case 1: return LaunchGeneralIndexed<uint8_t>(src, dst, sh, ss, ds, stream);
    case 2: return LaunchGeneralIndexed<uint16_t>(src, dst, sh, ss, ds, stream);
    case 4: return LaunchGeneralIndexed<uint32_t>(src, dst, sh, ss, ds, stream);
    case 8: return LaunchGeneralIndexed<uint2>(src, dst, sh, ss, ds, stream);
    default: return LaunchGeneralIndexed<uint4>(src, dst, sh, ss, ds, stream);
  }
}

// ---- Tile (modulo indexing) ----

struct TileParams {
  int rank;
  int64_t in_shape[kMaxDims], out_shape[kMaxDims], in_strides[kMaxDims];
  int64_t total;
};

template <typename T>
__global__ void TileKernel(const T* __restrict__ src, T* __restrict__ dst, TileParams p) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total; i += step) {
    int64_t rem = i, so = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t o = rem % p.out_shape[d];
      rem /= p.out_shape[d];
      so += (o % p.in_shape[d]) * p.in_strides[d];
    }
    dst[i] = src[so];
  }
}

}  // namespace

cudaError_t LaunchStridedCopy(const void* src, void* dst, int rank, const int64_t* shape, const int64_t* src_strides,
                              const int64_t* dst_strides, int elem_size, cudaStream_t stream) {
  const int es = elem_size;
  if (es != 1 && es != 2 && es != 4 && es != 8) return cudaErrorNotSupported;
  // Drop unit dims; nothing to do for 0 elements.
  std::vector<int64_t> sh, s, d;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] == 0) return cudaSuccess;
    if (shape[i] == 1) continue;
    sh.push_back(shape[i]);
    s.push_back(src_strides[i]);
    d.push_back(dst_strides[i]);
  }
  // Merge dim i into the previous one when both views are contiguous across them.
  std::vector<int64_t> msh, ms, md;
  for (size_t i = 0; i < sh.size(); ++i) {
    if (!msh.empty() && ms.back() == s[i] * sh[i] && md.back() == d[i] * sh[i]) {
      msh.back() *= sh[i];
      ms.back() = s[i];
      md.back() = d[i];
    } else {
      msh.push_back(sh[i]);
      ms.push_back(s[i]);
      md.push_back(d[i]);
    }
  }
  const int r = static_cast<int>(msh.size());
  if (r == 0) return cudaMemcpyAsync(dst, src, es, cudaMemcpyDeviceToDevice, stream);
  if (r > kMaxDims) return cudaErrorNotSupported;
  const int64_t n = msh[r - 1], sl = ms[r - 1], dl = md[r - 1];
  if (r == 1 && sl == 1 && dl == 1)
    return cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * es, cudaMemcpyDeviceToDevice, stream);
  // Transposing copy: the source is contiguous along another dim than the destination's last dim.
  if (sl != 1 && dl == 1 && n >= 16) {
    for (int j = r - 2; j >= 0; --j) {
      if (ms[j] == 1 && msh[j] >= 16) return LaunchTiledBySize(es, src, dst, msh, ms, md, j, stream);
    }
  }
  // Rows contiguous in both views: copy them in the widest vector unit every offset is aligned to.
  if (sl == 1 && dl == 1) {
    int unit = 16;
    for (; unit > es; unit /= 2) {
      bool ok = (n * es) % unit == 0 && AlignedTo(src, unit) && AlignedTo(dst, unit);
      for (int i = 0; ok && i + 1 < r; ++i) ok = (ms[i] * es) % unit == 0 && (md[i] * es) % unit == 0;
      if (ok) break;
    }
    if (unit > es) {
      msh[r - 1] = n * es / unit;
      for (int i = 0; i + 1 < r; ++i) {
        ms[i] = ms[i] * es / unit;
        md[i] = md[i] * es / unit;
      }
    }
    return LaunchGeneralBySize(unit, src, dst, msh, ms, md, stream);
  }
  return LaunchGeneralBySize(es, src, dst, msh, ms, md, stream);
}

cudaError_t LaunchTileCopy(const void* src, void* dst, int rank, const int64_t* in_shape, const int64_t* out_shape,
                           int elem_size, cudaStream_t stream) {
  if (rank > kMaxDims) return cudaErrorNotSupported;
  TileParams p{};
  p.rank = rank;
  p.total = 1;
  for (int d = 0; d < rank; ++d) {
    p.in_shape[d] = in_shape[d];
    p.out_shape[d] = out_shape[d];
    p.total *= out_shape[d];
  }
  if (p.total == 0) return cudaSuccess;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    p.in_strides[d] = stride;
    stride *= in_shape[d];
  }
  const unsigned grid = GridFor(p.total, kBlock);
  switch (elem_size) {
    case 1: TileKernel<uint8_t><<<grid, kBlock, 0, stream>>>(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), p); break;
    case 2: TileKernel<uint16_t><<<grid, kBlock, 0, stream>>>(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), p); break;
    case 4: TileKernel<uint32_t><<<grid, kBlock, 0, stream>>>(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), p); break;
    case 8: TileKernel<uint64_t><<<grid, kBlock, 0, stream>>>(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), p); break;
    default: return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda
