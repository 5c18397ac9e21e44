// The tensor-core fused attention kernel (float16/bfloat16, d == dv in {32, 64, 80, 96, 128}); see
// attention_kernels.h.
//
// One thread block (4 warps) per (batch, block of 64 query rows); each warp owns 16 query rows. K and V stream
// through shared memory 64 keys at a time (V stored transposed, [dim][key], so that both operands of the
// mma.sync m16n8k16 B fragments are two consecutive 16-bit values). Per tile, a warp computes its 16 x 64 scores
// S = Q K^T with the Q fragments held in registers, masks and scales them, updates the running max and sum of its
// rows, converts P to the storage type in registers (the S accumulator layout is the A operand layout of the next
// mma) and accumulates O += P V in float registers.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, c = (lane % 4) * 2):
//   A (16x16, row):  reg0 = (g, c..c+1), reg1 = (g+8, c..c+1), reg2 = (g, c+8..c+9), reg3 = (g+8, c+8..c+9)
//   B (16x8, col):   reg0 = (k = c..c+1, n = g), reg1 = (k = c+8..c+9, n = g)
//   C (16x8, f32):   c0,c1 = (g, c..c+1), c2,c3 = (g+8, c..c+1)
#include <cstring>

#include "backends/cuda/attention_common.cuh"

namespace kiln::cuda {
namespace {

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaRows = kMmaWarps * 16;  // query rows per block
constexpr int kMmaKeys = 64;              // keys per tile
constexpr int kVPitch = kMmaKeys + 8;     // halves per row of the transposed V tile (conflict-free reads)

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

// Two consecutive 16-bit values of shared memory (even index) as one register.
__device__ __forceinline__ uint32_t Ld32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Eight 16-bit values src[0], src[stride], ..., src[7 * stride]; one 16-byte load when `vec` (stride 1, aligned).
__device__ __forceinline__ uint4 Load8(const uint16_t* src, int64_t stride, bool vec) {
  if (vec) return *reinterpret_cast<const uint4*>(src);
  uint16_t v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = src[e * stride];
  uint4 r;
  memcpy(&r, v, 16);
  return r;
}

template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads) AttentionMmaKernel(const AttentionParams p, const bool vec) {
  static_assert(D % 16 == 0 && D <= 128, "head size");
  constexpr int kPitch = D + 8;  // halves per row of the Q / K tiles (conflict-free fragment reads, 16-byte rows)
  constexpr int kChunks = D / 8; // 16-byte chunks per row
  __shared__ __align__(16) uint16_t qk_s[kMmaRows * kPitch];  // the Q tile, then each K tile [key][dim]
  __shared__ __align__(16) uint16_t vt_s[D * kVPitch];        // each V tile transposed [dim][key]

  const int64_t row_blocks = (p.sq + kMmaRows - 1) / kMmaRows;
  const int64_t b = static_cast<int64_t>(blockIdx.x) / row_blocks;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) % row_blocks) * kMmaRows;
  const attn::BatchOffsets off = attn::OffsetsOf(p, b);
  const uint16_t* Q = static_cast<const uint16_t*>(p.q) + off.q;
  const uint16_t* K = static_cast<const uint16_t*>(p.k) + off.k;
  const uint16_t* V = static_cast<const uint16_t*>(p.v) + off.v;
  const T* M = p.mask ? static_cast<const T*>(p.mask) + off.mask : nullptr;
  const uint8_t* KP = p.keep ? p.keep + off.keep : nullptr;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c2 = (lane & 3) * 2;

  // Q tile -> shared -> A fragments in registers.
  for (int idx = tid; idx < kMmaRows * kChunks; idx += kMmaThreads) {
    const int r = idx / kChunks, ch = idx % kChunks;
    const int64_t row = row0 + r;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (row < p.sq) val = Load8(Q + row * D + ch * 8, 1, vec);
    *reinterpret_cast<uint4*>(&qk_s[r * kPitch + ch * 8]) = val;
  }
  __syncthreads();
  uint32_t qf[D / 16][4];
  {
    const uint16_t* q0 = &qk_s[(warp * 16 + g) * kPitch + c2];
    const uint16_t* q8 = q0 + 8 * kPitch;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      qf[ks][0] = Ld32(q0 + ks * 16);
      qf[ks][1] = Ld32(q8 + ks * 16);
      qf[ks][2] = Ld32(q0 + ks * 16 + 8);
      qf[ks][3] = Ld32(q8 + ks * 16 + 8);
    }
  }

  // Row h = 0: query row0 + warp * 16 + g; h = 1: that + 8.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[D / 8][4];
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
  const int64_t my_row[2] = {row0 + warp * 16 + g, row0 + warp * 16 + g + 8};
  const bool k_vec = vec && p.k_dim_stride == 1;

  for (int64_t key0 = 0; key0 < p.sk; key0 += kMmaKeys) {
    __syncthreads();  // Q fragments read / previous tile consumed
    for (int idx = tid; idx < kMmaKeys * kChunks; idx += kMmaThreads) {
      const int j = idx / kChunks, ch = idx % kChunks;
      const int64_t key = key0 + j;
      uint4 kv = make_uint4(0, 0, 0, 0);
      if (key < p.sk) kv = Load8(K + key * p.k_row_stride + ch * 8 * p.k_dim_stride, p.k_dim_stride, k_vec);
      *reinterpret_cast<uint4*>(&qk_s[j * kPitch + ch * 8]) = kv;
    }
    // V: consecutive threads take consecutive keys so that the transposed stores hit consecutive halves.
    for (int idx = tid; idx < kMmaKeys * kChunks; idx += kMmaThreads) {
      const int j = idx % kMmaKeys, ch = idx / kMmaKeys;
      const int64_t key = key0 + j;
      uint4 vv = make_uint4(0, 0, 0, 0);
      if (key < p.sk) vv = Load8(V + key * D + ch * 8, 1, vec);
      uint16_t ve[8];
      memcpy(ve, &vv, 16);
#pragma unroll
      for (int e = 0; e < 8; ++e) vt_s[(ch * 8 + e) * kVPitch + j] = ve[e];
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows x 64 keys (8 tiles of 8 keys).
    float s[kMmaKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
      const uint16_t* kr = &qk_s[(nt * 8 + g) * kPitch + c2];
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) MmaOp<T>::Run(s[nt], qf[ks], Ld32(kr + ks * 16), Ld32(kr + ks * 16 + 8));
    }

    // Scale, masks, running max.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        const int64_t key = key0 + nt * 8 + c2 + (e & 1);
        float v = -INFINITY;
        if (key < p.sk && my_row[h] < p.sq) v = attn::MaskScore<T>(p, M, KP, my_row[h], key, s[nt][e] * p.scale);
        s[nt][e] = v;
        tile_max[h] = fmaxf(tile_max[h], v);
      }
    }
    float alpha[2], m_use[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the 4 lanes of a quad share a row
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float m_new = fmaxf(m[h], tile_max[h]);
      m_use[h] = attn::UsableMax(m_new);
      alpha[h] = __expf(m[h] - m_use[h]);
      m[h] = m_new;
      l[h] *= alpha[h];
    }
#pragma unroll
    for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        s[nt][e] = __expf(s[nt][e] - m_use[h]);
        l[h] += s[nt][e];  // this lane's part of the row sum (the quad is summed at the end)
      }
    }
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt][0] *= alpha[0];
      o[nt][1] *= alpha[0];
      o[nt][2] *= alpha[1];
      o[nt][3] *= alpha[1];
    }

    // O += P V: P (16 x 64) as 4 A fragments of 16 keys; V^T tile rows give the B fragments.
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      uint32_t a[4];
      a[0] = MmaOp<T>::Pack(s[2 * kk][0], s[2 * kk][1]);
      a[1] = MmaOp<T>::Pack(s[2 * kk][2], s[2 * kk][3]);
      a[2] = MmaOp<T>::Pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = MmaOp<T>::Pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        const uint16_t* vr = &vt_s[(nt * 8 + g) * kVPitch + kk * 16 + c2];
        MmaOp<T>::Run(o[nt], a, Ld32(vr), Ld32(vr + 8));
      }
    }
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  T* Y = static_cast<T*>(p.out) + b * p.sq * D;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e >> 1;
      if (my_row[h] >= p.sq) continue;
      Y[my_row[h] * D + nt * 8 + c2 + (e & 1)] = FromF32<T>(attn::FinishOutput(p, o[nt][e], m[h], l[h]));
    }
  }
}

bool Aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

template <typename T, int D>
cudaError_t LaunchMmaTyped(const AttentionParams& p, cudaStream_t stream) {
  const int64_t row_blocks = (p.sq + kMmaRows - 1) / kMmaRows;
  const int64_t blocks = row_blocks * p.batch;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  // 16-byte loads of Q/K/V rows: every row start must be 16-byte aligned (D % 8 == 0, so it is enough that the
  // bases and the batch strides are).
  bool vec = Aligned16(p.q) && Aligned16(p.k) && Aligned16(p.v);
  for (int i = 0; i < p.nbd; ++i)
    vec = vec && p.q_bstride[i] % 8 == 0 && p.k_bstride[i] % 8 == 0 && p.v_bstride[i] % 8 == 0;
  AttentionMmaKernel<T, D><<<static_cast<unsigned>(blocks), kMmaThreads, 0, stream>>>(p, vec);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchMmaHead(const AttentionParams& p, cudaStream_t stream) {
  switch (p.d) {
    case 32: return LaunchMmaTyped<T, 32>(p, stream);
    case 64: return LaunchMmaTyped<T, 64>(p, stream);
    case 80: return LaunchMmaTyped<T, 80>(p, stream);
    case 96: return LaunchMmaTyped<T, 96>(p, stream);
    case 128: return LaunchMmaTyped<T, 128>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool AttentionMmaSupports(int dtype, int d, int dv) {
  return (dtype == kF16 || dtype == kBF16) && d == dv && (d == 32 || d == 64 || d == 80 || d == 96 || d == 128);
}

cudaError_t LaunchAttentionMma(const AttentionParams& p, int dtype, cudaStream_t stream) {
  if (!AttentionMmaSupports(dtype, p.d, p.dv)) return cudaErrorInvalidValue;
  if (p.batch <= 0 || p.sq <= 0) return cudaSuccess;  // no output elements
  return dtype == kF16 ? LaunchMmaHead<__half>(p, stream) : LaunchMmaHead<__nv_bfloat16>(p, stream);
}

}  // namespace kiln::cuda
