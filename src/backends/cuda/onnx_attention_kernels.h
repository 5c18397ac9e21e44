// Launchers of ONNX's Attention (opsets 23-25) on the GPU (onnx_attention.cu), with the CPU reference's semantics
// (backends/cpu/onnx_attention.cpp). Plain C++ (no IR); dtypes are DTypeCode ints. Every launcher only enqueues work.
//
// One thread block per query row (batch b, query head h, position i): the scores of the row's T keys (kept in shared
// memory, or in a workspace slot per block when T is large), the bias (mask, is_causal, windows, nonpad_kv_seqlen),
// the softmax, then Y's row. Values are rounded to Q's type (and to softmax_precision) wherever the CPU reference
// rounds them, and sums run in float, or double where Q, V or softmax_precision is double.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

constexpr int kOnnxAttnMaxHead = 2048;  // Q/K head size the kernel keeps in shared memory

struct OnnxAttentionParams {
  const void* q = nullptr;  // Q's type qk_dtype; (b, h, i) row at b * q_sb + h * q_sh + i * q_ss, features contiguous
  const void* k = nullptr;  // qk_dtype; (b, kv head, key j) row at b * k_sb + h * k_sh + j * k_ss (j < total)
  const void* v = nullptr;  // v_dtype; likewise with v_*
  void* y = nullptr;        // qk_dtype; (b, h, i) row at b * y_sb + h * y_sh + i * y_ss
  void* qk = nullptr;       // qk_matmul_output [B, Hq, Sq, T] in qk_dtype; nullptr: not wanted
  const void* bias = nullptr;  // the attn_mask as an additive bias in the compute type (float, or double when wide);
                               // element (b, h, i, j) at the dot of bias_stride with them, for j < bias_len
  const int64_t* nonpad = nullptr;  // nonpad_kv_seqlen [B] (device); nullptr: none
  int qk_dtype = 0, v_dtype = 0, softmax_dtype = 0;
  int wide = 0;  // compute in double
  int64_t q_sb = 0, q_sh = 0, q_ss = 0, k_sb = 0, k_sh = 0, k_ss = 0, v_sb = 0, v_sh = 0, v_ss = 0;
  int64_t y_sb = 0, y_sh = 0, y_ss = 0;
  int64_t bias_stride[4] = {}, bias_len = 0;
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, total = 0, past = 0;
  int head = 0, v_head = 0;
  int causal = 0, qk_mode = 0;
  int64_t left = -1, right = -1;  // window sizes (-1: unbounded)
  float softcap = 0.f;
  float q_factor = 1.f;  // Q is scaled by this (rounded to Q's type): sqrt(scale), or scale when it is negative
  int scale_k = 1;       // K is scaled by the same factor (scale >= 0)
};

// Workspace bytes LaunchOnnxAttention needs for the scores (0 when a row's scores fit in shared memory).
size_t OnnxAttentionScoresBytes(const OnnxAttentionParams& p);
cudaError_t LaunchOnnxAttention(const OnnxAttentionParams& p, void* scores_ws, cudaStream_t stream);

// attn_mask (any numeric type or bool, n elements) as an additive bias of out_dtype (float32 or float64 for the row
// kernel, Q's type for kiln's fused kernels): bool true -> 0, false -> -inf; numbers rounded to qk_dtype's precision,
// as the CPU reference takes them.
cudaError_t LaunchOnnxAttentionMaskBias(int mask_dtype, const void* mask, int64_t n, int qk_dtype, int out_dtype,
                                        void* bias, cudaStream_t stream);

// The keys each query may attend, for kiln's fused kernels: keep [batches, q_len, total] (batches: 1, or B with
// nonpad), 1 unless is_causal and j > pos, j outside the window [pos - left, pos + right] (-1: unbounded), j at or
// past nonpad[b] (when given) or j >= key_limit; pos = i + (nonpad ? nonpad[b] - q_len : past).
cudaError_t LaunchOnnxAttentionKeep(uint8_t* keep, int64_t batches, int64_t q_len, int64_t total, int64_t past,
                                    const int64_t* nonpad, int causal, int64_t left, int64_t right, int64_t key_limit,
                                    cudaStream_t stream);

// present [B, H, past + len, size] = past [B, H, past, size] (nullptr when past == 0) followed by x's rows, x's
// (b, h, s) row at b * x_sb + h * x_sh + s * x_ss; elements of elem_bytes bytes, moved as they are.
cudaError_t LaunchKvConcat(int elem_bytes, const void* past, const void* x, int64_t x_sb, int64_t x_sh, int64_t x_ss,
                           int64_t batch, int64_t heads, int64_t past_len, int64_t len, int64_t size, void* present,
                           cudaStream_t stream);

}  // namespace kiln::cuda
