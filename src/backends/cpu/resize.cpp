// CPU kernel for Resize (Upsample is rewritten to Resize at import). Each resized axis gets a table of
// taps (source index, weight) per output index from the coordinate transformation and the mode (nearest,
// linear, cubic; antialias widens the filter when downsampling). Nearest is a pure gather on raw elements
// (any dtype; fast for YOLO-style NCHW upsampling: duplicated output rows are copied). Linear and cubic
// run one separable pass per resized axis in float (double for float64 inputs).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/index_util.h"
#include "ops/resize_plan.h"

namespace kiln::cpu {
namespace {

using idx::EnsureOutput;

struct ResizeAttrs {
  std::string mode, ctm, nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false, antialias = false;
  double extrapolation = 0.0;
};

// Taps of one axis: `taps` entries per output index; idx == -1 marks an output that takes the
// extrapolation value (tf_crop_and_resize outside the input).
struct AxisTaps {
  int64_t taps = 1;
  std::vector<int64_t> idx;
  std::vector<double> w;
};

double CubicKernel(double x, double A) {
  x = std::fabs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0.0;
}

// Source coordinate of output index x; `outside` is set for tf_crop_and_resize outside the input.
double SourceCoord(const ResizeAttrs& at, int64_t x, int64_t in_len, int64_t out_len, double s, double r0, double r1,
                   bool* outside) {
  const double out_w = s * static_cast<double>(in_len);
  const double xd = static_cast<double>(x), in_d = static_cast<double>(in_len);
  *outside = false;
  if (at.ctm == "align_corners") return out_w == 1.0 ? 0.0 : xd * (in_d - 1) / (out_w - 1);
  if (at.ctm == "asymmetric") return xd / s;
  if (at.ctm == "pytorch_half_pixel") return out_len == 1 ? -0.5 : (xd + 0.5) / s - 0.5;
  if (at.ctm == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out_len) / out_w;
    const double offset = in_d / 2 * (1 - adjustment);
    return offset + (xd + 0.5) / s - 0.5;
  }
  if (at.ctm == "tf_crop_and_resize") {
    double c = out_w == 1.0 ? (r1 - r0) * (in_d - 1) / 2 : xd * (r1 - r0) * (in_d - 1) / (out_w - 1);
    c += r0 * (in_d - 1);
    *outside = c < 0 || c > in_d - 1;
    return c;
  }
  return (xd + 0.5) / s - 0.5;  // half_pixel
}

int64_t NearestIndex(const std::string& mode, double c) {
  const double f = std::floor(c);
  if (c == f) return static_cast<int64_t>(f);
  const double frac = c - f;
  bool up;
  if (mode == "floor") up = false;
  else if (mode == "ceil") up = true;
  else if (mode == "round_prefer_ceil") up = frac >= 0.5;
  else up = frac > 0.5;  // round_prefer_floor
  return static_cast<int64_t>(f) + (up ? 1 : 0);
}

AxisTaps MakeTaps(const ResizeAttrs& at, int64_t in_len, int64_t out_len, double s, double r0, double r1) {
  AxisTaps t;
  const bool nearest = at.mode == "nearest", cubic = at.mode == "cubic";
  const double sa = at.antialias ? std::min(s, 1.0) : 1.0;
  int64_t start;  // first tap offset relative to floor(coord)
  if (nearest) {
    start = 0, t.taps = 1;
  } else if (cubic) {
    start = at.antialias ? static_cast<int64_t>(std::floor(-2.0 / sa)) + 1 : -1;
    t.taps = 2 - 2 * start;
  } else {
    start = at.antialias ? static_cast<int64_t>(std::floor(-1.0 / sa)) + 1 : 0;
    t.taps = 2 - 2 * start;
  }
  t.idx.assign(out_len * t.taps, 0);
  t.w.assign(out_len * t.taps, 0.0);
  for (int64_t x = 0; x < out_len; ++x) {
    bool outside = false;
    const double c = SourceCoord(at, x, in_len, out_len, s, r0, r1, &outside);
    int64_t* ix = &t.idx[x * t.taps];
    double* w = &t.w[x * t.taps];
    if (outside || in_len == 0) {
      for (int64_t k = 0; k < t.taps; ++k) ix[k] = -1;
      continue;
    }
    if (nearest) {
      ix[0] = std::clamp<int64_t>(NearestIndex(at.nearest_mode, c), 0, in_len - 1);
      w[0] = 1.0;
      continue;
    }
    const double f = std::floor(c), r = c - f;
    const int64_t x0 = static_cast<int64_t>(f);
    double sum = 0;
    for (int64_t k = 0; k < t.taps; ++k) {
      const int64_t j = start + k;
      double wk;
      if (!at.antialias) {
        wk = cubic ? CubicKernel(static_cast<double>(j) - r, at.cubic_a) : (j == 0 ? 1 - r : r);
      } else {
        const double arg = (static_cast<double>(j) - r) * sa;
        wk = cubic ? CubicKernel(arg, at.cubic_a) : std::clamp(1 - std::fabs(arg), 0.0, 1.0);
      }
      const int64_t src = x0 + j;
      if (at.exclude_outside && (src < 0 || src >= in_len)) wk = 0;
      ix[k] = std::clamp<int64_t>(src, 0, in_len - 1);
      w[k] = wk;
      sum += wk;
    }
    if ((at.antialias || at.exclude_outside) && sum != 0)
      for (int64_t k = 0; k < t.taps; ++k) w[k] /= sum;
  }
  return t;
}

// Nearest: out[coords] = in[map_0[c0], ..., map_n[cn]] on raw elements.
template <typename E>
void NearestGather(const E* src, E* dst, const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape,
                   const std::vector<AxisTaps>& maps, E extrap) {
  const int64_t rank = static_cast<int64_t>(out_shape.size());
  const auto istr = Strides(in_shape);
  const int64_t W = out_shape[rank - 1];
  const int64_t rows = W == 0 ? 0 : NumElements(out_shape) / W;
  const int64_t* xmap = maps[rank - 1].idx.data();
  // For row r, the second-to-last output coordinate maps to the same source row as for r-1: copy it.
  ParallelFor(rows, [&](int64_t b, int64_t e) {
    std::vector<int64_t> coord(rank, 0);
    int64_t rem = b;
    for (int64_t d = rank - 2; d >= 0; --d) {
      coord[d] = rem % out_shape[d];
      rem /= out_shape[d];
    }
    for (int64_t r = b; r < e; ++r) {
      E* out_row = dst + r * W;
      bool same_as_prev = false;
      if (r > b && rank >= 2 && coord[rank - 2] > 0) {
        const auto& m = maps[rank - 2].idx;
        same_as_prev = m[coord[rank - 2]] == m[coord[rank - 2] - 1];
      }
      if (same_as_prev) {
        std::memcpy(out_row, out_row - W, W * sizeof(E));
      } else {
        int64_t off = 0;
        bool out_of_roi = false;
        for (int64_t d = 0; d < rank - 1; ++d) {
          const int64_t s = maps[d].idx[coord[d]];
          if (s < 0) out_of_roi = true;
          off += s * istr[d];
        }
        const E* in_row = src + off;
        if (out_of_roi) {
          for (int64_t x = 0; x < W; ++x) out_row[x] = extrap;
        } else {
          for (int64_t x = 0; x < W; ++x) out_row[x] = xmap[x] < 0 ? extrap : in_row[xmap[x]];
        }
      }
      for (int64_t d = rank - 2; d >= 0; --d) {
        if (++coord[d] < out_shape[d]) break;
        coord[d] = 0;
      }
    }
  }, std::max<int64_t>(1, 16384 / std::max<int64_t>(W, 1)));
}

// One separable pass along `axis`: dst[o, x, i] = sum_k w[x,k] * src[o, idx[x,k], i].
template <typename Acc>
void SeparablePass(const std::vector<Acc>& src, std::vector<Acc>& dst, const std::vector<int64_t>& shape, int64_t axis,
                   int64_t out_len, const AxisTaps& t, Acc extrap) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t in_len = shape[axis];
  dst.assign(outer * out_len * inner, Acc(0));
  ParallelFor(outer * out_len, [&](int64_t b, int64_t e) {
    for (int64_t ox = b; ox < e; ++ox) {
      const int64_t o = ox / out_len, x = ox % out_len;
      Acc* d = &dst[ox * inner];
      const int64_t* ix = &t.idx[x * t.taps];
      const double* w = &t.w[x * t.taps];
      if (ix[0] < 0) {
        std::fill(d, d + inner, extrap);
        continue;
      }
      if (inner == 1) {  // resizing the innermost axis: one dot product per output
        const Acc* s = &src[o * in_len];
        Acc acc = 0;
        for (int64_t k = 0; k < t.taps; ++k) acc += static_cast<Acc>(w[k]) * s[ix[k]];
        *d = acc;
        continue;
      }
      for (int64_t k = 0; k < t.taps; ++k) {
        const Acc wk = static_cast<Acc>(w[k]);
        if (wk == Acc(0)) continue;
        const Acc* s = &src[(o * in_len + ix[k]) * inner];
        for (int64_t i = 0; i < inner; ++i) d[i] += wk * s[i];
      }
    }
  }, std::max<int64_t>(1, 8192 / std::max<int64_t>(inner, 1)));
}

template <typename T, typename Acc>
void InterpolateTyped(const Tensor& x, Tensor& out, const std::vector<AxisTaps>& maps,
                      const std::vector<int64_t>& out_shape, double extrap) {
  const int64_t n = x.numel();
  std::vector<Acc> cur(n), next;
  const T* p = x.data<T>();
  for (int64_t i = 0; i < n; ++i) cur[i] = static_cast<Acc>(Load(p, i));
  std::vector<int64_t> shape = x.shape();
  for (int64_t a = static_cast<int64_t>(shape.size()) - 1; a >= 0; --a) {
    if (maps[a].idx.empty()) continue;  // identity axis
    SeparablePass<Acc>(cur, next, shape, a, out_shape[a], maps[a], static_cast<Acc>(extrap));
    shape[a] = out_shape[a];
    cur.swap(next);
  }
  T* o = out.data<T>();
  const int64_t m = out.numel();
  for (int64_t i = 0; i < m; ++i) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const double v = std::nearbyint(static_cast<double>(cur[i]));
      const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
      const double hi = static_cast<double>(std::numeric_limits<T>::max());
      o[i] = static_cast<T>(std::clamp(v, lo, hi));
    } else {
      Store(o, i, static_cast<ComputeT<T>>(cur[i]));
    }
  }
}

template <typename E>
E ExtrapolationAs(DataType dt, double v) {
  Tensor t = Tensor::Scalar(dt, v);
  E e;
  std::memcpy(&e, t.raw(), sizeof(E));
  return e;
}

Status Resize(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  if (x.rank() == 0) return Err(StatusCode::kInvalidArgument, "{}: X must have rank >= 1", n.Where());
  KILN_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(n, x.shape(), ctx.input(1), ctx.input(2), ctx.input(3)));
  ResizeAttrs at;
  at.mode = n.gets("mode", "nearest");
  at.ctm = n.gets("coordinate_transformation_mode", "half_pixel");
  at.nearest_mode = n.gets("nearest_mode", "round_prefer_floor");
  at.cubic_a = n.getf("cubic_coeff_a", -0.75f);
  at.exclude_outside = n.geti("exclude_outside", 0) != 0;
  at.antialias = n.geti("antialias", 0) != 0;
  at.extrapolation = n.getf("extrapolation_value", 0.f);
  if (at.mode != "nearest" && at.mode != "linear" && at.mode != "cubic")
    return Err(StatusCode::kInvalidModel, "{}: unknown mode '{}'", n.Where(), at.mode);
  if (at.antialias && at.mode == "nearest") at.antialias = false;

  const int64_t rank = x.rank();
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, x.dtype(), plan.out_shape));
  Tensor& out = *out_ptr;
  if (out.numel() == 0) return Status::Ok();
  if (x.numel() == 0)
    return Err(StatusCode::kInvalidArgument, "{}: cannot resize the empty tensor {} to {}", n.Where(), x.Describe(),
               ShapeToString(plan.out_shape));
  const bool crop = at.ctm == "tf_crop_and_resize";
  std::vector<AxisTaps> maps(rank);
  for (int64_t a = 0; a < rank; ++a) {
    const bool identity = plan.out_shape[a] == x.dim(a) && plan.scales[a] == 1.0 &&
                          (!crop || (plan.roi_start[a] == 0.0 && plan.roi_end[a] == 1.0));
    if (identity && at.mode != "nearest") continue;
    maps[a] = MakeTaps(at, x.dim(a), plan.out_shape[a], plan.scales[a], plan.roi_start[a], plan.roi_end[a]);
  }

  if (at.mode == "nearest") {
    const size_t es = DataTypeSize(x.dtype());
    auto run = [&]<typename E>() {
      NearestGather<E>(x.data<E>(), out.data<E>(), x.shape(), plan.out_shape, maps,
                       ExtrapolationAs<E>(x.dtype(), at.extrapolation));
    };
    switch (es) {
      case 1: run.template operator()<uint8_t>(); break;
      case 2: run.template operator()<uint16_t>(); break;
      case 4: run.template operator()<uint32_t>(); break;
      case 8: run.template operator()<uint64_t>(); break;
      default:
        return Err(StatusCode::kUnsupported, "{}: element type {} is not supported", n.Where(),
                   DataTypeName(x.dtype()));
    }
    return Status::Ok();
  }
  if (x.dtype() == DataType::kBool)
    return Err(StatusCode::kInvalidModel, "{}: mode '{}' does not apply to bool tensors", n.Where(), at.mode);
  return DispatchAll(x.dtype(), n, [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      return;
    } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
      InterpolateTyped<T, double>(x, out, maps, plan.out_shape, at.extrapolation);
    } else {
      InterpolateTyped<T, float>(x, out, maps, plan.out_shape, at.extrapolation);
    }
  });
}

}  // namespace

void RegisterGridSampleKernels(KernelRegistry& r);  // grid_sample.cpp

void RegisterResizeKernels(KernelRegistry& r) {
  r.Add("Resize", Resize);
  RegisterGridSampleKernels(r);
}

}  // namespace kiln::cpu
