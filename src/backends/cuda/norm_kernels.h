// Launchers of the normalization kernels (norm.cu): LayerNormalization, Group/InstanceNormalization and
// BatchNormalization (inference; training mode: norm_training_kernels.h). Statistics and affine math are float32
// whatever the storage type; dtypes are DTypeCode ints (F32, F16, BF16 for the data; parameter tables may also be
// F64). No IR types here.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda {

// y = (x - mean(row)) * rsqrt(var(row) + eps) * gamma[j] + beta[j] over `rows` contiguous rows of `cols`.
struct LayerNormArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int dtype = 0;                 // x and y
  const float* gamma = nullptr;  // cols floats
  const float* beta = nullptr;   // cols floats, or nullptr (no bias)
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  void* mean = nullptr;     // optional: rows values of stash_dtype
  void* inv_std = nullptr;  // optional: rows values of stash_dtype
  int stash_dtype = 1;
  // Optional: y as written, quantized per tensor (LayerNormalization's output 3, ops/quantized_ops.h: kQScale),
  // int8 or uint8 (q_unsigned): saturate(round_half_even(float(y) / q_scale) + q_zero_point), NaN giving 0.
  void* yq = nullptr;
  float q_scale = 1.f;
  int q_zero_point = 0;
  bool q_unsigned = false;
  bool rms = false;    // RMSNormalization: the mean taken as 0 (the variance is then the mean of squares)
  bool q_fp8 = false;  // float8e4m3fn instead: float(y) / q_scale rounded to nearest even, saturated (zero point 0)
};
cudaError_t LaunchLayerNorm(const LayerNormArgs& a, cudaStream_t stream);

// dst[j] = float(src[offset(j)]) for j < n, where j is a row-major index over dims[0..nd) and
// offset(j) = sum_d index_d(j) * src_strides[d] (0 strides broadcast). nd <= 8.
cudaError_t LaunchExpandToF32(const void* src, int src_dtype, const int64_t* dims, const int64_t* src_strides, int nd,
                              int64_t n, float* dst, cudaStream_t stream);

// GroupNormalization: x is [N, C, inner...]; channels split into G groups of C/G; statistics per (n, group).
// scale/bias have C elements (per channel) or G (per_group). InstanceNormalization is G = C.
struct GroupNormArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int dtype = 0;
  const void* scale = nullptr;
  int scale_dtype = 0;
  const void* bias = nullptr;
  int bias_dtype = 0;
  bool per_group = false;
  int64_t N = 0, C = 0, G = 1, inner = 0;
  float eps = 1e-5f;
};
cudaError_t LaunchGroupNorm(const GroupNormArgs& a, cudaStream_t stream);

// a[p] = scale[p] / sqrt(var[p] + eps); b[p] = bias[p] - mean[p] * a[p] for p < P (inputs of any float dtype).
cudaError_t LaunchBatchNormCoefficients(const void* scale, int scale_dtype, const void* bias, int bias_dtype,
                                        const void* mean, int mean_dtype, const void* var, int var_dtype, float eps,
                                        int64_t P, float* a, float* b, cudaStream_t stream);

// y = x * a[p] + b[p] over x [N, C, inner...]: p = c (per channel) or c * inner + i (per_element, spatial = 0).
struct BatchNormArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int dtype = 0;
  const float* a = nullptr;
  const float* b = nullptr;
  int64_t total = 0, C = 0, inner = 0;
  bool per_element = false;
};
cudaError_t LaunchBatchNormApply(const BatchNormArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
