// CPU kernels of ReverseSequence, Compress, LRN (cross-channel local response normalization),
// MeanVarianceNormalization, DynamicQuantizeLinear, CenterCropPad and AffineGrid, as the ONNX operator documents
// define them.
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

}  // namespace

void RegisterCropAndGridKernels(KernelRegistry& r);  // below

void RegisterTensorMoreOpKernels(KernelRegistry& r) {
  RegisterCropAndGridKernels(r);
  r.Add("ReverseSequence", ReverseSequenceKernel);
  r.Add("Compress", CompressKernel);
  r.Add("LRN", LrnKernel);
  r.Add("MeanVarianceNormalization", MvnKernel);
  r.Add("DynamicQuantizeLinear", DynamicQuantizeLinearKernel);
}

}  // namespace kiln::cpu

namespace kiln::cpu {
namespace {

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
  const std::vector<int64_t> in_strides = Strides(x.shape()), out_strides = Strides(out);
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t o = 0; o < y.numel(); ++o) {
    int64_t rest = o, off = 0;
    bool inside = true;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t idx = rest / out_strides[static_cast<size_t>(d)];
      rest -= idx * out_strides[static_cast<size_t>(d)];
      const int64_t s = idx + shift[static_cast<size_t>(d)];
      if (s < 0 || s >= x.dim(d)) {
        inside = false;
        break;
      }
      off += s * in_strides[static_cast<size_t>(d)];
    }
    if (inside) std::memcpy(dst + static_cast<size_t>(o) * es, src + static_cast<size_t>(off) * es, es);
  }
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

}  // namespace

void RegisterCropAndGridKernels(KernelRegistry& r) {
  r.Add("CenterCropPad", CenterCropPadKernel);
  r.Add("AffineGrid", AffineGridKernel);
}

}  // namespace kiln::cpu
