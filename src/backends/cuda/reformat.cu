// kiln.Reformat's kernels (reformat_kernels.h): a Cast, Transpose and zero Pad of the last axis in one pass.
#include <vector>

#include "backends/cuda/reformat_kernels.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int64_t kMaxFastChannels = 16;

// One output pixel's kCPad values, stored with one (or a few) vector stores: 8, 16, 32 or 64 bytes.
template <typename TO, int kCPad>
struct alignas(kCPad * sizeof(TO) >= 16 ? 16 : kCPad * sizeof(TO)) Pixel {
  TO v[kCPad];
};

// [N, C, S] -> [N, S, C_pad]: thread p reads its pixel's C values (consecutive threads read consecutive elements of
// each channel plane) and writes C_pad values (zeros past C), as one Pixel where kCPad > 0 (then c_pad == kCPad and
// Y is aligned to the Pixel), else one by one.
template <typename TI, typename TO, int kCPad>
__global__ void ChannelsLastKernel(const TI* __restrict__ x, TO* __restrict__ y, int64_t pixels, int64_t s, int c,
                                   int c_pad) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pixels; p += step) {
    const int64_t n = p / s;
    const TI* src = x + (n * c) * s + (p - n * s);
    if constexpr (kCPad > 0) {
      Pixel<TO, kCPad> px;
#pragma unroll
      for (int k = 0; k < kCPad; ++k) px.v[k] = FromF32<TO>(k < c ? ToF32(src[k * s]) : 0.f);
      reinterpret_cast<Pixel<TO, kCPad>*>(y)[p] = px;
    } else {
      TO* dst = y + p * c_pad;
      for (int k = 0; k < c_pad; ++k) dst[k] = FromF32<TO>(k < c ? ToF32(src[k * s]) : 0.f);
    }
  }
}

// Any permutation: thread o computes output element o's source (dims[rank - 1] is the padded last axis, of which
// the first last_in entries are read).
struct GeneralParams {
  int rank;
  int64_t total, last_in;
  int64_t dims[kMaxDims], src[kMaxDims];
};

template <typename TI, typename TO>
__global__ void GeneralKernel(const TI* __restrict__ x, TO* __restrict__ y, GeneralParams p) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < p.total; o += step) {
    int64_t rem = o, off = 0;
    bool pad = false;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d >= p.rank) continue;
      const int64_t i = rem % p.dims[d];
      rem /= p.dims[d];
      if (d == p.rank - 1) pad = i >= p.last_in;
      off += i * p.src[d];
    }
    y[o] = FromF32<TO>(pad ? 0.f : ToF32(x[off]));
  }
}

template <typename TI, typename TO, int kCPad>
void LaunchChannelsLast(const TI* x, TO* y, int64_t pixels, int64_t s, int c, int c_pad, cudaStream_t stream) {
  ChannelsLastKernel<TI, TO, kCPad><<<GridFor(pixels, kBlock), kBlock, 0, stream>>>(x, y, pixels, s, c, c_pad);
}

}  // namespace

cudaError_t LaunchReformat(int x_dtype, int y_dtype, const void* x, void* y, int rank, const int64_t* x_shape,
                           const int64_t* perm, int64_t y_last, cudaStream_t stream) {
  if (rank < 0) return cudaErrorNotSupported;
  // Y's dims (the last one unpadded) and their strides in X: unit dims dropped (not the last), and a dim merged
  // into the one before it where X holds the two together (never the padded last one).
  std::vector<int64_t> xs(rank, 1);
  for (int d = rank - 2; d >= 0; --d) xs[d] = xs[d + 1] * x_shape[d + 1];
  std::vector<int64_t> dims, src;
  int64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t n = x_shape[perm[i]], s = xs[perm[i]];
    const bool last = i == rank - 1;
    total *= last ? y_last : n;
    if (n == 1 && !last) continue;
    const bool padded = last && y_last != n;
    if (!dims.empty() && !padded && src.back() == s * n) {
      dims.back() *= n;
      src.back() = s;
    } else {
      dims.push_back(n);
      src.push_back(s);
    }
  }
  if (rank == 0) {  // a scalar
    dims = {1};
    src = {0};
  }
  if (total == 0) return cudaSuccess;
  const int r = static_cast<int>(dims.size());
  const int64_t c = dims.back();
  // The last dim as written: Y's padded last axis, or, unpadded, the merged dim it may have joined (Y [7,5,6] read
  // from [5,6,7] by perm [2,0,1] merges its last two dims into one of 30).
  const int64_t last_n = rank > 0 ? x_shape[perm[rank - 1]] : 1;
  y_last = y_last == last_n ? c : y_last;
  // [N, S, C] read from [N, C, S]: S at stride 1, C at stride S (any stride for one channel), N at C * S.
  const bool channels_last = r >= 2 && r <= 3 && c <= kMaxFastChannels && y_last <= kMaxFastChannels &&
                             src[r - 2] == 1 && (c == 1 || src[r - 1] == dims[r - 2]) &&
                             (r == 2 || src[0] == c * dims[1]);
  bool dispatched = false;
  DispatchLowFloat(x_dtype, [&](auto ti) {
    DispatchLowFloat(y_dtype, [&](auto to) {
      using TI = typename decltype(ti)::type;
      using TO = typename decltype(to)::type;
      dispatched = true;
      const TI* px = static_cast<const TI*>(x);
      TO* py = static_cast<TO*>(y);
      if (channels_last) {
        const int64_t s = dims[r - 2], pixels = (r == 3 ? dims[0] : 1) * s;
        const int ci = static_cast<int>(c), cp = static_cast<int>(y_last);
        const size_t bytes = static_cast<size_t>(cp) * sizeof(TO);
        const bool aligned = AlignedTo(py, bytes >= 16 ? 16 : bytes);
        if (aligned && cp == 4) LaunchChannelsLast<TI, TO, 4>(px, py, pixels, s, ci, cp, stream);
        else if (aligned && cp == 8) LaunchChannelsLast<TI, TO, 8>(px, py, pixels, s, ci, cp, stream);
        else if (aligned && cp == 16) LaunchChannelsLast<TI, TO, 16>(px, py, pixels, s, ci, cp, stream);
        else LaunchChannelsLast<TI, TO, 0>(px, py, pixels, s, ci, cp, stream);
        return;
      }
      if (r > kMaxDims) {
        dispatched = false;
        return;
      }
      GeneralParams p{};
      p.rank = r;
      p.total = total;
      p.last_in = c;
      for (int d = 0; d < r; ++d) {
        p.dims[d] = d == r - 1 ? y_last : dims[d];
        p.src[d] = src[d];
      }
      GeneralKernel<TI, TO><<<GridFor(total, kBlock), kBlock, 0, stream>>>(px, py, p);
    });
  });
  if (!dispatched) return cudaErrorNotSupported;
  return cudaGetLastError();
}

}  // namespace kiln::cuda
