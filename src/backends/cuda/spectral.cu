// Signal-processing kernels around cuFFT (see spectral_kernels.h): one thread per buffer point or output element,
// grid-stride loops. R is the transform's real type (double for the f64 buffer, float otherwise).
#include <algorithm>
#include <type_traits>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/spectral_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

constexpr int kBlock = 256;

template <typename R, typename T>
__device__ __forceinline__ R LoadAs(const T* p, int64_t i) {
  if constexpr (std::is_same_v<R, double>) return LoadF64(p, i);
  else if constexpr (std::is_same_v<T, double>) return static_cast<float>(p[i]);
  else return ToF32(p[i]);
}

template <typename T, typename R>
__device__ __forceinline__ T StoreAs(R v) {
  if constexpr (std::is_same_v<R, double>) return FromF64<T>(v);
  else if constexpr (std::is_same_v<T, double>) return static_cast<double>(v);
  else return FromF32<T>(v);
}

// inner_fastest: consecutive threads take consecutive i (coalesced loads of x where inner > 1); otherwise
// consecutive j (coalesced stores into the buffer).
template <typename T, typename R>
__global__ void DftGatherKernel(const T* __restrict__ x, R* __restrict__ buf, int64_t outer, int64_t m, int64_t inner,
                                int channels, int64_t len, bool irfft, bool inner_fastest) {
  const int64_t total = outer * inner * len;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t o, i, j;
    if (inner_fastest) {
      i = e % inner;
      const int64_t t = e / inner;
      j = t % len;
      o = t / len;
    } else {
      j = e % len;
      const int64_t t = e / len;
      i = t % inner;
      o = t / inner;
    }
    int64_t src = j;
    bool conj = false;
    if (irfft && j > len / 2) {
      src = len - j;
      conj = true;
    }
    R re = R(0), im = R(0);
    if (src < m) {
      const int64_t off = ((o * m + src) * inner + i) * channels;
      re = LoadAs<R>(x, off);
      if (channels == 2) im = LoadAs<R>(x, off + 1);
    }
    if (conj) im = -im;
    const int64_t dst = ((o * inner + i) * len + j) * 2;
    buf[dst] = re;
    buf[dst + 1] = im;
  }
}

template <typename T, typename R>
__global__ void StftFramesKernel(const T* __restrict__ x, const T* __restrict__ window, R* __restrict__ buf,
                                 int64_t batch, int64_t signal, int channels, int64_t frames, int64_t frame,
                                 int64_t step) {
  const int64_t total = batch * frames * frame;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e % frame, bf = e / frame;
    const int64_t b = bf / frames, f = bf - b * frames;
    const int64_t off = (b * signal + f * step + j) * channels;
    const R w = window ? LoadAs<R>(window, j) : R(1);
    const R im = channels == 2 ? LoadAs<R>(x, off + 1) : R(0);
    buf[e * 2] = LoadAs<R>(x, off) * w;
    buf[e * 2 + 1] = im * w;
  }
}

// One thread per output element (o, k, i), in y's order.
template <typename T, typename R>
__global__ void SpectrumStoreKernel(const R* __restrict__ buf, T* __restrict__ y, int64_t outer, int64_t len,
                                    int64_t inner, int64_t out_len, int out_channels, R scale, bool scaled) {
  const int64_t total = outer * out_len * inner;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, t = e / inner;
    const int64_t k = t % out_len, o = t / out_len;
    const int64_t src = ((o * inner + i) * len + k) * 2;
    R re = buf[src], im = buf[src + 1];
    if (scaled) {
      re = re * scale;
      im = im * scale;
    }
    y[e * out_channels] = StoreAs<T>(re);
    if (out_channels == 2) y[e * out_channels + 1] = StoreAs<T>(im);
  }
}

// ---- MelWeightMatrix ----

constexpr int kMelColumnsPerLaunch = 480;  // 482 int64 edges: under 4 KB of kernel parameters with the rest

struct MelEdgeChunk {
  int64_t v[kMelColumnsPerLaunch + 2];
};

// Columns [c0, c0 + cols) of y [spectrum, mels]; edges.v[c] is edge c0 + c.
template <typename T>
__global__ void MelWeightsKernel(T* __restrict__ y, int64_t spectrum, int64_t mels, int64_t c0, int cols,
                                 MelEdgeChunk edges) {
  const int64_t total = spectrum * cols;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(e % cols);
    const int64_t j = e / cols;
    const int64_t lo = edges.v[c], mid = edges.v[c + 1], hi = edges.v[c + 2];
    double w = 0.0;
    if (mid == lo && j == mid) w = 1.0;
    if (mid > lo && j >= lo && j <= mid) w = static_cast<double>(j - lo) / static_cast<double>(mid - lo);
    if (j >= mid && j <= hi - 1) w = static_cast<double>(hi - j) / static_cast<double>(hi - mid);
    y[j * mels + c0 + c] = FromF64<T>(w);
  }
}

template <typename F>
bool DispatchPrecision(bool f64, F&& f) {
  if (f64) f(TypeTag<double>{});
  else f(TypeTag<float>{});
  return true;
}

}  // namespace

bool SpectralSupports(int dtype) { return DispatchFloat(dtype, [](auto) {}); }

cudaError_t LaunchDftGather(int dtype, bool f64, const void* x, void* buffer, int64_t outer, int64_t m, int64_t inner,
                            int channels, int64_t len, bool irfft, cudaStream_t stream) {
  const int64_t total = outer * inner * len;
  if (total <= 0) return cudaSuccess;
  if (channels != 1 && channels != 2) return cudaErrorInvalidValue;
  const bool ok = DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DispatchPrecision(f64, [&](auto rtag) {
      using R = typename decltype(rtag)::type;
      DftGatherKernel<T, R><<<GridFor(total, kBlock), kBlock, 0, stream>>>(
          static_cast<const T*>(x), static_cast<R*>(buffer), outer, m, inner, channels, len, irfft, inner > 1);
    });
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchStftFrames(int dtype, bool f64, const void* x, const void* window, void* buffer, int64_t batch,
                             int64_t signal, int channels, int64_t frames, int64_t frame, int64_t step,
                             cudaStream_t stream) {
  const int64_t total = batch * frames * frame;
  if (total <= 0) return cudaSuccess;
  if (channels != 1 && channels != 2) return cudaErrorInvalidValue;
  const bool ok = DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DispatchPrecision(f64, [&](auto rtag) {
      using R = typename decltype(rtag)::type;
      StftFramesKernel<T, R><<<GridFor(total, kBlock), kBlock, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(window), static_cast<R*>(buffer), batch, signal, channels,
          frames, frame, step);
    });
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchSpectrumStore(int dtype, bool f64, const void* buffer, void* y, int64_t outer, int64_t len,
                                int64_t inner, int64_t out_len, int out_channels, double scale, cudaStream_t stream) {
  const int64_t total = outer * out_len * inner;
  if (total <= 0) return cudaSuccess;
  if ((out_channels != 1 && out_channels != 2) || out_len > len) return cudaErrorInvalidValue;
  const bool ok = DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DispatchPrecision(f64, [&](auto rtag) {
      using R = typename decltype(rtag)::type;
      SpectrumStoreKernel<T, R><<<GridFor(total, kBlock), kBlock, 0, stream>>>(
          static_cast<const R*>(buffer), static_cast<T*>(y), outer, len, inner, out_len, out_channels,
          static_cast<R>(scale), scale != 1.0);
    });
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

bool MelWeightsSupports(int dtype) { return DispatchNumeric(dtype, [](auto) {}); }

cudaError_t LaunchMelWeights(int dtype, void* y, int64_t spectrum, int64_t mels, const int64_t* edges,
                             cudaStream_t stream) {
  if (spectrum <= 0 || mels <= 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  const bool ok = DispatchNumeric(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t c0 = 0; c0 < mels && err == cudaSuccess; c0 += kMelColumnsPerLaunch) {
      const int cols = static_cast<int>(std::min<int64_t>(kMelColumnsPerLaunch, mels - c0));
      MelEdgeChunk chunk{};
      for (int c = 0; c < cols + 2; ++c) chunk.v[c] = edges[c0 + c];
      MelWeightsKernel<T><<<GridFor(spectrum * cols, kBlock), kBlock, 0, stream>>>(static_cast<T*>(y), spectrum,
                                                                                   mels, c0, cols, chunk);
      err = cudaGetLastError();
    }
  });
  return ok ? err : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
