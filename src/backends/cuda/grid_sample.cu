// GridSample and AffineGrid kernels (see grid_kernels.h). Coordinates are computed in double with each operation
// rounded on its own (no fused multiply-add), as the host computes them, so that the taps (floor, rounding, the
// reflection's folds) land where the CPU reference's do; sums are double.
#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/grid_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

constexpr int kBlock = 128;
constexpr int kMaxTaps = 4;

// x folded into [lo, hi] at the nearer border until inside (the CPU reference's Reflect).
__device__ __forceinline__ double Reflect(double x, double lo, double hi) {
  const double range = __dsub_rn(hi, lo);
  if (range <= 0) return lo;
  if (x < lo) {
    const double d = __dsub_rn(lo, x);
    const auto n = static_cast<int64_t>(__ddiv_rn(d, range));
    const double r = __dsub_rn(d, __dmul_rn(static_cast<double>(n), range));
    return n % 2 == 0 ? __dadd_rn(lo, r) : __dsub_rn(hi, r);
  }
  if (x > hi) {
    const double d = __dsub_rn(x, hi);
    const auto n = static_cast<int64_t>(__ddiv_rn(d, range));
    const double r = __dsub_rn(d, __dmul_rn(static_cast<double>(n), range));
    return n % 2 == 0 ? __dsub_rn(hi, r) : __dadd_rn(lo, r);
  }
  return x;
}

// Keys' cubic weights (a = -0.75) of the four taps around a point at fraction t past the second.
__device__ __forceinline__ void CubicWeights(double t, double w[4]) {
  constexpr double a = -0.75;
  const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  w[0] = ((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a;
  w[1] = ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1;
  w[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
  w[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

// The taps of one dim of `size` pixels for grid value g: their indices (-1: outside, reads 0) and weights.
__device__ __forceinline__ int Taps(const GridSampleArgs& a, int64_t size, double g, int64_t* idx, double* w) {
  const double sz = static_cast<double>(size);
  double v = a.align_corners ? __dmul_rn(__ddiv_rn(__dadd_rn(g, 1.0), 2.0), static_cast<double>(size - 1))
                             : __ddiv_rn(__dsub_rn(__dmul_rn(__dadd_rn(g, 1.0), sz), 1.0), 2.0);
  if (a.mode == kGridNearest) v = rint(v);
  const double lo = a.align_corners ? 0.0 : -0.5;
  const double hi = a.align_corners ? static_cast<double>(size - 1) : __dsub_rn(sz, 0.5);
  if (v < lo || v > hi) {
    if (a.pad == kGridPadBorder) v = fmin(fmax(v, 0.0), static_cast<double>(size - 1));
    else if (a.pad == kGridPadReflection) v = Reflect(v, lo, hi);
  }
  auto fix = [&](int64_t i) -> int64_t {
    if (i >= 0 && i < size) return i;
    if (a.pad == kGridPadZeros) return -1;
    if (a.pad == kGridPadBorder) return i < 0 ? 0 : size - 1;
    const auto j = static_cast<int64_t>(Reflect(static_cast<double>(i), lo, hi));
    return j < 0 ? 0 : (j >= size ? size - 1 : j);
  };
  if (a.mode == kGridNearest) {
    idx[0] = fix(static_cast<int64_t>(v));
    w[0] = 1.0;
    return 1;
  }
  const double f = floor(v);
  const double t = __dsub_rn(v, f);
  const auto i0 = static_cast<int64_t>(f);
  if (a.mode == kGridLinear) {
    idx[0] = fix(i0);
    w[0] = __dsub_rn(1.0, t);
    idx[1] = fix(i0 + 1);
    w[1] = t;
    return 2;
  }
  CubicWeights(t, w);
  for (int k = 0; k < 4; ++k) idx[k] = fix(i0 - 1 + k);
  return 4;
}

template <typename T, typename G>
__global__ void GridSampleKernel(const GridSampleArgs a, int64_t in_points, int64_t out_points) {
  const T* x = static_cast<const T*>(a.x);
  const G* grid = static_cast<const G*>(a.grid);
  T* y = static_cast<T*>(a.y);
  const int r = a.rank;
  int64_t in_stride[kGridSampleMaxDims];
  in_stride[r - 1] = 1;
  for (int d = r - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * a.in[d + 1];
  const int64_t total = a.n * out_points;
  for (int64_t bp = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; bp < total;
       bp += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = bp / out_points, p = bp - b * out_points;
    int64_t idx[kGridSampleMaxDims][kMaxTaps];
    double w[kGridSampleMaxDims][kMaxTaps];
    int taps[kGridSampleMaxDims];
    int combos = 1;
    for (int d = 0; d < r; ++d) {
      const double g = LoadF64(grid, bp * r + (r - 1 - d));
      taps[d] = Taps(a, a.in[d], g, idx[d], w[d]);
      combos *= taps[d];
    }
    for (int64_t k = 0; k < a.c; ++k) {
      const T* xc = x + (b * a.c + k) * in_points;
      double acc = 0;
      // Every combination of one tap per dim, the last dim's changing fastest, the weight a product in dim order
      // (the CPU reference's order).
      for (int cmb = 0; cmb < combos; ++cmb) {
        int pick[kGridSampleMaxDims];
        for (int d = r - 1, rest = cmb; d >= 0; --d) {
          pick[d] = rest % taps[d];
          rest /= taps[d];
        }
        double wt = 1;
        int64_t off = 0;
        bool zero = false;
        for (int d = 0; d < r; ++d) {
          const int64_t i = idx[d][pick[d]];
          wt = __dmul_rn(wt, w[d][pick[d]]);
          if (i < 0) zero = true;
          else off += i * in_stride[d];
        }
        if (!zero && wt != 0) acc = __dadd_rn(acc, __dmul_rn(wt, LoadF64(xc, off)));
      }
      y[(b * a.c + k) * out_points + p] = FromF64<T>(acc);
    }
  }
}

template <typename T>
__global__ void AffineGridKernel(const T* __restrict__ theta, T* __restrict__ y, int64_t n, int r, Dims8 dims,
                                 int64_t points, bool align) {
  const int64_t total = n * points;
  for (int64_t bp = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; bp < total;
       bp += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = bp / points;
    // The base vector (x from the last spatial dim, y, [z], 1).
    double v[4] = {1.0, 1.0, 1.0, 1.0};
    int64_t rest = bp - b * points;
    for (int d = r - 1; d >= 0; --d) {
      const int64_t size = dims.d[d], i = rest % size;
      rest /= size;
      const double di = static_cast<double>(i);
      v[r - 1 - d] = align ? (size > 1 ? __dadd_rn(-1.0, __ddiv_rn(__dmul_rn(2.0, di), static_cast<double>(size - 1)))
                                       : 0.0)
                           : __dsub_rn(__ddiv_rn(__dadd_rn(__dmul_rn(2.0, di), 1.0), static_cast<double>(size)), 1.0);
    }
    for (int i = 0; i < r; ++i) {
      double acc = 0;
      for (int j = 0; j <= r; ++j) acc = __dadd_rn(acc, __dmul_rn(LoadF64(theta, (b * r + i) * (r + 1) + j), v[j]));
      y[bp * r + i] = FromF64<T>(acc);
    }
  }
}

}  // namespace

bool GridSampleSupports(int dtype) { return DispatchFloat(dtype, [](auto) {}); }

cudaError_t LaunchGridSample(const GridSampleArgs& a, cudaStream_t stream) {
  if (a.rank < 1 || a.rank > kGridSampleMaxDims) return cudaErrorInvalidValue;
  int64_t in_points = 1, out_points = 1;
  for (int d = 0; d < a.rank; ++d) {
    in_points *= a.in[d];
    out_points *= a.out[d];
  }
  const int64_t total = a.n * out_points;
  if (total <= 0 || a.c <= 0) return cudaSuccess;
  bool ok = false;
  DispatchFloat(a.x_dtype, [&](auto xtag) {
    using T = typename decltype(xtag)::type;
    ok = DispatchFloat(a.grid_dtype, [&](auto gtag) {
      using G = typename decltype(gtag)::type;
      GridSampleKernel<T, G><<<GridFor(total, kBlock), kBlock, 0, stream>>>(a, in_points, out_points);
    });
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchAffineGrid(int dtype, const void* theta, void* y, int64_t n, int rank, const int64_t* dims,
                             bool align_corners, cudaStream_t stream) {
  if (rank != 2 && rank != 3) return cudaErrorInvalidValue;
  Dims8 d{};
  int64_t points = 1;
  for (int i = 0; i < rank; ++i) {
    d.d[i] = dims[i];
    points *= dims[i];
  }
  const int64_t total = n * points;
  if (total <= 0) return cudaSuccess;
  const bool ok = DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    AffineGridKernel<T><<<GridFor(total, kBlock), kBlock, 0, stream>>>(static_cast<const T*>(theta),
                                                                      static_cast<T*>(y), n, rank, d, points,
                                                                      align_corners);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
