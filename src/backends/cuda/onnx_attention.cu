// ONNX Attention kernels (see onnx_attention_kernels.h). One block of kThreads threads per query row:
//   1. Q's row, scaled and rounded to Q's type, into shared memory;
//   2. one warp per key j (lanes over the features): the score, rounded to Q's type, then softcap, the bias
//      (attn_mask, is_causal, windows, nonpad_kv_seqlen), rounded to softmax_precision; qk_matmul_output modes 0-2;
//   3. the block's max and sum, the probabilities rounded as the CPU reference rounds them (mode 3);
//   4. Y's row: warps over keys, lanes over 32 value features at a time, the warps' partial sums added in order.
// A row whose bias is -inf everywhere has probabilities 0 (Y = 0), as on the CPU. Loads take the storage type
// from a (block-uniform) dtype code.
#include <cmath>
#include <type_traits>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/onnx_attention_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr size_t kSmemLimit = 48 * 1024;  // the default dynamic shared memory a block may take
constexpr int64_t kMaxGlobalBlocks = 1024;  // blocks (workspace slots) when the scores live in the workspace

template <typename Acc>
__device__ __forceinline__ Acc LoadAs(const void* p, int dtype, int64_t i) {
  switch (dtype) {
    case kF32: return static_cast<Acc>(static_cast<const float*>(p)[i]);
    case kF16: return static_cast<Acc>(__half2float(static_cast<const __half*>(p)[i]));
    case kBF16: return static_cast<Acc>(__bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]));
    default: return static_cast<Acc>(static_cast<const double*>(p)[i]);
  }
}

// The CPU's Store of an Acc value: float16/bfloat16 through float32.
template <typename Acc>
__device__ __forceinline__ void StoreAs(void* p, int dtype, int64_t i, Acc v) {
  switch (dtype) {
    case kF32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case kF16: static_cast<__half*>(p)[i] = __float2half_rn(static_cast<float>(v)); break;
    case kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v)); break;
    default: static_cast<double*>(p)[i] = static_cast<double>(v); break;
  }
}

// v rounded to the precision of dtype (the CPU's RoundAs: 16-bit floats through float32).
template <typename Acc>
__device__ __forceinline__ Acc RoundAs(int dtype, Acc v) {
  switch (dtype) {
    case kF32: return static_cast<Acc>(static_cast<float>(v));
    case kF16: return static_cast<Acc>(__half2float(__float2half_rn(static_cast<float>(v))));
    case kBF16: return static_cast<Acc>(__bfloat162float(__float2bfloat16_rn(static_cast<float>(v))));
    default: return v;
  }
}

template <typename Acc>
__device__ __forceinline__ Acc AccExp(Acc v) {
  if constexpr (std::is_same_v<Acc, double>) return ::exp(v);
  else return ::expf(v);
}

template <typename Acc>
__device__ __forceinline__ Acc AccTanh(Acc v) {
  if constexpr (std::is_same_v<Acc, double>) return ::tanh(v);
  else return ::tanhf(v);
}

template <typename Acc>
__device__ __forceinline__ Acc WarpSum(Acc v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The CPU's std::max(a, b): b only when a < b (a NaN b is skipped).
template <typename Acc>
__device__ __forceinline__ Acc MaxLikeCpu(Acc a, Acc b) {
  return a < b ? b : a;
}

// Max (is_max) or sum over the block, returned to every thread; `red` holds kWarps values.
template <typename Acc>
__device__ Acc BlockReduce(Acc v, bool is_max, Acc* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const Acc other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? MaxLikeCpu(v, other) : v + other;
  }
  __syncthreads();  // red's previous use is over
  if (lane == 0) red[warp] = v;
  __syncthreads();
  Acc r = red[0];
  for (int w = 1; w < kWarps; ++w) r = is_max ? MaxLikeCpu(r, red[w]) : r + red[w];
  return r;
}

template <typename Acc>
__global__ void __launch_bounds__(kThreads) OnnxAttentionRows(OnnxAttentionParams p, Acc* __restrict__ gscores,
                                                              int scores_in_smem) {
  extern __shared__ double smem_raw[];  // double: aligned for either compute type
  Acc* smem = reinterpret_cast<Acc*>(smem_raw);
  Acc* scores = scores_in_smem ? smem : gscores + static_cast<int64_t>(blockIdx.x) * p.total;
  Acc* qs = smem + (scores_in_smem ? p.total : 0);
  Acc* red = qs + p.head;      // kWarps values for the block reductions
  Acc* part = red + kWarps;    // kWarps * 32 partial sums of Y
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const Acc neg_inf = -static_cast<Acc>(INFINITY);
  const int t1 = p.qk_dtype;
  const Acc q_factor = RoundAs<Acc>(t1, static_cast<Acc>(p.q_factor));
  const Acc k_factor = p.scale_k ? q_factor : Acc(1);
  const Acc softcap = static_cast<Acc>(p.softcap);
  const int64_t group = p.q_heads / p.kv_heads;
  const int64_t rows = p.batch * p.q_heads * p.q_len;

  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t b = r / (p.q_heads * p.q_len), h = (r / p.q_len) % p.q_heads, i = r % p.q_len;
    const int64_t kvh = h / group;
    const int64_t valid = p.nonpad ? p.nonpad[b] : p.total;
    const int64_t pos = i + (p.nonpad ? valid - p.q_len : p.past);
    __syncthreads();  // the previous row is done with qs, scores and part
    const int64_t q_row = b * p.q_sb + h * p.q_sh + i * p.q_ss;
    for (int t = threadIdx.x; t < p.head; t += kThreads)
      qs[t] = RoundAs<Acc>(t1, LoadAs<Acc>(p.q, t1, q_row + t) * q_factor);
    __syncthreads();

    // Scores, one warp per key.
    const int64_t k_base = b * p.k_sb + kvh * p.k_sh;
    const int64_t qk_off = r * p.total;  // [B, Hq, Sq, T] row r
    int all_masked = 1;
    Acc mx = neg_inf;
    for (int64_t j = warp; j < p.total; j += kWarps) {
      const int64_t k_row = k_base + j * p.k_ss;
      Acc dot = 0;
      for (int t = lane; t < p.head; t += 32) dot += qs[t] * RoundAs<Acc>(t1, LoadAs<Acc>(p.k, t1, k_row + t) * k_factor);
      dot = WarpSum(dot);
      Acc bj = 0;
      if (p.bias)
        bj = j < p.bias_len ? static_cast<const Acc*>(p.bias)[b * p.bias_stride[0] + h * p.bias_stride[1] +
                                                              i * p.bias_stride[2] + j * p.bias_stride[3]]
                            : neg_inf;
      if ((p.causal && j > pos) || (p.left >= 0 && pos - j > p.left) || (p.right >= 0 && j - pos > p.right) ||
          j >= valid)
        bj = neg_inf;
      all_masked = all_masked && bj == neg_inf;
      Acc s = RoundAs<Acc>(t1, dot);
      if (p.qk && p.qk_mode == 0 && lane == 0) StoreAs<Acc>(p.qk, t1, qk_off + j, s);
      if (p.softcap > 0.f) s = RoundAs<Acc>(t1, softcap * AccTanh(s / softcap));
      if (p.qk && p.qk_mode == 1 && lane == 0) StoreAs<Acc>(p.qk, t1, qk_off + j, s);
      s = RoundAs<Acc>(t1, s + bj);
      if (p.qk && p.qk_mode == 2 && lane == 0) StoreAs<Acc>(p.qk, t1, qk_off + j, s);
      const Acc x = RoundAs<Acc>(p.softmax_dtype, s);
      if (lane == 0) scores[j] = x;
      mx = MaxLikeCpu(mx, x);
    }
    all_masked = __syncthreads_and(all_masked);  // also publishes the scores

    // Softmax over the row (probabilities 0 where every key is masked).
    if (all_masked) {
      for (int64_t j = threadIdx.x; j < p.total; j += kThreads) scores[j] = 0;
    } else {
      mx = BlockReduce<Acc>(mx, true, red);
      if (mx == neg_inf) mx = 0;
      Acc sum = 0;
      for (int64_t j = threadIdx.x; j < p.total; j += kThreads) {
        const Acc e = AccExp(scores[j] - mx);
        scores[j] = e;
        sum += e;
      }
      sum = BlockReduce<Acc>(sum, false, red);
      if (sum == 0) sum = 1;
      for (int64_t j = threadIdx.x; j < p.total; j += kThreads)
        scores[j] = RoundAs<Acc>(t1, RoundAs<Acc>(p.softmax_dtype, scores[j] / sum));
    }
    if (p.qk && p.qk_mode == 3)
      for (int64_t j = threadIdx.x; j < p.total; j += kThreads) StoreAs<Acc>(p.qk, t1, qk_off + j, scores[j]);
    __syncthreads();

    // Y's row: 32 features at a time; warp w adds keys w, w + kWarps, ...; then the warps' sums in order.
    const int64_t v_base = b * p.v_sb + kvh * p.v_sh;
    const int64_t y_row = b * p.y_sb + h * p.y_sh + i * p.y_ss;
    for (int t0 = 0; t0 < p.v_head; t0 += 32) {
      const int t = t0 + lane;
      Acc acc = 0;
      if (t < p.v_head)
        for (int64_t j = warp; j < p.total; j += kWarps)
          acc += scores[j] * LoadAs<Acc>(p.v, p.v_dtype, v_base + j * p.v_ss + t);
      part[warp * 32 + lane] = acc;
      __syncthreads();
      if (warp == 0 && t < p.v_head) {
        Acc y = part[lane];
        for (int w = 1; w < kWarps; ++w) y += part[w * 32 + lane];
        StoreAs<Acc>(p.y, t1, y_row + t, y);
      }
      __syncthreads();
    }
  }
}

// Elements per compute-type value; the shared memory of a block with (or without) the scores.
template <typename Acc>
size_t SmemBytes(const OnnxAttentionParams& p, bool with_scores) {
  return sizeof(Acc) * (static_cast<size_t>(with_scores ? p.total : 0) + p.head + kWarps + kWarps * 32);
}

size_t AccBytes(const OnnxAttentionParams& p) { return p.wide ? sizeof(double) : sizeof(float); }

bool ScoresInSmem(const OnnxAttentionParams& p) {
  return (p.wide ? SmemBytes<double>(p, true) : SmemBytes<float>(p, true)) <= kSmemLimit;
}

int64_t Rows(const OnnxAttentionParams& p) { return p.batch * p.q_heads * p.q_len; }

template <typename Acc>
cudaError_t Launch(const OnnxAttentionParams& p, void* scores_ws, cudaStream_t stream) {
  const int64_t rows = Rows(p);
  const bool in_smem = ScoresInSmem(p);
  if (!in_smem && scores_ws == nullptr) return cudaErrorInvalidValue;
  const int64_t cap = in_smem ? int64_t{1} << 20 : kMaxGlobalBlocks;
  const unsigned grid = static_cast<unsigned>(rows < cap ? rows : cap);
  OnnxAttentionRows<Acc><<<grid, kThreads, SmemBytes<Acc>(p, in_smem), stream>>>(
      p, static_cast<Acc*>(scores_ws), in_smem ? 1 : 0);
  return cudaGetLastError();
}

// ---- attn_mask as a bias; the keep mask of kiln's fused kernels ----

template <typename M, typename O>
__global__ void MaskBiasKernel(const M* __restrict__ mask, int64_t n, int qk_dtype, O* __restrict__ bias) {
  using Acc = std::conditional_t<std::is_same_v<O, double>, double, float>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Acc r;
    if constexpr (std::is_same_v<M, bool>) {
      r = reinterpret_cast<const uint8_t*>(mask)[i] ? Acc(0) : -static_cast<Acc>(INFINITY);
    } else {
      double v;
      if constexpr (std::is_same_v<M, __half> || std::is_same_v<M, __nv_bfloat16>) v = static_cast<double>(ToF32(mask[i]));
      else v = static_cast<double>(mask[i]);
      r = RoundAs<Acc>(qk_dtype, static_cast<Acc>(v));
    }
    if constexpr (std::is_same_v<O, double> || std::is_same_v<O, float>) bias[i] = r;
    else bias[i] = FromF32<O>(static_cast<float>(r));
  }
}

__global__ void KeepKernel(uint8_t* __restrict__ keep, int64_t n, int64_t q_len, int64_t total, int64_t past,
                           const int64_t* __restrict__ nonpad, int causal, int64_t left, int64_t right,
                           int64_t key_limit) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e % total, i = (e / total) % q_len, b = e / (total * q_len);
    const int64_t valid = nonpad ? nonpad[b] : total;
    const int64_t pos = i + (nonpad ? valid - q_len : past);
    const bool drop = (causal && j > pos) || (left >= 0 && pos - j > left) || (right >= 0 && j - pos > right) ||
                      j >= valid || j >= key_limit;
    keep[e] = drop ? 0 : 1;
  }
}

// ---- present = past ++ new ----

template <typename E>
__global__ void KvConcatKernel(const E* __restrict__ past, const E* __restrict__ x, int64_t x_sb, int64_t x_sh,
                               int64_t x_ss, int64_t heads, int64_t past_len, int64_t len, int64_t size, int64_t n,
                               E* __restrict__ out) {
  const int64_t total = past_len + len;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = e % size, rest = e / size;
    const int64_t j = rest % total, bh = rest / total;
    if (j < past_len) {
      out[e] = past[(bh * past_len + j) * size + t];
    } else {
      const int64_t b = bh / heads, h = bh % heads;
      out[e] = x[b * x_sb + h * x_sh + (j - past_len) * x_ss + t];
    }
  }
}

}  // namespace

size_t OnnxAttentionScoresBytes(const OnnxAttentionParams& p) {
  if (ScoresInSmem(p)) return 0;
  const int64_t rows = Rows(p);
  const int64_t blocks = rows < kMaxGlobalBlocks ? rows : kMaxGlobalBlocks;
  return static_cast<size_t>(blocks) * static_cast<size_t>(p.total) * AccBytes(p);
}

cudaError_t LaunchOnnxAttention(const OnnxAttentionParams& p, void* scores_ws, cudaStream_t stream) {
  if (Rows(p) <= 0) return cudaSuccess;
  if (p.head < 0 || p.head > kOnnxAttnMaxHead || p.v_head < 0 || p.kv_heads <= 0 || p.q_heads % p.kv_heads != 0)
    return cudaErrorInvalidValue;
  return p.wide ? Launch<double>(p, scores_ws, stream) : Launch<float>(p, scores_ws, stream);
}

cudaError_t LaunchOnnxAttentionMaskBias(int mask_dtype, const void* mask, int64_t n, int qk_dtype, int out_dtype,
                                        void* bias, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  bool ok = false;
  DispatchStorage(mask_dtype, [&](auto mtag) {
    using M = typename decltype(mtag)::type;
    ok = DispatchFloat(out_dtype, [&](auto otag) {
      using O = typename decltype(otag)::type;
      MaskBiasKernel<M, O><<<GridFor(n), 256, 0, stream>>>(static_cast<const M*>(mask), n, qk_dtype,
                                                            static_cast<O*>(bias));
    });
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t LaunchOnnxAttentionKeep(uint8_t* keep, int64_t batches, int64_t q_len, int64_t total, int64_t past,
                                    const int64_t* nonpad, int causal, int64_t left, int64_t right, int64_t key_limit,
                                    cudaStream_t stream) {
  const int64_t n = batches * q_len * total;
  if (n <= 0) return cudaSuccess;
  KeepKernel<<<GridFor(n), 256, 0, stream>>>(keep, n, q_len, total, past, nonpad, causal, left, right, key_limit);
  return cudaGetLastError();
}

cudaError_t LaunchKvConcat(int elem_bytes, const void* past, const void* x, int64_t x_sb, int64_t x_sh, int64_t x_ss,
                           int64_t batch, int64_t heads, int64_t past_len, int64_t len, int64_t size, void* present,
                           cudaStream_t stream) {
  const int64_t n = batch * heads * (past_len + len) * size;
  if (n <= 0) return cudaSuccess;
  bool ok = DispatchElemBytes(elem_bytes, [&](auto tag) {
    using E = typename decltype(tag)::type;
    KvConcatKernel<E><<<GridFor(n), 256, 0, stream>>>(static_cast<const E*>(past), static_cast<const E*>(x), x_sb,
                                                       x_sh, x_ss, heads, past_len, len, size, n,
                                                       static_cast<E*>(present));
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace kiln::cuda
