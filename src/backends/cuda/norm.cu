// Normalization kernels (see norm_kernels.h). LayerNorm rows that fit in registers: a group of 32..512
// threads per row (several rows per block when the group is small); other rows: one block per row. Group/Instance
// norm: one block per (n, group). Statistics are two-pass in float32 (mean, then the mean of squared deviations),
// like the CPU reference.
#include "backends/cuda/norm_kernels.h"
#include "backends/cuda/norm_pool_util.cuh"

namespace kiln::cuda {

namespace {

constexpr int64_t kMaxGrid = 1 << 20;  // grid-stride loops cover the rest
constexpr int64_t kRowCacheFloats = 8192;  // rows up to this many columns are cached in shared memory (32 KiB)

// A ThreadSum term: the squared deviation from the mean.
struct SquaredDeviation {
  float mean;
  __device__ __forceinline__ float operator()(int64_t, float f) const {
    const float d = f - mean;
    return d * d;
  }
};

// ---- LayerNormalization ----

// Output 3: y[i] as written (v), quantized per tensor as the CUDA QuantizeLinear's per-tensor kernel does it; the
// byte's bits (int8, uint8 or float8e4m3fn).
__device__ __forceinline__ uint32_t QuantizedByte(const LayerNormArgs& a, float v) {
  return QuantizedBits(v, a.q_scale, a.q_zero_point, a.q_fp8 ? 2 : a.q_unsigned ? 1 : 0);
}
__device__ __forceinline__ void StoreQuantized(const LayerNormArgs& a, int64_t i, float v) {
  static_cast<uint8_t*>(a.yq)[i] = static_cast<uint8_t>(QuantizedByte(a, v));
}
// A pack's V values (T's 16 bytes) at element i, a multiple of V: 8 bytes (V = 8) or 4 (V = 4) in one store.
template <typename T, int V>
__device__ __forceinline__ void StoreQuantizedPack(const LayerNormArgs& a, int64_t i, const Pack16<T>& p) {
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int j = 0; j < V; ++j) w[j / 4] |= QuantizedByte(a, ToF32(p.v[j])) << (8 * (j % 4));
  if constexpr (V == 8) *reinterpret_cast<uint2*>(static_cast<uint8_t*>(a.yq) + i) = make_uint2(w[0], w[1]);
  else if constexpr (V == 4) *reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(a.yq) + i) = w[0];
  else {
#pragma unroll
    for (int j = 0; j < V; ++j) StoreQuantized(a, i + j, ToF32(p.v[j]));
  }
}

// One block per row. kVec: cols % Pack16 size == 0 and x/y 16-byte aligned. kCache: the row is kept in shared
// memory (as float) after the first read.
template <typename T, bool kVec, bool kCache>
__global__ void LayerNormKernel(LayerNormArgs a) {
  extern __shared__ float row_cache[];
  __shared__ float red[32];
  constexpr int V = Pack16<T>::kN;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const int64_t cols = a.cols;
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    // Pass 1: mean (and fill the cache).
    const float s = ThreadSum<T, kVec>(xr, cols, [&](int64_t j, float f) {
      if constexpr (kCache) row_cache[j] = f;
      return f;
    });
    float mean = BlockMean(s, cols, red);  // also makes the cache visible to the whole block
    if (a.rms) mean = 0.f;
    // Pass 2: variance.
    const float q = kCache ? ThreadSum<float, false>(row_cache, cols, SquaredDeviation{mean})
                           : ThreadSum<T, false>(xr, cols, SquaredDeviation{mean});
    const float var = BlockMean(q, cols, red);
    const float inv = 1.f / sqrtf(var + a.eps);
    // Pass 3: normalize, scale, shift.
    if constexpr (kVec) {
      const Pack16<T>* xv = reinterpret_cast<const Pack16<T>*>(xr);
      Pack16<T>* yv = reinterpret_cast<Pack16<T>*>(yr);
      for (int64_t k = threadIdx.x; k < cols / V; k += blockDim.x) {
        float f[V];
        if constexpr (kCache) {
#pragma unroll
          for (int i = 0; i < V; ++i) f[i] = row_cache[k * V + i];
        } else {
          const Pack16<T> in = xv[k];
#pragma unroll
          for (int i = 0; i < V; ++i) f[i] = ToF32(in.v[i]);
        }
        Pack16<T> out;
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const int64_t j = k * V + i;
          const float b = a.beta ? a.beta[j] : 0.f;
          out.v[i] = FromF32<T>((f[i] - mean) * inv * a.gamma[j] + b);
        }
        yv[k] = out;
        if (a.yq) StoreQuantizedPack<T, V>(a, r * cols + k * V, out);
      }
    } else {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float f = kCache ? row_cache[j] : ToF32(xr[j]);
        const float b = a.beta ? a.beta[j] : 0.f;
        const T yj = FromF32<T>((f - mean) * inv * a.gamma[j] + b);
        yr[j] = yj;
        if (a.yq) StoreQuantized(a, r * cols + j, ToF32(yj));
      }
    }
    if (threadIdx.x == 0) {
      if (a.mean) StoreFromF32(a.mean, a.stash_dtype, r, mean);
      if (a.inv_std) StoreFromF32(a.inv_std, a.stash_dtype, r, inv);
    }
    if (kCache) __syncthreads();  // the next row overwrites the cache
  }
}

// Rows held in registers. blockDim = (tpr, rows per block): threadIdx.x walks the row's 16-byte packs
// tx, tx + tpr, ... (kPacks of them at most), read once and kept as float. tpr is 32 (shuffles only) or a
// power of two up to 512 whose warps combine through `red`. Requires cols % Pack16 size == 0 and x, y, gamma, beta
// 16-byte aligned.
template <typename T, int kPacks>
__global__ void __launch_bounds__(512) LayerNormRegKernel(LayerNormArgs a) {
  __shared__ float red[2][32];
  constexpr int V = Pack16<T>::kN;
  const int tpr = blockDim.x, tx = threadIdx.x;
  const int wpr = tpr >> 5;                           // warps per row
  const int warp0 = threadIdx.y * wpr;                // this row's first warp in the block
  const int wid = warp0 + (tx >> 5), lane = tx & 31;
  const int64_t packs = a.cols / V;
  const float inv_cols = 1.f / static_cast<float>(a.cols);
  // The sum over the row group, returned to all of its threads (every thread of the block calls it together).
  auto row_sum = [&](float v, float* r) {
    v = WarpSum(v);
    if (wpr == 1) return v;
    if (lane == 0) r[wid] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < wpr; ++w) t += r[warp0 + w];
    return t;  // r is rewritten only after the other buffer's __syncthreads, which follows these reads
  };
  for (int64_t r0 = static_cast<int64_t>(blockIdx.x) * blockDim.y; r0 < a.rows;
       r0 += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t row = r0 + threadIdx.y;
    const bool live = row < a.rows;  // dead rows still join the block-wide reductions
    const Pack16<T>* xv = reinterpret_cast<const Pack16<T>*>(static_cast<const T*>(a.x) + (live ? row : 0) * a.cols);
    float f[kPacks][V];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      const int64_t k = tx + static_cast<int64_t>(i) * tpr;
      if (live && k < packs) {
        const Pack16<T> p = xv[k];
#pragma unroll
        for (int j = 0; j < V; ++j) f[i][j] = ToF32(p.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) f[i][j] = 0.f;
      }
    }
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
#pragma unroll
      for (int j = 0; j < V; ++j) s += f[i][j];
    }
    const float mean = a.rms ? (row_sum(s, red[0]), 0.f) : row_sum(s, red[0]) * inv_cols;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      if (tx + i * tpr < packs) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float d = f[i][j] - mean;
          q += d * d;
        }
      }
    }
    const float var = row_sum(q, red[1]) * inv_cols;
    const float inv = 1.f / sqrtf(var + a.eps);
    if (!live) continue;
    Pack16<T>* yv = reinterpret_cast<Pack16<T>*>(static_cast<T*>(a.y) + row * a.cols);
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      const int64_t k = tx + static_cast<int64_t>(i) * tpr;
      if (k >= packs) break;
      float g[V], b[V];
#pragma unroll
      for (int j = 0; j < V; j += 4) {
        const float4 gv = reinterpret_cast<const float4*>(a.gamma + k * V)[j / 4];
        const float4 bv = a.beta ? reinterpret_cast<const float4*>(a.beta + k * V)[j / 4] : float4{0.f, 0.f, 0.f, 0.f};
        g[j] = gv.x;
        g[j + 1] = gv.y;
        g[j + 2] = gv.z;
        g[j + 3] = gv.w;
        b[j] = bv.x;
        b[j + 1] = bv.y;
        b[j + 2] = bv.z;
        b[j + 3] = bv.w;
      }
      Pack16<T> out;
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = FromF32<T>((f[i][j] - mean) * inv * g[j] + b[j]);
      yv[k] = out;
      if (a.yq) StoreQuantizedPack<T, V>(a, row * a.cols + k * V, out);
    }
    if (tx == 0) {
      if (a.mean) StoreFromF32(a.mean, a.stash_dtype, row, mean);
      if (a.inv_std) StoreFromF32(a.inv_std, a.stash_dtype, row, inv);
    }
  }
}

constexpr int kRegFloats = 32;  // row floats per thread in LayerNormRegKernel (kPacks * Pack16 size at most)

template <typename T, int kPacks>
void LaunchLayerNormReg(int packs_per_thread, unsigned grid, dim3 block, const LayerNormArgs& a,
                        cudaStream_t stream) {
  if constexpr (kPacks > 1) {
    if (packs_per_thread < kPacks) return LaunchLayerNormReg<T, kPacks - 1>(packs_per_thread, grid, block, a, stream);
  }
  LayerNormRegKernel<T, kPacks><<<grid, block, 0, stream>>>(a);
}

// Launches LayerNormRegKernel when the row fits (true), else leaves the row to LayerNormKernel (false).
template <typename T>
bool LayerNormInRegisters(const LayerNormArgs& a, cudaStream_t stream) {
  constexpr int V = Pack16<T>::kN, kMaxPacks = kRegFloats / V;
  if (a.cols <= 0 || a.cols % V != 0 || !Aligned16(a.x) || !Aligned16(a.y) || (a.yq && !Aligned16(a.yq)) ||
      !Aligned16(a.gamma) ||
      (a.beta && !Aligned16(a.beta)))
    return false;
  const int64_t packs = a.cols / V;
  int tpr = 32;
  while (tpr < 512 && static_cast<int64_t>(tpr) * kMaxPacks < packs) tpr *= 2;
  if (static_cast<int64_t>(tpr) * kMaxPacks < packs) return false;
  const int per_thread = static_cast<int>((packs + tpr - 1) / tpr);
  const int rpb = tpr >= 128 ? 1 : 128 / tpr;  // rows per block
  const int64_t blocks = (a.rows + rpb - 1) / rpb;
  const unsigned grid = static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
  LaunchLayerNormReg<T, kMaxPacks>(per_thread, grid, dim3(tpr, rpb), a, stream);
  return true;
}

template <typename T>
cudaError_t LayerNormTyped(const LayerNormArgs& a, cudaStream_t stream) {
  if (LayerNormInRegisters<T>(a, stream)) return cudaGetLastError();
  constexpr int V = Pack16<T>::kN;
  const bool vec = a.cols % V == 0 && Aligned16(a.x) && Aligned16(a.y) && (!a.yq || Aligned16(a.yq));
  const bool cache = a.cols <= kRowCacheFloats;
  const int threads = BlockThreadsFor(vec ? a.cols / V : a.cols, 512);
  const unsigned grid = static_cast<unsigned>(a.rows < kMaxGrid ? a.rows : kMaxGrid);
  const size_t smem = cache ? static_cast<size_t>(a.cols) * sizeof(float) : 0;
  if (vec && cache) LayerNormKernel<T, true, true><<<grid, threads, smem, stream>>>(a);
  else if (vec) LayerNormKernel<T, true, false><<<grid, threads, 0, stream>>>(a);
  else if (cache) LayerNormKernel<T, false, true><<<grid, threads, smem, stream>>>(a);
  else LayerNormKernel<T, false, false><<<grid, threads, 0, stream>>>(a);
  return cudaGetLastError();
}

__global__ void ExpandToF32Kernel(const void* src, int code, Dims8 dims, Dims8 strides, int nd, int64_t n,
                                  float* dst) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = j, off = 0;
    for (int d = nd - 1; d >= 0; --d) {
      off += (rem % dims.d[d]) * strides.d[d];
      rem /= dims.d[d];
    }
    dst[j] = LoadAsF32(src, code, off);
  }
}

// ---- Group / Instance normalization ----

// One block per (n, group) of cpg * inner contiguous elements. kVec: inner % Pack16 size == 0, x/y aligned.
template <typename T, bool kVec>
__global__ void GroupNormKernel(GroupNormArgs a) {
  __shared__ float red[32];
  constexpr int V = Pack16<T>::kN;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const int64_t cpg = a.C / a.G, inner = a.inner, gsize = cpg * inner;
  for (int64_t ng = blockIdx.x; ng < a.N * a.G; ng += gridDim.x) {
    const int64_t g = ng % a.G;
    const T* xg = x + ng * gsize;
    T* yg = y + ng * gsize;
    const float mean = BlockMean(ThreadSum<T, kVec>(xg, gsize, [](int64_t, float f) { return f; }), gsize, red);
    const float var = BlockMean(ThreadSum<T, kVec>(xg, gsize, SquaredDeviation{mean}), gsize, red);
    const float inv = 1.f / sqrtf(var + a.eps);
    for (int64_t k = 0; k < cpg; ++k) {
      const int64_t c = g * cpg + k, p = a.per_group ? g : c;
      const float sc = LoadAsF32(a.scale, a.scale_dtype, p) * inv;
      const float sh = LoadAsF32(a.bias, a.bias_dtype, p) - mean * sc;
      const T* xc = xg + k * inner;
      T* yc = yg + k * inner;
      if constexpr (kVec) {
        const Pack16<T>* xv = reinterpret_cast<const Pack16<T>*>(xc);
        Pack16<T>* yv = reinterpret_cast<Pack16<T>*>(yc);
        for (int64_t u = threadIdx.x; u < inner / V; u += blockDim.x) {
          const Pack16<T> in = xv[u];
          Pack16<T> out;
#pragma unroll
          for (int i = 0; i < V; ++i) out.v[i] = FromF32<T>(ToF32(in.v[i]) * sc + sh);
          yv[u] = out;
        }
      } else {
        for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) yc[i] = FromF32<T>(ToF32(xc[i]) * sc + sh);
      }
    }
  }
}

template <typename T>
cudaError_t GroupNormTyped(const GroupNormArgs& a, cudaStream_t stream) {
  constexpr int V = Pack16<T>::kN;
  const bool vec = a.inner % V == 0 && Aligned16(a.x) && Aligned16(a.y);
  const int64_t gsize = (a.C / a.G) * a.inner;
  const int threads = BlockThreadsFor(vec ? gsize / V : gsize, 512);
  const int64_t blocks = a.N * a.G;
  const unsigned grid = static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
  if (vec) GroupNormKernel<T, true><<<grid, threads, 0, stream>>>(a);
  else GroupNormKernel<T, false><<<grid, threads, 0, stream>>>(a);
  return cudaGetLastError();
}

// ---- BatchNormalization ----

__global__ void BatchNormCoefficientsKernel(const void* scale, int sc, const void* bias, int bc, const void* mean,
                                            int mc, const void* var, int vc, float eps, int64_t P, float* a,
                                            float* b) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < P;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float ap = LoadAsF32(scale, sc, p) / sqrtf(LoadAsF32(var, vc, p) + eps);
    a[p] = ap;
    b[p] = LoadAsF32(bias, bc, p) - LoadAsF32(mean, mc, p) * ap;
  }
}

// Unit u covers elements [u * W, u * W + W) with W = Pack16 size (kVec: inner % W == 0, so a pack never
// crosses a plane) or 1.
template <typename T, bool kVec>
__global__ void BatchNormApplyKernel(BatchNormArgs a) {
  constexpr int W = kVec ? Pack16<T>::kN : 1;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const int64_t units = a.total / W, plane_elems = a.C * a.inner;
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = u * W;
    const int64_t c = (e / a.inner) % a.C;
    const int64_t pe = a.per_element ? e % plane_elems : 0;  // c * inner + i
    if constexpr (kVec) {
      const Pack16<T> in = reinterpret_cast<const Pack16<T>*>(x)[u];
      Pack16<T> out;
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const int64_t p = a.per_element ? pe + i : c;
        out.v[i] = FromF32<T>(ToF32(in.v[i]) * a.a[p] + a.b[p]);
      }
      reinterpret_cast<Pack16<T>*>(y)[u] = out;
    } else {
      const int64_t p = a.per_element ? pe : c;
      y[e] = FromF32<T>(ToF32(x[e]) * a.a[p] + a.b[p]);
    }
  }
}

template <typename T>
cudaError_t BatchNormTyped(const BatchNormArgs& a, cudaStream_t stream) {
  constexpr int V = Pack16<T>::kN;
  const bool vec = a.inner % V == 0 && Aligned16(a.x) && Aligned16(a.y);
  if (vec) BatchNormApplyKernel<T, true><<<GridFor(a.total / V), 256, 0, stream>>>(a);
  else BatchNormApplyKernel<T, false><<<GridFor(a.total), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchLayerNorm(const LayerNormArgs& a, cudaStream_t stream) {
  if (a.rows <= 0) return cudaSuccess;
  cudaError_t e = cudaErrorInvalidValue;
  KILN_DISPATCH_FLOAT(a.dtype, T, e = LayerNormTyped<T>(a, stream));
  return e;
}

cudaError_t LaunchExpandToF32(const void* src, int src_dtype, const int64_t* dims, const int64_t* src_strides, int nd,
                              int64_t n, float* dst, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (nd < 1 || nd > kMaxDims || !IsParamCode(src_dtype)) return cudaErrorInvalidValue;
  Dims8 d{}, s{};
  for (int i = 0; i < nd; ++i) {
    d.d[i] = dims[i];
    s.d[i] = src_strides[i];
  }
  ExpandToF32Kernel<<<GridFor(n), 256, 0, stream>>>(src, src_dtype, d, s, nd, n, dst);
  return cudaGetLastError();
}

cudaError_t LaunchGroupNorm(const GroupNormArgs& a, cudaStream_t stream) {
  if (a.N * a.C == 0) return cudaSuccess;
  if (a.G <= 0 || a.C % a.G != 0 || !IsParamCode(a.scale_dtype) || !IsParamCode(a.bias_dtype))
    return cudaErrorInvalidValue;
  cudaError_t e = cudaErrorInvalidValue;
  KILN_DISPATCH_FLOAT(a.dtype, T, e = GroupNormTyped<T>(a, stream));
  return e;
}

cudaError_t LaunchBatchNormCoefficients(const void* scale, int scale_dtype, const void* bias, int bias_dtype,
                                        const void* mean, int mean_dtype, const void* var, int var_dtype, float eps,
                                        int64_t P, float* a, float* b, cudaStream_t stream) {
  if (P <= 0) return cudaSuccess;
  if (!IsParamCode(scale_dtype) || !IsParamCode(bias_dtype) || !IsParamCode(mean_dtype) || !IsParamCode(var_dtype))
    return cudaErrorInvalidValue;
  BatchNormCoefficientsKernel<<<GridFor(P), 256, 0, stream>>>(scale, scale_dtype, bias, bias_dtype, mean, mean_dtype,
                                                              var, var_dtype, eps, P, a, b);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormApply(const BatchNormArgs& a, cudaStream_t stream) {
  if (a.total <= 0) return cudaSuccess;
  if (a.C <= 0 || a.inner <= 0) return cudaErrorInvalidValue;
  cudaError_t e = cudaErrorInvalidValue;
  KILN_DISPATCH_FLOAT(a.dtype, T, e = BatchNormTyped<T>(a, stream));
  return e;
}

}  // namespace kiln::cuda
