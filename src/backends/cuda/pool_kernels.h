// Launchers of the pooling kernels (pool.cu): windowed Max/Average/Lp pooling over 1..6 spatial dims (NCHW...),
// with the optional int64 Indices of MaxPool, and the Global* pools. dtypes are DTypeCode ints: F32, F16, BF16
// for every kind, I8 and U8 for max. Sums are float32. No IR types here.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda {

constexpr int kPoolMaxSpatialDims = 6;

enum PoolKindCode : int { kPoolMax = 0, kPoolAvg = 1, kPoolLp = 2 };

// Output position o along dim d reads input coordinates o * stride - pad_begin + k * dilation, k < kernel;
// coordinates outside [0, in) are skipped (padding). Sizes are the spatial dims only.
struct PoolWindowArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int64_t* indices = nullptr;  // MaxPool only, optional: flat input index of each maximum (N*C*spatial)
  int dtype = 0;
  int kind = kPoolMax;
  int nsp = 0;  // number of spatial dims, 1..6
  int64_t planes = 0;  // N * C
  int64_t in[kPoolMaxSpatialDims] = {}, out[kPoolMaxSpatialDims] = {}, kernel[kPoolMaxSpatialDims] = {};
  int64_t stride[kPoolMaxSpatialDims] = {}, dilation[kPoolMaxSpatialDims] = {}, pad_begin[kPoolMaxSpatialDims] = {};
  int64_t in_size = 0, out_size = 0, ksize = 0;  // products of in, out, kernel
  bool count_include_pad = false;  // average: divide by ksize instead of the number of taps inside the input
  // AveragePool-22 with count_include_pad: taps past the end pads (a ceil_mode window's overhang) are not counted;
  // pad_end[d] then holds the end pads.
  bool uncount_overhang = false;
  int64_t pad_end[kPoolMaxSpatialDims] = {};
  int p = 2;                       // Lp: the norm order (>= 1)
  bool column_major_indices = false;  // MaxPool storage_order = 1
  int64_t channels_last = 0;  // > 0: X and Y are [N, spatial..., C] with C = channels_last (no indices)
};
cudaError_t LaunchWindowPool(const PoolWindowArgs& a, cudaStream_t stream);

// y[plane] = max / mean / Lp norm of the plane_size contiguous values of each of `planes` planes (0 when empty).
cudaError_t LaunchGlobalPool(const void* x, void* y, int dtype, int kind, int p, int64_t planes, int64_t plane_size,
                             cudaStream_t stream);

}  // namespace kiln::cuda
