// Device helpers shared by the pointwise kernels (*.cu, C++17): compute types of the storage types, loads and
// stores through them, dtype dispatch for launchers and broadcast offsets. The float formulas are the functors of
// ops/pointwise_formulas.h (EvalUnary/EvalBinary in ops/pointwise_op.h pick one at run time).
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

}  // namespace kiln::cuda::pw
