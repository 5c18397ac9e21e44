// Unary pointwise kernels: the unary formulas (one templated kernel per functor of ops/pointwise_formulas.h,
// computed in float32; float64 in double), integer Abs/Neg/Sign/Relu/Erf/BitwiseNot/Shrink, Clip, IsNaN, IsInf,
// Not. Contiguous inputs and outputs of the same shape; grid-stride loops with 64-bit indices.
#include <cmath>
#include <limits>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/pointwise_device.cuh"

namespace kiln::cuda {
namespace {

using pw::C;
using pw::Ld;
using pw::St;

// A unary formula F (ops/pointwise_formulas.h) in float32: one element per iteration (tails, unaligned pointers),
// or 4 per vector access.
template <typename T, typename F>
__global__ void FormulaKernel(F f, float a, float b, const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    St(y, i, f(ToF32(x[i]), a, b));
}

// 4 elements in one access: 16 bytes for float32, 8 for the 16-bit types.
template <typename T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

template <typename T, typename F>
__global__ void FormulaVec4Kernel(F f, float a, float b, const T* __restrict__ x, T* __restrict__ y, int64_t n4) {
  using P = Pack4<T>;
  const P* xp = reinterpret_cast<const P*>(x);
  P* yp = reinterpret_cast<P*>(y);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    P p = xp[i];
#pragma unroll
    for (int k = 0; k < 4; ++k) p.v[k] = FromF32<T>(f(ToF32(p.v[k]), a, b));
    yp[i] = p;
  }
}

// A unary formula F on float64, computed in double (the attributes widened from float, as the CPU reference does).
template <typename F>
__global__ void FormulaF64Kernel(F f, double a, double b, const double* __restrict__ x, double* __restrict__ y,
                                 int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = f(x[i], a, b);
}

// Shrink of an integer (the CPU reference's ShrinkInteger): the formula in double, truncated toward zero and
// saturated to T's range.
template <typename T>
__device__ __forceinline__ T ShrinkInt(T x, float lambd, float bias) {
  using Lim = std::numeric_limits<T>;
  const double v = static_cast<double>(x), l = lambd;
  const double r = v < -l ? v + static_cast<double>(bias) : (v > l ? v - static_cast<double>(bias) : 0.0);
  if (r <= static_cast<double>(Lim::min())) return Lim::min();
  if (r >= static_cast<double>(Lim::max())) return Lim::max();
  return static_cast<T>(r);
}

template <typename T>
__device__ __forceinline__ T IntUnary(int op, T x, float a, float b) {
  if (op == kPwIntShrink) return ShrinkInt<T>(x, a, b);
  if constexpr (std::is_unsigned_v<T>) {
    switch (op) {
      case kPwIntAbs: return x;
      case kPwIntNeg: return static_cast<T>(T(0) - x);
      case kPwIntSign: return x > T(0) ? T(1) : T(0);
      case kPwIntRelu: return x;
      case kPwIntErf: return static_cast<T>(erf(static_cast<double>(x)));
      case kPwIntBitNot: return static_cast<T>(~x);
      default: return x;
    }
  } else {
    switch (op) {
      case kPwIntAbs: return x < T(0) ? static_cast<T>(-x) : x;
      case kPwIntNeg: return static_cast<T>(-x);
      case kPwIntSign: return x > T(0) ? T(1) : (x < T(0) ? static_cast<T>(-1) : x);
      case kPwIntRelu: return x < T(0) ? T(0) : x;
      case kPwIntErf: return static_cast<T>(erf(static_cast<double>(x)));
      case kPwIntBitNot: return static_cast<T>(~x);
      default: return x;
    }
  }
}

template <typename T>
__global__ void IntUnaryKernel(int op, float a, float b, const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = IntUnary<T>(op, x[i], a, b);
}

template <typename T>
__global__ void ClipKernel(const T* __restrict__ x, const T* lo, const T* hi, T* __restrict__ y, int64_t n) {
  using CT = C<T>;
  using Lim = std::numeric_limits<CT>;
  // An absent bound clamps nothing: -inf/+inf for floats, the type's range for integers.
  const CT l = lo ? Ld(lo, 0) : (Lim::has_infinity ? -Lim::infinity() : Lim::lowest());
  const CT h = hi ? Ld(hi, 0) : (Lim::has_infinity ? Lim::infinity() : Lim::max());
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    St(y, i, pwf::Clip{}(Ld(x, i), l, h));
}

// kind 0: IsNaN; kind 1: IsInf with the sign flags.
template <typename T>
__global__ void FloatPredicateKernel(int kind, bool neg, bool pos, const T* __restrict__ x, uint8_t* __restrict__ y,
                                     int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const C<T> v = Ld(x, i);
    bool r;
    if (kind == 0) r = isnan(v);
    else r = isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
    y[i] = r ? 1 : 0;
  }
}

__global__ void NotKernel(const uint8_t* __restrict__ x, uint8_t* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = x[i] ? 0 : 1;
}

}  // namespace

cudaError_t LaunchPwUnary(PwOp op, float a, float b, int dtype, const void* x, void* y, int64_t n,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  bool known = false;
  if (dtype == kF64) {
    known = VisitUnary(op, [&](auto f) {
      FormulaF64Kernel<decltype(f)><<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(
          f, static_cast<double>(a), static_cast<double>(b), static_cast<const double*>(x), static_cast<double*>(y),
          n);
    });
    return pw::LaunchResult(known);
  }
  const bool ok = DispatchLowFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    known = VisitUnary(op, [&](auto f) {
      using F = decltype(f);
      const int64_t n4 = n / 4;
      if (n4 > 0 && AlignedTo(x, 4 * sizeof(T)) && AlignedTo(y, 4 * sizeof(T))) {
        FormulaVec4Kernel<T, F><<<GridFor(n4, pw::kBlock), pw::kBlock, 0, stream>>>(f, a, b, xt, yt, n4);
        if (n4 * 4 < n)
          FormulaKernel<T, F><<<1, pw::kBlock, 0, stream>>>(f, a, b, xt + n4 * 4, yt + n4 * 4, n - n4 * 4);
      } else {
        FormulaKernel<T, F><<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(f, a, b, xt, yt, n);
      }
    });
  });
  return pw::LaunchResult(ok && known);
}

cudaError_t LaunchIntUnary(int op, int dtype, const void* x, void* y, int64_t n, cudaStream_t stream, float a,
                           float b) {
  if (n <= 0) return cudaSuccess;
  const bool ok = DispatchInt(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    IntUnaryKernel<T><<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(op, a, b, static_cast<const T*>(x),
                                                                        static_cast<T*>(y), n);
  });
  return pw::LaunchResult(ok);
}

cudaError_t LaunchClip(int dtype, const void* x, const void* lo, const void* hi, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool ok = DispatchNumeric(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ClipKernel<T><<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(lo), static_cast<const T*>(hi), static_cast<T*>(y), n);
  });
  return pw::LaunchResult(ok);
}

cudaError_t LaunchIsNaN(int dtype, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool ok = DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    FloatPredicateKernel<T><<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(
        0, false, false, static_cast<const T*>(x), static_cast<uint8_t*>(y), n);
  });
  return pw::LaunchResult(ok);
}

cudaError_t LaunchIsInf(int dtype, bool detect_negative, bool detect_positive, const void* x, void* y, int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool ok = DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    FloatPredicateKernel<T><<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(
        1, detect_negative, detect_positive, static_cast<const T*>(x), static_cast<uint8_t*>(y), n);
  });
  return pw::LaunchResult(ok);
}

cudaError_t LaunchNot(const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  NotKernel<<<GridFor(n, pw::kBlock), pw::kBlock, 0, stream>>>(static_cast<const uint8_t*>(x),
                                                              static_cast<uint8_t*>(y), n);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
