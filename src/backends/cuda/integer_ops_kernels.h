// Launchers of the ONNX integer matmuls and convolutions (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv)
// and of Det (integer_ops.cu), with the CPU reference's arithmetic (backends/cpu/linalg_integer.cpp,
// conv_integer.cpp, tensor_more_ops.cpp). Plain C++ (no IR); dtypes are DTypeCode ints. Every launcher only
// enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// A zero point or scale as the kernels read it on the device: `count` 0 (omitted: zero point 0), 1 (per tensor) or
// one value per row / column / output channel.
struct IntParam {
  const void* data = nullptr;
  int dtype = 0;  // zero points int8/uint8; scales float32, float16 or bfloat16
  int64_t count = 0;
};

constexpr int kIntMatMulMaxBatchDims = 8;

// Y[b] = (A[b] - a_zero_point) x (B[b] - b_zero_point) for each output batch b (numpy broadcasting of the batch dims:
// a_stride/b_stride are the elements to step per batch dim, 0 where that operand is broadcast). A [m, k] and B
// [k, n] row-major int8/uint8; a's zero point per row (m values) or per tensor, b's per column (n) or per tensor.
// The sums are exact (int64); MatMulInteger (requant false) stores their low 32 bits as int32. QLinearMatMul
// (requant) stores round_half_even(float(sum) * (a_scale[row] * b_scale[col] / y_scale)) + y_zero_point in float32,
// saturated to y's 8-bit type (NaN: 0).
struct IntMatMulArgs {
  const void* a = nullptr;
  int a_dtype = 0;
  const void* b = nullptr;
  int b_dtype = 0;
  int64_t m = 0, n = 0, k = 0, batches = 1;
  int batch_rank = 0;
  int64_t batch[kIntMatMulMaxBatchDims] = {};
  int64_t a_stride[kIntMatMulMaxBatchDims] = {}, b_stride[kIntMatMulMaxBatchDims] = {};
  IntParam a_zp, b_zp;
  bool requant = false;
  IntParam a_scale, b_scale, y_scale, y_zp;  // requant only; y_scale and y_zp per tensor
  void* y = nullptr;
  int y_dtype = 0;  // int32, or int8/uint8 (requant)
};
cudaError_t LaunchIntMatMul(const IntMatMulArgs& a, cudaStream_t stream);

// The integer convolutions over NC(D)HW int8/uint8 x and w [M, C/groups, kernel...], 1 to 3 spatial dims (right-
// aligned in the 3 slots of the geometry; the leading unused slots are 1), with the sums (x - x_zero_point) * (w -
// w_zero_point) exact (taps in the padding add 0). ConvInteger (requant false) stores the low 32 bits as int32.
// QLinearConv (requant) adds the int32 bias, keeps the low 32 bits, and stores round_half_even(double(sum) *
// double(x_scale * w_scale[oc] / y_scale, in float32) + y_zero_point), saturated to y's 8-bit type (NaN: the zero
// point).
struct IntConvArgs {
  const void* x = nullptr;
  int x_dtype = 0;
  const void* w = nullptr;
  int w_dtype = 0;
  int64_t batch = 0, channels = 0, out_channels = 0, groups = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1},
          pad[3] = {0, 0, 0};  // pad: the begin pads
  IntParam x_zp, w_zp;         // x per tensor; w per tensor or per output channel
  bool requant = false;
  IntParam x_scale, w_scale, y_scale, y_zp;  // float32 scales; w_scale per tensor or per output channel
  const int32_t* bias = nullptr;             // requant: out_channels values, or null
  void* y = nullptr;
  int y_dtype = 0;
};
cudaError_t LaunchIntConv(const IntConvArgs& a, cudaStream_t stream);

// Det of `count` row-major m x m matrices: LU with partial pivoting in double (the first row of largest magnitude),
// as the CPU reference, every step rounded as the host rounds it (no fused multiply-add). float32, float16,
// bfloat16, float64. The scratch: DetWorkspaceBytes(count, m) bytes of device memory (0 for small matrices, which
// live in shared memory).
bool DetSupports(int dtype);
size_t DetWorkspaceBytes(int64_t count, int64_t m);
cudaError_t LaunchDet(int dtype, const void* x, void* y, int64_t count, int64_t m, void* workspace,
                      cudaStream_t stream);

}  // namespace kiln::cuda
