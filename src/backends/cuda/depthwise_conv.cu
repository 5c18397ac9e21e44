// Depthwise 2-D convolution in channels-last (NHWC) layout with bias, residual and activation fused (see
// conv_kernels.h). Memory-bound: each thread computes kTileW consecutive output columns of one output row for a
// 16-byte vector of channels (8 float16/bfloat16 or 4 float32), so a warp reads whole 16-byte channel vectors of
// neighbouring pixels. Stride-1, undilated windows of width 3, 5 or 7 keep the input row segment the tile needs in
// registers (kTileW + K - 1 vectors per kernel row instead of kTileW * K loads); other windows load each tap.
#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/epilogue_pack.cuh"
#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {

namespace {

constexpr int kTileW = 4;

template <typename T, int V>
__device__ __forceinline__ void LoadVec(const T* p, float (&out)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = ToF32(e[i]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = ToF32(p[i]);
  }
}

template <typename T, int V>
__device__ __forceinline__ void StoreVec(T* p, const float (&v)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < V; ++i) e[i] = FromF32<T>(v[i]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = FromF32<T>(v[i]);
  }
}

// K > 0: stride 1, dilation 1, window width K (the row segment in registers); K == 0: any stride and dilation.
template <typename T, int V, int K>
__global__ void __launch_bounds__(128) DepthwiseConvKernel(const T* __restrict__ x, const T* __restrict__ w,
                                                           const T* __restrict__ bias, const T* __restrict__ res,
                                                           T* __restrict__ y, const DepthwiseConvParams p) {
  const int64_t chunks = p.c / V;
  const int64_t tiles = (p.ow + kTileW - 1) / kTileW;
  const int64_t total = p.n * p.oh * tiles * chunks;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = idx;
    const int64_t c0 = (r % chunks) * V;
    r /= chunks;
    const int64_t ow0 = (r % tiles) * kTileW;
    r /= tiles;
    const int64_t oh = r % p.oh, n = r / p.oh;
    float acc[kTileW][V];
#pragma unroll
    for (int t = 0; t < kTileW; ++t)
#pragma unroll
      for (int i = 0; i < V; ++i) acc[t][i] = 0.f;
    for (int kh = 0; kh < p.kh; ++kh) {
      const int64_t ih = oh * p.sh - p.ph + kh * p.dh;
      if (ih < 0 || ih >= p.h) continue;
      const T* xrow = x + ((n * p.h + ih) * p.w) * p.c + c0;
      const T* wrow = w + static_cast<int64_t>(kh) * p.kw * p.c + c0;
      if constexpr (K > 0) {
        float seg[kTileW + K - 1][V];
#pragma unroll
        for (int j = 0; j < kTileW + K - 1; ++j) {
          const int64_t iw = ow0 - p.pw + j;
          if (iw >= 0 && iw < p.w) {
            LoadVec<T, V>(xrow + iw * p.c, seg[j]);
          } else {
#pragma unroll
            for (int i = 0; i < V; ++i) seg[j][i] = 0.f;
          }
        }
#pragma unroll
        for (int kw = 0; kw < K; ++kw) {
          float wv[V];
          LoadVec<T, V>(wrow + kw * p.c, wv);
#pragma unroll
          for (int t = 0; t < kTileW; ++t)
#pragma unroll
            for (int i = 0; i < V; ++i) acc[t][i] = fmaf(seg[t + kw][i], wv[i], acc[t][i]);
        }
      } else {
        for (int kw = 0; kw < p.kw; ++kw) {
          float wv[V];
          LoadVec<T, V>(wrow + kw * p.c, wv);
#pragma unroll
          for (int t = 0; t < kTileW; ++t) {
            const int64_t iw = (ow0 + t) * p.sw - p.pw + kw * p.dw;
            if (ow0 + t >= p.ow || iw < 0 || iw >= p.w) continue;
            float xv[V];
            LoadVec<T, V>(xrow + iw * p.c, xv);
#pragma unroll
            for (int i = 0; i < V; ++i) acc[t][i] = fmaf(xv[i], wv[i], acc[t][i]);
          }
        }
      }
    }
    float bv[V];
#pragma unroll
    for (int i = 0; i < V; ++i) bv[i] = 0.f;
    if (bias) LoadVec<T, V>(bias + c0, bv);
#pragma unroll
    for (int t = 0; t < kTileW; ++t) {
      if (ow0 + t >= p.ow) break;
      const int64_t off = ((n * p.oh + oh) * p.ow + ow0 + t) * p.c + c0;
      float rv[V];
      if (res) LoadVec<T, V>(res + off, rv);
      float out[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        float v = acc[t][i] + bv[i];
        if (res) v += rv[i];
        out[i] = epilogue::ActAt<ConvAct, float>(p.act, v, p.alpha, p.beta);
      }
      StoreVec<T, V>(y + off, out);
    }
  }
}

template <typename T, int V>
void Launch(const T* x, const T* w, const T* bias, const T* res, T* y, const DepthwiseConvParams& p,
            cudaStream_t stream) {
  const int64_t total = p.n * p.oh * ((p.ow + kTileW - 1) / kTileW) * (p.c / V);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((total + 127) / 128, 1 << 20));
  const bool unit = p.sw == 1 && p.dw == 1;
  if (unit && p.kw == 3)
    DepthwiseConvKernel<T, V, 3><<<grid, 128, 0, stream>>>(x, w, bias, res, y, p);
  else if (unit && p.kw == 5)
    DepthwiseConvKernel<T, V, 5><<<grid, 128, 0, stream>>>(x, w, bias, res, y, p);
  else if (unit && p.kw == 7)
    DepthwiseConvKernel<T, V, 7><<<grid, 128, 0, stream>>>(x, w, bias, res, y, p);
  else
    DepthwiseConvKernel<T, V, 0><<<grid, 128, 0, stream>>>(x, w, bias, res, y, p);
}

}  // namespace

cudaError_t LaunchDepthwiseConv(int dtype, const void* x, const void* w, const void* bias, const void* residual,
                                void* y, const DepthwiseConvParams& p, cudaStream_t stream) {
  if (p.n * p.oh * p.ow * p.c == 0) return cudaSuccess;
  auto aligned = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const bool vec_ptrs = aligned(x) && aligned(w) && aligned(bias) && aligned(residual) && aligned(y);
  const bool ok = KILN_DISPATCH_FLOAT(dtype, T, {
    constexpr int V = 16 / sizeof(T);
    auto args = [&](auto v) {
      Launch<T, decltype(v)::value>(static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
                                    static_cast<const T*>(residual), static_cast<T*>(y), p, stream);
    };
    if (vec_ptrs && p.c % V == 0) args(std::integral_constant<int, V>());
    else args(std::integral_constant<int, 1>());
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace kiln::cuda
