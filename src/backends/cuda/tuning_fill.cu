// Random inputs for timing tactics (see tuning_fill.h).
#include "backends/cuda/tuning_fill.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {

namespace {

// A 32-bit integer hash (two multiply-xorshift rounds) of the index mixed with the seed, mapped to [-1, 1).
__device__ __forceinline__ float HashUniform(uint64_t i, uint32_t seed) {
  uint32_t x = static_cast<uint32_t>(i) ^ (static_cast<uint32_t>(i >> 32) * 0x9E3779B9u) ^ (seed * 0x85EBCA6Bu);
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return static_cast<float>(x >> 8) * (2.0f / 16777216.0f) - 1.0f;  // 24 bits: every value exact in float
}

template <typename T>
__global__ void FillKernel(T* __restrict__ out, int64_t n, uint32_t seed) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = FromF32<T>(HashUniform(static_cast<uint64_t>(i), seed));
}

template <>
__global__ void FillKernel<double>(double* __restrict__ out, int64_t n, uint32_t seed) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = static_cast<double>(HashUniform(static_cast<uint64_t>(i), seed));
}

template <typename T>
Status Launch(void* data, int64_t n, uint32_t seed, cudaStream_t stream) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 4096);
  FillKernel<T><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(static_cast<T*>(data), n, seed);
  return KILN_CUDA_STATUS(cudaGetLastError());
}

}  // namespace

Status FillTuningInput(void* data, DataType dtype, int64_t n, uint32_t seed, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  switch (dtype) {
    case DataType::kFloat32: return Launch<float>(data, n, seed, stream);
    case DataType::kFloat16: return Launch<__half>(data, n, seed, stream);
    case DataType::kBFloat16: return Launch<__nv_bfloat16>(data, n, seed, stream);
    case DataType::kFloat64: return Launch<double>(data, n, seed, stream);
    default:
      return Status(StatusCode::kUnsupported, "only float32/float16/bfloat16/float64 are filled on the device");
  }
}

}  // namespace kiln::cuda
