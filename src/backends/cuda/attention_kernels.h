// Launchers of the fused attention kernels (kiln.Attention, see shape/fused_ops.h and cpu/fused_attention.cpp):
//   Y[b, i, :] = sum_j softmax_j(scale * Q[b,i,:] . K[b,j,:]  (+ mask[b,i,j])  (keep[b,i,j] ? . : fill)) V[b,j,:]
// Flash-attention style: the score matrix never reaches global memory; running max and sum (online softmax) and
// the output accumulators are float32. Two kernels:
//   simt: every floating storage type, head sizes d, dv <= 256, K or K^T, any sequence lengths.
//   mma:  float16/bfloat16 tensor cores (mma.sync m16n8k16), d == dv in {32, 64, 80, 96, 128}.
// Plain C++ (no IR): the host side fills AttentionParams.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

constexpr int kAttnMaxBatchDims = 6;  // ranks up to 8: up to 6 leading (batch) dims
constexpr int kAttnMaxHeadSize = 256;

struct AttentionParams {
  // Q/K/V and the output are read and written through strides (the head split [B,S,H,D] -> [B,H,S,D] and the
  // merge back are absorbed this way); the last (head) dim of Q, V and the output is contiguous.
  const void* q = nullptr;        // [batch..., sq, d]: element (i, t) at i * q_row_stride + t
  const void* k = nullptr;        // [batch..., sk, d]: element (j, t) at j * k_row_stride + t * k_dim_stride
  const void* v = nullptr;        // [batch..., sk, dv]: element (j, t) at j * v_row_stride + t
  const void* mask = nullptr;     // additive, Q's storage type; nullptr: none
  const uint8_t* keep = nullptr;  // bool; nullptr: none
  void* out = nullptr;            // [batch..., sq, dv]: element (i, t) at i * out_row_stride + t

  // The broadcast batch shape (outermost first) and each operand's element stride per batch dim (0: broadcast).
  int nbd = 0;
  int64_t batch_dims[kAttnMaxBatchDims] = {};
  int64_t q_bstride[kAttnMaxBatchDims] = {}, k_bstride[kAttnMaxBatchDims] = {}, v_bstride[kAttnMaxBatchDims] = {};
  int64_t mask_bstride[kAttnMaxBatchDims] = {}, keep_bstride[kAttnMaxBatchDims] = {};
  int64_t out_bstride[kAttnMaxBatchDims] = {};
  int64_t batch = 0;  // product of batch_dims

  int64_t sq = 0, sk = 0;
  int d = 0, dv = 0;
  int64_t q_row_stride = 0, v_row_stride = 0, out_row_stride = 0;
  int64_t k_row_stride = 0, k_dim_stride = 1;  // K element (key j, dim t) at j * k_row_stride + t * k_dim_stride
  int64_t mask_row = 0, mask_col = 0;          // mask element (i, j) at i * mask_row + j * mask_col
  int64_t keep_row = 0, keep_col = 0;

  float scale = 1.f;
  float fill = 0.f;       // score where the keep mask says "drop"
  int keep_if_true = 1;   // keep where keep != 0 (else where keep == 0)
  int where_first = 0;    // apply the keep mask before the additive mask
  int nan_to_zero = 0;    // fully masked rows give 0 instead of NaN

  // A quantized output (kiln_q_*, ops/quantized_ops.h): `out` holds one byte per element, each value rounded to the
  // storage type as it would be written, times q_inv_scale (the float reciprocal of the scale, as the CPU takes it),
  // rounded half to even plus the zero point and saturated (int8, uint8), or converted saturating (float8e4m3fn).
  // -1: none; 0 int8, 1 uint8, 2 float8e4m3fn.
  int q_kind = -1;
  float q_inv_scale = 1.f;
  int q_zero_point = 0;
};

// Raises the dynamic shared memory limit of the SIMT kernels (needed for head sizes above 128). Call once per
// device before the first launch (outside stream capture); cheap.
cudaError_t PrepareAttentionSimt();

// dtype: DTypeCode of Q/K/V/mask/out (F32, F16, BF16). Requires d, dv <= kAttnMaxHeadSize.
cudaError_t LaunchAttentionSimt(const AttentionParams& p, int dtype, cudaStream_t stream);

// Whether the tensor-core kernel handles this configuration (F16/BF16, d == dv in {32, 64, 80, 96, 128}).
bool AttentionMmaSupports(int dtype, int d, int dv);
// warps: warps per thread block (16 query rows each): 1, 2, 4 or 8; 0 picks by the grid size and the SM count.
cudaError_t LaunchAttentionMma(const AttentionParams& p, int dtype, cudaStream_t stream, int warps = 0);
// Raises the dynamic shared memory limit of the tensor-core kernels (they double-buffer K/V tiles, above 48 KiB
// for large heads). Called once per device before the first launch; the launcher also does it lazily.
cudaError_t PrepareAttentionMma();

}  // namespace kiln::cuda
