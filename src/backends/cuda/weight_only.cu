// kiln.WeightOnlyMatMul's kernels (weight_only_kernels.h). The GEMV reads each packed row with 16-byte streaming loads
// (32 weights per lane per step), so a decode-shaped GEMM moves a quarter of FP16's weight bytes; the weight of
// element k is (q - z) * s, rounded to the scales' type and to X's type as the CPU reference rounds it, then summed
// in float32 (the product with x is a fused multiply-add; the order of the sum is the GPU's).
#include <algorithm>
#include <type_traits>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/weight_only_kernels.h"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 4;  // per block
constexpr int kDefaultCols = 2;    // output columns per warp
constexpr int kDefaultUnroll = 1;  // chunks per lane whose loads are issued together (more measured slower: registers)

__device__ __forceinline__ float RoundTo(int code, float v) {
  if (code == kF16) return __half2float(__float2half_rn(v));
  if (code == kBF16) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

// The same with the type known at compile time (the GEMV's inner loop: a branch per weight there makes cicc take
// minutes per instance).
template <int kCode>
__device__ __forceinline__ float RoundToType(float v) {
  if constexpr (kCode == kF16) return __half2float(__float2half_rn(v));
  else if constexpr (kCode == kBF16) return __bfloat162float(__float2bfloat16_rn(v));
  else return v;
}

// The scales' type when the product must be rounded to it before X's type: a 16-bit type other than X's (0: none).
__host__ __device__ inline int ScaleRounding(const WoqArgs& a) {
  return (a.scale_dtype == kF16 || a.scale_dtype == kBF16) && a.scale_dtype != a.x_dtype ? a.scale_dtype : 0;
}

// The dequantized weight of nibble j (0..7) of a 32-bit word.
template <bool kSigned>
__device__ __forceinline__ int Nibble(uint32_t word, int j) {
  if (kSigned) return static_cast<int>(word << (28 - 4 * j)) >> 28;
  return static_cast<int>((word >> (4 * j)) & 0xfu);
}

// Eight x values from k0 (those at or past k are 0).
template <typename T>
__device__ __forceinline__ void LoadX8(const T* row, int64_t k0, int64_t k, bool vec, float (&v)[8]) {
  if (vec && k0 + 8 <= k) {
    if constexpr (sizeof(T) == 2) {
      const Pack16<T> p = *reinterpret_cast<const Pack16<T>*>(row + k0);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = ToF32(p.v[i]);
    } else {
      const Pack16<T> p0 = *reinterpret_cast<const Pack16<T>*>(row + k0);
      const Pack16<T> p1 = *reinterpret_cast<const Pack16<T>*>(row + k0 + 4);
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = ToF32(p0.v[i]), v[i + 4] = ToF32(p1.v[i]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = k0 + i < k ? ToF32(row[k0 + i]) : 0.f;
}

// Float16 X with float16 scales (the usual INT4 model): eight weights of a word as four half2 pairs (nibbles j and
// j + 4), made exact by the 1024-bias trick and scaled by one half2 multiply. The product of (q - z), a small integer,
// and a half scale is exact in float32, so rounding it to half once, as __hmul2 does, gives the reference's value.
template <bool kSigned>
__device__ __forceinline__ void HalfWeights(uint32_t word, __half2 bias_z, __half2 s2, float (&w)[8]) {
  const uint32_t b = kSigned ? word ^ 0x88888888u : word;  // int4: biased by 8, so every nibble reads as 0..15
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t bits = ((b >> (4 * j)) & 0x000f000fu) | 0x64006400u;  // half2 (1024 + n_j, 1024 + n_{j+4})
    __half2 h = *reinterpret_cast<const __half2*>(&bits);
    h = __hmul2(__hsub2(h, bias_z), s2);
    const float2 f = __half22float2(h);
    w[j] = f.x;
    w[j + 4] = f.y;
  }
}

// One 32-weight chunk (ch) of each of the warp's columns: the lane's share of the dot products.
template <typename T, int kRows, bool kSigned, bool kGroup32, int kSRound, int kCols>
__device__ __forceinline__ void Chunk(const WoqArgs& a, const T* x, int64_t n0, int64_t r0, int64_t ch, bool vec,
                                      const uint4 (&wq)[kCols], float (&acc)[kRows][kCols]) {
  constexpr bool kHalf = std::is_same_v<T, __half> && kSRound == 0 && kGroup32;  // S is half too (or float32: no)
  const int64_t k0 = ch * 32;
  float sc[kCols];
  int zp[kCols];
  __half2 s2[kCols], bz[kCols];
  if (kGroup32) {
    // The group of this chunk: a shift where the group size is 32 times a power of two, else a division.
    const int64_t gi = a.group_shift >= 0 ? (ch >> a.group_shift) : ch / (a.group / 32);
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int64_t j = n0 + c < a.n ? n0 + c : n0;
      const int64_t g = j * a.groups + gi;
      sc[c] = a.scales[g];
      zp[c] = a.zeros ? a.zeros[g] : 0;
      if constexpr (kHalf) {
        s2[c] = __float2half2_rn(sc[c]);
        bz[c] = __float2half2_rn(1024.f + (kSigned ? 8.f : 0.f) + static_cast<float>(zp[c]));
      }
    }
  }
#pragma unroll
  for (int wi = 0; wi < 4; ++wi) {
    float xv[kRows][8];
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      if (r0 + m < a.rows) {
        LoadX8(x + (r0 + m) * a.k, k0 + 8 * wi, a.k, vec, xv[m]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) xv[m][i] = 0.f;
      }
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const uint32_t word = wi == 0 ? wq[c].x : wi == 1 ? wq[c].y : wi == 2 ? wq[c].z : wq[c].w;
      float wv[8];
      if constexpr (kHalf) {
        if (a.scale_dtype == kF16) {
          HalfWeights<kSigned>(word, bz[c], s2[c], wv);
        } else {  // float32 scales with float16 X: the product rounds to half only
#pragma unroll
          for (int j = 0; j < 8; ++j)
            wv[j] = ToF32(FromF32<T>(__fmul_rn(static_cast<float>(Nibble<kSigned>(word, j) - zp[c]), sc[c])));
        }
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float s;
          int z;
          if (kGroup32) {
            s = sc[c], z = zp[c];
          } else {
            const int64_t kk = min(k0 + 8 * wi + j, a.k - 1);
            const int64_t col = n0 + c < a.n ? n0 + c : n0;
            const int64_t g = col * a.groups + kk / a.group;
            s = a.scales[g], z = a.zeros ? a.zeros[g] : 0;
          }
          const float v = __fmul_rn(static_cast<float>(Nibble<kSigned>(word, j) - z), s);
          wv[j] = ToF32(FromF32<T>(RoundToType<kSRound>(v)));  // to the scales' type, then to X's
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int m = 0; m < kRows; ++m) acc[m][c] = fmaf(xv[m][j], wv[j], acc[m][c]);
    }
  }
}

template <typename T, int kRows, bool kSigned, bool kGroup32, int kSRound, int kCols = kDefaultCols, int kUnroll = kDefaultUnroll>
__global__ void __launch_bounds__(kWarps * 32) WoqGemvKernel(WoqArgs a, bool vec) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kCols;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRows;
  if (n0 >= a.n) return;
  const T* x = static_cast<const T*>(a.x);
  float acc[kRows][kCols];
#pragma unroll
  for (int m = 0; m < kRows; ++m)
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[m][c] = 0.f;
  const int64_t chunks = (a.k + 31) / 32;
  // Software pipelined: the next step's kUnroll chunks are loaded before this step's are used, so each warp keeps
  // its loads in flight while it computes (more warps per SM cost registers; measured slower).
  auto load = [&](int64_t ch, uint4 (&w)[kUnroll][kCols]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int64_t cu = ch + 32 * u;
        w[u][c] = n0 + c < a.n && cu < chunks ? __ldcs(reinterpret_cast<const uint4*>(a.w + (n0 + c) * a.ldw) + cu)
                                              : make_uint4(0, 0, 0, 0);
      }
  };
  uint4 cur[kUnroll][kCols];
  load(lane, cur);
  for (int64_t ch = lane; ch < chunks; ch += 32 * kUnroll) {
    uint4 next[kUnroll][kCols];
    load(ch + 32 * kUnroll, next);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (ch + 32 * u < chunks)
        Chunk<T, kRows, kSigned, kGroup32, kSRound, kCols>(a, x, n0, r0, ch + 32 * u, vec, cur[u], acc);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int c = 0; c < kCols; ++c) cur[u][c] = next[u][c];
  }
#pragma unroll
  for (int m = 0; m < kRows; ++m)
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float v = acc[m][c];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      acc[m][c] = v;
    }
  if (lane == 0) {
    T* y = static_cast<T*>(a.y);
#pragma unroll
    for (int m = 0; m < kRows; ++m)
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (r0 + m < a.rows && n0 + c < a.n) y[(r0 + m) * a.n + n0 + c] = FromF32<T>(acc[m][c]);
  }
}

template <typename T, int kRows, bool kGroup32, int kSRound, int kCols = kDefaultCols, int kUnroll = kDefaultUnroll>
cudaError_t Launch(const WoqArgs& a, cudaStream_t stream) {
  const int64_t per_block = static_cast<int64_t>(kWarps) * kCols;
  const dim3 grid(static_cast<unsigned>((a.n + per_block - 1) / per_block),
                  static_cast<unsigned>((a.rows + kRows - 1) / kRows));
  const bool vec = Aligned16(a.x) && (a.k * static_cast<int64_t>(sizeof(T))) % 16 == 0;
  if (a.w_signed)
    WoqGemvKernel<T, kRows, true, kGroup32, kSRound, kCols, kUnroll><<<grid, kWarps * 32, 0, stream>>>(a, vec);
  else
    WoqGemvKernel<T, kRows, false, kGroup32, kSRound, kCols, kUnroll><<<grid, kWarps * 32, 0, stream>>>(a, vec);
  return cudaGetLastError();
}

template <typename T, int kSRound>
cudaError_t LaunchRounded(const WoqArgs& a, cudaStream_t stream) {
  if (a.group % 32 != 0) return Launch<T, 1, false, kSRound>(a, stream);
  if (a.rows <= 1) return Launch<T, 1, true, kSRound>(a, stream);
  return Launch<T, 4, true, kSRound>(a, stream);
}

// Rows per block: a decode step's row (or rows, up to 4) in one pass over the weight; grid.y covers the rest. Group
// sizes that are not multiples of 32 (rare: a scale per value's group) take one row per block. Few instances keep the
// compile short.
template <typename T>
cudaError_t LaunchRows(const WoqArgs& a, cudaStream_t stream) {
  const int s_round = ScaleRounding(a);
  if constexpr (!std::is_same_v<T, __half>)
    if (s_round == kF16) return LaunchRounded<T, kF16>(a, stream);
  if constexpr (!std::is_same_v<T, __nv_bfloat16>)
    if (s_round == kBF16) return LaunchRounded<T, kBF16>(a, stream);
  return LaunchRounded<T, 0>(a, stream);
}

template <typename T>
__global__ void WoqDequantizeKernel(WoqArgs a, T* wd) {
  const int64_t per_row = (a.k + 1) / 2;
  const int s_round = ScaleRounding(a);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.n * per_row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i / per_row, b = i % per_row;
    const uint32_t byte = a.w[j * a.ldw + b];
    for (int h = 0; h < 2; ++h) {
      const int64_t kk = 2 * b + h;
      if (kk >= a.k) break;
      const int64_t g = j * a.groups + kk / a.group;
      const int v = a.w_signed ? Nibble<true>(byte, h) : Nibble<false>(byte, h);
      const float wv = __fmul_rn(static_cast<float>(v - (a.zeros ? a.zeros[g] : 0)), a.scales[g]);
      wd[j * a.k + kk] = FromF32<T>(RoundTo(s_round, wv));  // to the scales' type, then (the store) to X's
    }
  }
}

}  // namespace

cudaError_t LaunchWoqGemv(const WoqArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.n == 0) return cudaSuccess;
  cudaError_t err = cudaErrorInvalidValue;
  if (!KILN_DISPATCH_FLOAT(a.x_dtype, T, err = LaunchRows<T>(a, stream))) return cudaErrorInvalidValue;
  return err;
}

cudaError_t LaunchWoqDequantize(const WoqArgs& a, void* wd, cudaStream_t stream) {
  if (a.n == 0 || a.k == 0) return cudaSuccess;
  const unsigned grid = GridFor(a.n * ((a.k + 1) / 2));
  if (!KILN_DISPATCH_FLOAT(a.x_dtype, T, WoqDequantizeKernel<T><<<grid, 256, 0, stream>>>(a, static_cast<T*>(wd))))
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace kiln::cuda
