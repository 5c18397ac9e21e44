// Reduce* and ArgMax/ArgMin kernels. The input is seen as kept dims x reduced dims (size-1 dims dropped, adjacent
// dims of the same kind merged), each with its strides, so any set of axes works without a transpose.
// Kernels: "rows" when the innermost reduced dim is contiguous (a warp per output, or a whole block per output for
// long reductions with few outputs) and "columns" when the innermost dim is kept (32 consecutive outputs per
// block, coalesced, with threadIdx.y splitting the reduction); float columns whose innermost kept dim holds whole
// 16-byte packs, with the reduced dims merged into one, read a pack (V outputs) per thread instead. Partial
// results merge through shared memory, so every accumulator (plain, log-sum-exp pair, arg pair) goes through the
// same code. float32/float16/bfloat16 compute in float, float64 in double (as the CPU reference).
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cuda/reduce_common.cuh"
#include "backends/cuda/reduce_kernels.h"

namespace kiln::cuda {

namespace {

using reduce_detail::kIsFloatStorage;
using reduce_detail::LoadValue;
using reduce_detail::StoreValue;
using reduce_detail::ValueT;

__device__ __forceinline__ float Exp(float x) { return expf(x); }
__device__ __forceinline__ double Exp(double x) { return exp(x); }
__device__ __forceinline__ float Log(float x) { return logf(x); }
__device__ __forceinline__ double Log(double x) { return log(x); }
__device__ __forceinline__ float Sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double Sqrt(double x) { return sqrt(x); }

// ---- accumulators: Init / Add(value, position) / Merge / Finish; V is the value type, A the accumulator ----
template <typename V, typename A>
struct SumOp {
  using Acc = A;
  __device__ Acc Init() const { return A(0); }
  __device__ void Add(Acc& a, V v, int64_t) const { a += static_cast<A>(v); }
  __device__ void Merge(Acc& a, const Acc& b) const { a += b; }
  __device__ A Finish(const Acc& a, int64_t) const { return a; }
};
template <typename V, typename A>
struct MeanOp : SumOp<V, A> {
  __device__ A Finish(const A& a, int64_t n) const { return a / static_cast<A>(n); }
};
template <typename V, typename A>
struct SumSquareOp : SumOp<V, A> {
  __device__ void Add(A& a, V v, int64_t) const { a += static_cast<A>(v) * static_cast<A>(v); }
};
template <typename V, typename A>
struct L1Op : SumOp<V, A> {
  __device__ void Add(A& a, V v, int64_t) const {
    if constexpr (std::is_unsigned_v<V>) a += static_cast<A>(v);
    else a += static_cast<A>(v < 0 ? -v : v);
  }
};
template <typename V, typename A>
struct L2Op : SumSquareOp<V, A> {
  __device__ A Finish(const A& a, int64_t) const { return Sqrt(a); }
};
template <typename V, typename A>
struct LogSumOp : SumOp<V, A> {
  __device__ A Finish(const A& a, int64_t) const { return Log(a); }
};
template <typename V, typename A>
struct ProdOp {
  using Acc = A;
  __device__ Acc Init() const { return A(1); }
  __device__ void Add(Acc& a, V v, int64_t) const { a *= static_cast<A>(v); }
  __device__ void Merge(Acc& a, const Acc& b) const { a *= b; }
  __device__ A Finish(const Acc& a, int64_t) const { return a; }
};
// Max/Min: NaN propagates (v != v is false for integers). `init` is the storage type's lowest/highest.
template <typename V, bool kMax>
struct ExtremeOp {
  using Acc = V;
  V init;
  __device__ Acc Init() const { return init; }
  __device__ void Merge(Acc& a, const Acc& b) const {
    if (a != a) return;
    if (b != b || (kMax ? b > a : b < a)) a = b;
  }
  __device__ void Add(Acc& a, V v, int64_t) const { Merge(a, v); }
  __device__ V Finish(const Acc& a, int64_t) const { return a; }
};
// Log-sum-exp as (running max m, sum s of exp(x - m)); NaN is sticky, -inf adds nothing.
template <typename A>
struct LseAcc {
  A m, s;
};
template <typename V, typename A>
struct LogSumExpOp {
  using Acc = LseAcc<A>;
  __device__ Acc Init() const { return {-static_cast<A>(INFINITY), A(0)}; }
  __device__ void Add(Acc& a, V v, int64_t) const {
    const A x = static_cast<A>(v);
    if (x != x) {
      a.m = x;
      a.s = 1;
      return;
    }
    if (x == -static_cast<A>(INFINITY) || a.m != a.m) return;
    if (x > a.m) {
      a.s = a.s * Exp(a.m - x) + A(1);
      a.m = x;
    } else {
      a.s += Exp(x - a.m);
    }
  }
  __device__ void Merge(Acc& a, const Acc& b) const {
    if (a.m != a.m || b.s == A(0)) return;
    if (b.m != b.m || a.s == A(0)) {
      a = b;
      return;
    }
    if (b.m > a.m) {
      a.s = a.s * Exp(a.m - b.m) + b.s;
      a.m = b.m;
    } else if (b.m < a.m) {
      a.s += b.s * Exp(b.m - a.m);
    } else {
      a.s += b.s;
    }
  }
  __device__ A Finish(const Acc& a, int64_t) const {
    return a.s == A(0) ? -static_cast<A>(INFINITY) : a.m + Log(a.s);
  }
};
// ArgMax/ArgMin matching the CPU's sequential scan: a NaN at position 0 wins, NaNs elsewhere are never picked;
// equal values go to the lower position (the higher one with select_last_index). idx < 0: nothing seen yet.
template <typename V>
struct ArgAcc {
  V v;
  int64_t idx;
};
template <typename V>
struct ArgOp {
  using Acc = ArgAcc<V>;
  bool is_max, last;
  __device__ Acc Init() const { return {V(0), -1}; }
  __device__ void Merge(Acc& a, const Acc& b) const {
    if (b.idx < 0) return;
    if (a.idx < 0) {
      a = b;
      return;
    }
    if (a.v != a.v) return;  // only a position-0 NaN ever gets here
    if (b.v != b.v) {
      a = b;
      return;
    }
    const bool b_better = is_max ? b.v > a.v : b.v < a.v;
    const bool a_better = is_max ? a.v > b.v : a.v < b.v;
    if (b_better || (!a_better && (last ? b.idx > a.idx : b.idx < a.idx))) a = b;
  }
  __device__ void Add(Acc& a, V v, int64_t r) const {
    if (v != v && r != 0) return;
    Merge(a, Acc{v, r});
  }
  __device__ int64_t Finish(const Acc& a, int64_t) const { return a.idx < 0 ? 0 : a.idx; }
};

// ---- the iteration plan ----
struct Plan {
  int kr = 0, rr = 0;  // kept / reduced dims after dropping size-1 dims and merging
  int64_t kshape[kMaxDims], kstride[kMaxDims], rshape[kMaxDims], rstride[kMaxDims];
  int64_t out_count = 1, red_count = 1;
};

__device__ __forceinline__ int64_t Offset(int n, const int64_t* shape, const int64_t* stride, int64_t i) {
  if (n == 1) return i * stride[0];
  int64_t off = 0;
  for (int d = n - 1; d >= 0; --d) {
    const int64_t q = i / shape[d];
    off += (i - q * shape[d]) * stride[d];
    i = q;
  }
  return off;
}

constexpr int kSmemSlots = 1024;  // accumulators of at most 16 bytes, one per thread of the largest block
constexpr int kRowWarps = 8;

// Rows: the innermost reduced dim is contiguous. blockDim = (32, kRowWarps). Either each warp owns one output,
// or (block_per_output) the whole block does.
template <typename T, typename Out, typename Op>
__global__ void ReduceRowsKernel(const T* __restrict__ x, Out* __restrict__ y, Plan p, Op op, bool block_per_output) {
  using Acc = typename Op::Acc;
  static_assert(sizeof(Acc) <= 16, "accumulator too large for the shared slots");
  __shared__ alignas(16) unsigned char smem[kSmemSlots * 16];
  Acc* s = reinterpret_cast<Acc*>(smem);
  const int lane = threadIdx.x, warp = threadIdx.y, tid = warp * 32 + lane;
  if (block_per_output) {
    const int nthreads = 32 * kRowWarps;
    for (int64_t o = blockIdx.x; o < p.out_count; o += gridDim.x) {
      const int64_t base = Offset(p.kr, p.kshape, p.kstride, o);
      Acc acc = op.Init();
      for (int64_t r = tid; r < p.red_count; r += nthreads)
        op.Add(acc, LoadValue(x, base + Offset(p.rr, p.rshape, p.rstride, r)), r);
      s[tid] = acc;
      __syncthreads();
      for (int st = nthreads / 2; st > 0; st >>= 1) {
        if (tid < st) op.Merge(s[tid], s[tid + st]);
        __syncthreads();
      }
      if (tid == 0) StoreValue(y, o, op.Finish(s[0], p.red_count));
      __syncthreads();
    }
  } else {
    for (int64_t o = static_cast<int64_t>(blockIdx.x) * kRowWarps + warp; o < p.out_count;
         o += static_cast<int64_t>(gridDim.x) * kRowWarps) {
      const int64_t base = Offset(p.kr, p.kshape, p.kstride, o);
      Acc acc = op.Init();
      for (int64_t r = lane; r < p.red_count; r += 32)
        op.Add(acc, LoadValue(x, base + Offset(p.rr, p.rshape, p.rstride, r)), r);
      s[tid] = acc;
      __syncwarp();
      for (int st = 16; st > 0; st >>= 1) {
        if (lane < st) op.Merge(s[tid], s[tid + st]);
        __syncwarp();
      }
      if (lane == 0) StoreValue(y, o, op.Finish(s[tid], p.red_count));
      __syncwarp();
    }
  }
}

// Columns: the innermost dim is kept. blockDim = (32, ny) with ny a power of two: threadIdx.x picks one of 32
// consecutive outputs, threadIdx.y strides over the reduction.
template <typename T, typename Out, typename Op>
__global__ void ReduceColumnsKernel(const T* __restrict__ x, Out* __restrict__ y, Plan p, Op op) {
  using Acc = typename Op::Acc;
  static_assert(sizeof(Acc) <= 16, "accumulator too large for the shared slots");
  __shared__ alignas(16) unsigned char smem[kSmemSlots * 16];
  Acc* s = reinterpret_cast<Acc*>(smem);
  const int tx = threadIdx.x, ty = threadIdx.y, ny = blockDim.y;
  for (int64_t tile = blockIdx.x; tile * 32 < p.out_count; tile += gridDim.x) {
    const int64_t o = tile * 32 + tx;
    Acc acc = op.Init();
    if (o < p.out_count) {
      const int64_t base = Offset(p.kr, p.kshape, p.kstride, o);
      for (int64_t r = ty; r < p.red_count; r += ny)
        op.Add(acc, LoadValue(x, base + Offset(p.rr, p.rshape, p.rstride, r)), r);
    }
    s[ty * 32 + tx] = acc;
    __syncthreads();
    for (int st = ny / 2; st > 0; st >>= 1) {
      if (ty < st) op.Merge(s[ty * 32 + tx], s[(ty + st) * 32 + tx]);
      __syncthreads();
    }
    if (ty == 0 && o < p.out_count) StoreValue(y, o, op.Finish(s[tx], p.red_count));
    __syncthreads();
  }
}

// Columns by packs (float storage): the innermost kept dim has stride 1 and `inner` % V == 0 elements, the
// reduced dims merged into one (`rstride` apart), x 16-byte aligned (so every pack is). blockDim = (bx, ny):
// threadIdx.x picks one of bx consecutive packs of V outputs, threadIdx.y strides over the reduction with four
// loads in flight; the ny partials merge in shared memory.
constexpr int kPackSmemBytes = 16384;
constexpr int kPackThreads = 256;

template <typename T, typename Out, typename Op>
__global__ void __launch_bounds__(kPackThreads)
    ReduceColumnPacksKernel(const T* __restrict__ x, Out* __restrict__ y, Plan p, Op op, int64_t inner,
                            int64_t rstride) {
  using Acc = typename Op::Acc;
  using P = Pack16<T>;
  constexpr int V = P::kN;
  __shared__ alignas(16) unsigned char smem[kPackSmemBytes];
  Acc* s = reinterpret_cast<Acc*>(smem);  // s[(ty * V + i) * bx + tx]: conflict-free across tx
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, ny = blockDim.y;
  const int64_t row_packs = inner / V, packs = p.out_count / V, red = p.red_count;
  for (int64_t tile = blockIdx.x; tile * bx < packs; tile += gridDim.x) {
    const int64_t g = tile * bx + tx;
    Acc acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = op.Init();
    if (g < packs) {
      const int64_t outer = g / row_packs;
      const T* xb = x + Offset(p.kr - 1, p.kshape, p.kstride, outer) + (g - outer * row_packs) * V;
      for (int64_t r = ty; r < red; r += 4 * ny) {
        P v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int64_t ru = r + u * ny;
          if (ru < red) v[u] = *reinterpret_cast<const P*>(xb + ru * rstride);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int64_t ru = r + u * ny;
          if (ru < red) {
#pragma unroll
            for (int i = 0; i < V; ++i) op.Add(acc[i], ToF32(v[u].v[i]), ru);
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < V; ++i) s[(ty * V + i) * bx + tx] = acc[i];
    __syncthreads();
    for (int st = ny / 2; st > 0; st >>= 1) {
      if (ty < st) {
#pragma unroll
        for (int i = 0; i < V; ++i) op.Merge(s[(ty * V + i) * bx + tx], s[((ty + st) * V + i) * bx + tx]);
      }
      __syncthreads();
    }
    if (ty == 0 && g < packs) {
#pragma unroll
      for (int i = 0; i < V; ++i) StoreValue(y, g * V + i, op.Finish(s[i * bx + tx], red));
    }
    __syncthreads();
  }
}

constexpr int64_t kMaxBlocks = 65535LL * 32;

// Launches ReduceColumnPacksKernel when the plan and x allow it (true).
template <typename T, typename Out, typename Op>
bool RunColumnPacks(const T* x, Out* y, const Plan& p, const Op& op, cudaStream_t stream) {
  if constexpr (!kIsFloatStorage<T>) {
    return false;
  } else {
    constexpr int V = Pack16<T>::kN;
    constexpr int kAccBytes = static_cast<int>(sizeof(typename Op::Acc));
    static_assert(kPackSmemBytes >= V * kAccBytes * 32, "accumulators too large for the shared slots");
    if (p.kr == 0 || p.kstride[p.kr - 1] != 1 || p.kshape[p.kr - 1] % V != 0 || p.rr > 1 || !Aligned16(x))
      return false;
    const int64_t packs = p.out_count / V;
    int bx = 32;  // fewer packs than a warp: narrower blocks leave room for more rows of threads
    while (bx > 1 && bx / 2 >= packs) bx /= 2;
    // Few blocks for a long reduction (the global average pool of an NHWC image: 64 x 56 x 56 x 64 made 16 blocks of
    // 3136 rows each): halve the block's width, doubling the blocks and the rows of threads per reduction, while the
    // GPU has fewer than 512 blocks and each thread keeps at least 8 rows. Two packs (32 bytes) stay one sector.
    while (bx > 2 && (packs + bx - 1) / bx < 512 && p.red_count >= 8LL * (kPackThreads / (bx / 2))) bx /= 2;
    const int max_ny = std::min(kPackThreads / bx, kPackSmemBytes / (V * kAccBytes * bx));
    int ny = 1;  // about four reduced rows per thread
    while (ny * 2 <= max_ny && ny * 4 < p.red_count) ny *= 2;
    const int64_t blocks = (packs + bx - 1) / bx;
    ReduceColumnPacksKernel<T, Out, Op><<<static_cast<unsigned>(std::min(blocks, kMaxBlocks)), dim3(bx, ny), 0,
                                          stream>>>(x, y, p, op, p.kshape[p.kr - 1], p.rr ? p.rstride[0] : 0);
    return true;
  }
}

template <typename T, typename Out, typename Op>
cudaError_t Run(const T* x, Out* y, const Plan& p, const Op& op, cudaStream_t stream) {
  if (p.out_count == 0) return cudaSuccess;
  const bool inner_reduced = p.rr > 0 && p.rstride[p.rr - 1] == 1;
  if (inner_reduced) {
    const bool block_per_output = p.red_count >= 2048 && p.out_count < 1024;
    const int64_t blocks = block_per_output ? p.out_count : (p.out_count + kRowWarps - 1) / kRowWarps;
    ReduceRowsKernel<T, Out, Op><<<static_cast<unsigned>(std::min(blocks, kMaxBlocks)), dim3(32, kRowWarps), 0,
                                   stream>>>(x, y, p, op, block_per_output);
  } else if (!RunColumnPacks(x, y, p, op, stream)) {
    int ny = 1;
    while (ny < 32 && ny < p.red_count) ny *= 2;
    const int64_t blocks = (p.out_count + 31) / 32;
    ReduceColumnsKernel<T, Out, Op>
        <<<static_cast<unsigned>(std::min(blocks, kMaxBlocks)), dim3(32, ny), 0, stream>>>(x, y, p, op);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t RunTyped(ReduceOpCode op, int dtype, const void* xv, void* yv, const Plan& p, bool last,
                     cudaStream_t stream) {
  using V = ValueT<T>;
  using AS = V;                                                        // sums and products
  using AR = std::conditional_t<kIsFloatStorage<T>, float, double>;  // real-valued results (mean, L2, logs)
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  V lowest, highest;
  if constexpr (kIsFloatStorage<T> || std::is_same_v<T, double>) {  // float32/16, bfloat16 in float; float64
    lowest = -std::numeric_limits<V>::infinity();
    highest = std::numeric_limits<V>::infinity();
  } else {
    lowest = static_cast<V>(std::numeric_limits<T>::lowest());
    highest = dtype == kBool ? V(1) : static_cast<V>(std::numeric_limits<T>::max());
  }
  switch (op) {
    case ReduceOpCode::kSum: return Run(x, y, p, SumOp<V, AS>{}, stream);
    case ReduceOpCode::kMean: return Run(x, y, p, MeanOp<V, AR>{}, stream);
    case ReduceOpCode::kMax: return Run(x, y, p, ExtremeOp<V, true>{lowest}, stream);
    case ReduceOpCode::kMin: return Run(x, y, p, ExtremeOp<V, false>{highest}, stream);
    case ReduceOpCode::kProd: return Run(x, y, p, ProdOp<V, AS>{}, stream);
    case ReduceOpCode::kL1: return Run(x, y, p, L1Op<V, AS>{}, stream);
    case ReduceOpCode::kL2: return Run(x, y, p, L2Op<V, AR>{}, stream);
    case ReduceOpCode::kSumSquare: return Run(x, y, p, SumSquareOp<V, AS>{}, stream);
    case ReduceOpCode::kLogSum: return Run(x, y, p, LogSumOp<V, AR>{}, stream);
    case ReduceOpCode::kLogSumExp: return Run(x, y, p, LogSumExpOp<V, AR>{}, stream);
    case ReduceOpCode::kArgMax: return Run(x, static_cast<int64_t*>(yv), p, ArgOp<V>{true, last}, stream);
    case ReduceOpCode::kArgMin: return Run(x, static_cast<int64_t*>(yv), p, ArgOp<V>{false, last}, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

bool ReduceDTypeSupported(int dtype) {
  switch (dtype) {
    case kF32: case kF16: case kBF16: case kF64: case kI32: case kI64: case kI8: case kU8: case kBool: return true;
    default: return false;
  }
}

cudaError_t LaunchReduce(ReduceOpCode op, int dtype, const void* x, void* y, const int64_t* shape, int rank,
                         uint32_t reduced_mask, bool select_last, cudaStream_t stream) {
  if (rank < 0 || rank > kMaxDims) return cudaErrorInvalidValue;
  // Row-major strides; then drop size-1 dims and merge neighbours of the same kind (as the CPU's MakePlan).
  int64_t strides[kMaxDims];
  int64_t acc = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = acc;
    acc *= shape[d];
  }
  Plan p;
  int last_kind = -1;
  for (int d = 0; d < rank; ++d) {
    const bool red = (reduced_mask >> d) & 1u;
    (red ? p.red_count : p.out_count) *= shape[d];
    if (shape[d] == 1) continue;
    int& n = red ? p.rr : p.kr;
    int64_t* s = red ? p.rshape : p.kshape;
    int64_t* t = red ? p.rstride : p.kstride;
    const int kind = red ? 1 : 0;
    if (kind == last_kind && t[n - 1] == strides[d] * shape[d]) {
      s[n - 1] *= shape[d];
      t[n - 1] = strides[d];
    } else {
      s[n] = shape[d];
      t[n] = strides[d];
      ++n;
    }
    last_kind = kind;
  }
  cudaError_t err = cudaErrorInvalidValue;
  KILN_REDUCE_DISPATCH(dtype, T, err = RunTyped<T>(op, dtype, x, y, p, select_last, stream));
  return err;
}

}  // namespace kiln::cuda
