// Device kernels of the quantized layers (ops/quantized_ops.h has their arithmetic; the CPU reference is
// backends/cpu/quantized.cpp): one tiled int8 GEMM with exact int32 sums (float8: float32 sums) and the float
// epilogue fused, reading its
// second operand either as a matrix (QMatMul) or as the implicit im2col of a convolution's input (QConv, 1 to 3
// spatial dims, groups, strides, dilations, pads). Launchers only; no IR here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/matmul_kernels.h"

namespace kiln::cuda {

// For each batch item b (QConv: image x group) the kernel computes
//   acc[m][o] = sum_k W[m][k] * (X(o, k) - x_zero_point)      (X(o, k) = 0 - zero point... i.e. 0 in padding)
// and writes y = epilogue(acc) at the output position of (b, m, o).
//   QMatMul: W is the weight transposed, [N, K]; X(o, k) = x[o * K + k]; o runs over the rows; y[o * N + m].
//   QConv:   W is [M, K] with K = C/groups * kernel size; X is the input window of output position o (NC(D)HW);
//            y is NC(D)HW, channel = group * M/groups + m. With `nhwc` (2-D, kiln_layout = "NHWC") X, y and the
//            residual are channels-last instead.
struct QGemmArgs {
  bool conv = false;
  bool nhwc = false;
  const int8_t* w = nullptr;       // int8, or float8e4m3fn bytes (fp8)
  const void* x = nullptr;
  bool x_unsigned = false;
  bool fp8 = false;                 // x and w float8e4m3fn (QMatMul only): sums in float32, zero point 0
  int x_zero_point = 0;
  int64_t m = 0, o = 0, k = 0;  // per batch item (conv: m = output channels per group)
  // conv geometry (spatial dims padded to 3 with size-1 dims)
  int64_t batch = 1, groups = 1, channels = 0, out_channels = 0;
  int in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1},
      pad[3] = {0, 0, 0};
  // epilogue
  float x_scale = 0;
  const float* w_scales = nullptr;  // device: one, or one per output channel
  bool per_channel = false;
  const float* bias = nullptr;      // device, per output channel; may be null
  const float* residual = nullptr;  // device, the output's shape; may be null
  const int8_t* residual_i8 = nullptr;  // or an int8 residual, read as r * r_scale
  const uint16_t* residual_f16 = nullptr;  // or a float16 residual, read exactly
  float r_scale = 0;
  GemmPostOp act;
  int y_dtype = 1;                  // kF32, kF16, kI8, kU8 or kF8E4M3 (saturated)
  float y_scale = 1;
  int y_zero_point = 0;
  void* y = nullptr;
};

cudaError_t LaunchQGemm(const QGemmArgs& a, cudaStream_t stream);

// QMatMul's epilogue over int32 sums another kernel computed (cuBLASLt's int8 GEMM of x and W, row-major [o, m]):
// acc[o][m] - x_zero_point * w_colsum[m] (the zero point's share: the GEMM summed x_q, not x_q - zero point), then
// the same epilogue as LaunchQGemm. w_colsum may be null when x_zero_point is 0.
cudaError_t LaunchQMatMulEpilogue(const QGemmArgs& a, const int32_t* acc, const int32_t* w_colsum,
                                  cudaStream_t stream);

}  // namespace kiln::cuda
