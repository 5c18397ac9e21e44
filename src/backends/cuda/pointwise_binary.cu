// Broadcasting pointwise kernels: arithmetic, comparisons and logic, Mod, Pow, Where, and the variadic
// Sum/Mean/Max/Min. Each output element finds its operands through PwBroadcast (pointwise_kernels.h); outputs
// below 2^31 elements use 32-bit index arithmetic, larger ones 64-bit. Float arithmetic without broadcasting
// (same-shape or scalar operands) takes a vectorized path (ArithVecKernel).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cuda/pointwise_device.cuh"
#include "backends/cuda/pointwise_scalar.cuh"

namespace kiln::cuda {
namespace {

using pw::C;
using pw::Ld;
using pw::LoadScalar;
using pw::Scalar;
using pw::ScalarAsDouble;
using pw::ScalarAsFloat;
using pw::St;

// Wide unsigned type for wrap-around integer arithmetic (no signed-overflow UB).
template <typename T>
using WideU = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

// The CPU reference's binary ops on compute values.
template <typename CT>
__device__ __forceinline__ CT ArithOp(int op, CT a, CT b) {
  if constexpr (std::is_integral_v<CT>) {
    using W = WideU<CT>;
    switch (op) {
      case kPwArAdd: return static_cast<CT>(static_cast<W>(a) + static_cast<W>(b));
      case kPwArSub: return static_cast<CT>(static_cast<W>(a) - static_cast<W>(b));
      case kPwArMul: return static_cast<CT>(static_cast<W>(a) * static_cast<W>(b));
      case kPwArDiv:
        if (b == CT(0)) return CT(0);
        if constexpr (std::is_signed_v<CT>) {
          if (b == CT(-1)) return static_cast<CT>(W(0) - static_cast<W>(a));
        }
        return static_cast<CT>(a / b);
      case kPwArMax: return a < b ? b : a;
      case kPwArMin: return b < a ? b : a;
      case kPwArPRelu:
        if constexpr (std::is_signed_v<CT>) {
          return a < CT(0) ? static_cast<CT>(static_cast<W>(a) * static_cast<W>(b)) : a;
        } else {
          return a;
        }
      default: return CT(0);
    }
  } else {
    switch (op) {
      case kPwArAdd: return a + b;
      case kPwArSub: return a - b;
      case kPwArMul: return a * b;
      case kPwArDiv: return a / b;
      case kPwArMax: return isnan(a) ? a : (isnan(b) ? b : (a < b ? b : a));
      case kPwArMin: return isnan(a) ? a : (isnan(b) ? b : (b < a ? b : a));
      case kPwArPRelu: return a < CT(0) ? a * b : a;
      default: return CT(0);
    }
  }
}

template <typename CT>
__device__ __forceinline__ bool CompareOp(int op, CT a, CT b) {
  switch (op) {
    case kPwEqual: return a == b;
    case kPwLess: return a < b;
    case kPwLessOrEqual: return a <= b;
    case kPwGreater: return a > b;
    case kPwGreaterOrEqual: return a >= b;
    case kPwAnd: return (a != CT(0)) && (b != CT(0));
    case kPwOr: return (a != CT(0)) || (b != CT(0));
    case kPwXor: return (a != CT(0)) != (b != CT(0));
    default: return false;
  }
}

#define KILN_PW_GRID_LOOP(i, n)                                                                      \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);            \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T, typename I>
__global__ void ArithKernel(int op, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                            const PwBroadcast bc) {
  KILN_PW_GRID_LOOP(i, bc.numel) {
    I off[2];
    pw::Offsets<2, I>(bc, static_cast<I>(i), off);
    St(y, i, ArithOp<C<T>>(op, Ld(a, off[0]), Ld(b, off[1])));
  }
}

// Float arithmetic where neither operand broadcasts along the output (each is like the output: step 1, or one
// element: step 0): 16 bytes of output per thread (8 float16/bfloat16 or 4 float32 elements) with 16-byte loads
// and stores. The launcher checks 16-byte alignment of y and of step-1 operands and that n < 2^31.
template <typename T, int OP>
__global__ void ArithVecKernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, uint32_t n,
                               int step_a, int step_b) {
  constexpr int V = 16 / sizeof(T);
  const uint32_t chunks = (n + V - 1) / V;
  const float sa = step_a ? 0.f : Ld(a, 0), sb = step_b ? 0.f : Ld(b, 0);
  for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += gridDim.x * blockDim.x) {
    const uint32_t base = c * V;
    if (base + V <= n) {
      uint4 ra = make_uint4(0, 0, 0, 0), rb = ra, ry;
      if (step_a) ra = *reinterpret_cast<const uint4*>(a + base);
      if (step_b) rb = *reinterpret_cast<const uint4*>(b + base);
      const T* va = reinterpret_cast<const T*>(&ra);
      const T* vb = reinterpret_cast<const T*>(&rb);
      T* vy = reinterpret_cast<T*>(&ry);
#pragma unroll
      for (int e = 0; e < V; ++e)
        vy[e] = FromF32<T>(ArithOp<float>(OP, step_a ? ToF32(va[e]) : sa, step_b ? ToF32(vb[e]) : sb));
      *reinterpret_cast<uint4*>(y + base) = ry;
    } else {
      for (uint32_t i = base; i < n; ++i)
        y[i] = FromF32<T>(ArithOp<float>(OP, step_a ? Ld(a, i) : sa, step_b ? Ld(b, i) : sb));
    }
  }
}

template <typename T>
void LaunchArithVec(int op, const T* a, const T* b, T* y, const PwBroadcast& bc, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  const int64_t chunks = (bc.numel + V - 1) / V;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((chunks + pw::kBlock - 1) / pw::kBlock, 1 << 20));
  const uint32_t n = static_cast<uint32_t>(bc.numel);
  const int sa = bc.step[0] ? 1 : 0, sb = bc.step[1] ? 1 : 0;
  switch (op) {
#define KILN_ARITH_VEC(OPC) \
  case OPC: ArithVecKernel<T, OPC><<<grid, pw::kBlock, 0, stream>>>(a, b, y, n, sa, sb); break;
    KILN_ARITH_VEC(kPwArAdd)
    KILN_ARITH_VEC(kPwArSub)
    KILN_ARITH_VEC(kPwArMul)
    KILN_ARITH_VEC(kPwArDiv)
    KILN_ARITH_VEC(kPwArMax)
    KILN_ARITH_VEC(kPwArMin)
    KILN_ARITH_VEC(kPwArPRelu)
#undef KILN_ARITH_VEC
    default: break;
  }
}

// The arithmetic ops the vectorized kernels instantiate.
inline bool IsVecArithOp(int op) {
  return op == kPwArAdd || op == kPwArSub || op == kPwArMul || op == kPwArDiv || op == kPwArMax || op == kPwArMin ||
         op == kPwArPRelu;
}

// Whether LaunchArith may take the vectorized path.
inline bool ArithVecOk(int dtype, const void* a, const void* b, const void* y, const PwBroadcast& bc) {
  if (dtype != kF32 && dtype != kF16 && dtype != kBF16) return false;
  if (bc.general || bc.num_operands != 2 || bc.numel >= (int64_t{1} << 31)) return false;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return aligned(y) && (!bc.step[0] || aligned(a)) && (!bc.step[1] || aligned(b));
}

// Float arithmetic where an operand broadcasts along outer dims (a per-channel scale or bias: NHWC [N,H,W,C] x
// [N,1,1,C], [M,C] + [C]; or NCHW [N,C,H,W] x [N,C,1,1]) and the merged output has at most three dims whose innermost
// extent is a multiple of V = 16 / sizeof(T): every 16-byte chunk of the output then lies in one inner row, and each
// operand either runs along that row (one 16-byte load: its inner stride is 1 and its outer strides keep 16-byte
// alignment) or holds one value for the whole row (inner stride 0: one scalar load). The coordinates of a chunk cost
// one division per outer dim instead of one per element and dim (ArithKernel).
struct RowBroadcast {
  uint32_t chunks = 0;          // output chunks of V elements
  uint32_t inner_chunks = 0;    // chunks per inner row
  uint32_t mid = 1;             // extent of the middle dim (1 for two dims)
  uint32_t stride[2][3] = {};   // per operand: outer, middle, inner (0 or 1) strides in elements
};

template <typename T, int OP>
__global__ void ArithRowKernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                               const RowBroadcast rb) {
  constexpr int V = 16 / sizeof(T);
  for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < rb.chunks; c += gridDim.x * blockDim.x) {
    const uint32_t row = c / rb.inner_chunks, k = (c - row * rb.inner_chunks) * V;
    const uint32_t o = row / rb.mid, m = row - o * rb.mid;
    const T* src[2] = {a, b};
    float v[2][V];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const uint32_t off = o * rb.stride[j][0] + m * rb.stride[j][1];
      if (rb.stride[j][2]) {
        const uint4 raw = *reinterpret_cast<const uint4*>(src[j] + off + k);
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int i = 0; i < V; ++i) v[j][i] = ToF32(e[i]);
      } else {
        const float x = ToF32(src[j][off]);
#pragma unroll
        for (int i = 0; i < V; ++i) v[j][i] = x;
      }
    }
    uint4 ry;
    T* vy = reinterpret_cast<T*>(&ry);
#pragma unroll
    for (int i = 0; i < V; ++i) vy[i] = FromF32<T>(ArithOp<float>(OP, v[0][i], v[1][i]));
    *reinterpret_cast<uint4*>(y + static_cast<size_t>(c) * V) = ry;
  }
}

// The RowBroadcast of a two-operand float broadcast, when ArithRowKernel can run it (see there).
template <typename T>
bool RowBroadcastFor(const PwBroadcast& bc, const void* a, const void* b, const void* y, RowBroadcast* rb) {
  constexpr int V = 16 / sizeof(T);
  if (!bc.general || bc.num_operands != 2 || bc.rank < 2 || bc.rank > 3 || bc.numel >= (int64_t{1} << 31)) return false;
  const int r = bc.rank;
  const int64_t inner = bc.dims[r - 1];
  if (inner % V != 0) return false;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (!aligned(y)) return false;
  const void* ptr[2] = {a, b};
  for (int j = 0; j < 2; ++j) {
    const int64_t in_stride = bc.strides[j][r - 1];
    if (in_stride != 0 && in_stride != 1) return false;
    for (int d = 0; d < r - 1; ++d)
      if (in_stride == 1 && bc.strides[j][d] % V != 0) return false;
    if (in_stride == 1 && !aligned(ptr[j])) return false;
    rb->stride[j][2] = static_cast<uint32_t>(in_stride);
    rb->stride[j][1] = static_cast<uint32_t>(r == 3 ? bc.strides[j][1] : 0);
    rb->stride[j][0] = static_cast<uint32_t>(bc.strides[j][0]);
  }
  rb->mid = static_cast<uint32_t>(r == 3 ? bc.dims[1] : 1);
  rb->inner_chunks = static_cast<uint32_t>(inner / V);
  rb->chunks = static_cast<uint32_t>(bc.numel / V);
  return true;
}

template <typename T>
void LaunchArithRow(int op, const T* a, const T* b, T* y, const RowBroadcast& rb, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((rb.chunks + pw::kBlock - 1) / pw::kBlock, 1 << 20));
  switch (op) {
#define KILN_ARITH_ROW(OPC) \
  case OPC: ArithRowKernel<T, OPC><<<grid, pw::kBlock, 0, stream>>>(a, b, y, rb); break;
    KILN_ARITH_ROW(kPwArAdd)
    KILN_ARITH_ROW(kPwArSub)
    KILN_ARITH_ROW(kPwArMul)
    KILN_ARITH_ROW(kPwArDiv)
    KILN_ARITH_ROW(kPwArMax)
    KILN_ARITH_ROW(kPwArMin)
    KILN_ARITH_ROW(kPwArPRelu)
#undef KILN_ARITH_ROW
    default: break;
  }
}

template <typename T, typename I>
__global__ void CompareKernel(int op, const T* __restrict__ a, const T* __restrict__ b, uint8_t* __restrict__ y,
                              const PwBroadcast bc) {
  KILN_PW_GRID_LOOP(i, bc.numel) {
    I off[2];
    pw::Offsets<2, I>(bc, static_cast<I>(i), off);
    y[i] = CompareOp<C<T>>(op, Ld(a, off[0]), Ld(b, off[1])) ? 1 : 0;
  }
}

// ---- Mod ----
template <typename CT>
__device__ __forceinline__ CT ModValue(CT a, CT b, bool truncated) {
  if constexpr (std::is_integral_v<CT>) {
    if (b == CT(0)) return CT(0);
    if constexpr (std::is_signed_v<CT>) {
      if (b == CT(-1)) return CT(0);  // also avoids the MIN % -1 trap
      const CT r = static_cast<CT>(a % b);
      // Floored: a nonzero remainder of the other sign than b moves by b (no overflow: |r| < |b|, signs differ).
      if (!truncated && r != CT(0) && ((r < CT(0)) != (b < CT(0)))) return static_cast<CT>(r + b);
      return r;
    } else {
      return static_cast<CT>(a % b);
    }
  } else {
    // Floats: fmod's truncated remainder; floored (fmod = 0, opset 28): numpy's mod, a nonzero remainder of the other
    // sign than b moves by b and a zero one takes b's sign.
    const CT r = std::is_same_v<CT, float> ? fmodf(a, b) : fmod(a, b);
    if (truncated) return r;
    if (r == CT(0)) return copysign(CT(0), b);
    return (r < CT(0)) != (b < CT(0)) ? r + b : r;
  }
}

template <typename T, typename I>
__global__ void ModKernel(bool truncated, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                          const PwBroadcast bc) {
  KILN_PW_GRID_LOOP(i, bc.numel) {
    I off[2];
    pw::Offsets<2, I>(bc, static_cast<I>(i), off);
    St(y, i, ModValue<C<T>>(Ld(a, off[0]), Ld(b, off[1]), truncated));
  }
}

// ---- BitwiseAnd/Or/Xor, BitShift (integers only) ----
template <typename T>
__device__ __forceinline__ T BitwiseValue(int op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    constexpr int kBits = static_cast<int>(sizeof(T) * 8);
    switch (op) {
      case kPwBitAnd: return static_cast<T>(a & b);
      case kPwBitOr: return static_cast<T>(a | b);
      case kPwBitXor: return static_cast<T>(a ^ b);
      default: break;
    }
    const bool left = op == kPwShiftLeft;
    const bool out_of_range = (std::is_signed_v<T> && b < T(0)) || static_cast<uint64_t>(b) >= kBits;
    if (out_of_range) return !left && std::is_signed_v<T> && a < T(0) ? T(-1) : T(0);
    const int s = static_cast<int>(b);
    if (left) return static_cast<T>(static_cast<U>(static_cast<U>(a) << s));
    return static_cast<T>(a >> s);  // arithmetic for signed T
  } else {
    return a;
  }
}

template <typename T, typename I>
__global__ void BitwiseKernel(int op, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                              const PwBroadcast bc) {
  KILN_PW_GRID_LOOP(i, bc.numel) {
    I off[2];
    pw::Offsets<2, I>(bc, static_cast<I>(i), off);
    y[i] = BitwiseValue<T>(op, a[off[0]], b[off[1]]);
  }
}

// ---- Pow ----
// The exponent is read as a pw::Scalar of its own dtype.
template <typename CT>
__device__ __forceinline__ CT PowValue(CT a, const Scalar& e, bool simple) {
  if constexpr (std::is_integral_v<CT>) {
    if (e.kind <= 1) {
      if (e.kind == 0 && e.i < 0) {  // only 1 and -1 have integral reciprocals
        if (a == CT(1)) return CT(1);
        if (a == CT(-1)) return (e.i % 2 == 0) ? CT(1) : CT(-1);
        return CT(0);
      }
      using W = WideU<CT>;
      W r = 1, base = static_cast<W>(a);
      for (uint64_t k = static_cast<uint64_t>(e.i); k; k >>= 1) {
        if (k & 1) r *= base;
        base *= base;
      }
      return static_cast<CT>(r);
    }
    const double v = pow(static_cast<double>(a), e.d);
    if (isnan(v)) return CT(0);
    constexpr CT lo = std::numeric_limits<CT>::lowest();
    constexpr CT hi = std::numeric_limits<CT>::max();
    if (v <= static_cast<double>(lo)) return lo;
    if (v >= static_cast<double>(hi)) return hi;
    return static_cast<CT>(v);
  } else {
    if (simple && e.kind >= 2) {
      if (e.d == 2.0) return a * a;
      if (e.d == 3.0) return a * a * a;
      if (e.d == 1.0) return a;
      if (e.d == 0.5) return sqrt(a);
    }
    if (std::is_same_v<CT, float> && e.kind != 3) {  // float base, float/int exponent: powf
      return static_cast<CT>(powf(static_cast<float>(a), ScalarAsFloat(e)));
    }
    return static_cast<CT>(pow(static_cast<double>(a), ScalarAsDouble(e)));
  }
}

template <typename T, typename I>
__global__ void PowKernel(int exp_code, bool simple, const T* __restrict__ a, const void* __restrict__ b,
                          T* __restrict__ y, const PwBroadcast bc) {
  KILN_PW_GRID_LOOP(i, bc.numel) {
    I off[2];
    pw::Offsets<2, I>(bc, static_cast<I>(i), off);
    St(y, i, PowValue<C<T>>(Ld(a, off[0]), LoadScalar(exp_code, b, off[1]), simple));
  }
}

// ---- Where: raw elements of 1, 2, 4 or 8 bytes ----
template <typename T, typename I>
__global__ void WhereKernel(const uint8_t* __restrict__ cond, const T* __restrict__ x, const T* __restrict__ yv,
                            T* __restrict__ out, const PwBroadcast bc) {
  KILN_PW_GRID_LOOP(i, bc.numel) {
    I off[3];
    pw::Offsets<3, I>(bc, static_cast<I>(i), off);
    out[i] = cond[off[0]] ? x[off[1]] : yv[off[2]];
  }
}

// ---- variadic Sum/Mean/Max/Min ----
struct InputPtrs {
  const void* p[kPwMaxOperands];
};

// y may also be input 0 (a partial result folded on): each element is read before it is written, by one thread.
template <typename T, typename I>
__global__ void VariadicKernel(int arith_op, InputPtrs in, T* y, float divisor, const PwBroadcast bc) {
  using CT = C<T>;
  KILN_PW_GRID_LOOP(i, bc.numel) {
    I off[kPwMaxOperands];
    pw::Offsets<kPwMaxOperands, I>(bc, static_cast<I>(i), off);
    CT acc = Ld(static_cast<const T*>(in.p[0]), off[0]);
#pragma unroll
    for (int k = 1; k < kPwMaxOperands; ++k)
      if (k < bc.num_operands) acc = ArithOp<CT>(arith_op, acc, Ld(static_cast<const T*>(in.p[k]), off[k]));
    if (divisor != 1.f) acc = acc / static_cast<CT>(divisor);
    St(y, i, acc);
  }
}

// Launches KERNEL<T, uint32_t or int64_t> over bc.numel elements.
#define KILN_PW_LAUNCH_INDEXED(KERNEL, T, bc, stream, ...)                                                  \
  do {                                                                                                       \
    if (pw::Fits32(bc))                                                                                      \
      KERNEL<T, uint32_t><<<GridFor((bc).numel, pw::kBlock), pw::kBlock, 0, stream>>>(__VA_ARGS__, bc);     \
    else                                                                                                     \
      KERNEL<T, int64_t><<<GridFor((bc).numel, pw::kBlock), pw::kBlock, 0, stream>>>(__VA_ARGS__, bc);      \
  } while (0)

}  // namespace

cudaError_t LaunchArith(int op, int dtype, const void* a, const void* b, void* y, const PwBroadcast& bc,
                        cudaStream_t stream) {
  if (bc.numel <= 0) return cudaSuccess;
  if (ArithVecOk(dtype, a, b, y, bc)) {
    const bool ok = DispatchLowFloat(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      LaunchArithVec<T>(op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), bc, stream);
    });
    return pw::LaunchResult(ok);
  }
  if ((dtype == kF32 || dtype == kF16 || dtype == kBF16) && IsVecArithOp(op)) {
    bool row = false;
    const bool ok = DispatchLowFloat(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      RowBroadcast rb;
      row = RowBroadcastFor<T>(bc, a, b, y, &rb);
      if (row) LaunchArithRow<T>(op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), rb, stream);
    });
    if (row) return pw::LaunchResult(ok);
  }
  const bool ok = DispatchNumeric(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    KILN_PW_LAUNCH_INDEXED(ArithKernel, T, bc, stream, op, static_cast<const T*>(a), static_cast<const T*>(b),
                           static_cast<T*>(y));
  });
  return pw::LaunchResult(ok);
}

cudaError_t LaunchCompare(int op, int dtype, const void* a, const void* b, void* y, const PwBroadcast& bc,
                          cudaStream_t stream) {
  if (bc.numel <= 0) return cudaSuccess;
  const bool ok = pw::DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    KILN_PW_LAUNCH_INDEXED(CompareKernel, T, bc, stream, op, static_cast<const T*>(a), static_cast<const T*>(b),
                           static_cast<uint8_t*>(y));
  });
  return pw::LaunchResult(ok);
}

cudaError_t LaunchMod(int dtype, bool truncated, const void* a, const void* b, void* y, const PwBroadcast& bc,
                      cudaStream_t stream) {
  if (bc.numel <= 0) return cudaSuccess;
  const bool ok = DispatchNumeric(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    KILN_PW_LAUNCH_INDEXED(ModKernel, T, bc, stream, truncated, static_cast<const T*>(a), static_cast<const T*>(b),
                           static_cast<T*>(y));
  });
  return pw::LaunchResult(ok);
}

cudaError_t LaunchBitwise(int op, int dtype, const void* a, const void* b, void* y, const PwBroadcast& bc,
                          cudaStream_t stream) {
  if (bc.numel <= 0) return cudaSuccess;
  const bool ok = DispatchInt(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    KILN_PW_LAUNCH_INDEXED(BitwiseKernel, T, bc, stream, op, static_cast<const T*>(a), static_cast<const T*>(b),
                           static_cast<T*>(y));
  });
  return pw::LaunchResult(ok);
}

cudaError_t LaunchPow(int base_dtype, int exp_dtype, bool simple_exponents, const void* a, const void* b, void* y,
                      const PwBroadcast& bc, cudaStream_t stream) {
  if (bc.numel <= 0) return cudaSuccess;
  bool exp_ok = false;
  DispatchNumeric(exp_dtype, [&](auto) { exp_ok = true; });
  if (!exp_ok) return cudaErrorInvalidValue;
  auto body = [&](auto tag) {
    using T = typename decltype(tag)::type;
    KILN_PW_LAUNCH_INDEXED(PowKernel, T, bc, stream, exp_dtype, simple_exponents, static_cast<const T*>(a), b,
                           static_cast<T*>(y));
  };
  bool ok = true;
  if (base_dtype == kI32) body(TypeTag<int32_t>{});
  else if (base_dtype == kI64) body(TypeTag<int64_t>{});
  else ok = DispatchFloat(base_dtype, body);
  return pw::LaunchResult(ok);
}

cudaError_t LaunchWhere(int elem_bytes, const void* cond, const void* x, const void* y, void* out,
                        const PwBroadcast& bc, cudaStream_t stream) {
  if (bc.numel <= 0) return cudaSuccess;
  auto body = [&](auto tag) {
    using T = typename decltype(tag)::type;
    KILN_PW_LAUNCH_INDEXED(WhereKernel, T, bc, stream, static_cast<const uint8_t*>(cond), static_cast<const T*>(x),
                           static_cast<const T*>(y), static_cast<T*>(out));
  };
  return pw::LaunchResult(DispatchElemBytes(elem_bytes, body));
}

cudaError_t LaunchVariadic(int op, int dtype, const void* const* inputs, void* y, float divisor,
                           const PwBroadcast& bc, cudaStream_t stream) {
  if (bc.numel <= 0) return cudaSuccess;
  if (bc.num_operands < 1 || bc.num_operands > kPwMaxOperands) return cudaErrorInvalidValue;
  InputPtrs in{};
  for (int k = 0; k < bc.num_operands; ++k) in.p[k] = inputs[k];
  const int arith = op == kPwVarSum ? kPwArAdd : (op == kPwVarMax ? kPwArMax : kPwArMin);
  const bool ok = DispatchNumeric(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    KILN_PW_LAUNCH_INDEXED(VariadicKernel, T, bc, stream, arith, in, static_cast<T*>(y), divisor);
  });
  return pw::LaunchResult(ok);
}

}  // namespace kiln::cuda
