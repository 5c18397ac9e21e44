// CPU kernel of GridSample (opset 16's bilinear/nearest/bicubic, opset 20's linear/nearest/cubic, any spatial rank):
// each output point takes its coordinates from the grid (last dim in x, y, z order: the reverse of the spatial dims),
// maps [-1, 1] onto each spatial dim (align_corners: onto the corner pixels' centres, else onto the pixels' outer
// edges), brings coordinates outside into range as padding_mode says (border: clamped; reflection: reflected), and
// interpolates separably: the nearest pixel (ties to even), two linear taps, or four cubic taps (Keys, a = -0.75).
// A tap outside the input reads 0 (zeros), the edge (border) or the reflected pixel (reflection).
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Pad { kZeros, kBorder, kReflection };

// Reflects x into [lo, hi] by folding at the nearer border until inside.
double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double d = lo - x;
    const auto n = static_cast<int64_t>(d / range);
    const double r = d - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double d = x - hi;
    const auto n = static_cast<int64_t>(d / range);
    const double r = d - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void CubicWeights(double t, double w[4]) {
  constexpr double a = -0.75;
  const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  w[0] = ((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a;
  w[1] = ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1;
  w[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
  w[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

struct Tap {
  int64_t index = 0;  // -1: outside (zeros padding)
  double weight = 0;
};

Status GridSampleKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const Tensor& grid = c.in(1);
  const int64_t r = x.rank() - 2;
  if (r < 1 || grid.rank() != x.rank() || grid.dim(0) != x.dim(0) || grid.dim(grid.rank() - 1) != r)
    return Err(StatusCode::kInvalidArgument, "{}: X {} and grid {} must be [N, C, spatial...] and [N, spatial..., {}]",
               c.node.Where(), x.Describe(), grid.Describe(), r);
  std::string mode_s = c.node.gets("mode", c.node.opset >= 20 ? "linear" : "bilinear");
  const Mode mode = mode_s == "nearest" ? Mode::kNearest
                    : (mode_s == "cubic" || mode_s == "bicubic") ? Mode::kCubic : Mode::kLinear;
  const std::string pad_s = c.node.gets("padding_mode", "zeros");
  const Pad pad = pad_s == "border" ? Pad::kBorder : pad_s == "reflection" ? Pad::kReflection : Pad::kZeros;
  KILN_ASSIGN_OR_RETURN(const int64_t align_attr, c.node.attr_int("align_corners", 0));
  const bool align = align_attr != 0;

  const int64_t n = x.dim(0), ch = x.dim(1);
  std::vector<int64_t> in_dims(static_cast<size_t>(r)), out_dims(static_cast<size_t>(r));
  int64_t in_points = 1, out_points = 1;
  for (int64_t d = 0; d < r; ++d) {
    in_dims[static_cast<size_t>(d)] = x.dim(2 + d);
    out_dims[static_cast<size_t>(d)] = grid.dim(1 + d);
    in_points *= x.dim(2 + d);
    out_points *= grid.dim(1 + d);
  }
  std::vector<int64_t> out_shape = {n, ch};
  out_shape.insert(out_shape.end(), out_dims.begin(), out_dims.end());
  Tensor& y = AllocOutput(c, 0, x.dtype(), out_shape);
  if (y.numel() == 0) return Status::Ok();
  std::vector<int64_t> in_strides(static_cast<size_t>(r));
  for (int64_t d = r - 1, s = 1; d >= 0; --d) {
    in_strides[static_cast<size_t>(d)] = s;
    s *= in_dims[static_cast<size_t>(d)];
  }

  // The taps of one dim for coordinate v (already denormalized and brought into range).
  auto taps_for = [&](int64_t d, double v, std::vector<Tap>& taps) {
    const int64_t size = in_dims[static_cast<size_t>(d)];
    const double lo = align ? 0.0 : -0.5, hi = align ? static_cast<double>(size - 1) : static_cast<double>(size) - 0.5;
    auto fix = [&](int64_t i) -> int64_t {  // a tap index under the padding mode; -1 reads zero
      if (i >= 0 && i < size) return i;
      if (pad == Pad::kZeros) return -1;
      if (pad == Pad::kBorder) return i < 0 ? 0 : size - 1;
      const auto j = static_cast<int64_t>(Reflect(static_cast<double>(i), lo, hi));
      return j < 0 ? 0 : (j >= size ? size - 1 : j);
    };
    taps.clear();
    if (mode == Mode::kNearest) {
      taps.push_back({fix(static_cast<int64_t>(v)), 1.0});
    } else if (mode == Mode::kLinear) {
      const double f = std::floor(v), t = v - f;
      const auto i0 = static_cast<int64_t>(f);
      taps.push_back({fix(i0), 1.0 - t});
      taps.push_back({fix(i0 + 1), t});
    } else {
      const double f = std::floor(v);
      double w[4];
      CubicWeights(v - f, w);
      const auto i0 = static_cast<int64_t>(f);
      for (int k = 0; k < 4; ++k) taps.push_back({fix(i0 - 1 + k), w[k]});
    }
  };

  return DispatchFloat(x.dtype(), c.node, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::vector<std::vector<Tap>> taps(static_cast<size_t>(r));
    std::vector<size_t> pick(static_cast<size_t>(r));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t p = 0; p < out_points; ++p) {
        // Coordinates of output point p: grid[b, p, :] in x, y, z order; dim d of the input takes component r-1-d.
        for (int64_t d = 0; d < r; ++d) {
          const int64_t size = in_dims[static_cast<size_t>(d)];
          const double g = grid.GetAsDouble((b * out_points + p) * r + (r - 1 - d));
          double v = align ? (g + 1) / 2.0 * static_cast<double>(size - 1)
                           : ((g + 1) * static_cast<double>(size) - 1) / 2.0;
          if (mode == Mode::kNearest) v = std::nearbyint(v);
          const double lo = align ? 0.0 : -0.5;
          const double hi = align ? static_cast<double>(size - 1) : static_cast<double>(size) - 0.5;
          if (v < lo || v > hi) {
            if (pad == Pad::kBorder) v = std::min(std::max(v, 0.0), static_cast<double>(size - 1));
            else if (pad == Pad::kReflection) v = Reflect(v, lo, hi);
          }
          taps_for(d, v, taps[static_cast<size_t>(d)]);
        }
        for (int64_t k = 0; k < ch; ++k) {
          const int64_t base = (b * ch + k) * in_points;
          double acc = 0;
          std::fill(pick.begin(), pick.end(), 0);
          for (;;) {  // every combination of one tap per dim
            double w = 1;
            int64_t off = 0;
            bool zero = false;
            for (int64_t d = 0; d < r; ++d) {
              const Tap& t = taps[static_cast<size_t>(d)][pick[static_cast<size_t>(d)]];
              w *= t.weight;
              if (t.index < 0) zero = true;
              else off += t.index * in_strides[static_cast<size_t>(d)];
            }
            if (!zero && w != 0) acc += w * static_cast<double>(Load(xp, base + off));
            int64_t d = r - 1;
            while (d >= 0 && ++pick[static_cast<size_t>(d)] == taps[static_cast<size_t>(d)].size())
              pick[static_cast<size_t>(d--)] = 0;
            if (d < 0) break;
          }
          Store(yp, (b * ch + k) * out_points + p, static_cast<ComputeT<T>>(acc));
        }
      }
  });
}

}  // namespace

void RegisterGridSampleKernels(KernelRegistry& r) { r.Add("GridSample", GridSampleKernel); }

}  // namespace kiln::cpu
