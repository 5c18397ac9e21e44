// CPU kernels of ReverseSequence, Compress, LRN (cross-channel local response normalization),
// MeanVarianceNormalization, DynamicQuantizeLinear, CenterCropPad, AffineGrid, Det, Col2Im, Unique and MaxUnpool, as
// the ONNX operator documents define them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/ranges.h>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

// Into each element o of dst (row-major, dst_shape, already zeroed): src's element at o's multi-index + shift, where
// that lies inside src_shape (elements of es bytes). CenterCropPad's crop-or-pad and MaxUnpool's output_shape.
void CopyShifted(const uint8_t* src, const std::vector<int64_t>& src_shape, uint8_t* dst,
                 const std::vector<int64_t>& dst_shape, const std::vector<int64_t>& shift, size_t es) {
  const std::vector<int64_t> src_strides = Strides(src_shape), dst_strides = Strides(dst_shape);
  int64_t n = 1;
  for (int64_t d : dst_shape) n *= d;
  for (int64_t o = 0; o < n; ++o) {
    int64_t rest = o, off = 0;
    bool inside = true;
    for (size_t d = 0; d < dst_shape.size() && inside; ++d) {
      const int64_t idx = rest / dst_strides[d];
      rest -= idx * dst_strides[d];
      const int64_t s = idx + shift[d];
      inside = s >= 0 && s < src_shape[d];
      off += s * src_strides[d];
    }
    if (inside) std::memcpy(dst + static_cast<size_t>(o) * es, src + static_cast<size_t>(off) * es, es);
  }
}

// Reverses the first sequence_lens[b] steps along time_axis of every batch entry b; the rest is copied.
Status ReverseSequenceKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const Tensor& lens = c.in(1);
  KILN_ASSIGN_OR_RETURN(const int64_t batch_axis, c.node.attr_int("batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(const int64_t time_axis, c.node.attr_int("time_axis", 0));
  if (x.rank() < 2 || batch_axis == time_axis || batch_axis < 0 || batch_axis > 1 || time_axis < 0 || time_axis > 1)
    return Err(StatusCode::kInvalidArgument, "{}: needs rank >= 2 and batch/time axes 0 and 1, got {}", c.node.Where(),
               x.Describe());
  const int64_t batch = x.dim(batch_axis), steps = x.dim(time_axis);
  if (lens.numel() != batch)
    return Err(StatusCode::kInvalidArgument, "{}: sequence_lens has {} entries for a batch of {}", c.node.Where(),
               lens.numel(), batch);
  Tensor& y = AllocOutput(c, 0, x.dtype(), x.shape());
  const size_t es = DataTypeSize(x.dtype());
  int64_t inner = 1;
  for (int64_t d = 2; d < x.rank(); ++d) inner *= x.dim(d);
  const size_t row = static_cast<size_t>(inner) * es;
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens.GetAsInt(b);
    if (len < 0 || len > steps)
      return Err(StatusCode::kInvalidArgument, "{}: sequence_lens[{}] = {} is outside [0, {}]", c.node.Where(), b, len,
                 steps);
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t from = t < len ? len - 1 - t : t;
      auto at = [&](int64_t step) { return batch_axis == 0 ? b * steps + step : step * batch + b; };
      std::memcpy(dst + static_cast<size_t>(at(t)) * row, src + static_cast<size_t>(at(from)) * row, row);
    }
  }
  return Status::Ok();
}

// The slices along `axis` (or the elements of the flattened input) whose condition is true; a condition shorter
// than the axis selects nothing past its end.
Status CompressKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const Tensor& cond = c.in(1);
  if (cond.dtype() != DataType::kBool || cond.rank() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: condition must be a 1-D bool tensor, got {}", c.node.Where(),
               cond.Describe());
  const size_t es = DataTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw());
  if (!c.node.attrs.count("axis")) {
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < std::min(cond.numel(), x.numel()); ++i)
      if (cond.data<bool>()[i]) keep.push_back(i);
    Tensor& y = AllocOutput(c, 0, x.dtype(), {static_cast<int64_t>(keep.size())});
    for (size_t k = 0; k < keep.size(); ++k)
      std::memcpy(static_cast<uint8_t*>(y.raw()) + k * es, src + static_cast<size_t>(keep[k]) * es, es);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.node.attr_int("axis", 0));
  const int64_t rank = x.rank();
  if (axis < -rank || axis >= rank)
    return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for {}", c.node.Where(), axis, x.Describe());
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(d);
  const int64_t dim = x.dim(axis);
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < std::min(cond.numel(), dim); ++i)
    if (cond.data<bool>()[i]) keep.push_back(i);
  std::vector<int64_t> shape = x.shape();
  shape[axis] = static_cast<int64_t>(keep.size());
  Tensor& y = AllocOutput(c, 0, x.dtype(), shape);
  const size_t slice = static_cast<size_t>(inner) * es;
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < keep.size(); ++k)
      std::memcpy(dst + (static_cast<size_t>(o) * keep.size() + k) * slice,
                  src + (static_cast<size_t>(o * dim + keep[k])) * slice, slice);
  return Status::Ok();
}

// LRN over channels (axis 1): y = x / (bias + alpha / size * sum of x^2 over the window) ^ beta, the window from
// c - floor((size - 1) / 2) to c + ceil((size - 1) / 2).
Status LrnKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  if (x.rank() < 3) return Err(StatusCode::kInvalidArgument, "{}: LRN needs N, C and spatial dims, got {}",
                               c.node.Where(), x.Describe());
  KILN_ASSIGN_OR_RETURN(const float alpha, c.node.attr_float("alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(const float beta, c.node.attr_float("beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(const float bias, c.node.attr_float("bias", 1.f));
  KILN_ASSIGN_OR_RETURN(const int64_t size, c.node.attr_int("size", 0));
  if (size < 1) return Err(StatusCode::kInvalidModel, "{}: size must be at least 1", c.node.Where());
  Tensor& y = AllocOutput(c, 0, x.dtype(), x.shape());
  const int64_t n = x.dim(0), ch = x.dim(1);
  int64_t spatial = 1;
  for (int64_t d = 2; d < x.rank(); ++d) spatial *= x.dim(d);
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  return DispatchFloat(x.dtype(), c.node, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < ch; ++k)
        for (int64_t s = 0; s < spatial; ++s) {
          double sq = 0;
          for (int64_t j = std::max<int64_t>(0, k - lo); j <= std::min(ch - 1, k + hi); ++j) {
            const double v = static_cast<double>(Load(xp, (b * ch + j) * spatial + s));
            sq += v * v;
          }
          const int64_t i = (b * ch + k) * spatial + s;
          const double v = static_cast<double>(Load(xp, i));
          Store(yp, i, static_cast<ComputeT<T>>(v / std::pow(bias + alpha / static_cast<double>(size) * sq, beta)));
        }
  });
}

// MeanVarianceNormalization: (x - mean) / sqrt(mean(x^2) - mean^2 + 1e-9) over `axes` (default 0, 2, 3), as the
// op's function body computes it.
Status MvnKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.node.attr_ints("axes", {0, 2, 3}));
  const int64_t rank = x.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for {}", c.node.Where(), a, x.Describe());
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  Tensor& y = AllocOutput(c, 0, x.dtype(), x.shape());
  // Each element's group: its index over the kept axes.
  const std::vector<int64_t> strides = Strides(x.shape());
  std::vector<int64_t> group(static_cast<size_t>(x.numel()));
  int64_t groups = 1;
  std::vector<int64_t> kept_strides(static_cast<size_t>(rank), 0);
  for (int64_t d = rank - 1; d >= 0; --d)
    if (!reduced[static_cast<size_t>(d)]) {
      kept_strides[static_cast<size_t>(d)] = groups;
      groups *= x.dim(d);
    }
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t g = 0, rest = i;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t idx = rest / strides[static_cast<size_t>(d)];
      rest -= idx * strides[static_cast<size_t>(d)];
      g += idx * kept_strides[static_cast<size_t>(d)];
    }
    group[static_cast<size_t>(i)] = g;
  }
  return DispatchFloat(x.dtype(), c.node, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::vector<double> sum(static_cast<size_t>(groups), 0.0), sq(static_cast<size_t>(groups), 0.0);
    std::vector<int64_t> count(static_cast<size_t>(groups), 0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = static_cast<double>(Load(xp, i));
      const size_t g = static_cast<size_t>(group[static_cast<size_t>(i)]);
      sum[g] += v;
      sq[g] += v * v;
      ++count[g];
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const size_t g = static_cast<size_t>(group[static_cast<size_t>(i)]);
      const double mean = sum[g] / static_cast<double>(count[g]);
      const double var = sq[g] / static_cast<double>(count[g]) - mean * mean;
      Store(yp, i, static_cast<ComputeT<T>>((static_cast<double>(Load(xp, i)) - mean) / std::sqrt(var + 1e-9)));
    }
  });
}

// DynamicQuantizeLinear: uint8 over [min(x, 0), max(x, 0)]: scale = (max - min) / 255, zero point =
// saturate(round(-min / scale)), y = saturate(round(x / scale) + zero point), rounding half to even.
Status DynamicQuantizeLinearKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  if (x.dtype() != DataType::kFloat32)
    return Err(StatusCode::kInvalidArgument, "{}: x must be float32, got {}", c.node.Where(), x.Describe());
  const float* xp = x.data<float>();
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::isnan(xp[i])) continue;
    lo = std::min(lo, xp[i]);
    hi = std::max(hi, xp[i]);
  }
  const float scale = (hi - lo) / 255.f;
  const float zp_f = scale == 0.f ? 0.f : std::nearbyint(std::clamp(-lo / scale, 0.f, 255.f));
  const auto zp = static_cast<uint8_t>(zp_f);
  Tensor& y = AllocOutput(c, 0, DataType::kUInt8, x.shape());
  uint8_t* yp = y.data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float q = scale == 0.f ? 0.f : std::nearbyint(xp[i] / scale) + zp_f;
    yp[i] = static_cast<uint8_t>(std::isnan(q) ? zp_f : std::clamp(q, 0.f, 255.f));
  }
  AllocOutput(c, 1, DataType::kFloat32, {}).data<float>()[0] = scale;
  AllocOutput(c, 2, DataType::kUInt8, {}).data<uint8_t>()[0] = zp;
  return Status::Ok();
}


// CenterCropPad: along each of `axes`, the centred window of the target length: cropped (start at
// floor((size - target) / 2)) or zero-padded (floor((target - size) / 2) before).
Status CenterCropPadKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const std::vector<int64_t> target = c.in(1).ToInt64Vector();
  const int64_t rank = x.rank();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.node.attr_ints("axes", {}));
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  if (target.size() != axes.size())
    return Err(StatusCode::kInvalidArgument, "{}: shape has {} values for {} axes", c.node.Where(), target.size(),
               axes.size());
  std::vector<int64_t> out = x.shape(), shift(static_cast<size_t>(rank), 0);  // source index = output index + shift
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank || target[i] < 0)
      return Err(StatusCode::kInvalidArgument, "{}: axis {} / length {} is invalid for {}", c.node.Where(), a,
                 target[i], x.Describe());
    if (a < 0) a += rank;
    const int64_t size = x.dim(a);
    out[static_cast<size_t>(a)] = target[i];
    shift[static_cast<size_t>(a)] = size >= target[i] ? (size - target[i]) / 2 : -((target[i] - size) / 2);
  }
  Tensor& y = AllocOutput(c, 0, x.dtype(), out);
  const size_t es = DataTypeSize(x.dtype());
  std::memset(y.raw(), 0, static_cast<size_t>(y.numel()) * es);
  CopyShifted(static_cast<const uint8_t*>(x.raw()), x.shape(), static_cast<uint8_t*>(y.raw()), out, shift, es);
  return Status::Ok();
}

// AffineGrid: the base grid (the pixel centres, or with align_corners the corner pixels, mapped to [-1, 1], in
// x, y[, z] order with a 1 appended) times theta's transpose, per batch entry.
Status AffineGridKernel(KernelContext& c) {
  const Tensor& theta = c.in(0);
  const std::vector<int64_t> size = c.in(1).ToInt64Vector();
  KILN_ASSIGN_OR_RETURN(const int64_t align_attr, c.node.attr_int("align_corners", 0));
  const bool align = align_attr != 0;
  const int64_t r = static_cast<int64_t>(size.size()) - 2;  // spatial rank: 2 or 3
  if ((r != 2 && r != 3) || theta.rank() != 3 || theta.dim(0) != size[0] || theta.dim(1) != r ||
      theta.dim(2) != r + 1)
    return Err(StatusCode::kInvalidArgument, "{}: theta {} does not fit size {}", c.node.Where(), theta.Describe(),
               fmt::format("{}", fmt::join(size, "x")));
  std::vector<int64_t> out = {size[0]};
  int64_t points = 1;
  for (int64_t d = 0; d < r; ++d) {
    out.push_back(size[static_cast<size_t>(2 + d)]);
    points *= size[static_cast<size_t>(2 + d)];
  }
  out.push_back(r);
  Tensor& y = AllocOutput(c, 0, theta.dtype(), out);
  auto base = [&](int64_t i, int64_t n) -> double {
    if (align) return n > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n) - 1.0;
  };
  for (int64_t b = 0; b < size[0]; ++b)
    for (int64_t p = 0; p < points; ++p) {
      // p over the spatial dims (D,) H, W, the last fastest; the base vector is (x from W, y from H[, z from D], 1).
      std::vector<double> v(static_cast<size_t>(r) + 1, 1.0);
      int64_t rest = p;
      for (int64_t d = r - 1; d >= 0; --d) {
        const int64_t n = size[static_cast<size_t>(2 + d)];
        v[static_cast<size_t>(r - 1 - d)] = base(rest % n, n);
        rest /= n;
      }
      for (int64_t i = 0; i < r; ++i) {
        double acc = 0;
        for (int64_t j = 0; j <= r; ++j)
          acc += theta.GetAsDouble((b * r + i) * (r + 1) + j) * v[static_cast<size_t>(j)];
        y.SetFromDouble((b * points + p) * r + i, acc);
      }
    }
  return Status::Ok();
}


// Det: LU decomposition with partial pivoting, in double, per matrix.
Status DetKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    return Err(StatusCode::kInvalidArgument, "{}: needs square matrices, got {}", c.node.Where(), x.Describe());
  const int64_t m = x.dim(x.rank() - 1);
  std::vector<int64_t> out(x.shape().begin(), x.shape().end() - 2);
  Tensor& y = AllocOutput(c, 0, x.dtype(), out);
  const int64_t count = y.numel();
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[static_cast<size_t>(i)] = x.GetAsDouble(b * m * m + i);
    double det = 1;
    for (int64_t col = 0; col < m && det != 0; ++col) {
      int64_t piv = col;
      for (int64_t r = col + 1; r < m; ++r)
        if (std::fabs(a[static_cast<size_t>(r * m + col)]) > std::fabs(a[static_cast<size_t>(piv * m + col)])) piv = r;
      if (a[static_cast<size_t>(piv * m + col)] == 0) {
        det = 0;
        break;
      }
      if (piv != col) {
        for (int64_t k = 0; k < m; ++k) std::swap(a[static_cast<size_t>(piv * m + k)], a[static_cast<size_t>(col * m + k)]);
        det = -det;
      }
      const double p = a[static_cast<size_t>(col * m + col)];
      det *= p;
      for (int64_t r = col + 1; r < m; ++r) {
        const double f = a[static_cast<size_t>(r * m + col)] / p;
        for (int64_t k = col; k < m; ++k) a[static_cast<size_t>(r * m + k)] -= f * a[static_cast<size_t>(col * m + k)];
      }
    }
    y.SetFromDouble(b, det);
  }
  return Status::Ok();
}

// Col2Im: sums every column of the input back into the image at its block's position (strides, dilations, pads).
Status Col2ImKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const std::vector<int64_t> image = c.in(1).ToInt64Vector(), block = c.in(2).ToInt64Vector();
  const size_t r = image.size();
  if (x.rank() != 3 || block.size() != r || r == 0)
    return Err(StatusCode::kInvalidArgument, "{}: input {} with image_shape of {} and block_shape of {} dims",
               c.node.Where(), x.Describe(), r, block.size());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, c.node.attr_ints("strides", std::vector<int64_t>(r, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dil, c.node.attr_ints("dilations", std::vector<int64_t>(r, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.node.attr_ints("pads", std::vector<int64_t>(2 * r, 0)));
  if (strides.size() != r || dil.size() != r || pads.size() != 2 * r)
    return Err(StatusCode::kInvalidModel, "{}: strides, dilations and pads must match the {} spatial dims",
               c.node.Where(), r);
  int64_t block_volume = 1;
  std::vector<int64_t> blocks(r);  // block positions per dim
  int64_t positions = 1;
  for (size_t d = 0; d < r; ++d) {
    block_volume *= block[d];
    const int64_t span = dil[d] * (block[d] - 1) + 1;
    blocks[d] = (image[d] + pads[d] + pads[d + r] - span) / strides[d] + 1;
    positions *= blocks[d];
  }
  if (block_volume <= 0 || x.dim(1) % block_volume != 0 || x.dim(2) != positions)
    return Err(StatusCode::kInvalidArgument, "{}: input {} does not match image_shape and block_shape ({} blocks of "
               "{} values)", c.node.Where(), x.Describe(), positions, block_volume);
  const int64_t n = x.dim(0), ch = x.dim(1) / block_volume;
  int64_t image_volume = 1;
  for (int64_t v : image) image_volume *= v;
  std::vector<int64_t> out = {n, ch};
  out.insert(out.end(), image.begin(), image.end());
  Tensor& y = AllocOutput(c, 0, x.dtype(), out);
  std::vector<double> acc(static_cast<size_t>(n * ch * image_volume), 0.0);
  std::vector<int64_t> kidx(r), pidx(r);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t cc = 0; cc < ch; ++cc)
      for (int64_t k = 0; k < block_volume; ++k) {
        for (int64_t d = static_cast<int64_t>(r) - 1, rest = k; d >= 0; --d) {
          kidx[static_cast<size_t>(d)] = rest % block[static_cast<size_t>(d)];
          rest /= block[static_cast<size_t>(d)];
        }
        for (int64_t p = 0; p < positions; ++p) {
          for (int64_t d = static_cast<int64_t>(r) - 1, rest = p; d >= 0; --d) {
            pidx[static_cast<size_t>(d)] = rest % blocks[static_cast<size_t>(d)];
            rest /= blocks[static_cast<size_t>(d)];
          }
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < r; ++d) {
            const int64_t pos = pidx[d] * strides[d] + kidx[d] * dil[d] - pads[d];
            if (pos < 0 || pos >= image[d]) {
              inside = false;
              break;
            }
            off = off * image[d] + pos;
          }
          if (!inside) continue;
          acc[static_cast<size_t>((b * ch + cc) * image_volume + off)] +=
              x.GetAsDouble((b * x.dim(1) + cc * block_volume + k) * positions + p);
        }
      }
  for (size_t i = 0; i < acc.size(); ++i) y.SetFromDouble(static_cast<int64_t>(i), acc[i]);
  return Status::Ok();
}


// Unique: the distinct values (or slices along `axis`), sorted ascending (lexicographically for slices) or in the
// order they first appear, with each one's first index, every element's (slice's) index into Y, and the counts.
Status UniqueKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(const int64_t sorted, c.node.attr_int("sorted", 1));
  const bool has_axis = c.node.attrs.count("axis") > 0;
  int64_t axis = 0;
  if (has_axis) {
    KILN_ASSIGN_OR_RETURN(axis, c.node.attr_int("axis", 0));
    if (axis < -x.rank() || axis >= x.rank())
      return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for {}", c.node.Where(), axis,
                 x.Describe());
    if (axis < 0) axis += x.rank();
  }
  // Slices: `count` of them, each `len` elements (outer x inner, gathered); without an axis, single elements.
  int64_t outer = 1, inner = 1, count = x.numel();
  if (has_axis) {
    for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
    count = x.dim(axis);
  }
  const int64_t len = has_axis ? outer * inner : 1;
  auto element = [&](int64_t s, int64_t j) {  // element j of slice s (flat offset into x)
    if (!has_axis) return s;
    const int64_t o = j / inner, i = j % inner;
    return (o * count + s) * inner + i;
  };
  const bool integral = IsIntegerType(x.dtype()) || x.dtype() == DataType::kBool;
  auto cmp = [&](int64_t a, int64_t b) -> int {  // -1, 0, 1: slice a against slice b
    for (int64_t j = 0; j < len; ++j) {
      if (integral) {
        const int64_t va = x.GetAsInt(element(a, j)), vb = x.GetAsInt(element(b, j));
        if (va != vb) return va < vb ? -1 : 1;
      } else {
        const double va = x.GetAsDouble(element(a, j)), vb = x.GetAsDouble(element(b, j));
        if (va != vb) return va < vb ? -1 : 1;
      }
    }
    return 0;
  };
  // First occurrences in order, then (sorted) ordered by value.
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t s = 0; s < count; ++s) order[static_cast<size_t>(s)] = s;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  std::vector<int64_t> firsts, inverse(static_cast<size_t>(count)), counts;
  std::vector<int64_t> group_of(static_cast<size_t>(count));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
      firsts.push_back(order[i]);  // stable sort: the lowest index of equal slices comes first
      counts.push_back(0);
    }
    group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(firsts.size()) - 1;
    ++counts.back();
  }
  std::vector<int64_t> rank(firsts.size());  // output position of each group
  for (size_t g = 0; g < firsts.size(); ++g) rank[g] = static_cast<int64_t>(g);
  if (!sorted) {
    std::vector<size_t> by_first(firsts.size());
    for (size_t g = 0; g < by_first.size(); ++g) by_first[g] = g;
    std::sort(by_first.begin(), by_first.end(), [&](size_t a, size_t b) { return firsts[a] < firsts[b]; });
    for (size_t pos = 0; pos < by_first.size(); ++pos) rank[by_first[pos]] = static_cast<int64_t>(pos);
  }
  const auto groups = static_cast<int64_t>(firsts.size());
  std::vector<int64_t> first_at(static_cast<size_t>(groups)), count_at(static_cast<size_t>(groups));
  for (size_t g = 0; g < firsts.size(); ++g) {
    first_at[static_cast<size_t>(rank[g])] = firsts[g];
    count_at[static_cast<size_t>(rank[g])] = counts[g];
  }
  for (int64_t s = 0; s < count; ++s)
    inverse[static_cast<size_t>(s)] = rank[static_cast<size_t>(group_of[static_cast<size_t>(s)])];
  std::vector<int64_t> y_shape = has_axis ? x.shape() : std::vector<int64_t>{groups};
  if (has_axis) y_shape[static_cast<size_t>(axis)] = groups;
  Tensor& y = AllocOutput(c, 0, x.dtype(), y_shape);
  const size_t es = DataTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < len; ++j) {
      const int64_t to = has_axis ? ((j / inner) * groups + g) * inner + j % inner : g;
      std::memcpy(dst + static_cast<size_t>(to) * es, src + static_cast<size_t>(element(first_at[g], j)) * es, es);
    }
  auto put = [&](size_t i, const std::vector<int64_t>& v) {
    Tensor& t = AllocOutput(c, i, DataType::kInt64, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int64_t));
  };
  put(1, first_at);
  put(2, inverse);
  put(3, count_at);
  return Status::Ok();
}

// MaxUnpool: zeros of the unpooled shape with X's values written at I's flat indices; with output_shape, that result
// sits at the start of each dim of a zero tensor of output_shape (as onnx's reference places it).
Status MaxUnpoolKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const Tensor& idx = c.in(1);
  if (idx.numel() != x.numel() || x.rank() < 3)
    return Err(StatusCode::kInvalidArgument, "{}: I {} must match X {} (rank >= 3)", c.node.Where(), idx.Describe(),
               x.Describe());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, c.node.attr_ints("kernel_shape", {}));
  const size_t r = static_cast<size_t>(x.rank() - 2);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, c.node.attr_ints("strides", std::vector<int64_t>(r, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.node.attr_ints("pads", std::vector<int64_t>(2 * r, 0)));
  if (kernel.size() != r || strides.size() != r || pads.size() != 2 * r)
    return Err(StatusCode::kInvalidModel, "{}: kernel_shape, strides and pads must match the {} spatial dims",
               c.node.Where(), r);
  std::vector<int64_t> inferred = {x.dim(0), x.dim(1)};
  for (size_t d = 0; d < r; ++d)
    inferred.push_back((x.dim(2 + static_cast<int64_t>(d)) - 1) * strides[d] + kernel[d] - pads[d] - pads[d + r]);
  std::vector<int64_t> out = inferred;
  if (c.input(2) && c.input(2)->numel() > 0) out = c.in(2).ToInt64Vector();
  if (out.size() != inferred.size())
    return Err(StatusCode::kInvalidArgument, "{}: output_shape has {} dims, X has {}", c.node.Where(), out.size(),
               inferred.size());
  int64_t inferred_volume = 1;
  for (int64_t v : inferred) inferred_volume *= v;
  const size_t es = DataTypeSize(x.dtype());
  std::vector<uint8_t> unpooled(static_cast<size_t>(std::max<int64_t>(inferred_volume, 0)) * es, 0);
  const auto* src = static_cast<const uint8_t*>(x.raw());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t at = idx.GetAsInt(i);
    if (at < 0 || at >= inferred_volume)
      return Err(StatusCode::kInvalidArgument, "{}: index {} at {} is outside the unpooled {} elements",
                 c.node.Where(), at, i, inferred_volume);
    std::memcpy(unpooled.data() + static_cast<size_t>(at) * es, src + static_cast<size_t>(i) * es, es);
  }
  Tensor& y = AllocOutput(c, 0, x.dtype(), out);
  auto* dst = static_cast<uint8_t*>(y.raw());
  std::memset(dst, 0, static_cast<size_t>(y.numel()) * es);
  CopyShifted(unpooled.data(), inferred, dst, out, std::vector<int64_t>(out.size(), 0), es);
  return Status::Ok();
}

}  // namespace

void RegisterTensorMoreOpKernels(KernelRegistry& r) {
  r.Add("ReverseSequence", ReverseSequenceKernel);
  r.Add("Compress", CompressKernel);
  r.Add("LRN", LrnKernel);
  r.Add("MeanVarianceNormalization", MvnKernel);
  r.Add("DynamicQuantizeLinear", DynamicQuantizeLinearKernel);
  r.Add("CenterCropPad", CenterCropPadKernel);
  r.Add("AffineGrid", AffineGridKernel);
  r.Add("Det", DetKernel);
  r.Add("Col2Im", Col2ImKernel);
  r.Add("Unique", UniqueKernel);
  r.Add("MaxUnpool", MaxUnpoolKernel);
}

}  // namespace kiln::cpu
