// The tensor-core fused attention kernel (float16/bfloat16, d == dv in {32, 64, 80, 96, 128}); see
// attention_kernels.h.
//
// One thread block of NW warps (NW = 1, 2, 4 or 8; the launcher picks it from the grid size so that small batches
// still fill the GPU) per (batch, block of 16 * NW query rows); each warp owns 16 query rows. K and V stream through
// shared memory 64 keys at a time, double-buffered: cp.async brings tile t + 1 while the warps work on tile t, K and
// V in separate groups so that S = Q K^T starts before V lands. Fragments come from shared memory with ldmatrix (Q
// and K plain, V transposed with ldmatrix.trans, so V stays [key][dim] as in global memory). Per tile, a warp
// computes its 16 x 64 scores S = Q K^T with the Q fragments held in registers, scales and masks them (see
// kKeyMask / kFullMask), updates the running max and sum of its rows (base-2 exponentials), converts P to the
// storage type in registers (the S accumulator layout is the A operand layout of the next mma) and accumulates
// O += P V in float registers. The output tile goes out through shared memory in 16-byte row segments.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, c = (lane % 4) * 2):
//   A (16x16, row):  reg0 = (g, c..c+1), reg1 = (g+8, c..c+1), reg2 = (g, c+8..c+9), reg3 = (g+8, c+8..c+9)
//   B (16x8, col):   reg0 = (k = c..c+1, n = g), reg1 = (k = c+8..c+9, n = g)
//   C (16x8, f32):   c0,c1 = (g, c..c+1), c2,c3 = (g+8, c..c+1)
// ldmatrix.x4 gives lane l, register r the elements (l / 4, 2 (l % 4) ..+1) of the 8x8 matrix r whose rows lanes
// 8r..8r+7 address (.trans: the transposed element), which is each of the layouts above for the right row choice.
#include <atomic>
#include <cstring>

#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/per_device.h"

namespace kiln::cuda {
namespace {

constexpr int kMmaKeys = 64;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

// Flags of a launch (uniform over the grid).
constexpr int kVecQV = 1;   // Q and V rows are 16-byte aligned: cp.async
constexpr int kVecK = 2;    // K rows likewise (and K's head dim contiguous)
constexpr int kVecOut = 4;  // output pairs are 4-byte aligned
constexpr int kVecOut16 = 8;  // output rows are 16-byte aligned
constexpr int kVecOutQ16 = 16;  // a quantized (one byte per element) output's rows are 16-byte aligned

template <typename T>
struct MmaOp;
template <>
struct MmaOp<__half> {
  static __device__ __forceinline__ void Run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  // Two floats as one 32-bit register of the A operand: `lo` (lower column) in the low half.
  static __device__ __forceinline__ uint32_t Pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &h, 4);
    return r;
  }
};
template <>
struct MmaOp<__nv_bfloat16> {
  static __device__ __forceinline__ void Run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t Pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &h, 4);
    return r;
  }
};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SmemAddr(smem)), "l"(gmem) : "memory");
}
// cp.async of 16 bytes, or 16 zero bytes when !valid (nothing is read; gmem must still be a mapped address).
__device__ __forceinline__ void CpAsync16Z(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void Ldsm4(uint32_t r[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p))
               : "memory");
}
__device__ __forceinline__ void Ldsm4T(uint32_t r[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p))
               : "memory");
}

// 2^x (ex2.approx: 2 ulp; 2^-inf = 0).
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Eight 16-bit values src[0], src[stride], ..., src[7 * stride] (the unaligned / strided fallback).
__device__ __forceinline__ uint4 Load8(const uint16_t* src, int64_t stride) {
  uint16_t v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = src[e * stride];
  uint4 r;
  memcpy(&r, v, 16);
  return r;
}

// ROWS rows of D 16-bit values into shared memory (row pitch D + 8: conflict-free ldmatrix): row r from
// src + r * rs (element t at t * ds); rows at or past `nrows` (>= 1) are zero. Asynchronous (cp.async) when `vec`.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void LoadTile(uint16_t* dst, const uint16_t* src, int64_t nrows, int64_t rs, int64_t ds,
                                         bool vec, int tid) {
  constexpr int kChunks = D / 8;
  constexpr int kPitch = D + 8;
  if constexpr (NT % kChunks == 0 && ROWS % (NT / kChunks) == 0) {
    if (vec) {  // each thread copies one 16-byte column chunk of every (NT / kChunks)-th row
      constexpr int kStep = NT / kChunks;
      const int r0 = tid / kChunks, ch = tid - r0 * kChunks;
      const int n = nrows < ROWS ? static_cast<int>(nrows) : ROWS;
      const uint16_t* g = src + r0 * rs + ch * 8;
      uint16_t* sp = dst + r0 * kPitch + ch * 8;
#pragma unroll
      for (int i = 0; i < ROWS / kStep; ++i) {
        const bool valid = r0 + i * kStep < n;
        CpAsync16Z(sp + i * kStep * kPitch, valid ? g + i * kStep * rs : src, valid);
      }
      return;
    }
  }
#pragma unroll 2
  for (int idx = tid; idx < ROWS * kChunks; idx += NT) {
    const int r = idx / kChunks, ch = idx - (idx / kChunks) * kChunks;
    uint16_t* sp = dst + r * kPitch + ch * 8;
    if (r < nrows) {
      const uint16_t* gp = src + r * rs + ch * 8 * ds;
      if (vec) CpAsync16(sp, gp);
      else *reinterpret_cast<uint4*>(sp) = Load8(gp, ds);
    } else {
      *reinterpret_cast<uint4*>(sp) = make_uint4(0, 0, 0, 0);
    }
  }
}

// How the kernel applies the masks (a template parameter; the launcher picks it).
//   kKeyMask: no mask, or masks that broadcast over the query rows (mask_row == 0, keep_row == 0: BERT's
//             [B, 1, 1, S] padding mask). The score of key j is s * mul[j] + add[j]; the block stages (mul, add)
//             of each key tile in shared memory beside K and V (keys past sk: NaN and -inf; dropped keys: NaN and
//             the fill; a NaN mul means the score is add alone, even for a non-finite s). Registers stay free for S
//             and O.
//   kFullMask: any other broadcast. Each thread loads its mask elements of the tile into registers before the
//             S = Q K^T work, so that the loads issue together and their latency hides behind it.
constexpr int kKeyMask = 0;
constexpr int kFullMask = 1;

template <int D, int NW, int MODE>
constexpr size_t MmaSmemBytes() {
  return sizeof(uint16_t) * static_cast<size_t>(NW * 16 + 4 * kMmaKeys) * (D + 8) +
         (MODE == kKeyMask ? sizeof(float2) * 2 * kMmaKeys : 0);
}

// Blocks per SM that __launch_bounds__ asks registers for: as many as the shared memory allows (228 KiB per SM,
// 1 KiB of it reserved per block), but no more than fit at 128 registers a thread with kKeyMask and D <= 64
// (168 for D = 80; kFullMask: 168 for D <= 64, its mask tile lives in registers). Larger heads are left to the
// compiler (capping them spilled).
template <int D, int NW, int MODE>
constexpr int MmaMinBlocks() {
  const int regs = MODE == kKeyMask ? (D <= 64 ? 128 : (D <= 80 ? 168 : 255)) : (D <= 64 ? 168 : 255);
  const int by_regs = 65536 / (NW * 32 * regs);
  const int by_smem = static_cast<int>(228 * 1024 / (MmaSmemBytes<D, NW, MODE>() + 1024));
  const int blocks = by_regs < by_smem ? by_regs : by_smem;
  return blocks < 1 ? 1 : blocks;
}

template <typename T, int D, int NW, int MODE>
__global__ void __launch_bounds__(NW * 32, MmaMinBlocks<D, NW, MODE>())
    AttentionMmaKernel(const AttentionParams p, const int flags) {
  static_assert(D % 16 == 0 && D <= 128, "head size");
  constexpr int NT = NW * 32, kRows = NW * 16, kPitch = D + 8;
  constexpr int kKeysPer = (kMmaKeys + NT - 1) / NT;  // kKeyMask: keys of a tile whose (mul, add) a thread makes
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* q_s = smem;                         // [kRows][kPitch]; at the end, the output tile
  uint16_t* k_s = q_s + kRows * kPitch;         // [2][kMmaKeys][kPitch]
  uint16_t* v_s = k_s + 2 * kMmaKeys * kPitch;  // [2][kMmaKeys][kPitch]
  float2* kb_s = reinterpret_cast<float2*>(v_s + 2 * kMmaKeys * kPitch);  // kKeyMask: [2][kMmaKeys] (mul, add)

  const uint32_t row_blocks = static_cast<uint32_t>((p.sq + kRows - 1) / kRows);
  const uint32_t b = blockIdx.x / row_blocks;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x - b * row_blocks) * kRows;
  const attn::BatchOffsets off = attn::OffsetsOf<uint32_t>(p, b);
  const uint16_t* Q = static_cast<const uint16_t*>(p.q) + off.q + row0 * p.q_row_stride;
  const uint16_t* K = static_cast<const uint16_t*>(p.k) + off.k;
  const uint16_t* V = static_cast<const uint16_t*>(p.v) + off.v;
  const T* M = p.mask ? static_cast<const T*>(p.mask) + off.mask : nullptr;
  const uint8_t* KP = p.keep ? p.keep + off.keep : nullptr;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  const int lm = lane >> 3, lr = lane & 7;  // ldmatrix: which matrix this lane addresses, and its row
  const bool vec_qv = (flags & kVecQV) != 0, vec_k = (flags & kVecK) != 0;
  const int64_t sk = p.sk;
  const int ntiles = static_cast<int>((sk + kMmaKeys - 1) / kMmaKeys);

  // cp.async groups: {Q, tile 0}, {tile 1}, then one per tile t: tile t + 2 (empty when there is none), issued
  // once every warp is done with tile t's stage. At tile t, all but the newest group (tile t + 1) have landed.
  auto load_kv = [&](int tile) {
    const int64_t key0 = static_cast<int64_t>(tile) * kMmaKeys;
    const int stage = tile & 1;
    LoadTile<kMmaKeys, D, NT>(k_s + stage * kMmaKeys * kPitch, K + key0 * p.k_row_stride, sk - key0,
                              p.k_row_stride, p.k_dim_stride, vec_k, tid);
    LoadTile<kMmaKeys, D, NT>(v_s + stage * kMmaKeys * kPitch, V + key0 * p.v_row_stride, sk - key0,
                              p.v_row_stride, 1, vec_qv, tid);
  };
  LoadTile<kRows, D, NT>(q_s, Q, p.sq - row0, p.q_row_stride, 1, vec_qv, tid);
  if (ntiles > 0) load_kv(0);
  CpAsyncCommit();
  if (ntiles > 1) load_kv(1);
  CpAsyncCommit();

  // kKeyMask: (mul, add) of the keys of a tile, made by the threads tid < kMmaKeys (all keys when NT < 64) from
  // the raw mask values they loaded.
  auto load_keys = [&](int64_t key0, uint16_t (&mraw)[kKeysPer], uint8_t (&kraw)[kKeysPer]) {
#pragma unroll
    for (int i = 0; i < kKeysPer; ++i) {
      const int j = tid + i * NT;
      const int64_t key = key0 + j;
      mraw[i] = 0;
      kraw[i] = 0;
      if (j < kMmaKeys && key < sk) {
        if (M) mraw[i] = reinterpret_cast<const uint16_t*>(M)[key * p.mask_col];
        if (KP) kraw[i] = KP[key * p.keep_col];
      }
    }
  };
  auto store_keys = [&](int64_t key0, const uint16_t (&mraw)[kKeysPer], const uint8_t (&kraw)[kKeysPer]) {
    float2* dst = kb_s + ((key0 / kMmaKeys) & 1) * kMmaKeys;
#pragma unroll
    for (int i = 0; i < kKeysPer; ++i) {
      const int j = tid + i * NT;
      if (j >= kMmaKeys) continue;
      // (mul, add); mul NaN: the score is `add` whatever q.k is (a non-finite q.k times 0 would give NaN).
      float2 e = make_float2(NAN, -INFINITY);  // past the end
      if (key0 + j < sk) {
        T mv;
        memcpy(&mv, &mraw[i], 2);
        const float madd = M ? ToF32(mv) : 0.f;
        const bool drop = KP != nullptr && ((kraw[i] != 0) != (p.keep_if_true != 0));
        // As attn::MaskScore: a dropped score is the fill (plus the mask when the keep mask comes first).
        e = drop ? make_float2(NAN, p.where_first ? p.fill + madd : p.fill) : make_float2(p.scale, madd);
      }
      dst[j] = e;
    }
  };
  // Tiles 0 and 1 now (their loads wait alongside the cp.async copies); tile t + 2's values are loaded when its
  // copies are issued and stored at the start of tile t + 1.
  uint16_t mraw[kKeysPer];
  uint8_t kraw[kKeysPer];
  if constexpr (MODE == kKeyMask) {
    uint16_t mraw1[kKeysPer];
    uint8_t kraw1[kKeysPer];
    load_keys(0, mraw, kraw);
    load_keys(kMmaKeys, mraw1, kraw1);
    if (ntiles > 0) store_keys(0, mraw, kraw);
    if (ntiles > 1) store_keys(kMmaKeys, mraw1, kraw1);
  }

  // kFullMask: rows h = 0: row0 + warp * 16 + g; h = 1: that + 8. Rows past sq read the masks at row sq - 1
  // (never stored).
  const int64_t my_row[2] = {row0 + warp * 16 + g, row0 + warp * 16 + g + 8};
  const T* mrow[2] = {nullptr, nullptr};
  const uint8_t* krow[2] = {nullptr, nullptr};
  if constexpr (MODE == kFullMask) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = my_row[h] < p.sq ? my_row[h] : p.sq - 1;
      if (M) mrow[h] = M + r * p.mask_row;
      if (KP) krow[h] = KP + r * p.keep_row;
    }
  }
  uint32_t qf[D / 16][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[D / 8][4];
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;

  for (int t = 0; t < ntiles; ++t) {
    const int64_t key0 = static_cast<int64_t>(t) * kMmaKeys;
    const int st = t & 1;
    if constexpr (MODE == kKeyMask) {
      // Tile t + 1's values (loaded at tile t - 1) into the stage tile t - 1 used, released at its end.
      if (t >= 1 && t + 1 < ntiles) store_keys(key0 + kMmaKeys, mraw, kraw);
    }
    CpAsyncWait<1>();  // Q and tile t (pending: tile t + 1)
    __syncthreads();
    if (t == 0) {
      const uint16_t* qp = q_s + (warp * 16 + (lm & 1) * 8 + lr) * kPitch + (lm >> 1) * 8;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) Ldsm4(qf[ks], qp + ks * 16);
    }
    const uint16_t* kt = k_s + st * kMmaKeys * kPitch;
    const uint16_t* vt = v_s + st * kMmaKeys * kPitch;

    // kFullMask: this thread's mask elements of the tile, loaded before the mma work and without branches per
    // element (key clamped to sk - 1 past the end; those scores become -inf below). A load per element under a
    // branch serialized ~64 global latencies per tile.
    float madd[kMmaKeys / 8][4];
    uint32_t drop_bits = 0;  // bit nt * 4 + e: the keep mask drops that score
    if (MODE == kFullMask && M != nullptr) {
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t key = key0 + nt * 8 + c2 + (e & 1);
          madd[nt][e] = ToF32(mrow[e >> 1][(key < sk ? key : sk - 1) * p.mask_col]);
        }
    }
    if (MODE == kFullMask && KP) {
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t key = key0 + nt * 8 + c2 + (e & 1);
          const bool keep = krow[e >> 1][(key < sk ? key : sk - 1) * p.keep_col] != 0;
          drop_bits |= static_cast<uint32_t>(keep != (p.keep_if_true != 0)) << (nt * 4 + e);
        }
    }

    // S = Q K^T for this warp's 16 rows x 64 keys (8 tiles of 8 keys, two per ldmatrix.x4).
    float s[kMmaKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kMmaKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
    {
      const uint16_t* kp = kt + ((lm >> 1) * 8 + lr) * kPitch + (lm & 1) * 8;
#pragma unroll
      for (int np = 0; np < kMmaKeys / 16; ++np) {
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
          uint32_t kb[4];
          Ldsm4(kb, kp + np * 16 * kPitch + ks * 16);
          MmaOp<T>::Run(s[2 * np], qf[ks], kb[0], kb[1]);
          MmaOp<T>::Run(s[2 * np + 1], qf[ks], kb[2], kb[3]);
        }
      }
    }

    // Scale and masks (as attn::MaskScore), keys past the end; the tile's row max.
    float tile_max[2] = {-INFINITY, -INFINITY};
    if constexpr (MODE == kKeyMask) {
      const float4* kb = reinterpret_cast<const float4*>(kb_s + st * kMmaKeys);  // (mul, add) of 2 keys
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
        const float4 e = kb[nt * 4 + c2 / 2];  // keys nt * 8 + c2 and + 1
        s[nt][0] = isnan(e.x) ? e.y : fmaf(s[nt][0], e.x, e.y);
        s[nt][1] = isnan(e.z) ? e.w : fmaf(s[nt][1], e.z, e.w);
        s[nt][2] = isnan(e.x) ? e.y : fmaf(s[nt][2], e.x, e.y);
        s[nt][3] = isnan(e.z) ? e.w : fmaf(s[nt][3], e.z, e.w);
        tile_max[0] = fmaxf(tile_max[0], fmaxf(s[nt][0], s[nt][1]));
        tile_max[1] = fmaxf(tile_max[1], fmaxf(s[nt][2], s[nt][3]));
      }
    } else {
      const bool full = key0 + kMmaKeys <= sk;
      const bool masked = M != nullptr || KP != nullptr;
      const float scale = p.scale;
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e >> 1;
          const int64_t key = key0 + nt * 8 + c2 + (e & 1);
          float v = s[nt][e] * scale;
          if (!full && key >= sk) {
            v = -INFINITY;
          } else if (masked) {
            const bool drop = ((drop_bits >> (nt * 4 + e)) & 1u) != 0;
            if (p.where_first) {
              if (drop) v = p.fill;
              if (M) v += madd[nt][e];
            } else {
              if (M) v += madd[nt][e];
              if (drop) v = p.fill;
            }
          }
          s[nt][e] = v;
          tile_max[h] = fmaxf(tile_max[h], v);
        }
      }
    }
    float m_scaled[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the 4 lanes of a quad share a row
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float m_new = fmaxf(m[h], tile_max[h]);
      const float m_use = attn::UsableMax(m_new);
      const float alpha = Exp2((m[h] - m_use) * kLog2e);
      m[h] = m_new;
      l[h] *= alpha;
      m_scaled[h] = m_use * kLog2e;
      if (t > 0) {  // o is still 0 at the first tile
#pragma unroll
        for (int nt = 0; nt < D / 8; ++nt) {
          o[nt][2 * h] *= alpha;
          o[nt][2 * h + 1] *= alpha;
        }
      }
    }

    // P = exp(S - max), packed to the storage type as A fragments (16 keys each); O += P V with V^T fragments
    // from ldmatrix.trans (two 8-dim tiles per x4).
    const uint16_t* vp = vt + ((lm & 1) * 8 + lr) * kPitch + (lm >> 1) * 8;
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      float pe[8];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pe[e] = Exp2(fmaf(s[2 * kk][e], kLog2e, -m_scaled[e >> 1]));
        pe[4 + e] = Exp2(fmaf(s[2 * kk + 1][e], kLog2e, -m_scaled[e >> 1]));
      }
      l[0] += pe[0] + pe[1] + pe[4] + pe[5];  // this lane's part of the row sums (the quad is summed at the end)
      l[1] += pe[2] + pe[3] + pe[6] + pe[7];
      uint32_t a[4];
      a[0] = MmaOp<T>::Pack(pe[0], pe[1]);
      a[1] = MmaOp<T>::Pack(pe[2], pe[3]);
      a[2] = MmaOp<T>::Pack(pe[4], pe[5]);
      a[3] = MmaOp<T>::Pack(pe[6], pe[7]);
#pragma unroll
      for (int np = 0; np < D / 16; ++np) {
        uint32_t vb[4];
        Ldsm4T(vb, vp + kk * 16 * kPitch + np * 16);
        MmaOp<T>::Run(o[2 * np], a, vb[0], vb[1]);
        MmaOp<T>::Run(o[2 * np + 1], a, vb[2], vb[3]);
      }
    }
    if (t + 2 < ntiles) {
      __syncthreads();  // this stage is consumed: tile t + 2 may overwrite it
      load_kv(t + 2);
      if constexpr (MODE == kKeyMask) load_keys(key0 + 2 * kMmaKeys, mraw, kraw);
    }
    CpAsyncCommit();
  }
  CpAsyncWait<0>();
  if (ntiles == 0) __syncthreads();  // Q's copies (by every thread) land before the warps reuse q_s below

  // y = o / l per row, or what attn::FinishOutput gives for no keys and fully masked rows.
  float inv[2], special[2];
  bool is_special[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    is_special[h] = sk == 0 || m[h] == -INFINITY;
    special[h] = sk == 0 || p.nan_to_zero ? 0.f : NAN;
    inv[h] = 1.f / l[h];
  }
  if (p.q_kind >= 0) {
    // A quantized output: each value rounded to T as written, then quantized to one byte (attn::StoreOut's rule),
    // into this warp's rows of q_s (bytes, pitch 2 * kPitch), then out in 16-byte row segments where aligned.
    __syncwarp();
    constexpr int kBytePitch = 2 * kPitch;
    uint8_t* wb = reinterpret_cast<uint8_t*>(q_s + warp * 16 * kPitch);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        const float y0 = is_special[h] ? special[h] : o[nt][2 * h] * inv[h];
        const float y1 = is_special[h] ? special[h] : o[nt][2 * h + 1] * inv[h];
        const uint32_t b0 = attn::QuantizedOutBits(ToF32(FromF32<T>(y0)), p);
        const uint32_t b1 = attn::QuantizedOutBits(ToF32(FromF32<T>(y1)), p);
        *reinterpret_cast<uint16_t*>(wb + (g + 8 * h) * kBytePitch + nt * 8 + c2) = static_cast<uint16_t>(b0 | (b1 << 8));
      }
    __syncwarp();
    uint8_t* Yq = static_cast<uint8_t*>(p.out) + off.out;
    const int64_t wrow0 = row0 + warp * 16;
    const int64_t rows = p.sq - wrow0 < 16 ? p.sq - wrow0 : 16;
    if ((flags & kVecOutQ16) != 0) {
      constexpr int kChunks = D / 16;
#pragma unroll
      for (int idx = lane; idx < 16 * kChunks; idx += 32) {
        const int r = idx / kChunks, ch = idx - (idx / kChunks) * kChunks;
        if (r < rows)
          *reinterpret_cast<uint4*>(Yq + (wrow0 + r) * p.out_row_stride + ch * 16) =
              *reinterpret_cast<const uint4*>(wb + r * kBytePitch + ch * 16);
      }
    } else {
      for (int idx = lane; idx < 16 * D; idx += 32) {
        const int r = idx / D, t = idx - (idx / D) * D;
        if (r < rows) Yq[(wrow0 + r) * p.out_row_stride + t] = wb[r * kBytePitch + t];
      }
    }
    return;
  }
  T* Y = static_cast<T*>(p.out) + off.out;
  if ((flags & kVecOut16) != 0) {
    // Through this warp's rows of q_s (only this warp read them): 16-byte stores of whole row segments. Other
    // lanes of the warp read these rows with ldmatrix; where no block barrier came since (one or two key tiles), the
    // warp barrier orders those reads before the writes (compute-sanitizer racecheck reported the hazard).
    __syncwarp();
    uint16_t* ws = q_s + warp * 16 * kPitch;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        const float y0 = is_special[h] ? special[h] : o[nt][2 * h] * inv[h];
        const float y1 = is_special[h] ? special[h] : o[nt][2 * h + 1] * inv[h];
        *reinterpret_cast<uint32_t*>(ws + (g + 8 * h) * kPitch + nt * 8 + c2) = MmaOp<T>::Pack(y0, y1);
      }
    __syncwarp();
    const int64_t wrow0 = row0 + warp * 16;
    const int64_t rows = p.sq - wrow0 < 16 ? p.sq - wrow0 : 16;
    constexpr int kChunks = D / 8;
#pragma unroll
    for (int idx = lane; idx < 16 * kChunks; idx += 32) {
      const int r = idx / kChunks, ch = idx - (idx / kChunks) * kChunks;
      if (r < rows)
        *reinterpret_cast<uint4*>(Y + (wrow0 + r) * p.out_row_stride + ch * 8) =
            *reinterpret_cast<const uint4*>(ws + r * kPitch + ch * 8);
    }
    return;
  }
  const bool vec_out = (flags & kVecOut) != 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (my_row[h] >= p.sq) continue;
    T* yr = Y + my_row[h] * p.out_row_stride + c2;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      const T y0 = FromF32<T>(is_special[h] ? special[h] : o[nt][2 * h] * inv[h]);
      const T y1 = FromF32<T>(is_special[h] ? special[h] : o[nt][2 * h + 1] * inv[h]);
      if (vec_out) {
        uint16_t pair[2];
        memcpy(&pair[0], &y0, 2);
        memcpy(&pair[1], &y1, 2);
        uint32_t w;
        memcpy(&w, pair, 4);
        *reinterpret_cast<uint32_t*>(yr + nt * 8) = w;
      } else {
        yr[nt * 8] = y0;
        yr[nt * 8 + 1] = y1;
      }
    }
  }
}

bool Aligned(const void* ptr, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) == 0; }

int SmCount() {
  static PerDeviceValue counts;
  return counts.Get([] {
    int dev = 0, c = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || c <= 0)
      c = 132;
    return c;
  });
}

template <typename T, int D, int NW, int MODE>
cudaError_t SetSmem() {
  return cudaFuncSetAttribute(AttentionMmaKernel<T, D, NW, MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(MmaSmemBytes<D, NW, MODE>()));
}

template <typename T, int D, int NW, int MODE>
cudaError_t LaunchMmaTyped(const AttentionParams& p, int flags, cudaStream_t stream) {
  // Once per device (a function attribute is set in the current device's context); PrepareAttentionMma sets every
  // one when the layer is created, so this only finds it done.
  static PerDeviceValue attr;
  const auto e = static_cast<cudaError_t>(attr.Get([] { return static_cast<int>(SetSmem<T, D, NW, MODE>()); }));
  if (e != cudaSuccess) return e;
  const int64_t row_blocks = (p.sq + NW * 16 - 1) / (NW * 16);
  const int64_t blocks = row_blocks * p.batch;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  AttentionMmaKernel<T, D, NW, MODE>
      <<<static_cast<unsigned>(blocks), NW * 32, MmaSmemBytes<D, NW, MODE>(), stream>>>(p, flags);
  return cudaGetLastError();
}

template <typename T, int D, int NW>
cudaError_t LaunchMmaMode(const AttentionParams& p, int flags, bool key_mask, cudaStream_t stream) {
  return key_mask ? LaunchMmaTyped<T, D, NW, kKeyMask>(p, flags, stream)
                  : LaunchMmaTyped<T, D, NW, kFullMask>(p, flags, stream);
}

template <typename T, int D>
cudaError_t LaunchMmaWarps(const AttentionParams& p, int flags, bool key_mask, int warps, cudaStream_t stream) {
  switch (warps) {
    case 1: return LaunchMmaMode<T, D, 1>(p, flags, key_mask, stream);
    case 2: return LaunchMmaMode<T, D, 2>(p, flags, key_mask, stream);
    case 4: return LaunchMmaMode<T, D, 4>(p, flags, key_mask, stream);
    case 8: return LaunchMmaMode<T, D, 8>(p, flags, key_mask, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t LaunchMmaHead(const AttentionParams& p, int flags, bool key_mask, int warps, cudaStream_t stream) {
  switch (p.d) {
    case 32: return LaunchMmaWarps<T, 32>(p, flags, key_mask, warps, stream);
    case 64: return LaunchMmaWarps<T, 64>(p, flags, key_mask, warps, stream);
    case 80: return LaunchMmaWarps<T, 80>(p, flags, key_mask, warps, stream);
    case 96: return LaunchMmaWarps<T, 96>(p, flags, key_mask, warps, stream);
    case 128: return LaunchMmaWarps<T, 128>(p, flags, key_mask, warps, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T, int D, int NW>
cudaError_t PrepareWarps() {
  cudaError_t e = SetSmem<T, D, NW, kKeyMask>();
  if (e == cudaSuccess) e = SetSmem<T, D, NW, kFullMask>();
  return e;
}

template <typename T, int D>
cudaError_t PrepareHead() {
  cudaError_t e = PrepareWarps<T, D, 1>();
  if (e == cudaSuccess) e = PrepareWarps<T, D, 2>();
  if (e == cudaSuccess) e = PrepareWarps<T, D, 4>();
  if (e == cudaSuccess) e = PrepareWarps<T, D, 8>();
  return e;
}

template <typename T>
cudaError_t PrepareTyped() {
  cudaError_t e = PrepareHead<T, 32>();
  if (e == cudaSuccess) e = PrepareHead<T, 64>();
  if (e == cudaSuccess) e = PrepareHead<T, 80>();
  if (e == cudaSuccess) e = PrepareHead<T, 96>();
  if (e == cudaSuccess) e = PrepareHead<T, 128>();
  return e;
}

}  // namespace

bool AttentionMmaSupports(int dtype, int d, int dv) {
  return (dtype == kF16 || dtype == kBF16) && d == dv && (d == 32 || d == 64 || d == 80 || d == 96 || d == 128);
}

cudaError_t PrepareAttentionMma() {
  cudaError_t e = PrepareTyped<__half>();
  if (e == cudaSuccess) e = PrepareTyped<__nv_bfloat16>();
  return e;
}

cudaError_t LaunchAttentionMma(const AttentionParams& p, int dtype, cudaStream_t stream, int warps) {
  if (!AttentionMmaSupports(dtype, p.d, p.dv)) return cudaErrorInvalidValue;
  if (p.batch <= 0 || p.sq <= 0) return cudaSuccess;  // no output elements
  // 16-byte (cp.async) loads of Q/K/V rows: bases, row strides and batch strides 16-byte aligned (D % 8 == 0).
  bool vec_qv = Aligned(p.q, 16) && Aligned(p.v, 16) && p.q_row_stride % 8 == 0 && p.v_row_stride % 8 == 0;
  bool vec_k = Aligned(p.k, 16) && p.k_dim_stride == 1 && p.k_row_stride % 8 == 0;
  bool vec_out = Aligned(p.out, 4) && p.out_row_stride % 2 == 0;
  for (int i = 0; i < p.nbd; ++i) {
    vec_qv = vec_qv && p.q_bstride[i] % 8 == 0 && p.v_bstride[i] % 8 == 0;
    vec_k = vec_k && p.k_bstride[i] % 8 == 0;
    vec_out = vec_out && p.out_bstride[i] % 2 == 0;
  }
  bool vec_out16 = Aligned(p.out, 16) && p.out_row_stride % 8 == 0;
  for (int i = 0; i < p.nbd; ++i) vec_out16 = vec_out16 && p.out_bstride[i] % 8 == 0;
  bool vec_outq16 = Aligned(p.out, 16) && p.out_row_stride % 16 == 0;
  for (int i = 0; i < p.nbd; ++i) vec_outq16 = vec_outq16 && p.out_bstride[i] % 16 == 0;
  const int flags = (vec_qv ? kVecQV : 0) | (vec_k ? kVecK : 0) | (vec_out ? kVecOut : 0) |
                    (vec_out16 ? kVecOut16 : 0) | (vec_outq16 ? kVecOutQ16 : 0);
  // Masks constant over the query rows (or none) are applied per key from shared memory.
  const bool key_mask = (p.mask == nullptr || p.mask_row == 0) && (p.keep == nullptr || p.keep_row == 0);
  if (warps == 0) {
    // The biggest block that still gives ~0.7 blocks per SM: big blocks share each K/V tile among more rows
    // (H100, BERT-base at batch 8 and 32: 8 warps fastest); small ones fill the GPU when there are few (batch,
    // row block) pairs (batch 1: 12 heads x 128 rows). 8 warps only where they keep 16 warps per SM (kKeyMask,
    // D <= 64: 2 blocks of 128 registers a thread).
    const int64_t sms = SmCount();
    const int64_t rows16 = (p.sq + 15) / 16;
    warps = 1;
    for (int w = key_mask && p.d <= 64 ? 8 : 4; w > 1; w /= 2)
      if (10 * ((rows16 + w - 1) / w * p.batch) >= 7 * sms) {
        warps = w;
        break;
      }
  }
  return dtype == kF16 ? LaunchMmaHead<__half>(p, flags, key_mask, warps, stream)
                       : LaunchMmaHead<__nv_bfloat16>(p, flags, key_mask, warps, stream);
}

}  // namespace kiln::cuda
