// A plain tiled GEMM for layers whose matrix products are a side part of the op (the RNN family's input projection,
// DeformConv's product of the weights with the sampled columns): any element strides, any storage types, the sums in
// the accumulator type Acc (float, or double where the data is double), and the result handed to a store functor
// (which may add a bias, convert, or scatter). Not a tuned GEMM: 32 x 32 output tiles through shared memory, four
// outputs per thread.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {

// Element i of p in the accumulator type (double: the exact value; float: through float32).
template <typename Acc, typename T>
__device__ __forceinline__ Acc LoadAcc(const T* p, int64_t i) {
  if constexpr (std::is_same_v<Acc, double>) return LoadF64(p, i);
  else return ToF32(p[i]);
}

// An accumulator value stored as T: double as is; float32, float16 and bfloat16 through float32.
template <typename T, typename Acc>
__device__ __forceinline__ T StoreFromAcc(Acc v) {
  if constexpr (std::is_same_v<T, double>) return static_cast<double>(v);
  else return FromF32<T>(static_cast<float>(v));
}

// C_z(m, n) = sum_k A_z(m, k) B_z(k, n) for z < batch, where A_z(m, k) = a[z * a_z + m * a_m + k * a_k] and
// B_z(k, n) = b[z * b_z + k * b_k + n * b_n].
struct SimpleGemmGeom {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t a_m = 0, a_k = 0, a_z = 0;
  int64_t b_k = 0, b_n = 0, b_z = 0;
};

constexpr int kSimpleGemmTile = 32;
constexpr int kSimpleGemmThreads = 256;  // 8 rows of 32 threads; each thread keeps 4 rows of one column

// store(z, m, n, acc) is called once per output element.
template <typename Acc, typename TA, typename TB, typename Store>
__global__ void __launch_bounds__(kSimpleGemmThreads)
    SimpleGemmKernel(const TA* __restrict__ a, const TB* __restrict__ b, SimpleGemmGeom g, Store store) {
  constexpr int kT = kSimpleGemmTile;
  __shared__ Acc as[kT][kT + 1];  // [m][k]
  __shared__ Acc bs[kT][kT + 1];  // [k][n]
  const int tx = threadIdx.x % kT, ty = threadIdx.x / kT;
  const int64_t tiles_m = (g.m + kT - 1) / kT, tiles_n = (g.n + kT - 1) / kT;
  const int64_t tiles = tiles_m * tiles_n * g.batch;
  // Which operand index the 32 neighbouring threads walk when a tile is loaded: the contiguous one.
  const bool a_along_m = g.a_m == 1 && g.a_k != 1;
  const bool b_along_k = g.b_k == 1 && g.b_n != 1;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {  // uniform across the block
    const int64_t z = tile / (tiles_m * tiles_n), rest = tile % (tiles_m * tiles_n);
    const int64_t m0 = (rest / tiles_n) * kT, n0 = (rest % tiles_n) * kT;
    const TA* az = a + z * g.a_z;
    const TB* bz = b + z * g.b_z;
    Acc acc[kT / 8];
#pragma unroll
    for (int i = 0; i < kT / 8; ++i) acc[i] = Acc(0);
    for (int64_t k0 = 0; k0 < g.k; k0 += kT) {
#pragma unroll
      for (int i = 0; i < kT / 8; ++i) {
        const int r = ty + 8 * i;
        // A tile: as[mm][kk].
        const int mm = a_along_m ? tx : r, kk = a_along_m ? r : tx;
        const int64_t am = m0 + mm, ak = k0 + kk;
        as[mm][kk] = am < g.m && ak < g.k ? LoadAcc<Acc>(az, am * g.a_m + ak * g.a_k) : Acc(0);
        // B tile: bs[kk][nn].
        const int kb = b_along_k ? tx : r, nb = b_along_k ? r : tx;
        const int64_t bk = k0 + kb, bn = n0 + nb;
        bs[kb][nb] = bk < g.k && bn < g.n ? LoadAcc<Acc>(bz, bk * g.b_k + bn * g.b_n) : Acc(0);
      }
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kT; ++kk) {
        const Acc bv = bs[kk][tx];
#pragma unroll
        for (int i = 0; i < kT / 8; ++i) acc[i] += as[ty + 8 * i][kk] * bv;
      }
      __syncthreads();
    }
    const int64_t n = n0 + tx;
#pragma unroll
    for (int i = 0; i < kT / 8; ++i) {
      const int64_t m = m0 + ty + 8 * i;
      if (m < g.m && n < g.n) store(z, m, n, acc[i]);
    }
  }
}

// Blocks for the GEMM (a grid-stride loop over the tiles covers the rest).
inline unsigned SimpleGemmBlocks(const SimpleGemmGeom& g) {
  const int64_t tiles = ((g.m + kSimpleGemmTile - 1) / kSimpleGemmTile) *
                        ((g.n + kSimpleGemmTile - 1) / kSimpleGemmTile) * g.batch;
  return static_cast<unsigned>(tiles < 1 ? 1 : (tiles > (int64_t{1} << 20) ? (int64_t{1} << 20) : tiles));
}

}  // namespace kiln::cuda
