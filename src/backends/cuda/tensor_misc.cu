// Fill, Pad, Trilu, Range and small int64 writes (see tensor_misc_kernels.h).
#include <cstdint>
#include <cstring>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/tensor_misc_kernels.h"

namespace kiln::cuda {
namespace {

constexpr int kBlock = 256;

// Calls f(T{}) with T the unsigned integer type of elem_size bytes (raw element movement).
template <typename F>
cudaError_t BySize(int elem_size, F&& f) {
  switch (elem_size) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: return cudaErrorNotSupported;
  }
}

template <typename T>
T FromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));  // little-endian: the low bytes
  return v;
}

template <typename T>
__global__ void FillKernel(T* __restrict__ dst, int64_t n, T value) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = value;
}

struct Int64x8 {
  int64_t v[8];
};

__global__ void WriteInt64sKernel(int64_t* __restrict__ dst, Int64x8 values, int n) {
  if (static_cast<int>(threadIdx.x) < n) dst[threadIdx.x] = values.v[threadIdx.x];
}

// ---- Pad ----

struct PadParams {
  int rank;
  int mode;
  int64_t in_shape[kMaxDims], out_shape[kMaxDims], before[kMaxDims], in_strides[kMaxDims];
  int64_t total;
};

// Source index of output position o on an axis of length d with `before` padding, or -1 for "constant"
// (the CPU reference's PadSource).
__device__ __forceinline__ int64_t PadSource(int64_t o, int64_t before, int64_t d, int mode) {
  int64_t i = o - before;
  if (i >= 0 && i < d) return i;
  if (mode == static_cast<int>(PadMode::kConstant) || d == 0) return -1;
  if (mode == static_cast<int>(PadMode::kEdge)) return i < 0 ? 0 : d - 1;
  if (mode == static_cast<int>(PadMode::kWrap)) return ((i % d) + d) % d;
  // reflect (mirror without repeating the edge)
  if (d == 1) return 0;
  const int64_t period = 2 * (d - 1);
  i = ((i % period) + period) % period;
  return i < d ? i : period - i;
}

template <typename T>
__global__ void PadKernel(const T* __restrict__ src, T* __restrict__ dst, PadParams p, T value,
                          const T* __restrict__ value_ptr) {
  const T fill = value_ptr ? *value_ptr : value;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total; i += step) {
    int64_t rem = i, so = 0;
    bool constant = false;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t o = rem % p.out_shape[d];
      rem /= p.out_shape[d];
      const int64_t s = PadSource(o, p.before[d], p.in_shape[d], p.mode);
      if (s < 0) constant = true;
      else so += s * p.in_strides[d];
    }
    dst[i] = constant ? fill : src[so];
  }
}

// Constant padding of the last axis only (the leading axes unpadded): rows of in_c values become rows of out_c
// values, `before` of them in front (NHWC channel padding). One division per element, in 32 bits when it fits.
template <typename T, typename I>
__global__ void PadLastAxisKernel(const T* __restrict__ src, T* __restrict__ dst, I total, I in_c, I out_c, I before,
                                  T value, const T* __restrict__ value_ptr) {
  const T fill = value_ptr ? *value_ptr : value;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const I row = i / out_c;
    const I s = i - row * out_c - before;
    dst[i] = s >= 0 && s < in_c ? src[row * in_c + s] : fill;
  }
}

// ---- Trilu ----

template <typename T>
__global__ void TriluKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t total, int64_t rows,
                            int64_t cols, bool upper, int64_t k, const int64_t* __restrict__ k_ptr) {
  const int64_t kk = k_ptr ? *k_ptr : k;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t j = i % cols, r = (i / cols) % rows;
    const bool keep = upper ? (j - r >= kk) : (j - r <= kk);
    dst[i] = keep ? src[i] : T(0);
  }
}

// ---- Range ----

template <typename T>
__global__ void RangeIntKernel(const T* __restrict__ start, const T* __restrict__ delta, T* __restrict__ out,
                               int64_t n) {
  const int64_t s = static_cast<int64_t>(*start), d = static_cast<int64_t>(*delta);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = static_cast<T>(s + i * d);
}

template <typename T>
__global__ void RangeFloatKernel(const T* __restrict__ start, const T* __restrict__ delta, T* __restrict__ out,
                                 int64_t n) {
  const double s = static_cast<double>(*start), d = static_cast<double>(*delta);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = static_cast<T>(__dadd_rn(s, __dmul_rn(static_cast<double>(i), d)));  // no FMA: match the CPU
}

// float16 / bfloat16 (opset 27): start + i * delta in float32 (stash_type 1) or double (11), no FMA, rounded to T
// as the CPU does (double through float32).
template <typename T>
__global__ void RangeLowFloatKernel(const T* __restrict__ start, const T* __restrict__ delta, T* __restrict__ out,
                                    int64_t n, bool stash_double) {
  const float s = ToF32(*start), d = ToF32(*delta);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (stash_double) {
      const double v = __dadd_rn(static_cast<double>(s), __dmul_rn(static_cast<double>(i), static_cast<double>(d)));
      out[i] = FromF64<T>(v);
    } else {
      out[i] = FromF32<T>(__fadd_rn(s, __fmul_rn(static_cast<float>(i), d)));
    }
  }
}

template <typename T>
cudaError_t LaunchRangeLow(const void* start, const void* delta, void* out, int64_t n, bool stash_double,
                           cudaStream_t stream) {
  RangeLowFloatKernel<T><<<GridFor(n, kBlock), kBlock, 0, stream>>>(
      static_cast<const T*>(start), static_cast<const T*>(delta), static_cast<T*>(out), n, stash_double);
  return cudaGetLastError();
}

template <typename T, bool kFloat>
cudaError_t LaunchRangeTyped(const void* start, const void* delta, void* out, int64_t n, cudaStream_t stream) {
  const auto* s = static_cast<const T*>(start);
  const auto* d = static_cast<const T*>(delta);
  auto* o = static_cast<T*>(out);
  if constexpr (kFloat) RangeFloatKernel<T><<<GridFor(n, kBlock), kBlock, 0, stream>>>(s, d, o, n);
  else RangeIntKernel<T><<<GridFor(n, kBlock), kBlock, 0, stream>>>(s, d, o, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchFill(void* dst, int64_t n, int elem_size, uint64_t value_bits, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8) return cudaErrorNotSupported;
  const uint64_t mask = elem_size == 8 ? ~0ULL : ((1ULL << (8 * elem_size)) - 1);
  if ((value_bits & mask) == 0) return cudaMemsetAsync(dst, 0, static_cast<size_t>(n) * elem_size, stream);
  return BySize(elem_size, [&](auto tag) {
    using T = decltype(tag);
    FillKernel<T><<<GridFor(n, kBlock), kBlock, 0, stream>>>(static_cast<T*>(dst), n, FromBits<T>(value_bits));
    return cudaGetLastError();
  });
}

cudaError_t LaunchWriteInt64s(int64_t* dst, const int64_t* values, int n, cudaStream_t stream) {
  for (int base = 0; base < n; base += 8) {
    Int64x8 chunk{};
    const int m = n - base < 8 ? n - base : 8;
    for (int i = 0; i < m; ++i) chunk.v[i] = values[base + i];
    WriteInt64sKernel<<<1, 8, 0, stream>>>(dst + base, chunk, m);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t LaunchPad(const void* src, void* dst, int rank, const int64_t* in_shape, const int64_t* out_shape,
                      const int64_t* before, PadMode mode, int elem_size, uint64_t value_bits, const void* value_ptr,
                      cudaStream_t stream) {
  if (rank > kMaxDims) return cudaErrorNotSupported;
  PadParams p{};
  p.rank = rank;
  p.mode = static_cast<int>(mode);
  p.total = 1;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    p.in_shape[d] = in_shape[d];
    p.out_shape[d] = out_shape[d];
    p.before[d] = before[d];
    p.in_strides[d] = stride;
    stride *= in_shape[d];
    p.total *= out_shape[d];
  }
  if (p.total == 0) return cudaSuccess;
  bool last_axis_only = mode == PadMode::kConstant && rank > 0 && in_shape[rank - 1] > 0;
  for (int d = 0; d + 1 < rank; ++d) last_axis_only = last_axis_only && before[d] == 0 && in_shape[d] == out_shape[d];
  if (last_axis_only) {
    const int64_t in_c = in_shape[rank - 1], out_c = out_shape[rank - 1], pre = before[rank - 1];
    // 32-bit indices when every index the grid-stride loop forms (up to total + one grid) fits.
    const int64_t span = p.total + static_cast<int64_t>(GridFor(p.total, kBlock)) * kBlock;
    const bool small = span < INT32_MAX && p.total / out_c * in_c < INT32_MAX;
    return BySize(elem_size, [&](auto tag) {
      using T = decltype(tag);
      const T fill = FromBits<T>(value_bits);
      const T* vp = static_cast<const T*>(value_ptr);
      if (small)
        PadLastAxisKernel<T, int32_t><<<GridFor(p.total, kBlock), kBlock, 0, stream>>>(
            static_cast<const T*>(src), static_cast<T*>(dst), static_cast<int32_t>(p.total),
            static_cast<int32_t>(in_c), static_cast<int32_t>(out_c), static_cast<int32_t>(pre), fill, vp);
      else
        PadLastAxisKernel<T, int64_t><<<GridFor(p.total, kBlock), kBlock, 0, stream>>>(
            static_cast<const T*>(src), static_cast<T*>(dst), p.total, in_c, out_c, pre, fill, vp);
      return cudaGetLastError();
    });
  }
  return BySize(elem_size, [&](auto tag) {
    using T = decltype(tag);
    PadKernel<T><<<GridFor(p.total, kBlock), kBlock, 0, stream>>>(
        static_cast<const T*>(src), static_cast<T*>(dst), p, FromBits<T>(value_bits), static_cast<const T*>(value_ptr));
    return cudaGetLastError();
  });
}

cudaError_t LaunchTrilu(const void* src, void* dst, int64_t total, int64_t rows, int64_t cols, bool upper, int64_t k,
                        const int64_t* k_ptr, int elem_size, cudaStream_t stream) {
  if (total <= 0 || rows <= 0 || cols <= 0) return cudaSuccess;
  return BySize(elem_size, [&](auto tag) {
    using T = decltype(tag);
    TriluKernel<T><<<GridFor(total, kBlock), kBlock, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst),
                                                                   total, rows, cols, upper, k, k_ptr);
    return cudaGetLastError();
  });
}

cudaError_t LaunchRange(int dtype, const void* start, const void* delta, void* out, int64_t n, cudaStream_t stream,
                        bool stash_double) {
  if (n <= 0) return cudaSuccess;
  switch (dtype) {
    case kF16: return LaunchRangeLow<__half>(start, delta, out, n, stash_double, stream);
    case kBF16: return LaunchRangeLow<__nv_bfloat16>(start, delta, out, n, stash_double, stream);
    case kF32: return LaunchRangeTyped<float, true>(start, delta, out, n, stream);
    case kF64: return LaunchRangeTyped<double, true>(start, delta, out, n, stream);
    case kI16: return LaunchRangeTyped<int16_t, false>(start, delta, out, n, stream);
    case kI32: return LaunchRangeTyped<int32_t, false>(start, delta, out, n, stream);
    case kI64: return LaunchRangeTyped<int64_t, false>(start, delta, out, n, stream);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace kiln::cuda
