// Launcher of BatchNormalization in training mode (norm_training.cu). Plain C++ (no IR); dtypes are DTypeCode ints.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// x is [N, C, inner...] of float32, float16, bfloat16 or float64; the parameters and statistics are C values of any
// of those types. Per channel c, over its N * inner values: mean and biased variance (two passes, summed in double
// as the CPU reference does), then y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a (a and b
// rounded to float32 for the 32- and 16-bit types, double for float64), and where given
// running_mean = input_mean * momentum + mean * (1 - momentum), running_var likewise with the biased variance.
struct BatchNormTrainingArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int dtype = 0;
  const void* scale = nullptr;
  int scale_dtype = 0;
  const void* bias = nullptr;
  int bias_dtype = 0;
  const void* input_mean = nullptr;
  int input_mean_dtype = 0;
  const void* input_var = nullptr;
  int input_var_dtype = 0;
  void* running_mean = nullptr;  // optional
  int running_mean_dtype = 0;
  void* running_var = nullptr;   // optional
  int running_var_dtype = 0;
  int64_t N = 0, C = 0, inner = 0;
  float eps = 1e-5f;
  float momentum = 0.9f;
};

// Whether the launcher takes these dtypes (data and the parameter/statistics types).
bool BatchNormTrainingSupports(int data_dtype, int param_dtype);
// Scratch bytes LaunchBatchNormTraining needs for this geometry.
size_t BatchNormTrainingWorkspaceBytes(int64_t N, int64_t C, int64_t inner);
// Enqueues the statistics, the running statistics and y on `stream`. With no values per channel (N * inner == 0) the
// statistics are NaN (0 / 0), as the ONNX reference's mean of nothing.
cudaError_t LaunchBatchNormTraining(const BatchNormTrainingArgs& a, void* workspace, size_t workspace_bytes,
                                    cudaStream_t stream);

}  // namespace kiln::cuda
