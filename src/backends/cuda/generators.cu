// EyeLike and window kernels (see generator_kernels.h): one thread per output element.
#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/generator_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

constexpr int kBlock = 256;

template <typename E>
__global__ void EyeLikeKernel(E* __restrict__ y, int64_t rows, int64_t cols, int64_t k, E one) {
  const int64_t total = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    y[i] = c - r == k ? one : E(0);
  }
}

// The window value of point i in double, each product and sum rounded on its own (no fused multiply-add) as the
// host computes it.
__device__ __forceinline__ double WindowValue(int kind, int64_t i, double period) {
  constexpr double kPi = 3.14159265358979323846;
  const double a = period > 0 ? __ddiv_rn(__dmul_rn(__dmul_rn(2.0, kPi), static_cast<double>(i)), period) : 0.0;
  const double c = cos(a);
  switch (kind) {
    case kWindowHann: return __dsub_rn(0.5, __dmul_rn(0.5, c));
    case kWindowHamming: return __dsub_rn(25.0 / 46.0, __dmul_rn(21.0 / 46.0, c));
    default: return __dadd_rn(__dsub_rn(0.42, __dmul_rn(0.5, c)), __dmul_rn(0.08, cos(__dmul_rn(2.0, a))));
  }
}

template <typename T>
__global__ void WindowKernel(int kind, T* __restrict__ y, int64_t n, double period) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = FromF64<T>(WindowValue(kind, i, period));
}

}  // namespace

cudaError_t LaunchEyeLike(void* y, int64_t rows, int64_t cols, int64_t k, int elem_size, uint64_t one_bits,
                          cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total <= 0) return cudaSuccess;
  const bool ok = DispatchElemBytes(elem_size, [&](auto tag) {
    using E = typename decltype(tag)::type;
    EyeLikeKernel<E><<<GridFor(total, kBlock), kBlock, 0, stream>>>(static_cast<E*>(y), rows, cols, k,
                                                                   static_cast<E>(one_bits));
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

bool WindowSupports(int dtype) { return DispatchNumeric(dtype, [](auto) {}); }

cudaError_t LaunchWindow(int kind, int dtype, void* y, int64_t n, bool periodic, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const double period = static_cast<double>(periodic ? n : n - 1);
  const bool ok = DispatchNumeric(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    WindowKernel<T><<<GridFor(n, kBlock), kBlock, 0, stream>>>(kind, static_cast<T*>(y), n, period);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
