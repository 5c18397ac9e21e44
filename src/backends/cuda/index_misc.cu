// OneHot and NonZero kernels (see index_misc_kernels.h). NonZero flags the nonzero elements, takes an inclusive
// prefix sum of the flags (CUB) to give each its output column, reads the count back (the one synchronization),
// then writes the coordinates.
#include <cub/device/device_scan.cuh>

#include "backends/cuda/index_misc_kernels.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
__device__ __forceinline__ double AsDouble(T v) { return static_cast<double>(v); }
template <>
__device__ __forceinline__ double AsDouble<__half>(__half v) { return static_cast<double>(__half2float(v)); }
template <>
__device__ __forceinline__ double AsDouble<__nv_bfloat16>(__nv_bfloat16 v) {
  return static_cast<double>(__bfloat162float(v));
}

template <typename E, typename I>
__global__ void OneHotKernel(const I* __restrict__ indices, const E* __restrict__ values, E* __restrict__ out,
                             int64_t depth, int64_t inner, int64_t total) {
  const E off = values[0], on = values[1];
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % inner, rest = t / inner;
    const int64_t d = rest % depth, o = rest / depth;
    const double raw = AsDouble(indices[o * inner + i]);
    E r = off;
    if (isfinite(raw) && raw > -9.2e18 && raw < 9.2e18) {
      int64_t v = static_cast<int64_t>(raw);  // truncation, as the CPU reference
      if (v < 0) v += depth;
      if (v == d) r = on;
    }
    out[t] = r;
  }
}

template <typename T>
__device__ __forceinline__ bool IsNonZero(T v) { return v != T(0); }
template <>
__device__ __forceinline__ bool IsNonZero<__half>(__half v) { return __half2float(v) != 0.f; }
template <>
__device__ __forceinline__ bool IsNonZero<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v) != 0.f; }

template <typename T>
__global__ void NonZeroFlagsKernel(const T* __restrict__ x, int64_t* __restrict__ flags, int64_t n) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x)
    flags[t] = IsNonZero(x[t]) ? 1 : 0;
}

// `inclusive` is the inclusive prefix sum of the flags: element i is nonzero where it steps, and its column is the
// sum before it.
__global__ void NonZeroCoordsKernel(const int64_t* __restrict__ inclusive, int64_t n, int rank, Dims8 shape,
                                    int64_t nonzero, int64_t* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t before = i > 0 ? inclusive[i - 1] : 0;
    if (inclusive[i] == before) continue;
    int64_t rem = i;
    for (int d = rank - 1; d >= 0; --d) {
      out[d * nonzero + before] = rem % shape.d[d];
      rem /= shape.d[d];
    }
  }
}

constexpr size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

size_t ScanTempBytes(int64_t count) {
  size_t bytes = 0;
  if (cub::DeviceScan::InclusiveSum(nullptr, bytes, static_cast<int64_t*>(nullptr), count) != cudaSuccess) return 0;
  return bytes;
}

}  // namespace

bool OneHotSupportsIndexType(int dtype) { return DispatchStorage(dtype, [](auto) {}); }

cudaError_t LaunchOneHot(const void* indices, int index_dtype, const void* values, int value_bytes, void* out,
                         int64_t outer, int64_t depth, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * depth * inner;
  if (total <= 0) return cudaSuccess;
  bool ok = false;
  DispatchElemBytes(value_bytes, [&](auto etag) {
    using E = typename decltype(etag)::type;
    ok = DispatchStorage(index_dtype, [&](auto itag) {
      using I = typename decltype(itag)::type;
      OneHotKernel<<<GridFor(total), 256, 0, stream>>>(static_cast<const I*>(indices), static_cast<const E*>(values),
                                                       static_cast<E*>(out), depth, inner, total);
    });
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

bool NonZeroSupportsType(int dtype) { return DispatchStorage(dtype, [](auto) {}); }

size_t NonZeroWorkspaceBytes(int64_t count) {
  if (count <= 0) return 0;
  return AlignUp(static_cast<size_t>(count) * sizeof(int64_t), 256) + ScanTempBytes(count) + 256;
}

cudaError_t RunNonZero(const void* x, int dtype, int64_t count, int rank, const int64_t* shape, void* workspace,
                       size_t workspace_bytes, int64_t* out, int64_t* nonzero_count, cudaStream_t stream) {
  *nonzero_count = 0;
  if (count <= 0) return cudaSuccess;
  if (rank > kMaxDims || workspace_bytes < NonZeroWorkspaceBytes(count)) return cudaErrorInvalidValue;
  int64_t* flags = static_cast<int64_t*>(workspace);
  const size_t flag_bytes = AlignUp(static_cast<size_t>(count) * sizeof(int64_t), 256);
  void* temp = static_cast<char*>(workspace) + flag_bytes;
  size_t temp_bytes = workspace_bytes - flag_bytes;
  const bool ok = DispatchStorage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    NonZeroFlagsKernel<<<GridFor(count), 256, 0, stream>>>(static_cast<const T*>(x), flags, count);
  });
  if (!ok) return cudaErrorInvalidValue;
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  e = cub::DeviceScan::InclusiveSum(temp, temp_bytes, flags, count, stream);
  if (e != cudaSuccess) return e;
  int64_t total = 0;
  e = cudaMemcpyAsync(&total, flags + count - 1, sizeof(int64_t), cudaMemcpyDeviceToHost, stream);
  if (e != cudaSuccess) return e;
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return e;
  *nonzero_count = total;
  if (total == 0) return cudaSuccess;
  Dims8 dims{};
  int r = rank;
  if (r == 0) {
    r = 1;
    dims.d[0] = 1;
  } else {
    for (int d = 0; d < rank; ++d) dims.d[d] = shape[d];
  }
  NonZeroCoordsKernel<<<GridFor(count), 256, 0, stream>>>(flags, count, r, dims, total, out);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
