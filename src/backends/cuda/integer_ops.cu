// Kernels of integer_ops_kernels.h.
//  - MatMulInteger / QLinearMatMul / ConvInteger / QLinearConv: one tiled integer GEMM. A block computes a 64 x 64
//    output tile (256 threads, 4 x 4 outputs each, rows ty + 16 i and columns tx + 16 j so that the shared-memory
//    reads are free of bank conflicts), walking K in steps of 32: the operands are centered (value - zero point) as
//    they are staged in shared memory, multiplied in int32 (a 32-deep step stays below 2^31) and summed across steps
//    in int64, so the sums are the CPU reference's exact ones. The matmuls read B as a matrix (batch broadcasting by
//    strides); the convolutions read it as the implicit im2col of the input (taps in the padding are 0), one GEMM
//    per (image, group). The epilogues requantize as the host does, each operation rounded on its own.
//  - Det: one block per matrix (in shared memory when small, else in the workspace): LU with partial pivoting in
//    double, the pivot search a block reduction that picks the host's row, the elimination spread over the threads.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/integer_ops_kernels.h"
#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 32, kThreads = 256;
constexpr int kTM = kBM / 16, kTN = kBN / 16;  // outputs per thread: rows ty + 16 i, columns tx + 16 j
static_assert(kThreads == 256, "the thread layout is 16 x 16");
static_assert(kThreads % kBN == 0, "a thread loads B tile entries of one column only");
static_assert((kBM * kBK) % kThreads == 0 && (kBK * kBN) % kThreads == 0, "whole tiles per thread");
constexpr int64_t kMaxGridYZ = 65535;

// ---- operand and parameter reads ----

__device__ __forceinline__ int ZeroPointAt(const IntParam& z, int64_t i) {
  if (z.count == 0) return 0;
  const int64_t j = z.count == 1 ? 0 : i;
  return z.dtype == kU8 ? static_cast<int>(static_cast<const uint8_t*>(z.data)[j])
                        : static_cast<int>(static_cast<const int8_t*>(z.data)[j]);
}

__device__ __forceinline__ float ScaleAt(const IntParam& s, int64_t i) {
  const int64_t j = s.count == 1 ? 0 : i;
  switch (s.dtype) {
    case kF16: return __half2float(static_cast<const __half*>(s.data)[j]);
    case kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(s.data)[j]);
    default: return static_cast<const float*>(s.data)[j];
  }
}

// The low 32 bits of an exact sum (the host's static_cast<int32_t> of its int64 sum).
__device__ __forceinline__ int32_t Low32(long long v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<unsigned long long>(v)));
}

// QLinearMatMul's requantization in float32 as the CPU computes it: (a_scale * b_scale) / y_scale, float(sum) times
// that, rounded half to even, plus the zero point, clamped; NaN stores 0.
__device__ __forceinline__ int RequantF32(long long acc, float mult, float zp, float lo, float hi) {
  const float v = __fadd_rn(rintf(__fmul_rn(__ll2float_rn(acc), mult)), zp);
  if (isnan(v)) return 0;
  return static_cast<int>(fminf(hi, fmaxf(lo, v)));
}

// QLinearConv's: double(sum) * double(multiplier) + zero point in double, rounded half to even, clamped; NaN stores
// the zero point.
__device__ __forceinline__ int RequantF64(int32_t sum, float mult, double zp, double lo, double hi) {
  double v = rint(__dadd_rn(__dmul_rn(static_cast<double>(sum), static_cast<double>(mult)), zp));
  if (isnan(v)) v = zp;
  return static_cast<int>(fmin(hi, fmax(lo, v)));
}

__device__ __forceinline__ void Store8(void* y, int dtype, int64_t i, int v) {
  if (dtype == kU8) static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(v);
  else static_cast<int8_t*>(y)[i] = static_cast<int8_t>(v);
}

// ---- the tiled product ----

struct Tiles {
  int a[kBM][kBK + 1];  // [row][k], padded: the staging stores of a warp fall in distinct banks
  int b[kBK][kBN];      // [k][column]
};

// acc[i][j] += sum over k of la(row0 + ty + 16 i, k) * lb(k, col0 + tx + 16 j). la and lb return centered values and
// are called in range only (row < rows, column < cols, k < k); the other tile entries are 0. A thread calls lb for
// the column col0 + threadIdx.x % kBN only, which lets the convolution's loader place its output position once.
template <class LA, class LB>
__device__ __forceinline__ void TileProduct(Tiles& t, int64_t rows, int64_t cols, int64_t k, int64_t row0,
                                            int64_t col0, LA la, LB lb, long long (&acc)[kTM][kTN]) {
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  for (int64_t k0 = 0; k0 < k; k0 += kBK) {
#pragma unroll
    for (int i = 0; i < kBM * kBK / kThreads; ++i) {
      const int e = tid + i * kThreads, r = e / kBK, c = e % kBK;
      const int64_t gr = row0 + r, gk = k0 + c;
      t.a[r][c] = gr < rows && gk < k ? la(gr, gk) : 0;
    }
#pragma unroll
    for (int i = 0; i < kBK * kBN / kThreads; ++i) {
      const int e = tid + i * kThreads, r = e / kBN, c = e % kBN;
      const int64_t gk = k0 + r, gc = col0 + c;
      t.b[r][c] = gk < k && gc < cols ? lb(gk, gc) : 0;
    }
    __syncthreads();
    int part[kTM][kTN] = {};
#pragma unroll 8
    for (int kk = 0; kk < kBK; ++kk) {
      int av[kTM], bv[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i) av[i] = t.a[ty + 16 * i][kk];
#pragma unroll
      for (int j = 0; j < kTN; ++j) bv[j] = t.b[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) part[i][j] += av[i] * bv[j];
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
      for (int j = 0; j < kTN; ++j) acc[i][j] += part[i][j];
    __syncthreads();  // the tiles are restaged next step
  }
}

// ---- MatMulInteger / QLinearMatMul ----

template <typename TA, typename TB>
__global__ void __launch_bounds__(kThreads) IntMatMulKernel(IntMatMulArgs p) {
  __shared__ Tiles t;
  __shared__ int zpa[kBM], zpb[kBN];
  const TA* A = static_cast<const TA*>(p.a);
  const TB* B = static_cast<const TB*>(p.b);
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBN;
  float y_scale = 1.f, y_zp = 0.f, lo = 0.f, hi = 0.f;
  if (p.requant) {
    y_scale = ScaleAt(p.y_scale, 0);
    y_zp = static_cast<float>(ZeroPointAt(p.y_zp, 0));
    lo = p.y_dtype == kU8 ? 0.f : -128.f;
    hi = p.y_dtype == kU8 ? 255.f : 127.f;
  }
  for (int64_t bt = blockIdx.z; bt < p.batches; bt += gridDim.z) {
    int64_t aoff = 0, boff = 0, rest = bt;
    for (int d = p.batch_rank - 1; d >= 0; --d) {
      const int64_t idx = rest % p.batch[d];
      rest /= p.batch[d];
      aoff += idx * p.a_stride[d];
      boff += idx * p.b_stride[d];
    }
    const TA* Ab = A + aoff;
    const TB* Bb = B + boff;
    for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * kBM; row0 < p.m; row0 += static_cast<int64_t>(gridDim.y) * kBM) {
      __syncthreads();  // the zero points of the previous tile are read
      if (tid < kBM) zpa[tid] = row0 + tid < p.m ? ZeroPointAt(p.a_zp, row0 + tid) : 0;
      else if (tid < kBM + kBN) zpb[tid - kBM] = col0 + tid - kBM < p.n ? ZeroPointAt(p.b_zp, col0 + tid - kBM) : 0;
      __syncthreads();
      long long acc[kTM][kTN] = {};
      TileProduct(
          t, p.m, p.n, p.k, row0, col0,
          [&](int64_t r, int64_t q) { return static_cast<int>(Ab[r * p.k + q]) - zpa[r - row0]; },
          [&](int64_t q, int64_t c) { return static_cast<int>(Bb[q * p.n + c]) - zpb[c - col0]; }, acc);
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
        const int64_t row = row0 + ty + 16 * i;
        if (row >= p.m) continue;
        const float a_s = p.requant ? ScaleAt(p.a_scale, row) : 0.f;
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
          const int64_t col = col0 + tx + 16 * j;
          if (col >= p.n) continue;
          const int64_t o = (bt * p.m + row) * p.n + col;
          if (!p.requant) {
            static_cast<int32_t*>(p.y)[o] = Low32(acc[i][j]);
          } else {
            const float mult = __fdiv_rn(__fmul_rn(a_s, ScaleAt(p.b_scale, col)), y_scale);
            Store8(p.y, p.y_dtype, o, RequantF32(acc[i][j], mult, y_zp, lo, hi));
          }
        }
      }
    }
  }
}

template <typename TA>
void LaunchMatMulFor(const IntMatMulArgs& a, dim3 grid, cudaStream_t s) {
  if (a.b_dtype == kU8) IntMatMulKernel<TA, uint8_t><<<grid, kThreads, 0, s>>>(a);
  else IntMatMulKernel<TA, int8_t><<<grid, kThreads, 0, s>>>(a);
}

// ---- ConvInteger / QLinearConv ----

template <typename TX, typename TW>
__global__ void __launch_bounds__(kThreads, 2) IntConvKernel(IntConvArgs p) {
  __shared__ Tiles t;
  __shared__ int zpw[kBM];
  const TX* X = static_cast<const TX*>(p.x);
  const TW* W = static_cast<const TW*>(p.w);
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t mg = p.out_channels / p.groups, cg = p.channels / p.groups;
  const int ks2 = static_cast<int>(p.kernel[2]), ks1 = static_cast<int>(p.kernel[1]);
  const int ksize = static_cast<int>(p.kernel[0]) * ks1 * ks2;
  const int64_t kc = cg * ksize;  // the host checks it fits an int
  const int64_t in_size = p.in[0] * p.in[1] * p.in[2], out_size = p.out[0] * p.out[1] * p.out[2];
  const int in0 = static_cast<int>(p.in[0]), in1 = static_cast<int>(p.in[1]), in2 = static_cast<int>(p.in[2]);
  const int d0 = static_cast<int>(p.dil[0]), d1 = static_cast<int>(p.dil[1]), d2 = static_cast<int>(p.dil[2]);
  const int x_zp = ZeroPointAt(p.x_zp, 0);
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBN;
  // The input window corner of the one output position this thread stages B entries for.
  int base0, base1, base2;
  {
    int64_t rest = col0 + tid % kBN;
    const int64_t o2 = rest % p.out[2];
    rest /= p.out[2];
    const int64_t o1 = rest % p.out[1];
    const int64_t o0 = rest / p.out[1];
    base0 = static_cast<int>(o0 * p.stride[0] - p.pad[0]);
    base1 = static_cast<int>(o1 * p.stride[1] - p.pad[1]);
    base2 = static_cast<int>(o2 * p.stride[2] - p.pad[2]);
  }
  float x_scale = 0.f, y_scale = 1.f;
  double y_zp = 0.0, lo = 0.0, hi = 0.0;
  if (p.requant) {
    x_scale = ScaleAt(p.x_scale, 0);
    y_scale = ScaleAt(p.y_scale, 0);
    y_zp = static_cast<double>(ZeroPointAt(p.y_zp, 0));
    lo = p.y_dtype == kU8 ? 0.0 : -128.0;
    hi = p.y_dtype == kU8 ? 255.0 : 127.0;
  }
  for (int64_t item = blockIdx.z; item < p.batch * p.groups; item += gridDim.z) {
    const int64_t n = item / p.groups, g = item % p.groups;
    const TX* xg = X + (n * p.channels + g * cg) * in_size;
    const TW* wg = W + g * mg * kc;
    for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * kBM; row0 < mg; row0 += static_cast<int64_t>(gridDim.y) * kBM) {
      __syncthreads();  // the zero points of the previous tile are read
      if (tid < kBM) zpw[tid] = row0 + tid < mg ? ZeroPointAt(p.w_zp, g * mg + row0 + tid) : 0;
      __syncthreads();
      long long acc[kTM][kTN] = {};
      TileProduct(
          t, mg, out_size, kc, row0, col0,
          [&](int64_t r, int64_t q) { return static_cast<int>(wg[r * kc + q]) - zpw[r - row0]; },
          [&](int64_t q, int64_t) {
            const int qi = static_cast<int>(q);
            const int ci = qi / ksize;
            int kr = qi - ci * ksize;
            const int k2 = kr % ks2;
            kr /= ks2;
            const int k1 = kr % ks1, k0 = kr / ks1;
            const int i0 = base0 + k0 * d0, i1 = base1 + k1 * d1, i2 = base2 + k2 * d2;
            if (i0 < 0 || i0 >= in0 || i1 < 0 || i1 >= in1 || i2 < 0 || i2 >= in2) return 0;
            return static_cast<int>(xg[ci * in_size + (static_cast<int64_t>(i0) * in1 + i1) * in2 + i2]) - x_zp;
          },
          acc);
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
        const int64_t row = row0 + ty + 16 * i;
        if (row >= mg) continue;
        const int64_t oc = g * mg + row;
        float mult = 0.f;
        long long bias = 0;
        if (p.requant) {
          mult = __fdiv_rn(__fmul_rn(x_scale, ScaleAt(p.w_scale, oc)), y_scale);
          if (p.bias) bias = p.bias[oc];
        }
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
          const int64_t col = col0 + tx + 16 * j;
          if (col >= out_size) continue;
          const int64_t o = (n * p.out_channels + oc) * out_size + col;
          if (!p.requant) static_cast<int32_t*>(p.y)[o] = Low32(acc[i][j]);
          else Store8(p.y, p.y_dtype, o, RequantF64(Low32(acc[i][j] + bias), mult, y_zp, lo, hi));
        }
      }
    }
  }
}

template <typename TX>
void LaunchConvFor(const IntConvArgs& a, dim3 grid, cudaStream_t s) {
  if (a.w_dtype == kU8) IntConvKernel<TX, uint8_t><<<grid, kThreads, 0, s>>>(a);
  else IntConvKernel<TX, int8_t><<<grid, kThreads, 0, s>>>(a);
}

bool Is8BitCode(int dtype) { return dtype == kI8 || dtype == kU8; }

dim3 GemmGrid(int64_t rows, int64_t cols, int64_t batches) {
  return dim3(static_cast<unsigned>((cols + kBN - 1) / kBN),
              static_cast<unsigned>(std::min<int64_t>((rows + kBM - 1) / kBM, kMaxGridYZ)),
              static_cast<unsigned>(std::min<int64_t>(batches, kMaxGridYZ)));
}

// ---- Det ----

constexpr int64_t kDetSharedMaxM = 64;            // (64 * 64 + 64) doubles = 33 KB of shared memory
constexpr int64_t kDetMaxBlocks = 1024;
constexpr int64_t kDetWorkspaceBudget = int64_t{256} << 20;  // bytes of workspace matrices in flight

int64_t DetBlocks(int64_t count, int64_t m) {
  if (m <= kDetSharedMaxM) return std::min<int64_t>(count, int64_t{65535} * 32);
  const int64_t per = (m * m + m) * static_cast<int64_t>(sizeof(double));
  return std::max<int64_t>(1, std::min({count, kDetMaxBlocks, kDetWorkspaceBudget / per}));
}

// The (|value|, row) that the host's scan "first row of strictly largest magnitude" keeps, of two candidates.
__device__ __forceinline__ void PivotMax(double& v, long long& i, double ov, long long oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

template <typename T>
__global__ void DetKernel(const T* __restrict__ x, T* __restrict__ y, int64_t count, int64_t m, double* ws,
                          bool shared) {
  extern __shared__ double smem[];
  __shared__ double red_v[32];
  __shared__ long long red_i[32];
  __shared__ long long piv_s;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  const int64_t mm = m * m;
  double* a = shared ? smem : ws + static_cast<int64_t>(blockIdx.x) * (mm + m);
  double* f = a + mm;  // the elimination factors of the current column
  for (int64_t b = blockIdx.x; b < count; b += gridDim.x) {
    __syncthreads();  // the previous matrix is done with
    for (int64_t i = threadIdx.x; i < mm; i += blockDim.x) a[i] = LoadF64(x, b * mm + i);
    __syncthreads();
    double det = 1;  // every thread computes the same value from the same shared entries
    for (int64_t col = 0; col < m && det != 0; ++col) {
      // Pivot search. A NaN magnitude never wins (the host's '>' is false for it); the column's own row stays the
      // pivot when its entry is NaN, as nothing compares larger.
      double best = -1;
      long long bi = col;
      for (int64_t r = col + threadIdx.x; r < m; r += blockDim.x) {
        const double v = fabs(a[r * m + col]);
        if (v > best) best = v, bi = r;
      }
      for (int o = 16; o > 0; o >>= 1)
        PivotMax(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
      if (lane == 0) red_v[warp] = best, red_i[warp] = bi;
      __syncthreads();
      if (warp == 0) {
        best = lane < nw ? red_v[lane] : -2.0;
        bi = lane < nw ? red_i[lane] : m;
        for (int o = 16; o > 0; o >>= 1)
          PivotMax(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
        if (lane == 0) piv_s = isnan(a[col * m + col]) ? col : bi;
      }
      __syncthreads();
      const int64_t piv = piv_s;
      const double pv = a[piv * m + col];
      if (pv == 0) {
        det = 0;
        break;
      }
      __syncthreads();  // every thread has read pv and piv_s
      if (piv != col) {
        for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
          const double s = a[piv * m + k];
          a[piv * m + k] = a[col * m + k];
          a[col * m + k] = s;
        }
        det = -det;
        __syncthreads();  // the rows are swapped (uniform: piv is the block's)
      }
      det = __dmul_rn(det, pv);
      for (int64_t r = col + 1 + threadIdx.x; r < m; r += blockDim.x) f[r] = __ddiv_rn(a[r * m + col], pv);
      __syncthreads();  // the factors are ready
      const int64_t w = m - col - 1;
      for (int64_t e = threadIdx.x; e < w * w; e += blockDim.x) {
        const int64_t r = col + 1 + e / w, k = col + 1 + e % w;
        a[r * m + k] = __dsub_rn(a[r * m + k], __dmul_rn(f[r], a[col * m + k]));
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) y[b] = FromF64<T>(det);
  }
}

template <typename T>
cudaError_t LaunchDetT(const void* x, void* y, int64_t count, int64_t m, void* workspace, cudaStream_t s) {
  const bool shared = m <= kDetSharedMaxM;
  const int threads = m <= 8 ? 32 : m <= 32 ? 128 : 256;
  const size_t smem = shared ? static_cast<size_t>(m * m + m) * sizeof(double) : 0;
  const int64_t blocks = DetBlocks(count, m);
  DetKernel<T><<<static_cast<unsigned>(blocks), threads, smem, s>>>(
      static_cast<const T*>(x), static_cast<T*>(y), count, m, static_cast<double*>(workspace), shared);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchIntMatMul(const IntMatMulArgs& a, cudaStream_t stream) {
  if (!Is8BitCode(a.a_dtype) || !Is8BitCode(a.b_dtype) || a.batch_rank < 0 || a.batch_rank > kIntMatMulMaxBatchDims)
    return cudaErrorInvalidValue;
  if (a.m <= 0 || a.n <= 0 || a.batches <= 0) return cudaSuccess;
  const dim3 grid = GemmGrid(a.m, a.n, a.batches);
  if (a.a_dtype == kU8) LaunchMatMulFor<uint8_t>(a, grid, stream);
  else LaunchMatMulFor<int8_t>(a, grid, stream);
  return cudaGetLastError();
}

cudaError_t LaunchIntConv(const IntConvArgs& a, cudaStream_t stream) {
  if (!Is8BitCode(a.x_dtype) || !Is8BitCode(a.w_dtype) || a.groups <= 0) return cudaErrorInvalidValue;
  const int64_t mg = a.out_channels / a.groups, out_size = a.out[0] * a.out[1] * a.out[2];
  if (mg <= 0 || out_size <= 0 || a.batch <= 0) return cudaSuccess;
  const dim3 grid = GemmGrid(mg, out_size, a.batch * a.groups);
  if (a.x_dtype == kU8) LaunchConvFor<uint8_t>(a, grid, stream);
  else LaunchConvFor<int8_t>(a, grid, stream);
  return cudaGetLastError();
}

bool DetSupports(int dtype) { return dtype == kF32 || dtype == kF16 || dtype == kBF16 || dtype == kF64; }

size_t DetWorkspaceBytes(int64_t count, int64_t m) {
  if (count <= 0 || m <= kDetSharedMaxM) return 0;
  return static_cast<size_t>(DetBlocks(count, m) * (m * m + m)) * sizeof(double);
}

cudaError_t LaunchDet(int dtype, const void* x, void* y, int64_t count, int64_t m, void* workspace,
                      cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (m > kDetSharedMaxM && !workspace) return cudaErrorInvalidValue;
  switch (dtype) {
    case kF32: return LaunchDetT<float>(x, y, count, m, workspace, stream);
    case kF16: return LaunchDetT<__half>(x, y, count, m, workspace, stream);
    case kBF16: return LaunchDetT<__nv_bfloat16>(x, y, count, m, workspace, stream);
    case kF64: return LaunchDetT<double>(x, y, count, m, workspace, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda
