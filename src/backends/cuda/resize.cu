// Resize kernels (see resize_kernels.h). Every output element computes its source coordinates per axis with the
// reference's double arithmetic (shape/resize_plan.h and backends/cpu/resize.cpp): no tables, so nothing is
// uploaded when shapes change. Linear/cubic sum the tensor product of the per-axis taps (the reference applies
// the same taps one axis at a time; results agree to float rounding).
#include <cmath>
#include <type_traits>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/resize_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

// Double arithmetic that the device compiler may not contract into FMAs (the host reference does not either), so
// that coordinates, and the nearest indices and floors taken from them, match the reference bit for bit.
__host__ __device__ __forceinline__ double DMul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ __forceinline__ double DAdd(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ __forceinline__ double DSub(double a, double b) { return DAdd(a, -b); }
__host__ __device__ __forceinline__ double DDiv(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// Source coordinate of output index x on axis a; *outside is set for tf_crop_and_resize outside the input.
__host__ __device__ double SourceCoord(const ResizeParams& p, int a, int64_t x, bool* outside) {
  const double s = p.scale[a];
  const double in_d = static_cast<double>(p.in_shape[a]), xd = static_cast<double>(x);
  const double out_w = DMul(s, in_d);
  *outside = false;
  switch (p.coord_mode) {
    case kCoordAlignCorners: return out_w == 1.0 ? 0.0 : DDiv(DMul(xd, DSub(in_d, 1)), DSub(out_w, 1));
    case kCoordAsymmetric: return DDiv(xd, s);
    case kCoordPytorchHalfPixel: return p.out_shape[a] == 1 ? -0.5 : DSub(DDiv(DAdd(xd, 0.5), s), 0.5);
    case kCoordHalfPixelSymmetric: {
      const double adjustment = DDiv(static_cast<double>(p.out_shape[a]), out_w);
      const double offset = DMul(in_d / 2, DSub(1, adjustment));
      return DSub(DAdd(offset, DDiv(DAdd(xd, 0.5), s)), 0.5);
    }
    case kCoordTfCropAndResize: {
      const double r0 = p.roi_start[a], r1 = p.roi_end[a];
      double c = out_w == 1.0 ? DMul(DSub(r1, r0), DSub(in_d, 1)) / 2
                              : DDiv(DMul(DMul(xd, DSub(r1, r0)), DSub(in_d, 1)), DSub(out_w, 1));
      c = DAdd(c, DMul(r0, DSub(in_d, 1)));
      *outside = c < 0 || c > DSub(in_d, 1);
      return c;
    }
    default: return DSub(DDiv(DAdd(xd, 0.5), s), 0.5);  // half_pixel
  }
}

__host__ __device__ int64_t NearestSource(const ResizeParams& p, int a, int64_t x, bool* outside) {
  const double c = SourceCoord(p, a, x, outside);
  const double f = floor(c);
  int64_t v = static_cast<int64_t>(f);
  if (c != f) {
    const double frac = DSub(c, f);
    bool up;
    switch (p.nearest_mode) {
      case kNearestFloor: up = false; break;
      case kNearestCeil: up = true; break;
      case kRoundPreferCeil: up = frac >= 0.5; break;
      default: up = frac > 0.5; break;
    }
    v += up ? 1 : 0;
  }
  const int64_t hi = p.in_shape[a] - 1;
  return v < 0 ? 0 : (v > hi ? hi : v);
}

// Per-axis tap geometry of linear/cubic, fixed by the scale (computed on the host).
struct TapGeometry {
  int64_t start[kResizeMaxRank];   // first tap relative to floor(coordinate)
  int64_t taps[kResizeMaxRank];
  double support[kResizeMaxRank];  // antialias: min(scale, 1); else 1
  int64_t in_strides[kResizeMaxRank];
};

__device__ __forceinline__ double CubicKernel(double x, double A) {
  x = fabs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0.0;
}

// Unnormalized weight of tap j (relative to floor) for fraction r on axis a, with source index src.
__device__ __forceinline__ double TapWeight(const ResizeParams& p, const TapGeometry& g, int a, int64_t j, double r,
                                            int64_t src) {
  const bool cubic = p.mode == kResizeCubic;
  double w;
  const double jr = static_cast<double>(j) - r;
  if (!p.antialias) {
    w = cubic ? CubicKernel(jr, p.cubic_a) : (j == 0 ? 1 - r : r);
  } else {
    const double arg = jr * g.support[a];
    w = cubic ? CubicKernel(arg, p.cubic_a) : fmin(fmax(1 - fabs(arg), 0.0), 1.0);
  }
  if (p.exclude_outside && (src < 0 || src >= p.in_shape[a])) w = 0;
  return w;
}

template <typename T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};

template <typename T>
__device__ __forceinline__ typename AccOf<T>::type LoadAcc(T v) { return ToF32(v); }
template <>
__device__ __forceinline__ double LoadAcc<double>(double v) { return v; }
template <typename T>
__device__ __forceinline__ T StoreAcc(typename AccOf<T>::type v) { return FromF32<T>(v); }
template <>
__device__ __forceinline__ double StoreAcc<double>(double v) { return v; }

template <typename T>
__global__ void ResizeInterpolateKernel(const T* __restrict__ x, T* __restrict__ y, ResizeParams p, TapGeometry g,
                                        int64_t total) {
  using Acc = typename AccOf<T>::type;
  const bool normalize = p.antialias || p.exclude_outside;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t coord[kResizeMaxRank], floor_idx[kResizeMaxRank], k[kResizeMaxRank];
    double frac[kResizeMaxRank], norm[kResizeMaxRank];
    int64_t rem = t;
    for (int a = p.rank - 1; a >= 0; --a) {
      coord[a] = rem % p.out_shape[a];
      rem /= p.out_shape[a];
    }
    bool outside = false;
    for (int a = 0; a < p.rank && !outside; ++a) {
      k[a] = 0;
      if (!p.resized[a]) continue;
      const double c = SourceCoord(p, a, coord[a], &outside);
      const double f = floor(c);
      floor_idx[a] = static_cast<int64_t>(f);
      frac[a] = c - f;
      norm[a] = 1.0;
      if (normalize) {
        double sum = 0;
        for (int64_t q = 0; q < g.taps[a]; ++q) {
          const int64_t j = g.start[a] + q;
          sum += TapWeight(p, g, a, j, frac[a], floor_idx[a] + j);
        }
        if (sum != 0) norm[a] = sum;
      }
    }
    if (outside) {
      y[t] = StoreAcc<T>(static_cast<Acc>(p.extrapolation));
      continue;
    }
    Acc acc = 0;
    while (true) {
      double w = 1.0;
      int64_t off = 0;
      for (int a = 0; a < p.rank; ++a) {
        if (!p.resized[a]) {
          off += coord[a] * g.in_strides[a];
          continue;
        }
        const int64_t j = g.start[a] + k[a];
        const int64_t src = floor_idx[a] + j;
        w *= TapWeight(p, g, a, j, frac[a], src) / norm[a];
        const int64_t hi = p.in_shape[a] - 1;
        off += (src < 0 ? 0 : (src > hi ? hi : src)) * g.in_strides[a];
      }
      acc += static_cast<Acc>(w) * LoadAcc(x[off]);
      int a = p.rank - 1;
      for (; a >= 0; --a) {
        if (!p.resized[a]) continue;
        if (++k[a] < g.taps[a]) break;
        k[a] = 0;
      }
      if (a < 0) break;
    }
    y[t] = StoreAcc<T>(acc);
  }
}

template <typename E>
__global__ void ResizeNearestKernel(const E* __restrict__ x, E* __restrict__ y, ResizeParams p, Dims8 in_strides,
                                    E extrapolation, int64_t total) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = t, off = 0;
    bool outside = false;
    for (int a = p.rank - 1; a >= 0; --a) {
      const int64_t c = rem % p.out_shape[a];
      rem /= p.out_shape[a];
      if (!p.resized[a]) {
        off += c * in_strides.d[a];
        continue;
      }
      bool o = false;
      off += NearestSource(p, a, c, &o) * in_strides.d[a];
      outside = outside || o;
    }
    y[t] = outside ? extrapolation : x[off];
  }
}

// Nearest upsampling by integer factors (fy, fx) of the two innermost axes: one thread per input element writes its
// fy x fx copies. x is viewed as [rows_in, w_in] (rows_in = every leading axis times the input height).
template <typename E>
__global__ void NearestUpsampleKernel(const E* __restrict__ x, E* __restrict__ y, int64_t w_in, int64_t fy,
                                      int64_t fx, int64_t total_in) {
  const int64_t w_out = w_in * fx;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total_in;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = t / w_in, col = t - row * w_in;
    const E v = x[t];
    for (int64_t j = 0; j < fy; ++j) {
      E* out = y + (row * fy + j) * w_out + col * fx;
      for (int64_t i = 0; i < fx; ++i) out[i] = v;
    }
  }
}

// True when nearest maps output x to input x / f on axis a for an integer f (returned).
bool IsIntegerUpsample(const ResizeParams& p, int a, int64_t* factor) {
  const int64_t in = p.in_shape[a], out = p.out_shape[a];
  if (in <= 0 || out % in != 0) return false;
  const int64_t f = out / in;
  for (int64_t x = 0; x < out; ++x) {
    bool outside = false;
    if (NearestSource(p, a, x, &outside) != x / f || outside) return false;
  }
  *factor = f;
  return true;
}

cudaError_t LaunchNearest(const void* x, void* y, int elem_bytes, const ResizeParams& p, int64_t total,
                          cudaStream_t stream) {
  const int r = p.rank;
  bool fast = p.mode == kResizeNearest;
  int64_t fy = 1, fx = 1, f = 1;
  for (int a = 0; a < r && fast; ++a) {
    fast = IsIntegerUpsample(p, a, &f);
    if (!fast) break;
    if (a == r - 1) fx = f;
    else if (a == r - 2) fy = f;
    else fast = f == 1;
  }
  int64_t total_in = 1;
  for (int a = 0; a < r; ++a) total_in *= p.in_shape[a];
  Dims8 strides{};
  int64_t s = 1;
  for (int a = r - 1; a >= 0; --a) {
    strides.d[a] = s;
    s *= p.in_shape[a];
  }
  const bool ok = DispatchElemBytes(elem_bytes, [&](auto tag) {
    using E = typename decltype(tag)::type;
    if (fast) {
      NearestUpsampleKernel<<<GridFor(total_in), 256, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(y),
                                                                   p.in_shape[r - 1], fy, fx, total_in);
    } else {
      E extrap;
      memcpy(&extrap, &p.extrapolation_bits, sizeof(E));
      ResizeNearestKernel<<<GridFor(total), 256, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(y), p, strides,
                                                              extrap, total);
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace

bool ResizeInterpolates(int dtype) {
  return dtype == kF32 || dtype == kF16 || dtype == kBF16 || dtype == kF64;
}

cudaError_t LaunchResize(const void* x, void* y, int dtype, int elem_bytes, const ResizeParams& p,
                         cudaStream_t stream) {
  if (p.rank < 1 || p.rank > kResizeMaxRank) return cudaErrorInvalidValue;
  int64_t total = 1, total_in = 1;
  for (int a = 0; a < p.rank; ++a) {
    total *= p.out_shape[a];
    total_in *= p.in_shape[a];
  }
  if (total <= 0) return cudaSuccess;
  if (total_in <= 0) return cudaErrorInvalidValue;
  if (p.mode == kResizeNearest) return LaunchNearest(x, y, elem_bytes, p, total, stream);

  TapGeometry g{};
  int64_t s = 1;
  for (int a = p.rank - 1; a >= 0; --a) {
    g.in_strides[a] = s;
    s *= p.in_shape[a];
    const double sa = p.antialias ? (p.scale[a] < 1.0 ? p.scale[a] : 1.0) : 1.0;
    g.support[a] = sa;
    if (p.mode == kResizeCubic) g.start[a] = p.antialias ? static_cast<int64_t>(std::floor(-2.0 / sa)) + 1 : -1;
    else g.start[a] = p.antialias ? static_cast<int64_t>(std::floor(-1.0 / sa)) + 1 : 0;
    g.taps[a] = 2 - 2 * g.start[a];
  }
  switch (dtype) {
    case kF32:
      ResizeInterpolateKernel<<<GridFor(total), 256, 0, stream>>>(static_cast<const float*>(x), static_cast<float*>(y),
                                                                  p, g, total);
      break;
    case kF16:
      ResizeInterpolateKernel<<<GridFor(total), 256, 0, stream>>>(static_cast<const __half*>(x),
                                                                  static_cast<__half*>(y), p, g, total);
      break;
    case kBF16:
      ResizeInterpolateKernel<<<GridFor(total), 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(x),
                                                                  static_cast<__nv_bfloat16*>(y), p, g, total);
      break;
    case kF64:
      ResizeInterpolateKernel<<<GridFor(total), 256, 0, stream>>>(static_cast<const double*>(x),
                                                                  static_cast<double*>(y), p, g, total);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda
