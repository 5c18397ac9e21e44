// Device kernels of kiln.WeightOnlyMatMul (ops/quantized_ops.h has its arithmetic; the CPU reference is
// backends/cpu/quantized.cpp): a GEMV-shaped kernel that reads the packed 4-bit weight once per block of rows (the
// decode shapes: a few rows of X), and a dequantizing copy to X's type for cuBLASLt (many rows). Launchers only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

struct WoqArgs {
  const void* x = nullptr;  // [rows, k], dtype x_dtype (kF32, kF16, kBF16)
  int x_dtype = 0;
  const uint8_t* w = nullptr;  // [n, ldw bytes]: row j holds column j of W, two values per byte, zero-padded
  int64_t ldw = 0;             // bytes per row: a multiple of 16, at least ceil(k / 2)
  const float* scales = nullptr;  // [n, groups], as float32
  int scale_dtype = 0;            // the scales' own type: the product is rounded to it (kF32: not rounded)
  const int8_t* zeros = nullptr;  // [n, groups] or null
  bool w_signed = true;           // int4 (sign-extended) or uint4
  int64_t rows = 0, n = 0, k = 0, group = 0, groups = 0;
  int group_shift = -1;  // log2(group / 32) where the group size is 32 times a power of two, else -1
  void* y = nullptr;  // [rows, n], dtype x_dtype
};

// y = x . dequantize(w), summed in float32: one warp per two columns, lanes along K, up to 4 rows per block.
cudaError_t LaunchWoqGemv(const WoqArgs& a, cudaStream_t stream);
// wd [n, k] of X's type = dequantize(w), rounded as the GEMV rounds each weight (for a GEMM that reads it as B^T).
cudaError_t LaunchWoqDequantize(const WoqArgs& a, void* wd, cudaStream_t stream);

}  // namespace kiln::cuda
