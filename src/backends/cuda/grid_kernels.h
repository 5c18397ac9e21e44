// Launchers of GridSample and AffineGrid (grid_sample.cu). Plain C++ (no IR); dtypes are DTypeCode ints (float32,
// float16, bfloat16, float64). Every launcher only enqueues work on `stream` and launches nothing for 0 elements.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda {

// GridSample as the CPU reference computes it (backends/cpu/grid_sample.cpp), in double: output point p of batch
// entry b takes its coordinates from grid[b, p, :] (x, y, z order: component r-1-d for spatial dim d), maps
// [-1, 1] onto each dim (align_corners: the corner pixels' centres, else the pixels' outer edges), brings
// coordinates outside into range by the padding mode, and interpolates separably (nearest: ties to even; linear:
// two taps; cubic: four, Keys a = -0.75), a tap outside reading 0 (zeros), the edge (border) or the reflected
// pixel (reflection). One thread per output point, looping over the channels.
constexpr int kGridSampleMaxDims = 3;
enum GridSampleMode : int { kGridNearest = 0, kGridLinear, kGridCubic };
enum GridSamplePad : int { kGridPadZeros = 0, kGridPadBorder, kGridPadReflection };
struct GridSampleArgs {
  const void* x = nullptr;     // [n, c, in...]
  const void* grid = nullptr;  // [n, out..., rank]
  void* y = nullptr;           // [n, c, out...]
  int x_dtype = 0, grid_dtype = 0;
  int rank = 0;  // spatial dims, 1..kGridSampleMaxDims
  int mode = kGridLinear, pad = kGridPadZeros;
  bool align_corners = false;
  int64_t n = 0, c = 0;
  int64_t in[kGridSampleMaxDims] = {}, out[kGridSampleMaxDims] = {};
};
// True where GridSample supports the dtype (of X or of the grid).
bool GridSampleSupports(int dtype);
cudaError_t LaunchGridSample(const GridSampleArgs& a, cudaStream_t stream);

// AffineGrid: y [n, spatial..., rank] (rank 2 or 3; spatial = dims[0..rank)) of theta's dtype, point (..., h, w)
// of entry b being theta[b] (rank x rank+1) times the base vector (x from w, y from h[, z from d], 1), each base
// coordinate the pixel's centre (or with align_corners the corner pixels) mapped to [-1, 1]; in double.
cudaError_t LaunchAffineGrid(int dtype, const void* theta, void* y, int64_t n, int rank, const int64_t* dims,
                             bool align_corners, cudaStream_t stream);

}  // namespace kiln::cuda
