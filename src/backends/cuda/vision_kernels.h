// Launchers of RoiAlign (roi_align.cu) and DeformConv (deform_conv.cu). Plain C++ (no IR); dtypes are DTypeCode
// ints. Every launcher only enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// RoiAlign of X [n, c, h, w] (float32/16, bfloat16, float64) over rois [num_rois, 4] (x1, y1, x2, y2; any of those
// float types) with batch_indices [num_rois] (int32 or int64) into Y [num_rois, c, out_h, out_w] (X's type), in
// double with the CPU reference's (backends/cpu/roi_align.cpp) rounding of every coordinate. A roi the CPU refuses
// (batch index outside [0, n), a coordinate that is not finite, a sampling grid past 2^16 per axis or 2^28 points)
// gives NaN: the device cannot raise the error without synchronizing.
struct RoiAlignArgs {
  int x_dtype = 0, rois_dtype = 0, index_dtype = 0;
  const void* x = nullptr;
  const void* rois = nullptr;
  const void* batch_indices = nullptr;
  void* y = nullptr;
  int64_t n = 0, c = 0, h = 0, w = 0, num_rois = 0, out_h = 1, out_w = 1, sampling_ratio = 0;
  double spatial_scale = 1.0;
  bool half_pixel = true;  // else output_half_pixel: no -0.5 shift, rois at least 1 x 1
  bool max_mode = false;
};
bool RoiAlignSupports(int dtype);  // float32, float16, bfloat16, float64
cudaError_t LaunchRoiAlign(const RoiAlignArgs& a, cudaStream_t stream);

// DeformConv over 1 to kDeformConvMaxDims spatial dims (backends/cpu/deform_conv.cpp): per image, a gather of the
// multilinearly sampled, masked input values [c * kernel points, output points] into the workspace (sampled in
// double, kept in float32 for the 32- and 16-bit types, double for float64), then per group a GEMM with the weights
// in that type, plus the bias. X, W, offset, B and mask share one type.
constexpr int kDeformConvMaxDims = 6;
struct DeformConvArgs {
  int dtype = 0;
  const void* x = nullptr;
  const void* w = nullptr;
  const void* offset = nullptr;
  const void* bias = nullptr;  // nullptr: none
  const void* mask = nullptr;  // nullptr: ones
  void* y = nullptr;
  int nsp = 0;
  int64_t batch = 0, channels = 0, out_channels = 0, group = 1, offset_group = 1;
  int64_t in_sp[kDeformConvMaxDims] = {}, out_sp[kDeformConvMaxDims] = {}, kernel[kDeformConvMaxDims] = {};
  int64_t strides[kDeformConvMaxDims] = {}, pads[kDeformConvMaxDims] = {}, dilations[kDeformConvMaxDims] = {};
};
size_t DeformConvWorkspaceBytes(const DeformConvArgs& a);
cudaError_t LaunchDeformConv(const DeformConvArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace kiln::cuda
