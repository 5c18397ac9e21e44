// Launcher of DynamicQuantizeLinear (dynamic_quantize.cu). Plain C++ (no IR).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// DynamicQuantizeLinear of float32 x (n elements) as the CPU reference computes it, in float32 with IEEE division:
// lo = min(x, 0), hi = max(x, 0) over the non-NaN elements; scale = (hi - lo) / 255; zero point
// zp = round_half_even(clamp(-lo / scale, 0, 255)) (0 when scale is 0); y = clamp(round_half_even(x / scale) + zp,
// 0, 255) as uint8 (zp for NaN, 0 when scale is 0). y_scale (float32) and y_zero_point (uint8) are single device
// elements, or nullptr when not wanted. Three launches: partial min/max per block, the parameters, y.
size_t DynamicQuantizeWorkspaceBytes();
cudaError_t LaunchDynamicQuantizeLinear(const float* x, int64_t n, uint8_t* y, float* y_scale, uint8_t* y_zero_point,
                                        void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace kiln::cuda
