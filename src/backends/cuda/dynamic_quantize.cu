// DynamicQuantizeLinear kernels (see dynamic_quantize_kernels.h). The minimum and maximum do not depend on the order
// they are taken in (NaN skipped; -0 never replaces the starting 0), so the block partials give the CPU's values.
#include <algorithm>

#include "backends/cuda/dynamic_quantize_kernels.h"
#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPartials = 1024;  // blocks of the min/max pass

// The CPU's std::min / std::max / std::clamp comparisons, in that order.
__device__ __forceinline__ float MinOf(float lo, float v) { return v < lo ? v : lo; }
__device__ __forceinline__ float MaxOf(float hi, float v) { return hi < v ? v : hi; }
__device__ __forceinline__ float Clamp255(float v) { return v < 0.f ? 0.f : (255.f < v ? 255.f : v); }

// partial[2b], partial[2b + 1]: min and max (each starting at 0) of block b's share of x.
__global__ void MinMaxKernel(const float* __restrict__ x, int64_t n, float* __restrict__ partial) {
  __shared__ float s_lo[kThreads], s_hi[kThreads];
  float lo = 0.f, hi = 0.f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    if (v != v) continue;
    lo = MinOf(lo, v);
    hi = MaxOf(hi, v);
  }
  s_lo[threadIdx.x] = lo;
  s_hi[threadIdx.x] = hi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      s_lo[threadIdx.x] = MinOf(s_lo[threadIdx.x], s_lo[threadIdx.x + s]);
      s_hi[threadIdx.x] = MaxOf(s_hi[threadIdx.x], s_hi[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = s_lo[0];
    partial[2 * blockIdx.x + 1] = s_hi[0];
  }
}

// One thread: params[0] = scale, params[1] = the zero point as a float; the optional outputs.
__global__ void ParamsKernel(const float* __restrict__ partial, int blocks, float* __restrict__ params,
                             float* __restrict__ y_scale, uint8_t* __restrict__ y_zero_point) {
  float lo = 0.f, hi = 0.f;
  for (int b = 0; b < blocks; ++b) {
    lo = MinOf(lo, partial[2 * b]);
    hi = MaxOf(hi, partial[2 * b + 1]);
  }
  const float scale = __fdiv_rn(__fsub_rn(hi, lo), 255.f);
  const float zp = scale == 0.f ? 0.f : rintf(Clamp255(__fdiv_rn(-lo, scale)));
  params[0] = scale;
  params[1] = zp;
  if (y_scale) *y_scale = scale;
  if (y_zero_point) *y_zero_point = static_cast<uint8_t>(zp);
}

__global__ void QuantizeKernel(const float* __restrict__ x, int64_t n, const float* __restrict__ params,
                               uint8_t* __restrict__ y) {
  const float scale = params[0], zp = params[1];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float q = scale == 0.f ? 0.f : __fadd_rn(rintf(__fdiv_rn(x[i], scale)), zp);
    y[i] = static_cast<uint8_t>(q != q ? zp : Clamp255(q));
  }
}

}  // namespace

size_t DynamicQuantizeWorkspaceBytes() { return (2 * kMaxPartials + 2) * sizeof(float); }

cudaError_t LaunchDynamicQuantizeLinear(const float* x, int64_t n, uint8_t* y, float* y_scale, uint8_t* y_zero_point,
                                        void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n < 0 || workspace_bytes < DynamicQuantizeWorkspaceBytes()) return cudaErrorInvalidValue;
  float* partial = static_cast<float*>(workspace);
  float* params = partial + 2 * kMaxPartials;
  const int blocks = static_cast<int>(std::min<int64_t>(GridFor(n, kThreads), kMaxPartials));
  MinMaxKernel<<<blocks, kThreads, 0, stream>>>(x, n, partial);
  ParamsKernel<<<1, 1, 0, stream>>>(partial, blocks, params, y_scale, y_zero_point);
  if (n > 0) QuantizeKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(x, n, params, y);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
