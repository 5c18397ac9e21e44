// Kernels around the cuDNN convolutions (see conv_kernels.h).
#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/epilogue_pack.cuh"
#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {

namespace {

// One thread per output element (grid-stride); the coordinate walk runs from the innermost dim outwards.
template <typename E>
__global__ void WindowCopyKernel(const E* __restrict__ in, E* __restrict__ out, WindowCopyParams p, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t rem = i, src = 0, stride = 1;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t o = rem % p.out_dims[d];
      rem /= p.out_dims[d];
      const int64_t c = o + p.offset[d];
      inside = inside && c >= 0 && c < p.in_dims[d];
      src += c * stride;
      stride *= p.in_dims[d];
    }
    out[i] = inside ? in[src] : E(0);
  }
}

template <typename T>
__global__ void ConvEpilogueKernel(T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ residual,
                                   ConvEpilogueParams p) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += step) {
    float v = ToF32(y[i]);
    if (bias) v += ToF32(bias[(i / p.inner) % p.channels]);
    if (residual) v += ToF32(residual[i]);
    y[i] = FromF32<T>(epilogue::ActAt<ConvAct, float>(p.act, v, p.alpha, p.beta));
  }
}

}  // namespace

cudaError_t LaunchWindowCopy(const void* in, void* out, int elem_bytes, const WindowCopyParams& p,
                             cudaStream_t stream) {
  if (p.rank < 1 || p.rank > 8) return cudaErrorInvalidValue;
  int64_t n = 1;
  for (int d = 0; d < p.rank; ++d) n *= p.out_dims[d];
  if (n == 0) return cudaSuccess;
  const unsigned grid = GridFor(n);
  if (elem_bytes == 2) {
    WindowCopyKernel<uint16_t><<<grid, 256, 0, stream>>>(static_cast<const uint16_t*>(in),
                                                         static_cast<uint16_t*>(out), p, n);
  } else if (elem_bytes == 4) {
    WindowCopyKernel<uint32_t><<<grid, 256, 0, stream>>>(static_cast<const uint32_t*>(in),
                                                         static_cast<uint32_t*>(out), p, n);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchConvEpilogue(void* y, const void* bias, const void* residual, int dtype,
                               const ConvEpilogueParams& p, cudaStream_t stream) {
  if (p.numel == 0) return cudaSuccess;
  if (p.channels <= 0 || p.inner <= 0) return cudaErrorInvalidValue;
  // 16-byte packs where the channel sizes and pointers allow.
  bool packed = false;
  KILN_DISPATCH_FLOAT(dtype, T, packed = epilogue::LaunchBiasActPacks(
                                    static_cast<T*>(y), static_cast<const T*>(bias), static_cast<const T*>(residual),
                                    p.numel, p.inner, p.channels, p.act, p.alpha, p.beta, stream));
  if (packed) return cudaGetLastError();
  const unsigned grid = GridFor(p.numel);
  const bool ok = KILN_DISPATCH_FLOAT(dtype, T, ConvEpilogueKernel<T><<<grid, 256, 0, stream>>>(
                                                    static_cast<T*>(y), static_cast<const T*>(bias),
                                                    static_cast<const T*>(residual), p));
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

namespace {
__global__ void StreamBarrierKernel() {}
}  // namespace

cudaError_t LaunchStreamBarrier(cudaStream_t stream) {
  StreamBarrierKernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace kiln::cuda
