// CPU reference kernel of RoiAlign (opsets 10, 16, 22). Each roi (x1, y1, x2, y2), scaled by spatial_scale and
// shifted by -0.5 under half_pixel (opset 16's default; opset 10 and output_half_pixel do not shift, and force a
// roi to at least 1 x 1), is cut into output_height x output_width bins; each bin is sampled on a regular grid of
// sampling_ratio^2 points (0: ceil(roi size / bins) per axis), each point read by bilinear interpolation. A point
// more than one pixel outside the map reads 0; one inside that margin is clamped to the map.
//   avg: the sum of the points' interpolated values over the grid's point count.
//   max: as onnxruntime and the ONNX reference do, the largest of each point's four weighted taps (w * x, not the
//        interpolated value), maximized over the points.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

// One sampling point: four taps (offsets into an H x W plane) and their bilinear weights; `inside` false reads 0.
struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
  bool inside = false;
};

// The bilinear taps of point (y, x) on an H x W map.
Sample MakeSample(double y, double x, int64_t h, int64_t w) {
  Sample s;
  if (h <= 0 || w <= 0) return s;  // an empty map: every point reads 0
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x);
  int64_t y1, x1;
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
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  const double hy = 1.0 - ly, hx = 1.0 - lx;
  s.inside = true;
  s.pos[0] = y0 * w + x0;
  s.pos[1] = y0 * w + x1;
  s.pos[2] = y1 * w + x0;
  s.pos[3] = y1 * w + x1;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

Status RoiAlignKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.in(0);
  const Tensor& rois = c.in(1);
  const Tensor& bi = c.in(2);
  if (x.rank() != 4 || rois.rank() != 2 || rois.dim(1) != 4 || bi.rank() != 1 || bi.dim(0) != rois.dim(0))
    return Err(StatusCode::kInvalidArgument,
               "{}: X must be [N, C, H, W], rois [num_rois, 4] and batch_indices [num_rois], got {}, {} and {}",
               n.Where(), x.Describe(), rois.Describe(), bi.Describe());
  const bool max_mode = Lower(n.gets("mode", "avg")) == "max";
  const bool half_pixel =
      Lower(n.gets("coordinate_transformation_mode",
                   n.opset != 0 && n.opset < 16 ? "output_half_pixel" : "half_pixel")) == "half_pixel";
  const int64_t oh = n.geti("output_height", 1), ow = n.geti("output_width", 1);
  const int64_t sampling_ratio = n.geti("sampling_ratio", 0);
  const double scale = n.getf("spatial_scale", 1.0f);
  if (oh < 1 || ow < 1 || sampling_ratio < 0)
    return Err(StatusCode::kInvalidArgument, "{}: output_height/width must be >= 1 and sampling_ratio >= 0", n.Where());
  const int64_t batch = x.dim(0), ch = x.dim(1), h = x.dim(2), w = x.dim(3), nr = rois.dim(0);
  Tensor& y = AllocOutput(c, 0, x.dtype(), {nr, ch, oh, ow});
  if (y.numel() == 0) return Status::Ok();

  // Per roi: its batch image, bins and sampling grid (checked here, so the parallel loop cannot fail).
  struct Roi {
    int64_t image = 0, grid_h = 0, grid_w = 0;
    double start_h = 0, start_w = 0, bin_h = 0, bin_w = 0, count = 1;
  };
  std::vector<Roi> plan(static_cast<size_t>(nr));
  const double shift = half_pixel ? 0.5 : 0.0;
  constexpr double kMaxGrid = 1 << 16;    // points per bin axis: beyond this a roi is surely malformed
  constexpr double kMaxPoints = 1 << 28;  // points per roi
  for (int64_t r = 0; r < nr; ++r) {
    Roi& p = plan[static_cast<size_t>(r)];
    p.image = bi.GetAsInt(r);
    if (p.image < 0 || p.image >= batch)
      return Err(StatusCode::kOutOfRange, "{}: batch_indices[{}] = {} is outside [0, {}) (X's batch)", n.Where(), r,
                 p.image, batch);
    const double x1 = rois.GetAsDouble(r * 4) * scale - shift, y1 = rois.GetAsDouble(r * 4 + 1) * scale - shift;
    const double x2 = rois.GetAsDouble(r * 4 + 2) * scale - shift, y2 = rois.GetAsDouble(r * 4 + 3) * scale - shift;
    double rh = y2 - y1, rw = x2 - x1;
    if (!half_pixel) {  // a malformed roi becomes 1 x 1
      rh = std::max(rh, 1.0);
      rw = std::max(rw, 1.0);
    }
    if (!std::isfinite(x1) || !std::isfinite(y1) || !std::isfinite(rh) || !std::isfinite(rw))
      return Err(StatusCode::kInvalidArgument, "{}: roi {} has a coordinate that is not finite", n.Where(), r);
    p.start_h = y1;
    p.start_w = x1;
    p.bin_h = rh / static_cast<double>(oh);
    p.bin_w = rw / static_cast<double>(ow);
    // An empty or inverted roi (half_pixel) gives an adaptive grid of <= 0 points: no samples, the output 0.
    const double gh = sampling_ratio > 0 ? static_cast<double>(sampling_ratio) : std::max(std::ceil(p.bin_h), 0.0);
    const double gw = sampling_ratio > 0 ? static_cast<double>(sampling_ratio) : std::max(std::ceil(p.bin_w), 0.0);
    if (gh > kMaxGrid || gw > kMaxGrid || gh * gw * static_cast<double>(oh) * static_cast<double>(ow) > kMaxPoints)
      return Err(StatusCode::kInvalidArgument,
                 "{}: roi {} asks for a {} x {} sampling grid in each of {} x {} bins (too many points)", n.Where(), r,
                 gh, gw, oh, ow);
    p.grid_h = static_cast<int64_t>(gh);
    p.grid_w = static_cast<int64_t>(gw);
    p.count = static_cast<double>(std::max<int64_t>(p.grid_h * p.grid_w, 1));
  }

  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ParallelFor(
        nr,
        [&](int64_t begin, int64_t end) {
          std::vector<Sample> samples;
          for (int64_t r = begin; r < end; ++r) {
            const Roi& p = plan[static_cast<size_t>(r)];
            const int64_t gh = p.grid_h, gw = p.grid_w;
            // The sampling points of every bin, shared by all channels: bin (ph, pw), point (iy, ix).
            samples.clear();
            for (int64_t ph = 0; ph < oh; ++ph)
              for (int64_t pw = 0; pw < ow; ++pw)
                for (int64_t iy = 0; iy < gh; ++iy) {
                  const double yy = p.start_h + static_cast<double>(ph) * p.bin_h +
                                    (static_cast<double>(iy) + 0.5) * p.bin_h / static_cast<double>(gh);
                  for (int64_t ix = 0; ix < gw; ++ix) {
                    const double xx = p.start_w + static_cast<double>(pw) * p.bin_w +
                                      (static_cast<double>(ix) + 0.5) * p.bin_w / static_cast<double>(gw);
                    samples.push_back(MakeSample(yy, xx, h, w));
                  }
                }
            const int64_t per_bin = gh * gw;
            for (int64_t k = 0; k < ch; ++k) {
              const T* plane = xp + (p.image * ch + k) * h * w;
              T* out = yp + (r * ch + k) * oh * ow;
              for (int64_t b = 0; b < oh * ow; ++b) {
                const Sample* s = samples.data() + b * per_bin;
                double v = 0;
                if (!max_mode) {
                  for (int64_t i = 0; i < per_bin; ++i)
                    if (s[i].inside)
                      for (int t = 0; t < 4; ++t) v += s[i].w[t] * static_cast<double>(Load(plane, s[i].pos[t]));
                  v /= p.count;
                } else {
                  for (int64_t i = 0; i < per_bin; ++i) {
                    double m = 0;  // a point outside the map reads 0
                    if (s[i].inside) {
                      m = s[i].w[0] * static_cast<double>(Load(plane, s[i].pos[0]));
                      for (int t = 1; t < 4; ++t)
                        m = std::max(m, s[i].w[t] * static_cast<double>(Load(plane, s[i].pos[t])));
                    }
                    v = i == 0 ? m : std::max(v, m);
                  }
                }
                Store(out, b, static_cast<ComputeT<T>>(v));
              }
            }
          }
        },
        1);
  });
}

}  // namespace

void RegisterRoiAlignKernels(KernelRegistry& r) { r.Add("RoiAlign", RoiAlignKernel); }

}  // namespace kiln::cpu
