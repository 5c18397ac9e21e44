// The vectorized bias + activation (+ residual) epilogue shared by the GEMM post-op (matmul_kernels.cu) and the
// conv epilogue (conv_kernels.cu): y = act(y + bias[(i / inner) % channels] + residual[i]) in place, in float32,
// one 16-byte pack of y per thread. The activation enum E is GemmAct or ConvAct (same enumerator names); the
// formulas are the scalar kernels' (and the CPU reference's).
#pragma once

#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda::epilogue {

template <typename E, E A>
__device__ __forceinline__ float Act(float x, float alpha, float beta) {
  if constexpr (A == E::kRelu) {
    return x < 0.f ? 0.f : x;
  } else if constexpr (A == E::kLeakyRelu) {
    return x < 0.f ? alpha * x : x;
  } else if constexpr (A == E::kSigmoid) {
    return 1.f / (1.f + expf(-x));
  } else if constexpr (A == E::kTanh) {
    return tanhf(x);
  } else if constexpr (A == E::kClip) {
    return x < alpha ? alpha : (x > beta ? beta : x);
  } else if constexpr (A == E::kHardSigmoid) {
    const float t = alpha * x + beta;
    return t < 0.f ? 0.f : (t > 1.f ? 1.f : t);
  } else if constexpr (A == E::kSiLU) {
    return x / (1.f + expf(-x));
  } else if constexpr (A == E::kGelu) {
    return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
  } else if constexpr (A == E::kGeluTanh) {
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
  } else {
    return x;
  }
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
  for (int i = 0; i < V; ++i) v.v[i] = FromF32<T>(Act<E, A>(f[i], a.alpha, a.beta));
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
