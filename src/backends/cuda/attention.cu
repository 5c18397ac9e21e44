// The SIMT fused attention kernel (every floating storage type, head sizes up to 256); see attention_kernels.h.
//
// One thread block (4 warps) per (batch, block of 16 query rows); each warp owns 4 query rows. Q rows sit in
// shared memory as float; K and V stream through shared memory 32 keys at a time. Per tile, lane j computes the
// score of key j for the warp's rows, the warp updates each row's running max and sum (online softmax), and
// every lane accumulates the output dims lane, lane + 32, ... in float registers.
#include "backends/cuda/attention_common.cuh"

namespace kiln::cuda {
namespace {

constexpr int kSimtWarps = 4;
constexpr int kSimtThreads = kSimtWarps * 32;
constexpr int kSimtRowsPerWarp = 4;
constexpr int kSimtRows = kSimtWarps * kSimtRowsPerWarp;  // query rows per block
constexpr int kSimtKeys = 32;                              // keys per tile (one per lane)
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Odd row pitch (>= d) of the K tile so that lanes reading different keys hit different banks.
__host__ __device__ __forceinline__ int KPitch(int d) { return d | 1; }

size_t SimtSmemBytes(int d, int dv) {
  return sizeof(float) * (static_cast<size_t>(kSimtRows) * d + static_cast<size_t>(kSimtKeys) * KPitch(d) +
                          static_cast<size_t>(kSimtKeys) * dv);
}

// NV: output dims per lane (dv <= 32 * NV).
template <typename T, int NV>
__global__ void __launch_bounds__(kSimtThreads) AttentionSimtKernel(const AttentionParams p) {
  extern __shared__ float smem[];
  const int d = p.d, dv = p.dv, pitch = KPitch(d);
  float* qs = smem;                     // [kSimtRows][d]
  float* ks = qs + kSimtRows * d;       // [kSimtKeys][pitch]
  float* vs = ks + kSimtKeys * pitch;   // [kSimtKeys][dv]

  const int64_t row_blocks = (p.sq + kSimtRows - 1) / kSimtRows;
  const int64_t b = static_cast<int64_t>(blockIdx.x) / row_blocks;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) % row_blocks) * kSimtRows;
  const attn::BatchOffsets off = attn::OffsetsOf(p, b);
  const T* Q = static_cast<const T*>(p.q) + off.q;
  const T* K = static_cast<const T*>(p.k) + off.k;
  const T* V = static_cast<const T*>(p.v) + off.v;
  const T* M = p.mask ? static_cast<const T*>(p.mask) + off.mask : nullptr;
  const uint8_t* KP = p.keep ? p.keep + off.keep : nullptr;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int idx = tid; idx < kSimtRows * d; idx += kSimtThreads) {
    const int r = idx / d, t = idx % d;
    const int64_t row = row0 + r;
    qs[idx] = row < p.sq ? ToF32(Q[row * p.q_row_stride + t]) : 0.f;
  }

  float m[kSimtRowsPerWarp], l[kSimtRowsPerWarp], o[kSimtRowsPerWarp][NV];
#pragma unroll
  for (int i = 0; i < kSimtRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int c = 0; c < NV; ++c) o[i][c] = 0.f;
  }
  const float* my_q = qs + warp * kSimtRowsPerWarp * d;

  for (int64_t key0 = 0; key0 < p.sk; key0 += kSimtKeys) {
    __syncthreads();  // Q is stored / the previous tile is consumed
    if (p.k_row_stride == 1) {  // K^T: consecutive threads read consecutive keys
      for (int idx = tid; idx < kSimtKeys * d; idx += kSimtThreads) {
        const int j = idx % kSimtKeys, t = idx / kSimtKeys;
        const int64_t key = key0 + j;
        ks[j * pitch + t] = key < p.sk ? ToF32(K[key + t * p.k_dim_stride]) : 0.f;
      }
    } else {
      for (int idx = tid; idx < kSimtKeys * d; idx += kSimtThreads) {
        const int j = idx / d, t = idx % d;
        const int64_t key = key0 + j;
        ks[j * pitch + t] = key < p.sk ? ToF32(K[key * p.k_row_stride + t * p.k_dim_stride]) : 0.f;
      }
    }
    for (int idx = tid; idx < kSimtKeys * dv; idx += kSimtThreads) {
      const int j = idx / dv, t = idx % dv;
      const int64_t key = key0 + j;
      vs[idx] = key < p.sk ? ToF32(V[key * p.v_row_stride + t]) : 0.f;
    }
    __syncthreads();

    const int64_t key = key0 + lane;
    const bool valid_key = key < p.sk;
    float dot[kSimtRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kSimtRowsPerWarp; ++i) dot[i] = 0.f;
    if (valid_key) {
      const float* kr = ks + lane * pitch;
      for (int t = 0; t < d; ++t) {
        const float kv = kr[t];
#pragma unroll
        for (int i = 0; i < kSimtRowsPerWarp; ++i) dot[i] += my_q[i * d + t] * kv;
      }
    }
#pragma unroll
    for (int i = 0; i < kSimtRowsPerWarp; ++i) {
      const int64_t row = row0 + warp * kSimtRowsPerWarp + i;
      float s = -INFINITY;
      if (valid_key && row < p.sq) s = attn::MaskScore<T>(p, M, KP, row, key, dot[i] * p.scale);
      const float m_new = fmaxf(m[i], WarpMax(s));
      const float m_use = attn::UsableMax(m_new);
      const float alpha = __expf(m[i] - m_use);
      const float pj = __expf(s - m_use);
      l[i] = l[i] * alpha + WarpSum(pj);
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < NV; ++c) o[i][c] *= alpha;
      for (int j = 0; j < kSimtKeys; ++j) {
        const float pb = __shfl_sync(kFullMask, pj, j);
        const float* vr = vs + j * dv;
#pragma unroll
        for (int c = 0; c < NV; ++c) {
          const int t = lane + 32 * c;
          if (t < dv) o[i][c] += pb * vr[t];
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kSimtRowsPerWarp; ++i) {
    const int64_t row = row0 + warp * kSimtRowsPerWarp + i;
    if (row >= p.sq) continue;
#pragma unroll
    for (int c = 0; c < NV; ++c) {
      const int t = lane + 32 * c;
      if (t < dv)
        attn::StoreOut<T>(p, p.out, off.out + row * p.out_row_stride + t, attn::FinishOutput(p, o[i][c], m[i], l[i]));
    }
  }
}

template <typename T>
cudaError_t LaunchSimtTyped(const AttentionParams& p, cudaStream_t stream) {
  const int64_t row_blocks = (p.sq + kSimtRows - 1) / kSimtRows;
  const int64_t blocks = row_blocks * p.batch;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  const size_t smem = SimtSmemBytes(p.d, p.dv);
  const dim3 grid(static_cast<unsigned>(blocks));
  switch ((p.dv + 31) / 32) {
    case 0:
    case 1: AttentionSimtKernel<T, 1><<<grid, kSimtThreads, smem, stream>>>(p); break;
    case 2: AttentionSimtKernel<T, 2><<<grid, kSimtThreads, smem, stream>>>(p); break;
    case 3: AttentionSimtKernel<T, 3><<<grid, kSimtThreads, smem, stream>>>(p); break;
    case 4: AttentionSimtKernel<T, 4><<<grid, kSimtThreads, smem, stream>>>(p); break;
    case 5: AttentionSimtKernel<T, 5><<<grid, kSimtThreads, smem, stream>>>(p); break;
    case 6: AttentionSimtKernel<T, 6><<<grid, kSimtThreads, smem, stream>>>(p); break;
    case 7: AttentionSimtKernel<T, 7><<<grid, kSimtThreads, smem, stream>>>(p); break;
    case 8: AttentionSimtKernel<T, 8><<<grid, kSimtThreads, smem, stream>>>(p); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t PrepareSimtTyped() {
  const int bytes = static_cast<int>(SimtSmemBytes(kAttnMaxHeadSize, kAttnMaxHeadSize));
  cudaError_t e = cudaSuccess;
  auto set = [&](auto kernel) {
    if (e == cudaSuccess) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  };
  set(AttentionSimtKernel<T, 1>);
  set(AttentionSimtKernel<T, 2>);
  set(AttentionSimtKernel<T, 3>);
  set(AttentionSimtKernel<T, 4>);
  set(AttentionSimtKernel<T, 5>);
  set(AttentionSimtKernel<T, 6>);
  set(AttentionSimtKernel<T, 7>);
  set(AttentionSimtKernel<T, 8>);
  return e;
}

}  // namespace

cudaError_t PrepareAttentionSimt() {
  cudaError_t e = PrepareSimtTyped<float>();
  if (e == cudaSuccess) e = PrepareSimtTyped<__half>();
  if (e == cudaSuccess) e = PrepareSimtTyped<__nv_bfloat16>();
  return e;
}

cudaError_t LaunchAttentionSimt(const AttentionParams& p, int dtype, cudaStream_t stream) {
  if (p.d < 0 || p.dv < 0 || p.d > kAttnMaxHeadSize || p.dv > kAttnMaxHeadSize) return cudaErrorInvalidValue;
  if (p.batch <= 0 || p.sq <= 0 || p.dv == 0) return cudaSuccess;  // no output elements
  cudaError_t e = cudaErrorInvalidValue;
  const bool known = KILN_DISPATCH_FLOAT(dtype, T, e = LaunchSimtTyped<T>(p, stream));
  return known ? e : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
