// The quantized layers' tiled int8 GEMM (quantized_kernels.h). A block computes a 64 x 64 tile of acc[m][o]; 256
// threads each hold 4 x 4 int32 sums; K advances 32 at a time through shared memory, where both operands are kept as
// int32 (the second already centered on its zero point, 0 in padding). Float8 operands run the same loop over float
// copies, with float32 sums. The epilogue is written with
// round-to-nearest intrinsics (no fused multiply-add) so its float arithmetic is the CPU reference's.
#include <cuda_fp8.h>

#include <algorithm>

#include "backends/cuda/epilogue_pack.cuh"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/quantized_kernels.h"

namespace kiln::cuda {
namespace {

constexpr int kTile = 64, kTileK = 32, kThreads = 256;

__device__ __forceinline__ float Fp8ToFloat(uint8_t v) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(v), __NV_E4M3)));
}

// X(o, k) - zero point for batch item `b`, or 0 in a convolution's padding (float8: X's value; QMatMul only).
template <bool kFp8>
__device__ __forceinline__ std::conditional_t<kFp8, float, int> LoadX(const QGemmArgs& a, int64_t b, int64_t o,
                                                                      int64_t k) {
  if constexpr (kFp8) return Fp8ToFloat(static_cast<const uint8_t*>(a.x)[o * a.k + k]);
  int64_t idx;
  if (!a.conv) {
    idx = o * a.k + k;
  } else {
    const int64_t n = b / a.groups, g = b % a.groups;
    const int64_t ks = static_cast<int64_t>(a.kernel[0]) * a.kernel[1] * a.kernel[2];
    const int64_t c = k / ks;
    int64_t r = k % ks;
    const int kx = static_cast<int>(r % a.kernel[2]);
    r /= a.kernel[2];
    const int ky = static_cast<int>(r % a.kernel[1]);
    const int kz = static_cast<int>(r / a.kernel[1]);
    int64_t q = o;
    const int ox = static_cast<int>(q % a.out[2]);
    q /= a.out[2];
    const int oy = static_cast<int>(q % a.out[1]);
    const int oz = static_cast<int>(q / a.out[1]);
    const int iz = oz * a.stride[0] - a.pad[0] + kz * a.dil[0];
    const int iy = oy * a.stride[1] - a.pad[1] + ky * a.dil[1];
    const int ix = ox * a.stride[2] - a.pad[2] + kx * a.dil[2];
    if (iz < 0 || iz >= a.in[0] || iy < 0 || iy >= a.in[1] || ix < 0 || ix >= a.in[2]) return 0;
    const int64_t cg = a.channels / a.groups;
    idx = a.nhwc ? ((n * a.in[1] + iy) * a.in[2] + ix) * a.channels + g * cg + c
                 : (((n * a.channels + g * cg + c) * a.in[0] + iz) * a.in[1] + iy) * a.in[2] + ix;
  }
  const int v = a.x_unsigned ? static_cast<int>(static_cast<const uint8_t*>(a.x)[idx])
                             : static_cast<int>(static_cast<const int8_t*>(a.x)[idx]);
  return v - a.x_zero_point;
}

// The epilogue of one sum (an int32 sum converted to float as the CPU converts it).
__device__ __forceinline__ void Store(const QGemmArgs& a, int64_t off, int64_t ch, float acc) {
  const float scale = __fmul_rn(a.x_scale, a.w_scales[a.per_channel ? ch : 0]);
  float v = __fmul_rn(acc, scale);
  v = __fadd_rn(v, a.bias ? a.bias[ch] : 0.f);
  if (a.residual) v = __fadd_rn(v, a.residual[off]);
  else if (a.residual_i8) v = __fadd_rn(v, __fmul_rn(static_cast<float>(a.residual_i8[off]), a.r_scale));
  else if (a.residual_f16) v = __fadd_rn(v, __half2float(__ushort_as_half(a.residual_f16[off])));
  v = epilogue::ActAt<GemmAct, float>(a.act.act, v, a.act.alpha, a.act.beta);
  if (a.y_dtype == kF32) {
    static_cast<float*>(a.y)[off] = v;
    return;
  }
  if (a.y_dtype == kF16) {
    static_cast<__half*>(a.y)[off] = __float2half_rn(v);
    return;
  }
  if (a.y_dtype == kF8E4M3) {
    static_cast<uint8_t*>(a.y)[off] =
        static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(v, __fdiv_rn(1.f, a.y_scale)), __NV_SATFINITE, __NV_E4M3));
    return;
  }
  const float lo = a.y_dtype == kU8 ? 0.f : -128.f, hi = a.y_dtype == kU8 ? 255.f : 127.f;
  float q = __fadd_rn(rintf(__fmul_rn(v, __fdiv_rn(1.f, a.y_scale))), static_cast<float>(a.y_zero_point));
  q = isnan(q) ? static_cast<float>(a.y_zero_point) : fminf(hi, fmaxf(lo, q));
  if (a.y_dtype == kU8) static_cast<uint8_t*>(a.y)[off] = static_cast<uint8_t>(q);
  else static_cast<int8_t*>(a.y)[off] = static_cast<int8_t>(q);
}

template <bool kFp8>
__global__ void __launch_bounds__(kThreads) QGemmKernel(QGemmArgs a) {
  using V = std::conditional_t<kFp8, float, int>;  // operands and sums: int32, or float32 for float8
  __shared__ V ws[kTileK][kTile + 1];
  __shared__ V xs[kTileK][kTile + 1];
  const int64_t b = blockIdx.z;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTile, o0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  // conv: the weight rows of this item's group
  const int8_t* w = a.w + (a.conv ? (b % a.groups) * a.m * a.k : 0);
  V acc[4][4] = {};
  for (int64_t k0 = 0; k0 < a.k; k0 += kTileK) {
    for (int e = threadIdx.x; e < kTile * kTileK; e += kThreads) {
      const int kk = e % kTileK, r = e / kTileK;
      const int64_t k = k0 + kk;
      const int64_t m = m0 + r, o = o0 + r;
      if constexpr (kFp8)
        ws[kk][r] = (m < a.m && k < a.k) ? Fp8ToFloat(static_cast<uint8_t>(w[m * a.k + k])) : 0.f;
      else
        ws[kk][r] = (m < a.m && k < a.k) ? static_cast<int>(w[m * a.k + k]) : 0;
      xs[kk][r] = (o < a.o && k < a.k) ? LoadX<kFp8>(a, b, o, k) : V(0);
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTileK; ++kk) {
      V wv[4], xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) wv[i] = ws[kk][ty + 16 * i], xv[i] = xs[kk][tx + 16 * i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += wv[i] * xv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty + 16 * i;
    if (m >= a.m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t o = o0 + tx + 16 * j;
      if (o >= a.o) continue;
      if (a.conv) {
        const int64_t n = b / a.groups, ch = (b % a.groups) * a.m + m;
        Store(a, a.nhwc ? (n * a.o + o) * a.out_channels + ch : (n * a.out_channels + ch) * a.o + o, ch,
              static_cast<float>(acc[i][j]));
      } else {
        Store(a, o * a.m + m, m, static_cast<float>(acc[i][j]));
      }
    }
  }
}

// One block row per output row (blockIdx.y, strided), threads across its columns: no index division, and the
// per-column scale, bias and column sum are read coalesced.
__global__ void QMatMulEpilogueKernel(QGemmArgs a, const int32_t* acc, const int32_t* colsum) {
  const int64_t cols = a.m;
  for (int64_t row = blockIdx.y; row < a.o; row += gridDim.y) {
    const int32_t* r = acc + row * cols;
    for (int64_t m = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; m < cols;
         m += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int32_t v = r[m] - (colsum ? a.x_zero_point * colsum[m] : 0);
      Store(a, row * cols + m, m, static_cast<float>(v));
    }
  }
}

}  // namespace

cudaError_t LaunchQMatMulEpilogue(const QGemmArgs& a, const int32_t* acc, const int32_t* w_colsum,
                                  cudaStream_t stream) {
  if (a.m == 0 || a.o == 0) return cudaSuccess;
  const unsigned bx = static_cast<unsigned>(std::min<int64_t>((a.m + 255) / 256, 64));
  const unsigned by = static_cast<unsigned>(std::min<int64_t>(a.o, 65535));
  QMatMulEpilogueKernel<<<dim3(bx, by), 256, 0, stream>>>(a, acc, w_colsum);
  return cudaGetLastError();
}

cudaError_t LaunchQGemm(const QGemmArgs& a, cudaStream_t stream) {
  if (a.m == 0 || a.o == 0 || a.batch * a.groups == 0) return cudaSuccess;
  const int64_t items = a.conv ? a.batch * a.groups : 1;
  const dim3 grid(static_cast<unsigned>((a.o + kTile - 1) / kTile), static_cast<unsigned>((a.m + kTile - 1) / kTile),
                  static_cast<unsigned>(items));
  if (grid.y > 65535 || grid.z > 65535) return cudaErrorInvalidConfiguration;
  if (a.fp8 && a.conv) return cudaErrorInvalidValue;  // float8 is for QMatMul only
  if (a.fp8) QGemmKernel<true><<<grid, kThreads, 0, stream>>>(a);
  else QGemmKernel<false><<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
