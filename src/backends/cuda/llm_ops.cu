// RotaryEmbedding, TensorScatter, LinearAttention and CausalConvWithState kernels (see llm_kernels.h).
#include <type_traits>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/llm_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

// ---- RotaryEmbedding ----

// float for the 32- and 16-bit floats, double for double.
template <typename T>
using RotAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
__device__ __forceinline__ RotAcc<T> RotLoad(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, double>) return p[i];
  else return ToF32(p[i]);
}

// a * b - c * d (sign -1) or a * b + c * d (sign 1), every operation rounded on its own (no fused multiply-add).
__device__ __forceinline__ float MulMul(float a, float b, float c, float d, bool add) {
  const float x = __fmul_rn(a, b), y = __fmul_rn(c, d);
  return add ? __fadd_rn(x, y) : __fsub_rn(x, y);
}
__device__ __forceinline__ double MulMul(double a, double b, double c, double d, bool add) {
  const double x = __dmul_rn(a, b), y = __dmul_rn(c, d);
  return add ? __dadd_rn(x, y) : __dsub_rn(x, y);
}

template <typename T>
__global__ void RotaryKernel(RotaryArgs a, int64_t n) {
  using A = RotAcc<T>;
  const T* x = static_cast<const T*>(a.x);
  const T* cs = static_cast<const T*>(a.cos);
  const T* sn = static_cast<const T*>(a.sin);
  T* y = static_cast<T*>(a.y);
  const int64_t rot = 2 * a.half;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = e % a.head, rest = e / a.head;
    if (k >= rot) {
      y[e] = x[e];
      continue;
    }
    int64_t b, t;
    if (a.three) {  // [B, S, H, head]
      t = (rest / a.heads) % a.seq;
      b = rest / (a.heads * a.seq);
    } else {  // [B, H, S, head]
      t = rest % a.seq;
      b = rest / (a.heads * a.seq);
    }
    const int64_t row = e - k;
    int64_t kk, i1, i2;
    bool second;
    if (a.interleaved) {
      kk = k / 2, i1 = 2 * kk, i2 = i1 + 1, second = (k & 1) != 0;
    } else {
      second = k >= a.half;
      kk = second ? k - a.half : k, i1 = kk, i2 = kk + a.half;
    }
    int64_t cache;
    if (a.pos) {
      int64_t id = a.pos[b * a.row_b + t * a.row_t];
      id = id < 0 ? 0 : (id >= a.cache_rows ? a.cache_rows - 1 : id);
      cache = id * a.half + kk;
    } else {
      cache = b * a.row_b + t * a.row_t + kk;
    }
    const A x1 = RotLoad(x, row + i1), x2 = RotLoad(x, row + i2);
    const A c = RotLoad(cs, cache), s = RotLoad(sn, cache);
    const A r = second ? MulMul(s, x1, c, x2, true) : MulMul(c, x1, s, x2, false);
    if constexpr (std::is_same_v<T, double>) y[e] = r;
    else y[e] = FromF32<T>(r);
  }
}

// ---- TensorScatter ----

template <typename E>
__global__ void TensorScatterKernel(const E* __restrict__ update, const int64_t* __restrict__ indices, int64_t n,
                                    int64_t per_batch, int64_t max_len, int64_t len, int64_t inner, int circular,
                                    E* __restrict__ out) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, rest = e / inner;
    const int64_t s = rest % len, p = rest / len;
    int64_t at = (indices ? indices[p / per_batch] : 0) + s;
    if (circular) at = ((at % max_len) + max_len) % max_len;
    else if (at < 0 || at >= max_len) continue;  // outside the cache: skipped (the CPU refuses such indices)
    out[(p * max_len + at) * inner + i] = update[e];
  }
}

// ---- LinearAttention ----

constexpr int kLaWarps = 4;
constexpr int kLaPerLane = kLinearAttnMaxDk / 32;

__device__ __forceinline__ float LoadF(const void* p, int dtype, int64_t i) {
  switch (dtype) {
    case kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void StoreF(void* p, int dtype, int64_t i, float v) {
  switch (dtype) {
    case kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

__device__ __forceinline__ double WarpSumD(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kLaWarps * 32) LinearAttentionKernel(LinearAttentionArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kLaWarps + (threadIdx.x >> 5);
  if (col >= a.batch * a.kv_heads * a.dv) return;  // whole warps leave; no block barrier follows
  const int64_t j = col % a.dv, item = col / a.dv;
  const int64_t b = item / a.kv_heads, h = item % a.kv_heads;
  const int64_t dk = a.dk, dv = a.dv, hkv = a.kv_heads, hq = a.q_heads, group = hq / hkv;
  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const T* g = static_cast<const T*>(a.decay);
  const T* be = static_cast<const T*>(a.beta);
  T* out = static_cast<T*>(a.out);
  const bool g_per_head = a.decay_last == hkv;
  float s[kLaPerLane];  // the state's column j at rows lane + 32 m
#pragma unroll
  for (int m = 0; m < kLaPerLane; ++m) {
    const int64_t i = lane + 32 * m;
    s[m] = a.past && i < dk ? LoadF(a.past, a.state_dtype, (item * dk + i) * dv + j) : 0.f;
  }
  for (int64_t t = 0; t < a.len; ++t) {
    const int64_t bt = b * a.len + t;
    float kt[kLaPerLane];
#pragma unroll
    for (int m = 0; m < kLaPerLane; ++m) {
      const int64_t i = lane + 32 * m;
      kt[m] = i < dk ? ToF32(k[(bt * hkv + h) * dk + i]) : 0.f;
    }
    if (a.gated) {
#pragma unroll
      for (int m = 0; m < kLaPerLane; ++m) {
        const int64_t i = lane + 32 * m;
        if (i < dk) s[m] = __fmul_rn(s[m], expf(ToF32(g[bt * a.decay_last + (g_per_head ? h : h * dk + i)])));
      }
    }
    const float vt = ToF32(v[(bt * hkv + h) * dv + j]);
    double u = vt;
    if (a.delta) {
      double part = 0;
#pragma unroll
      for (int m = 0; m < kLaPerLane; ++m)
        if (lane + 32 * m < dk) part = __dadd_rn(part, __dmul_rn(static_cast<double>(s[m]), kt[m]));
      const double retrieved = WarpSumD(part);
      const double rate = ToF32(be[bt * a.beta_last + (a.beta_last == 1 ? 0 : h)]);
      u = static_cast<float>(__dmul_rn(rate, __dsub_rn(static_cast<double>(vt), retrieved)));
    }
#pragma unroll
    for (int m = 0; m < kLaPerLane; ++m)
      if (lane + 32 * m < dk)
        s[m] = static_cast<float>(__dadd_rn(static_cast<double>(s[m]), __dmul_rn(static_cast<double>(kt[m]), u)));
    for (int64_t qh = h * group; qh < (h + 1) * group; ++qh) {
      double part = 0;
#pragma unroll
      for (int m = 0; m < kLaPerLane; ++m) {
        const int64_t i = lane + 32 * m;
        if (i < dk)
          part = __dadd_rn(part, __dmul_rn(static_cast<double>(ToF32(q[(bt * hq + qh) * dk + i])),
                                           static_cast<double>(s[m])));
      }
      const double acc = WarpSumD(part);
      if (lane == 0) out[(bt * hq + qh) * dv + j] = FromF32<T>(static_cast<float>(__dmul_rn(a.scale, acc)));
    }
  }
#pragma unroll
  for (int m = 0; m < kLaPerLane; ++m) {
    const int64_t i = lane + 32 * m;
    if (i < dk) StoreF(a.present, a.state_dtype, (item * dk + i) * dv + j, s[m]);
  }
}

// ---- CausalConvWithState ----

template <typename T>
__global__ void CausalConvKernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                 const T* __restrict__ past, T* __restrict__ y, T* __restrict__ present, int64_t ch,
                                 int64_t len, int64_t k, int64_t n_out, int64_t n_state, int silu) {
  const int64_t keep = k - 1;
  // Element r of (b, c)'s row past ++ x.
  auto row = [&](int64_t bc, int64_t r) -> double {
    if (r < keep) return past ? static_cast<double>(ToF32(past[bc * keep + r])) : 0.0;
    return static_cast<double>(ToF32(x[bc * len + r - keep]));
  };
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n_out + n_state;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (e < n_out) {
      const int64_t t = e % len, bc = e / len, c = bc % ch;
      double acc = bias ? static_cast<double>(ToF32(bias[c])) : 0.0;
      for (int64_t j = 0; j < k; ++j)
        acc = __dadd_rn(acc, __dmul_rn(static_cast<double>(ToF32(w[c * k + j])), row(bc, t + j)));
      float v = static_cast<float>(acc);
      if (silu) {
        v = ToF32(FromF32<T>(v));  // rounded to the element type, then activated in float32
        v = __fmul_rn(v, __fdiv_rn(1.f, __fadd_rn(1.f, expf(-v))));
      }
      y[e] = FromF32<T>(v);
    } else {
      const int64_t s = e - n_out, i = s % keep, bc = s / keep;
      present[s] = FromF32<T>(static_cast<float>(row(bc, len + i)));
    }
  }
}

}  // namespace

cudaError_t LaunchRotaryEmbedding(const RotaryArgs& a, cudaStream_t stream) {
  const int64_t n = a.batch * a.heads * a.seq * a.head;
  if (n <= 0) return cudaSuccess;
  if (a.pos && a.cache_rows <= 0) return cudaErrorInvalidValue;
  const bool ok = DispatchFloat(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    RotaryKernel<T><<<GridFor(n), 256, 0, stream>>>(a, n);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchTensorScatter(int elem_bytes, const void* update, const int64_t* indices, int64_t prefix,
                                int64_t per_batch, int64_t max_len, int64_t len, int64_t inner, int circular,
                                void* out, cudaStream_t stream) {
  const int64_t n = prefix * len * inner;
  if (n <= 0 || max_len <= 0) return cudaSuccess;
  if (per_batch <= 0) return cudaErrorInvalidValue;
  const bool ok = DispatchElemBytes(elem_bytes, [&](auto tag) {
    using E = typename decltype(tag)::type;
    TensorScatterKernel<E><<<GridFor(n), 256, 0, stream>>>(static_cast<const E*>(update), indices, n, per_batch,
                                                            max_len, len, inner, circular, static_cast<E*>(out));
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchLinearAttention(const LinearAttentionArgs& a, cudaStream_t stream) {
  const int64_t cols = a.batch * a.kv_heads * a.dv;
  if (cols <= 0) return cudaSuccess;
  if (a.dk > kLinearAttnMaxDk || a.kv_heads <= 0 || a.q_heads % a.kv_heads != 0) return cudaErrorInvalidValue;
  const int64_t blocks = (cols + kLaWarps - 1) / kLaWarps;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  const bool ok = DispatchLowFloat(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    LinearAttentionKernel<T><<<static_cast<unsigned>(blocks), kLaWarps * 32, 0, stream>>>(a);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchCausalConvWithState(int dtype, const void* x, const void* w, const void* bias, const void* past,
                                      void* y, void* present, int64_t batch, int64_t channels, int64_t len,
                                      int64_t k, int silu, cudaStream_t stream) {
  if (k < 1) return cudaErrorInvalidValue;
  const int64_t n_out = batch * channels * len, n_state = batch * channels * (k - 1);
  if (n_out + n_state <= 0) return cudaSuccess;
  const bool ok = DispatchLowFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    CausalConvKernel<T><<<GridFor(n_out + n_state), 256, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<const T*>(past),
        static_cast<T*>(y), static_cast<T*>(present), channels, len, k, n_out, n_state, silu);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
