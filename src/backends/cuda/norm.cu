// Normalization kernels (see norm_kernels.h). One block per row (LayerNorm) or per (n, group) (Group/Instance
// norm); statistics are two-pass in float32 (mean, then the mean of squared deviations), like the CPU reference.
#include "backends/cuda/norm_kernels.h"
#include "backends/cuda/norm_pool_util.cuh"

namespace kiln::cuda {

namespace {

constexpr int64_t kMaxGrid = 1 << 20;  // grid-stride loops cover the rest
constexpr int64_t kRowCacheFloats = 8192;  // rows up to this many columns are cached in shared memory (32 KiB)

// ---- LayerNormalization ----

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
    // Pass 1: sum (and fill the cache).
    float s = 0.f;
    if constexpr (kVec) {
      const Pack16<T>* xv = reinterpret_cast<const Pack16<T>*>(xr);
      for (int64_t k = threadIdx.x; k < cols / V; k += blockDim.x) {
        const Pack16<T> p = xv[k];
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float f = ToF32(p.v[i]);
          s += f;
          if constexpr (kCache) row_cache[k * V + i] = f;
        }
      }
    } else {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float f = ToF32(xr[j]);
        s += f;
        if constexpr (kCache) row_cache[j] = f;
      }
    }
    const float total = BlockSum(s, red);  // also makes the cache visible to the whole block
    const float mean = cols > 0 ? total / static_cast<float>(cols) : 0.f;
    // Pass 2: variance.
    float q = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float d = (kCache ? row_cache[j] : ToF32(xr[j])) - mean;
      q += d * d;
    }
    const float sq = BlockSum(q, red);
    const float var = cols > 0 ? sq / static_cast<float>(cols) : 0.f;
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
      }
    } else {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float f = kCache ? row_cache[j] : ToF32(xr[j]);
        const float b = a.beta ? a.beta[j] : 0.f;
        yr[j] = FromF32<T>((f - mean) * inv * a.gamma[j] + b);
      }
    }
    if (threadIdx.x == 0) {
      if (a.mean) StoreFromF32(a.mean, a.stash_dtype, r, mean);
      if (a.inv_std) StoreFromF32(a.inv_std, a.stash_dtype, r, inv);
    }
    if (kCache) __syncthreads();  // the next row overwrites the cache
  }
}

template <typename T>
cudaError_t LayerNormTyped(const LayerNormArgs& a, cudaStream_t stream) {
  constexpr int V = Pack16<T>::kN;
  const bool vec = a.cols % V == 0 && Aligned16(a.x) && Aligned16(a.y);
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
    float s = 0.f;
    if constexpr (kVec) {
      const Pack16<T>* xv = reinterpret_cast<const Pack16<T>*>(xg);
      for (int64_t k = threadIdx.x; k < gsize / V; k += blockDim.x) {
        const Pack16<T> p = xv[k];
#pragma unroll
        for (int i = 0; i < V; ++i) s += ToF32(p.v[i]);
      }
    } else {
      for (int64_t i = threadIdx.x; i < gsize; i += blockDim.x) s += ToF32(xg[i]);
    }
    const float total = BlockSum(s, red);
    const float mean = gsize > 0 ? total / static_cast<float>(gsize) : 0.f;
    float q = 0.f;
    if constexpr (kVec) {
      const Pack16<T>* xv = reinterpret_cast<const Pack16<T>*>(xg);
      for (int64_t k = threadIdx.x; k < gsize / V; k += blockDim.x) {
        const Pack16<T> p = xv[k];
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float d = ToF32(p.v[i]) - mean;
          q += d * d;
        }
      }
    } else {
      for (int64_t i = threadIdx.x; i < gsize; i += blockDim.x) {
        const float d = ToF32(xg[i]) - mean;
        q += d * d;
      }
    }
    const float sq = BlockSum(q, red);
    const float var = gsize > 0 ? sq / static_cast<float>(gsize) : 0.f;
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
