// Launchers of the LLM building blocks of opsets 23-27 besides Attention (llm_ops.cu), with the CPU references'
// semantics: RotaryEmbedding (cpu/rotary_embedding.cpp), TensorScatter (cpu/bitcast_scatter.cpp), LinearAttention
// (cpu/linear_attention.cpp) and CausalConvWithState (cpu/causal_conv.cpp). Plain C++ (no IR); dtypes are DTypeCode
// ints. Every launcher only enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// RotaryEmbedding of X (float32/16, bfloat16, float64), one thread per element: the first 2 * half features of each
// head rotated in pairs (k, k + half), or (2k, 2k + 1) when interleaved, by the cache row of (b, t); the rest copied.
// Computed in float (double for double), each product and sum rounded on its own as on the CPU.
struct RotaryArgs {
  const void* x = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  const int64_t* pos = nullptr;  // position_ids (device); nullptr: the caches are [B, S, half]
  void* y = nullptr;
  int dtype = 0;
  int three = 0;  // X is [B, S, H * head] (else [B, H, S, head])
  int interleaved = 0;
  int64_t batch = 0, heads = 0, seq = 0, head = 0, half = 0;
  // With pos: (b, t)'s position id at b * row_b + t * row_t, clamped into [0, cache_rows). Without: the cache row's
  // element offset is b * row_b + t * row_t.
  int64_t row_b = 0, row_t = 0, cache_rows = 0;
};
cudaError_t LaunchRotaryEmbedding(const RotaryArgs& a, cudaStream_t stream);

// TensorScatter's writes (the output already holds past_cache): update [prefix, len, inner] row (p, s) goes to the
// output's row (p, at) of [prefix, max_len, inner], at = write index of batch p / per_batch (0 without indices) + s,
// wrapped into [0, max_len) when circular, else skipped when outside it. Elements of elem_bytes bytes.
cudaError_t LaunchTensorScatter(int elem_bytes, const void* update, const int64_t* indices, int64_t prefix,
                                int64_t per_batch, int64_t max_len, int64_t len, int64_t inner, int circular,
                                void* out, cudaStream_t stream);

// LinearAttention's recurrence: one warp per (batch, kv head, value feature j); the state's column j (d_k values,
// float32) lives in the warp's registers, its sums in double as on the CPU.
constexpr int kLinearAttnMaxDk = 256;
struct LinearAttentionArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *past = nullptr, *decay = nullptr, *beta = nullptr;
  void* out = nullptr;      // [B, T, Hq * dv], the inputs' type
  void* present = nullptr;  // [B, Hkv, dk, dv], state_dtype
  int dtype = 0, state_dtype = 0;  // float32/16, bfloat16
  int64_t batch = 0, len = 0, q_heads = 0, kv_heads = 0, dk = 0, dv = 0;
  int64_t decay_last = 0, beta_last = 0;  // decay's last dim (Hkv: one per head, else Hkv * dk); beta's (Hkv or 1)
  int gated = 0, delta = 0;
  double scale = 1.0;
};
cudaError_t LaunchLinearAttention(const LinearAttentionArgs& a, cudaStream_t stream);

// CausalConvWithState of x [B, C, L] (float32/16, bfloat16) with w [C, 1, k], bias [C] (nullptr: none) and
// past [B, C, k - 1] (nullptr: zeros): y [B, C, L] and present [B, C, k - 1]; sums in double, silu in float.
cudaError_t LaunchCausalConvWithState(int dtype, const void* x, const void* w, const void* bias, const void* past,
                                      void* y, void* present, int64_t batch, int64_t channels, int64_t len,
                                      int64_t k, int silu, cudaStream_t stream);

}  // namespace kiln::cuda
