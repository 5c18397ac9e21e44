// Device helpers shared by the attention kernels (attention.cu, attention_mma.cu): batch offsets of the operands
// and the masking of one score, exactly as cpu/fused_attention.cpp applies it.
#pragma once

#include <cmath>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda::attn {

// Element offsets of each operand's matrix for the flattened batch index b.
struct BatchOffsets {
  int64_t q = 0, k = 0, v = 0, mask = 0, keep = 0, out = 0;
};

// I: the index type of the divisions (uint32_t where b is a grid index, below 2^31: cheaper than 64-bit).
template <typename I = int64_t>
__device__ __forceinline__ BatchOffsets OffsetsOf(const AttentionParams& p, I b) {
  BatchOffsets o;
  for (int i = p.nbd - 1; i >= 0; --i) {
    const I dim = static_cast<I>(p.batch_dims[i]);
    const I idx = b % dim;
    b /= dim;
    o.q += idx * p.q_bstride[i];
    o.k += idx * p.k_bstride[i];
    o.v += idx * p.v_bstride[i];
    o.mask += idx * p.mask_bstride[i];
    o.keep += idx * p.keep_bstride[i];
    o.out += idx * p.out_bstride[i];
  }
  return o;
}

// The score of (query row i, key j) after the masks; `s` is scale * q.k. `mask`/`keep` are already offset to the
// batch's matrix (nullptr: absent).
template <typename T>
__device__ __forceinline__ float MaskScore(const AttentionParams& p, const T* mask, const uint8_t* keep, int64_t i,
                                           int64_t j, float s) {
  const bool drop = keep != nullptr && ((keep[i * p.keep_row + j * p.keep_col] != 0) != (p.keep_if_true != 0));
  if (p.where_first) {
    if (drop) s = p.fill;
    if (mask) s += ToF32(mask[i * p.mask_row + j * p.mask_col]);
  } else {
    if (mask) s += ToF32(mask[i * p.mask_row + j * p.mask_col]);
    if (drop) s = p.fill;
  }
  return s;
}

// The finished output of one row element: acc / sum, or what the CPU reference gives for a fully masked row
// (every score -inf: NaN, or 0 with nan_to_zero) and for no keys at all (0).
__device__ __forceinline__ float FinishOutput(const AttentionParams& p, float acc, float row_max, float row_sum) {
  if (p.sk == 0) return 0.f;
  if (row_max == -INFINITY) return p.nan_to_zero ? 0.f : NAN;
  return acc / row_sum;
}

// The max used for exp(s - max): 0 while every score so far is -inf (so exp gives 0, not NaN).
__device__ __forceinline__ float UsableMax(float m) { return m == -INFINITY ? 0.f : m; }

// The byte of a quantized output (AttentionParams::q_kind): v times the reciprocal scale, then as QuantizedBits
// (kernel_util.cuh) but for the division, which made the epilogue cost half the kernel (BERT-base shape: 14.5 ->
// 22.1 us with an IEEE division per element, on an H200).
__device__ __forceinline__ uint32_t QuantizedOutBits(float v, const AttentionParams& p) {
  const float x = v * p.q_inv_scale;
  if (p.q_kind == 2) return static_cast<uint32_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
  const float r = rintf(x) + static_cast<float>(p.q_zero_point);
  const float c = isnan(r) ? 0.f : fminf(p.q_kind == 1 ? 255.f : 127.f, fmaxf(p.q_kind == 1 ? 0.f : -128.f, r));
  return static_cast<uint32_t>(static_cast<int32_t>(c)) & 0xffu;
}

// Output element `idx` (in elements from `base`): y in T, or its quantized byte when p.q_kind >= 0.
template <typename T>
__device__ __forceinline__ void StoreOut(const AttentionParams& p, void* base, int64_t idx, float y) {
  const T t = FromF32<T>(y);
  if (p.q_kind >= 0) static_cast<uint8_t*>(base)[idx] = static_cast<uint8_t>(QuantizedOutBits(ToF32(t), p));
  else static_cast<T*>(base)[idx] = t;
}

}  // namespace kiln::cuda::attn
