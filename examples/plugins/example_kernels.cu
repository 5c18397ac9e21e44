// CUDA kernels of the example plugins (launchers declared in example_kernels.h).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include "example_kernels.h"

namespace kiln_examples {

namespace {

__device__ __forceinline__ float Apply(float x, float alpha, float beta, bool relu) {
  const float v = alpha * x + beta;
  return relu ? (v > 0.f ? v : 0.f) : v;
}

__global__ void ScaleShiftF32(const float* x, float* y, int64_t n, float alpha, float beta, bool relu) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = Apply(x[i], alpha, beta, relu);
}

__global__ void ScaleShiftF16(const __half* x, __half* y, int64_t n, float alpha, float beta, bool relu) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = __float2half(Apply(__half2float(x[i]), alpha, beta, relu));
}

constexpr int kSelectThreads = 1024;
constexpr size_t kKeptOffset = 256;  // workspace: the count at 0, the kept elements from here

// One block walks x in tiles: a flag per element, a block-wide exclusive scan, a scatter. Keeps x's order.
__global__ void SelectAboveKernel(const float* x, int64_t n, float threshold, float* kept, int64_t* count) {
  using Scan = cub::BlockScan<int, kSelectThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int64_t base;
  if (threadIdx.x == 0) base = 0;
  __syncthreads();
  for (int64_t start = 0; start < n; start += kSelectThreads) {
    const int64_t i = start + threadIdx.x;
    const float v = i < n ? x[i] : 0.f;
    const int flag = i < n && v > threshold ? 1 : 0;
    int offset = 0, total = 0;
    Scan(scan_storage).ExclusiveSum(flag, offset, total);
    if (flag) kept[base + offset] = v;
    __syncthreads();
    if (threadIdx.x == 0) base += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) *count = base;
}

const char* Check(cudaError_t e) { return e == cudaSuccess ? nullptr : cudaGetErrorString(e); }

}  // namespace

const char* LaunchScaleShift(const void* x, void* y, int64_t n, bool half, float alpha, float beta, bool relu,
                             void* stream) {
  if (n == 0) return nullptr;
  const int threads = 256;
  const int blocks = static_cast<int>(n / threads + 1 < 65535 ? n / threads + 1 : 65535);
  auto s = static_cast<cudaStream_t>(stream);
  if (half)
    ScaleShiftF16<<<blocks, threads, 0, s>>>(static_cast<const __half*>(x), static_cast<__half*>(y), n, alpha, beta,
                                             relu);
  else
    ScaleShiftF32<<<blocks, threads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(y), n, alpha, beta,
                                             relu);
  return Check(cudaGetLastError());
}

size_t SelectAboveWorkspaceBytes(int64_t n) { return kKeptOffset + static_cast<size_t>(n) * sizeof(float); }

const char* RunSelectAbove(const float* x, int64_t n, float threshold, void* workspace, int64_t* count, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  auto* d_count = static_cast<int64_t*>(workspace);
  auto* kept = reinterpret_cast<float*>(static_cast<char*>(workspace) + kKeptOffset);
  SelectAboveKernel<<<1, kSelectThreads, 0, s>>>(x, n, threshold, kept, d_count);
  if (const char* e = Check(cudaGetLastError())) return e;
  if (const char* e = Check(cudaMemcpyAsync(count, d_count, sizeof(int64_t), cudaMemcpyDeviceToHost, s))) return e;
  return Check(cudaStreamSynchronize(s));  // the count decides the output's shape
}

const char* CopySelected(const void* workspace, float* y, int64_t count, void* stream) {
  if (count == 0) return nullptr;
  const void* kept = static_cast<const char*>(workspace) + kKeptOffset;
  return Check(cudaMemcpyAsync(y, kept, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice,
                               static_cast<cudaStream_t>(stream)));
}

}  // namespace kiln_examples
