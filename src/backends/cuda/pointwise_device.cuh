// Device helpers shared by the pointwise kernels (*.cu, C++17): compute types of the storage types, loads and
// stores through them, dtype dispatch for launchers, broadcast offsets, and the float op set (PwFloatOp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/pointwise_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda::pw {

// Compute type of a storage type: float for half/bfloat16, the type itself otherwise. bool is stored as uint8_t.
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<__half> { using type = float; };
template <> struct ComputeOf<__nv_bfloat16> { using type = float; };
template <typename T> using C = typename ComputeOf<T>::type;

template <typename T>
__device__ __forceinline__ C<T> Ld(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) return ToF32(p[i]);
  else return p[i];
}
template <typename T>
__device__ __forceinline__ void St(T* p, int64_t i, C<T> v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) p[i] = FromF32<T>(v);
  else p[i] = static_cast<T>(v);
}

// Host-side dispatch (type_dispatch.cuh has the others): calls f(TypeTag<T>{}) for the storage type of `code`;
// returns false when not in the set.
template <typename F>
bool DispatchAll(int code, F&& f) {  // numeric and bool (uint8_t storage)
  if (code == kBool) {
    f(TypeTag<uint8_t>{});
    return true;
  }
  return DispatchNumeric(code, f);
}

// Finishes a launcher: the dispatch result, then the launch status.
inline cudaError_t LaunchResult(bool dispatched) {
  if (!dispatched) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

constexpr int kBlock = 256;

// True when 32-bit indexing covers every output element and operand offset (operands never exceed the output).
inline bool Fits32(const PwBroadcast& bc) { return bc.numel < (int64_t{1} << 31); }

// Element offsets of output element i in operands 0..K-1 (I: uint32_t or int64_t index arithmetic).
template <int K, typename I>
__device__ __forceinline__ void Offsets(const PwBroadcast& bc, I i, I (&off)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
  if (!bc.general) {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = bc.step[k] ? i : I(0);
    return;
  }
  for (int d = bc.rank - 1; d >= 0; --d) {
    const I extent = static_cast<I>(bc.dims[d]);
    const I c = i % extent;
    i /= extent;
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += c * static_cast<I>(bc.strides[k][d]);
  }
}

// ---- float ops (float32 compute) ----
__device__ __forceinline__ float StableSigmoid(float x) {
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}
__device__ __forceinline__ float Softplus(float x) { return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

__device__ __forceinline__ float FloatUnary(int op, float x, float alpha, float beta) {
  switch (op) {
    case kPwRelu: return x < 0.f ? 0.f : x;
    case kPwSigmoid: return StableSigmoid(x);
    case kPwFusedSigmoid: return 1.f / (1.f + expf(-x));
    case kPwTanh: return tanhf(x);
    case kPwExp: return expf(x);
    case kPwLog: return logf(x);
    case kPwNeg: return -x;
    case kPwAbs: return x < 0.f ? -x : x;
    case kPwSqrt: return sqrtf(x);
    case kPwReciprocal: return 1.f / x;
    case kPwErf: return erff(x);
    case kPwFloor: return floorf(x);
    case kPwCeil: return ceilf(x);
    case kPwRound: return rintf(x);  // half to even
    case kPwSign: return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);
    case kPwSoftplus: return Softplus(x);
    case kPwSoftsign: return x / (1.f + fabsf(x));
    case kPwSin: return sinf(x);
    case kPwCos: return cosf(x);
    case kPwHardSwish: {
      const float t = x / 6.f + 0.5f;
      return x * (t < 0.f ? 0.f : (t > 1.f ? 1.f : t));
    }
    case kPwFusedHardSwish: return x * fminf(1.f, fmaxf(0.f, x / 6.f + 0.5f));
    case kPwLeakyRelu: return x < 0.f ? alpha * x : x;
    case kPwElu: return x < 0.f ? alpha * (expf(x) - 1.f) : x;
    case kPwSelu: return x <= 0.f ? beta * (alpha * expf(x) - alpha) : beta * x;
    case kPwHardSigmoid: {
      const float t = alpha * x + beta;
      return t < 0.f ? 0.f : (t > 1.f ? 1.f : t);
    }
    case kPwFusedHardSigmoid: return fminf(1.f, fmaxf(0.f, alpha * x + beta));
    case kPwClip: return x < alpha ? alpha : (x > beta ? beta : x);
    case kPwGelu: return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    case kPwGeluTanh: return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case kPwMish: return x * tanhf(Softplus(x));
    default: return __int_as_float(0x7fc00000);  // unreachable: the layers only pass known ops
  }
}

__device__ __forceinline__ float FloatBinary(int op, float x, float y) {
  switch (op) {
    case kPwAdd: return x + y;
    case kPwSub: return x - y;
    case kPwMul: return x * y;
    case kPwDiv: return x / y;
    case kPwPow: return powf(x, y);
    case kPwMax: return isnan(x) || isnan(y) ? __int_as_float(0x7fc00000) : (x > y ? x : y);
    case kPwMin: return isnan(x) || isnan(y) ? __int_as_float(0x7fc00000) : (x < y ? x : y);
    case kPwPRelu: return x < 0.f ? y * x : x;
    default: return __int_as_float(0x7fc00000);
  }
}

}  // namespace kiln::cuda::pw
