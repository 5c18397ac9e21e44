// Launcher of Resize (resize.cu). Plain C++ (no IR): the host code turns the node and the (roi, scales, sizes)
// operands into ResizeParams (shape/resize_plan.h gives the per-axis sizes, scales and roi).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

constexpr int kResizeMaxRank = 8;

enum ResizeMode : int { kResizeNearest = 0, kResizeLinear, kResizeCubic };
enum ResizeCoordMode : int {
  kCoordHalfPixel = 0,
  kCoordPytorchHalfPixel,
  kCoordAlignCorners,
  kCoordAsymmetric,
  kCoordTfCropAndResize,
  kCoordHalfPixelSymmetric,
};
enum ResizeNearestMode : int { kRoundPreferFloor = 0, kRoundPreferCeil, kNearestFloor, kNearestCeil };

struct ResizeParams {
  int rank = 0;
  int mode = kResizeNearest;
  int coord_mode = kCoordHalfPixel;
  int nearest_mode = kRoundPreferFloor;
  bool exclude_outside = false;
  bool antialias = false;  // linear/cubic only
  double cubic_a = -0.75;
  double extrapolation = 0.0;       // tf_crop_and_resize outside the input (linear/cubic)
  uint64_t extrapolation_bits = 0;  // the same value as the element's bits (nearest, any dtype)
  int64_t in_shape[kResizeMaxRank] = {};
  int64_t out_shape[kResizeMaxRank] = {};
  double scale[kResizeMaxRank] = {};
  double roi_start[kResizeMaxRank] = {};
  double roi_end[kResizeMaxRank] = {};
  // Axes that are interpolated (nearest: every axis, as the reference maps every axis; linear/cubic: the axes that
  // are not the identity).
  bool resized[kResizeMaxRank] = {};
};

// True where linear/cubic interpolation supports the dtype (float32, float16, bfloat16, float64).
bool ResizeInterpolates(int dtype);

// y = Resize(x). Nearest moves raw elements of elem_bytes (1, 2, 4, 8); integer-factor nearest upsampling of the
// two innermost axes (YOLO's x2) takes a fast path. Linear/cubic compute in float32 (float64 for float64 data).
cudaError_t LaunchResize(const void* x, void* y, int dtype, int elem_bytes, const ResizeParams& p,
                         cudaStream_t stream);

}  // namespace kiln::cuda
