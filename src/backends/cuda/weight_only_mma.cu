// The tensor-core GEMV of kiln.WeightOnlyMatMul (weight_only_kernels.h has the layout): Y^T = W . X^T as
// mma.sync m16n8k16, the weight tile as A (16 output columns x 16 of K) and up to 8 rows of X as B, float32
// accumulators. A weight pair comes out of its word as a 16-bit float pair by one and/or (1024 + q in float16, 128 + q
// in bfloat16: exact), one subtract of the bias and zero point and one multiply by the scale, which rounds the exact
// product (q - z) * s once to X's type, as the reference does. No conversion to float32 is needed, which is what held
// the CUDA-core GEMV to a third of the memory's bandwidth.
#include <cstring>
#include <type_traits>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/weight_only_kernels.h"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 8;   // per block, all on the block's 16 columns, splitting K tile by tile
constexpr int kUnroll = 4;  // tiles per warp whose loads are issued together (2 KiB a warp in flight)

template <typename T>
struct Pair;
template <>
struct Pair<__half> {
  using T2 = __half2;
  static constexpr uint32_t kMagic = 0x64006400u;  // (1024, 1024): the low mantissa bits add 0..15
};
template <>
struct Pair<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  static constexpr uint32_t kMagic = 0x43004300u;  // (128, 128)
};

template <typename T2>
__device__ __forceinline__ T2 AsPair(uint32_t bits) {
  T2 v;
  static_assert(sizeof(T2) == 4, "a pair is 32 bits");
  memcpy(&v, &bits, 4);
  return v;
}
template <typename T2>
__device__ __forceinline__ uint32_t Bits(T2 v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  return b;
}

template <typename T>
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two values of X's row at kb and kb + 1 (0 past k), as a pair's bits.
// The 16 values of X's row from kb (0 past k) as 8 pairs: the lane's share of one tile (see the layout).
template <typename T>
__device__ __forceinline__ void XTile(const T* xr, int64_t kb, int64_t k, bool vec, uint32_t (&b)[8]) {
  if (vec) {  // k a multiple of 8 and X 16-byte aligned: each 8 values are all in or all out
    const uint4 lo = kb < k ? __ldg(reinterpret_cast<const uint4*>(xr + kb)) : make_uint4(0, 0, 0, 0);
    const uint4 hi = kb + 8 < k ? __ldg(reinterpret_cast<const uint4*>(xr + kb + 8)) : make_uint4(0, 0, 0, 0);
    b[0] = lo.x, b[1] = lo.y, b[2] = lo.z, b[3] = lo.w, b[4] = hi.x, b[5] = hi.y, b[6] = hi.z, b[7] = hi.w;
    return;
  }
  const uint16_t* p = reinterpret_cast<const uint16_t*>(xr);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t lo = kb + 2 * i < k ? __ldg(p + kb + 2 * i) : 0u;
    const uint32_t hi = kb + 2 * i + 1 < k ? __ldg(p + kb + 2 * i + 1) : 0u;
    b[i] = lo | (hi << 16);
  }
}

// One warp's share of a column block: tiles kt0, kt0 + kW, ... (kU of them, their loads issued together), every
// tile's four mma steps. The last tile's K past k holds weights of 0 and meets zero X.
template <typename T, int kW, int kU>
__global__ void __launch_bounds__(kW * 32) WoqMmaKernel(WoqMmaArgs a, bool vec) {
  using T2 = typename Pair<T>::T2;
  __shared__ float partial[kW][4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t nt = blockIdx.x, n0 = nt * 16, r0 = static_cast<int64_t>(blockIdx.y) * 8;
  const bool row_ok = r0 + g < a.rows;
  const T* xr = static_cast<const T*>(a.x) + (row_ok ? (r0 + g) * a.k : 0);
  const uint4* w = a.w + nt * a.ktiles * 32 + lane;
  const uint32_t* sb = a.sb + n0 + g;
  const int64_t last_group = (a.k - 1) / a.group;
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  for (int64_t kt0 = warp; kt0 < a.ktiles; kt0 += kW * kU) {
    uint4 q[kU];
    uint32_t sb0[kU], sb8[kU], xb[kU][8];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t kt = kt0 + u * kW, kb = kt * 64 + 16 * t;  // the lane's 16 of K in this tile
      q[u] = kt < a.ktiles ? __ldcs(w + kt * 32) : make_uint4(0, 0, 0, 0);
      int64_t gi = a.group_shift >= 0 ? (kb >> 4) >> a.group_shift : (kb >> 4) / (a.group >> 4);
      gi = gi < last_group ? gi : last_group;
      sb0[u] = __ldg(sb + gi * a.npad);
      sb8[u] = __ldg(sb + gi * a.npad + 8);
      if (row_ok) {
        XTile(xr, kb, a.k, vec, xb[u]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) xb[u][i] = 0u;
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (kt0 + u * kW >= a.ktiles) break;  // past the last tile (the same for the whole warp)
      // Scale and bias of the lane's two columns (g and g + 8), each doubled into a pair.
      const T2 s_g = AsPair<T2>(__byte_perm(sb0[u], 0, 0x1010)), z_g = AsPair<T2>(__byte_perm(sb0[u], 0, 0x3232));
      const T2 s_h = AsPair<T2>(__byte_perm(sb8[u], 0, 0x1010)), z_h = AsPair<T2>(__byte_perm(sb8[u], 0, 0x3232));
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t word = s == 0 ? q[u].x : s == 1 ? q[u].y : s == 2 ? q[u].z : q[u].w;
        uint32_t frag[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {  // fragment registers a0a1, a2a3, a4a5, a6a7: nibbles (r, r + 4)
          const T2 v = AsPair<T2>(((word >> (4 * r)) & 0x000f000fu) | Pair<T>::kMagic);
          frag[r] = Bits(__hmul2(__hsub2(v, r & 1 ? z_h : z_g), r & 1 ? s_h : s_g));
        }
        Mma<T>(c, frag, xb[u][2 * s], xb[u][2 * s + 1]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) partial[warp][i][lane] = c[i];
  __syncthreads();
  if (threadIdx.x < 128) {  // the block's 16 x 8 outputs, each the sum of its warps' shares in a fixed order
    const int i = threadIdx.x >> 5, l = threadIdx.x & 31;
    float v = 0.f;
#pragma unroll
    for (int wi = 0; wi < kW; ++wi) v += partial[wi][i][l];
    const int64_t col = n0 + (l >> 2) + (i >= 2 ? 8 : 0), row = r0 + 2 * (l & 3) + (i & 1);
    if (row < a.rows && col < a.n) static_cast<T*>(a.y)[row * a.n + col] = FromF32<T>(v);
  }
}

__global__ void WoqMmaLayoutKernel(WoqArgs a, int64_t ktiles, int64_t total, uint4* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int lane = static_cast<int>(i & 31), g = lane >> 2, t = lane & 3;
    const int64_t tile = i >> 5, kt = tile % ktiles, nt = tile / ktiles;
    uint32_t words[4];
    for (int s = 0; s < 4; ++s) {
      uint32_t word = 0;
      for (int p = 0; p < 8; ++p) {  // nibble p: column g (+ 8 if p is odd), K 16t + 4s (+ 2 if p & 2) (+ 1 if p & 4)
        const int64_t col = nt * 16 + g + 8 * (p & 1);
        const int64_t kk = kt * 64 + 16 * t + 4 * s + 2 * ((p >> 1) & 1) + (p >> 2);
        if (col >= a.n) continue;  // its scale is 0
        uint32_t q;
        if (kk < a.k) {
          q = (a.w[col * a.ldw + kk / 2] >> (4 * (kk & 1))) & 0xfu;
          if (a.w_signed) q ^= 8u;  // two's complement -8..7 to 0..15
        } else {  // K past k: the zero point, so the weight is 0 (not (0 - z) * s, which a huge scale makes inf)
          q = (a.w_signed ? 8u : 0u) + (a.zeros ? static_cast<uint32_t>(a.zeros[col * a.groups + a.groups - 1]) : 0u);
        }
        word |= (q & 0xfu) << (4 * p);
      }
      words[s] = word;
    }
    out[i] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// wd [n, k] = the weights the GEMV makes, from the same layout and by the same pair arithmetic.
template <typename T>
__global__ void WoqMmaDequantizeKernel(WoqMmaArgs a, int64_t total, T* wd) {
  using T2 = typename Pair<T>::T2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int lane = static_cast<int>(i & 31), g = lane >> 2, t = lane & 3;
    const int64_t tile = i >> 5, kt = tile % a.ktiles, nt = tile / a.ktiles;
    const uint4 q = a.w[i];
    const int64_t kb = kt * 64 + 16 * t;  // the lane's 16 of K, all in one group
    if (kb >= a.k) continue;
    const int64_t gi = (kb >> 4) / (a.group >> 4);
    for (int s = 0; s < 4; ++s) {
      const uint32_t word = s == 0 ? q.x : s == 1 ? q.y : s == 2 ? q.z : q.w;
      for (int r = 0; r < 4; ++r) {
        const int64_t col = nt * 16 + g + 8 * (r & 1), kk = kb + 4 * s + 2 * (r >> 1);
        if (col >= a.n) continue;
        const uint32_t sbv = a.sb[gi * a.npad + col];
        const T2 v = __hmul2(__hsub2(AsPair<T2>(((word >> (4 * r)) & 0x000f000fu) | Pair<T>::kMagic),
                                     AsPair<T2>(__byte_perm(sbv, 0, 0x3232))),
                             AsPair<T2>(__byte_perm(sbv, 0, 0x1010)));
        if (kk < a.k) wd[col * a.k + kk] = v.x;
        if (kk + 1 < a.k) wd[col * a.k + kk + 1] = v.y;
      }
    }
  }
}

}  // namespace

cudaError_t LaunchWoqMmaDequantize(const WoqMmaArgs& a, void* wd, cudaStream_t stream) {
  const int64_t total = (a.n + 15) / 16 * a.ktiles * 32;
  if (total == 0 || a.k == 0) return cudaSuccess;
  if (a.group <= 0 || a.group % 16 != 0) return cudaErrorInvalidValue;
  if (a.x_dtype == kF16)
    WoqMmaDequantizeKernel<__half><<<GridFor(total), 256, 0, stream>>>(a, total, static_cast<__half*>(wd));
  else if (a.x_dtype == kBF16)
    WoqMmaDequantizeKernel<__nv_bfloat16>
        <<<GridFor(total), 256, 0, stream>>>(a, total, static_cast<__nv_bfloat16*>(wd));
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t LaunchWoqMmaLayout(const WoqArgs& a, int64_t ktiles, uint4* out, cudaStream_t stream) {
  const int64_t total = (a.n + 15) / 16 * ktiles * 32;
  if (total == 0) return cudaSuccess;
  WoqMmaLayoutKernel<<<GridFor(total), 256, 0, stream>>>(a, ktiles, total, out);
  return cudaGetLastError();
}

cudaError_t LaunchWoqMma(const WoqMmaArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.n == 0) return cudaSuccess;
  if (a.group <= 0 || a.group % 16 != 0 || (a.rows + 7) / 8 > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((a.n + 15) / 16), static_cast<unsigned>((a.rows + 7) / 8));
  const bool vec = a.k % 8 == 0 && Aligned16(a.x);
  if (a.x_dtype == kF16)
    WoqMmaKernel<__half, kWarps, kUnroll><<<grid, kWarps * 32, 0, stream>>>(a, vec);
  else if (a.x_dtype == kBF16)
    WoqMmaKernel<__nv_bfloat16, kWarps, kUnroll><<<grid, kWarps * 32, 0, stream>>>(a, vec);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace kiln::cuda
