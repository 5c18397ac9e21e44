// The vectorized bias + activation (+ residual) epilogue shared by the GEMM post-op (matmul_kernels.cu) and the
// conv epilogue (conv_kernels.cu): y = act(y + bias[(i / inner) % channels] + residual[i]) in place, in float32,
// one 16-byte pack of y per thread. The activation enum E is GemmAct or ConvAct (same enumerator names); the
// formulas are the scalar kernels' (and the CPU reference's).
#pragma once

#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda::epilogue {

__device__ __forceinline__ float DevExp(float x) { return expf(x); }
__device__ __forceinline__ double DevExp(double x) { return exp(x); }
__device__ __forceinline__ float DevTanh(float x) { return tanhf(x); }
__device__ __forceinline__ double DevTanh(double x) { return tanh(x); }
__device__ __forceinline__ float DevErf(float x) { return erff(x); }
__device__ __forceinline__ double DevErf(double x) { return erf(x); }

// The activations exactly as the CPU reference (backends/cpu/fused.cpp) writes them, in C (float, or double for
// float64 tensors); one formula each for the packed kernels (A known at compile time) and the scalar ones (ActAt).
template <typename E, E A, typename C>
__device__ __forceinline__ C Act(C x, C alpha, C beta) {
  if constexpr (A == E::kRelu) {
    return x < C(0) ? C(0) : x;
  } else if constexpr (A == E::kLeakyRelu) {
    return x < C(0) ? alpha * x : x;
  } else if constexpr (A == E::kSigmoid) {
    return C(1) / (C(1) + DevExp(-x));
  } else if constexpr (A == E::kTanh) {
    return DevTanh(x);
  } else if constexpr (A == E::kClip) {
    return x < alpha ? alpha : (x > beta ? beta : x);
  } else if constexpr (A == E::kHardSigmoid) {
    const C t = alpha * x + beta;
    return t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
  } else if constexpr (A == E::kSiLU) {
    return x / (C(1) + DevExp(-x));
  } else if constexpr (A == E::kGelu) {
    return C(0.5) * x * (C(1) + DevErf(x * C(0.7071067811865476)));
  } else if constexpr (A == E::kGeluTanh) {
    const C k = C(0.7978845608028654);
    return C(0.5) * x * (C(1) + DevTanh(k * (x + C(0.044715) * x * x * x)));
  } else {
    return x;
  }
}

// Act with the activation chosen at run time.
template <typename E, typename C>
__device__ __forceinline__ C ActAt(E act, C x, C alpha, C beta) {
  switch (act) {
    case E::kNone: return x;
    case E::kRelu: return Act<E, E::kRelu>(x, alpha, beta);
    case E::kLeakyRelu: return Act<E, E::kLeakyRelu>(x, alpha, beta);
    case E::kSigmoid: return Act<E, E::kSigmoid>(x, alpha, beta);
    case E::kTanh: return Act<E, E::kTanh>(x, alpha, beta);
    case E::kClip: return Act<E, E::kClip>(x, alpha, beta);
    case E::kHardSigmoid: return Act<E, E::kHardSigmoid>(x, alpha, beta);
    case E::kSiLU: return Act<E, E::kSiLU>(x, alpha, beta);
    case E::kGelu: return Act<E, E::kGelu>(x, alpha, beta);
    case E::kGeluTanh: return Act<E, E::kGeluTanh>(x, alpha, beta);
  }
  return x;
}

// Where a pack's bias comes from: none; kBiasColumn: inner == 1, channels % V == 0, so the pack holds the bias
// pack of channels (u % groups) * V...; kBiasPlane: inner % V == 0, so one channel (u / groups) % channels.
enum BiasMode : int { kNoBias = 0, kBiasColumn = 1, kBiasPlane = 2 };

template <typename T>
struct PackArgs {
  T* y;
  const T* bias;      // null with kNoBias
  const T* residual;  // may be null
  uint64_t packs;     // numel / V
  int mode;           // BiasMode
  uint64_t groups;    // channels / V (column) or inner / V (plane)
  uint64_t channels;
  float alpha, beta;
};

// Pack u covers elements [u * V, u * V + V). I: uint32_t when every pack index fits, else uint64_t.
template <typename I, typename T, typename E, E A>
__device__ __forceinline__ void PackStep(const PackArgs<T>& a, uint64_t u64) {
  using P = Pack16<T>;
  constexpr int V = P::kN;
  const I u = static_cast<I>(u64);
  P v = reinterpret_cast<const P*>(a.y)[u];
  float f[V];
#pragma unroll
  for (int i = 0; i < V; ++i) f[i] = ToF32(v.v[i]);
  if (a.mode == kBiasColumn) {
    const P b = reinterpret_cast<const P*>(a.bias)[u % static_cast<I>(a.groups)];
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] += ToF32(b.v[i]);
  } else if (a.mode == kBiasPlane) {
    const float b = ToF32(a.bias[(u / static_cast<I>(a.groups)) % static_cast<I>(a.channels)]);
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] += b;
  }
  if (a.residual) {
    const P r = reinterpret_cast<const P*>(a.residual)[u];
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] += ToF32(r.v[i]);
  }
#pragma unroll
  for (int i = 0; i < V; ++i) v.v[i] = FromF32<T>(Act<E, A, float>(f[i], a.alpha, a.beta));
  reinterpret_cast<P*>(a.y)[u] = v;
}

template <typename T, typename E, E A>
__global__ void BiasActPackKernel(PackArgs<T> a) {
  const bool small = a.packs <= 0xffffffffull;
  for (uint64_t u = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; u < a.packs;
       u += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    if (small) PackStep<uint32_t, T, E, A>(a, u);
    else PackStep<uint64_t, T, E, A>(a, u);
  }
}

// Launches the packed epilogue over `numel` elements of y laid out as [outer, channels, inner] when the sizes and
// pointers allow it (returns true; the caller checks cudaGetLastError), else launches nothing (false). T: float,
// __half or __nv_bfloat16; bias and residual may be null.
template <typename T, typename E>
bool LaunchBiasActPacks(T* y, const T* bias, const T* residual, int64_t numel, int64_t inner, int64_t channels,
                        E act, float alpha, float beta, cudaStream_t stream) {
  constexpr int V = Pack16<T>::kN;
  if (numel <= 0 || numel % V != 0 || !Aligned16(y) || (residual && !Aligned16(residual))) return false;
  PackArgs<T> a{y, bias, residual, static_cast<uint64_t>(numel / V), kNoBias, 1, static_cast<uint64_t>(channels),
                alpha, beta};
  if (bias) {
    if (inner == 1 && channels % V == 0 && Aligned16(bias)) {
      a.mode = kBiasColumn;
      a.groups = static_cast<uint64_t>(channels / V);
    } else if (inner % V == 0) {
      a.mode = kBiasPlane;
      a.groups = static_cast<uint64_t>(inner / V);
    } else {
      return false;
    }
  }
  const unsigned grid = GridFor(static_cast<int64_t>(a.packs), 256);
  switch (act) {
    case E::kNone: BiasActPackKernel<T, E, E::kNone><<<grid, 256, 0, stream>>>(a); break;
    case E::kRelu: BiasActPackKernel<T, E, E::kRelu><<<grid, 256, 0, stream>>>(a); break;
    case E::kLeakyRelu: BiasActPackKernel<T, E, E::kLeakyRelu><<<grid, 256, 0, stream>>>(a); break;
    case E::kSigmoid: BiasActPackKernel<T, E, E::kSigmoid><<<grid, 256, 0, stream>>>(a); break;
    case E::kTanh: BiasActPackKernel<T, E, E::kTanh><<<grid, 256, 0, stream>>>(a); break;
    case E::kClip: BiasActPackKernel<T, E, E::kClip><<<grid, 256, 0, stream>>>(a); break;
    case E::kHardSigmoid: BiasActPackKernel<T, E, E::kHardSigmoid><<<grid, 256, 0, stream>>>(a); break;
    case E::kSiLU: BiasActPackKernel<T, E, E::kSiLU><<<grid, 256, 0, stream>>>(a); break;
    case E::kGelu: BiasActPackKernel<T, E, E::kGelu><<<grid, 256, 0, stream>>>(a); break;
    case E::kGeluTanh: BiasActPackKernel<T, E, E::kGeluTanh><<<grid, 256, 0, stream>>>(a); break;
    default: return false;
  }
  return true;
}

}  // namespace kiln::cuda::epilogue
