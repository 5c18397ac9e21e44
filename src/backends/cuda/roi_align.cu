// RoiAlign kernel (see vision_kernels.h): one thread per output element (roi, channel, bin row, bin column) walks the
// bin's sampling grid. Every coordinate is computed in double with each operation rounded on its own (no fused
// multiply-add), in the CPU reference's order, so the taps and their weights are the reference's; the avg sums run in
// its order too, and the max mode takes the largest weighted tap as it does.
#include <cmath>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/type_dispatch.cuh"
#include "backends/cuda/vision_kernels.h"

namespace kiln::cuda {
namespace {

constexpr double kMaxGrid = 65536.0;            // points per bin axis (as the CPU reference)
constexpr double kMaxPoints = 268435456.0;      // points per roi (2^28)

struct RoiGeom {
  int64_t n, c, h, w, num_rois, out_h, out_w, sampling_ratio;
  double scale;
  bool half_pixel, max_mode;
};

// The bilinear taps of point (y, x), as the CPU's MakeSample.
struct Taps {
  int64_t pos[4];
  double w[4];
  bool inside;
};

__device__ __forceinline__ Taps MakeTaps(double y, double x, int64_t h, int64_t w) {
  Taps s{{0, 0, 0, 0}, {0, 0, 0, 0}, false};
  if (h <= 0 || w <= 0) return s;
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return s;
  y = y < 0.0 ? 0.0 : y;
  x = x < 0.0 ? 0.0 : x;
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = static_cast<double>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = static_cast<double>(x0);
  } else {
    x1 = x0 + 1;
  }
  const double ly = __dsub_rn(y, static_cast<double>(y0)), lx = __dsub_rn(x, static_cast<double>(x0));
  const double hy = __dsub_rn(1.0, ly), hx = __dsub_rn(1.0, lx);
  s.inside = true;
  s.pos[0] = y0 * w + x0;
  s.pos[1] = y0 * w + x1;
  s.pos[2] = y1 * w + x0;
  s.pos[3] = y1 * w + x1;
  s.w[0] = __dmul_rn(hy, hx);
  s.w[1] = __dmul_rn(hy, lx);
  s.w[2] = __dmul_rn(ly, hx);
  s.w[3] = __dmul_rn(ly, lx);
  return s;
}

template <typename T, typename TR, typename TI>
__global__ void RoiAlignKernel(const T* __restrict__ x, const TR* __restrict__ rois, const TI* __restrict__ bi,
                               T* __restrict__ y, RoiGeom g) {
  const int64_t total = g.num_rois * g.c * g.out_h * g.out_w;
  const double nan = __longlong_as_double(0x7ff8000000000000LL);
  const double shift = g.half_pixel ? 0.5 : 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t pw = i % g.out_w, ph = (i / g.out_w) % g.out_h, k = (i / (g.out_w * g.out_h)) % g.c;
    const int64_t r = i / (g.out_w * g.out_h * g.c);
    const int64_t image = static_cast<int64_t>(bi[r]);
    if (image < 0 || image >= g.n) {
      y[i] = FromF64<T>(nan);
      continue;
    }
    const double x1 = __dsub_rn(__dmul_rn(LoadF64(rois, r * 4), g.scale), shift);
    const double y1 = __dsub_rn(__dmul_rn(LoadF64(rois, r * 4 + 1), g.scale), shift);
    const double x2 = __dsub_rn(__dmul_rn(LoadF64(rois, r * 4 + 2), g.scale), shift);
    const double y2 = __dsub_rn(__dmul_rn(LoadF64(rois, r * 4 + 3), g.scale), shift);
    double rh = __dsub_rn(y2, y1), rw = __dsub_rn(x2, x1);
    if (!g.half_pixel) {
      rh = rh < 1.0 ? 1.0 : rh;
      rw = rw < 1.0 ? 1.0 : rw;
    }
    if (!isfinite(x1) || !isfinite(y1) || !isfinite(rh) || !isfinite(rw)) {
      y[i] = FromF64<T>(nan);
      continue;
    }
    const double bin_h = __ddiv_rn(rh, static_cast<double>(g.out_h)), bin_w = __ddiv_rn(rw, static_cast<double>(g.out_w));
    double gh = static_cast<double>(g.sampling_ratio), gw = gh;
    if (g.sampling_ratio <= 0) {
      gh = ceil(bin_h);
      gw = ceil(bin_w);
      gh = gh < 0.0 ? 0.0 : gh;
      gw = gw < 0.0 ? 0.0 : gw;
    }
    if (gh > kMaxGrid || gw > kMaxGrid ||
        gh * gw * static_cast<double>(g.out_h) * static_cast<double>(g.out_w) > kMaxPoints) {
      y[i] = FromF64<T>(nan);
      continue;
    }
    const int64_t grid_h = static_cast<int64_t>(gh), grid_w = static_cast<int64_t>(gw);
    const int64_t points = grid_h * grid_w;
    const double count = static_cast<double>(points > 1 ? points : 1);
    const T* plane = x + (image * g.c + k) * g.h * g.w;
    const double row0 = __dadd_rn(y1, __dmul_rn(static_cast<double>(ph), bin_h));
    const double col0 = __dadd_rn(x1, __dmul_rn(static_cast<double>(pw), bin_w));
    double v = 0;
    int64_t point = 0;
    for (int64_t iy = 0; iy < grid_h; ++iy) {
      const double yy =
          __dadd_rn(row0, __ddiv_rn(__dmul_rn(static_cast<double>(iy) + 0.5, bin_h), static_cast<double>(grid_h)));
      for (int64_t ix = 0; ix < grid_w; ++ix, ++point) {
        const double xx =
            __dadd_rn(col0, __ddiv_rn(__dmul_rn(static_cast<double>(ix) + 0.5, bin_w), static_cast<double>(grid_w)));
        const Taps s = MakeTaps(yy, xx, g.h, g.w);
        if (!g.max_mode) {
          if (s.inside)
            for (int t = 0; t < 4; ++t) v = __dadd_rn(v, __dmul_rn(s.w[t], LoadF64(plane, s.pos[t])));
        } else {
          double m = 0;  // a point outside the map reads 0
          if (s.inside) {
            m = __dmul_rn(s.w[0], LoadF64(plane, s.pos[0]));
            for (int t = 1; t < 4; ++t) {
              const double wt = __dmul_rn(s.w[t], LoadF64(plane, s.pos[t]));
              m = m < wt ? wt : m;
            }
          }
          v = point == 0 ? m : (v < m ? m : v);
        }
      }
    }
    if (!g.max_mode) v = __ddiv_rn(v, count);
    y[i] = FromF64<T>(v);
  }
}

}  // namespace

bool RoiAlignSupports(int dtype) { return dtype == kF32 || dtype == kF16 || dtype == kBF16 || dtype == kF64; }

cudaError_t LaunchRoiAlign(const RoiAlignArgs& a, cudaStream_t stream) {
  if (!RoiAlignSupports(a.x_dtype) || !RoiAlignSupports(a.rois_dtype) ||
      (a.index_dtype != kI32 && a.index_dtype != kI64) || a.out_h < 1 || a.out_w < 1 || a.sampling_ratio < 0)
    return cudaErrorInvalidValue;
  const int64_t total = a.num_rois * a.c * a.out_h * a.out_w;
  if (total <= 0) return cudaSuccess;
  const RoiGeom g{a.n, a.c, a.h, a.w, a.num_rois, a.out_h, a.out_w, a.sampling_ratio, a.spatial_scale,
                  a.half_pixel, a.max_mode};
  bool launched = false;
  DispatchFloat(a.x_dtype, [&](auto xt) {
    using T = typename decltype(xt)::type;
    DispatchFloat(a.rois_dtype, [&](auto rt) {
      using TR = typename decltype(rt)::type;
      const T* x = static_cast<const T*>(a.x);
      const TR* rois = static_cast<const TR*>(a.rois);
      T* y = static_cast<T*>(a.y);
      if (a.index_dtype == kI32)
        RoiAlignKernel<T, TR, int32_t><<<GridFor(total), 256, 0, stream>>>(
            x, rois, static_cast<const int32_t*>(a.batch_indices), y, g);
      else
        RoiAlignKernel<T, TR, int64_t><<<GridFor(total), 256, 0, stream>>>(
            x, rois, static_cast<const int64_t*>(a.batch_indices), y, g);
      launched = true;
    });
  });
  return launched ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
