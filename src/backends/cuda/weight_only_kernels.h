// Device kernels of kiln.WeightOnlyMatMul (ops/quantized_ops.h has its arithmetic; the CPU reference is
// backends/cpu/quantized.cpp): GEMV-shaped kernels that read the packed 4-bit weight once per block of rows (the
// decode shapes: a few rows of X) — one on the CUDA cores for every type, one on the tensor cores for 16-bit X whose
// scales have X's type (weight_only_mma.cu) — and a dequantizing copy to X's type for cuBLASLt (many rows).
// Launchers only.
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

// The tensor-core GEMV's weight layout: tiles of 16 output columns x 64 of K, each 32 lanes x 16 bytes. Lane l
// (g = l / 4, t = l % 4) holds columns g and g + 8 at K 16t .. 16t + 15 of the tile, which its mma.m16n8k16 A
// fragments take over the tile's four steps: word s, nibble p is column g (+ 8 if p is odd) at K 16t + 4s (+ 2 if
// p & 2) (+ 1 if p & 4), so a shift and a mask give each fragment register's pair. The lane's B fragments are then X's
// 16 contiguous values from 16t (K is permuted the same way in A and B, which leaves the dot product as it is), and
// its 16 of K lie in one group. int4 values are biased by 8, so every nibble reads as 0..15. Tiles of one column
// block are contiguous along K; columns past n hold 0, K past k the zero point (a weight of 0).
struct WoqMmaArgs {
  const void* x = nullptr;  // [rows, k], float16 or bfloat16 (x_dtype)
  int x_dtype = 0;
  const uint4* w = nullptr;       // [ceil(n / 16)][ktiles][32] (the layout above)
  const uint32_t* sb = nullptr;   // [groups][npad]: (scale, 1024 or 128 + bias + zero point) as a pair of X's type
  int64_t rows = 0, n = 0, k = 0, ktiles = 0, npad = 0;
  int64_t group = 0;    // a multiple of 16
  int group_shift = -1; // log2(group / 16) where that is a power of two, else -1
  void* y = nullptr;    // [rows, n], X's type
};

// Writes the layout above from the row layout of WoqArgs (w, ldw, n, k, w_signed, and zeros with groups where there
// are zero points) into out (ceil(n / 16) * ktiles * 32 uint4s).
cudaError_t LaunchWoqMmaLayout(const WoqArgs& a, int64_t ktiles, uint4* out, cudaStream_t stream);
// y = x . dequantize(w) on the tensor cores: each weight made in X's type by one multiply (the reference's rounding),
// products summed in float32 by mma.sync m16n8k16; 8 warps per 16 columns split K, rows of X in blocks of 8.
cudaError_t LaunchWoqMma(const WoqMmaArgs& a, cudaStream_t stream);
// wd [n, k] of X's type = the weights LaunchWoqMma makes (for cuBLASLt past the GEMV's rows).
cudaError_t LaunchWoqMmaDequantize(const WoqMmaArgs& a, void* wd, cudaStream_t stream);

}  // namespace kiln::cuda
