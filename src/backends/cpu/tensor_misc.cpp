// CPU kernels of Pad (constant / reflect / edge / wrap), Trilu, Range and ConstantOfShape.
// Pad maps every output index of each axis to a source index (or "constant") once, then copies each output
// row as a few runs: contiguous source runs with memcpy, constant runs with a fill.
#include <cstring>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"
#include "ops/shape_tensor_params.h"

namespace kiln::cpu {
namespace {

// Source index of output position o on an axis of length d with `before` padding, or -1 for "constant".
int64_t PadSource(int64_t o, int64_t before, int64_t d, const std::string& mode) {
  int64_t i = o - before;
  if (i >= 0 && i < d) return i;
  if (mode == "constant" || d == 0) return -1;
  if (mode == "edge") return i < 0 ? 0 : d - 1;
  if (mode == "wrap") return ((i % d) + d) % d;
  // reflect (mirror without repeating the edge)
  if (d == 1) return 0;
  const int64_t period = 2 * (d - 1);
  i = ((i % period) + period) % period;
  return i < d ? i : period - i;
}

struct Run {
  int64_t out, src, len;  // src -1: constant
};

void FillValue(uint8_t* dst, int64_t n, const uint8_t* value, size_t es, bool zero) {
  if (zero) {
    std::memset(dst, 0, static_cast<size_t>(n) * es);
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * es, value, es);
}

Status PadKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const size_t es = DataTypeSize(x.dtype());
  if (es == 0) return Err(StatusCode::kUnsupported, "{}: unsupported element type", c.node.Where());
  const std::string mode = c.node.gets("mode", "constant");
  const int64_t r = x.rank();
  if (!c.input(1)) return Err(StatusCode::kInvalidModel, "{}: the pads input is missing", c.node.Where());
  std::vector<int64_t> axes = c.input(3) ? c.in(3).ToInt64Vector() : std::vector<int64_t>{};
  KILN_ASSIGN_OR_RETURN(auto p, ComputePads(c.node, r, c.in(1).ToInt64Vector(), axes));
  std::vector<int64_t> shape(r);
  for (int64_t d = 0; d < r; ++d) {
    shape[d] = x.shape()[d] + p[d] + p[r + d];
    if (shape[d] < 0) return Err(StatusCode::kInvalidArgument, "{}: pads make axis {} negative", c.node.Where(), d);
    if (x.shape()[d] == 0 && shape[d] > 0 && mode != "constant")
      return Err(StatusCode::kInvalidArgument, "{}: cannot pad an empty axis in mode '{}'", c.node.Where(), mode);
  }
  Tensor value = Tensor::Scalar(x.dtype(), 0.0);
  if (c.input(2) && c.in(2).numel() > 0)
    value = c.in(2).dtype() == x.dtype() ? c.in(2) : Tensor::Scalar(x.dtype(), c.in(2).GetAsDouble(0));
  const auto* vb = static_cast<const uint8_t*>(value.raw());
  bool zero = true;
  for (size_t b = 0; b < es; ++b) zero = zero && vb[b] == 0;
  Tensor& o = AllocOutput(c, 0, x.dtype(), shape);
  if (o.numel() == 0) return Status::Ok();
  if (r == 0) {
    std::memcpy(o.raw(), x.raw(), es);
    return Status::Ok();
  }
  std::vector<std::vector<int64_t>> maps(r);
  for (int64_t d = 0; d < r; ++d)
    for (int64_t k = 0; k < shape[d]; ++k) maps[d].push_back(PadSource(k, p[d], x.shape()[d], mode));
  // Runs of the innermost axis.
  std::vector<Run> runs;
  for (int64_t k = 0; k < shape[r - 1]; ++k) {
    const int64_t s = maps[r - 1][k];
    if (!runs.empty()) {
      Run& b = runs.back();
      if ((s < 0 && b.src < 0) || (s >= 0 && b.src >= 0 && s == b.src + b.len)) {
        ++b.len;
        continue;
      }
    }
    runs.push_back({k, s, 1});
  }
  const auto xs = Strides(x.shape());
  const int64_t inner = shape[r - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < r; ++d) rows *= shape[d];
  const auto* xb = static_cast<const uint8_t*>(x.raw());
  auto* ob = static_cast<uint8_t*>(o.raw());
  ParallelFor(
      rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          uint8_t* dst = ob + row * inner * es;
          int64_t rem = row, src = 0;
          bool constant = false;
          for (int64_t d = r - 2; d >= 0; --d) {
            const int64_t s = maps[d][rem % shape[d]];
            rem /= shape[d];
            if (s < 0) constant = true;
            else src += s * xs[d];
          }
          if (constant) {
            FillValue(dst, inner, vb, es, zero);
            continue;
          }
          for (const Run& run : runs) {
            if (run.src < 0) FillValue(dst + run.out * es, run.len, vb, es, zero);
            else std::memcpy(dst + run.out * es, xb + (src + run.src) * es, run.len * es);
          }
        }
      },
      std::max<int64_t>(1, 16384 / std::max<int64_t>(1, inner)));
  return Status::Ok();
}

Status TriluKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  const size_t es = DataTypeSize(x.dtype());
  if (x.rank() < 2 || es == 0)
    return Err(StatusCode::kInvalidArgument, "{}: needs an input of rank >= 2", c.node.Where());
  const bool upper = c.node.geti("upper", 1) != 0;
  const int64_t R = x.dim(-2), C = x.dim(-1);
  // k beyond +-(R + C) keeps all or nothing, as k at that bound does; clamped so that i + k cannot overflow.
  const int64_t k = std::clamp<int64_t>(c.input(1) && c.in(1).numel() > 0 ? c.in(1).GetAsInt(0) : 0, -(R + C) - 1,
                                        R + C + 1);
  Tensor& o = AllocOutput(c, 0, x.dtype(), x.shape());
  if (R == 0 || C == 0) return Status::Ok();  // empty
  const int64_t rows = x.numel() / C;
  const auto* xb = static_cast<const uint8_t*>(x.raw());
  auto* ob = static_cast<uint8_t*>(o.raw());
  ParallelFor(rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row % R;
      // Kept columns: [lo, hi).
      const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, C) : 0;
      const int64_t hi = upper ? C : std::clamp<int64_t>(i + k + 1, 0, C);
      uint8_t* dst = ob + row * C * es;
      std::memset(dst, 0, C * es);
      if (hi > lo) std::memcpy(dst + lo * es, xb + (row * C + lo) * es, (hi - lo) * es);
    }
  }, std::max<int64_t>(1, 16384 / C));
  return Status::Ok();
}

Status RangeKernel(KernelContext& c) {
  const Tensor &a = c.in(0), &b = c.in(1), &d = c.in(2);
  if (a.numel() != 1 || b.numel() != 1 || d.numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: start, limit and delta must be scalars", c.node.Where());
  const DataType t = a.dtype();
  const bool low = t == DataType::kFloat16 || t == DataType::kBFloat16;  // opset 27, with stash_type
  if (t != DataType::kFloat32 && t != DataType::kFloat64 && t != DataType::kInt16 && t != DataType::kInt32 &&
      t != DataType::kInt64 && !low)
    return Err(StatusCode::kUnsupported, "{}: Range does not take {}", c.node.Where(), DataTypeName(t));
  const int64_t stash = c.node.geti("stash_type", 1);
  if (low && stash != 1 && stash != 11)
    return Err(StatusCode::kUnsupported, "{}: stash_type {} is not float (1) or double (11)", c.node.Where(), stash);
  KILN_ASSIGN_OR_RETURN(int64_t n, RangeCount(c.node, a.GetAsDouble(0), b.GetAsDouble(0), d.GetAsDouble(0)));
  Tensor& o = AllocOutput(c, 0, t, {n});
  if (IsIntegerType(t)) {
    const int64_t s = a.GetAsInt(0), step = d.GetAsInt(0);
    if (t == DataType::kInt64) {
      for (int64_t i = 0; i < n; ++i) o.data<int64_t>()[i] = s + i * step;
    } else {
      for (int64_t i = 0; i < n; ++i) o.SetFromDouble(i, static_cast<double>(s + i * step));
    }
  } else if (low && stash == 1) {  // start + i * delta in float32, then rounded to the 16-bit type
    const float s = static_cast<float>(a.GetAsDouble(0)), step = static_cast<float>(d.GetAsDouble(0));
    for (int64_t i = 0; i < n; ++i) o.SetFromDouble(i, s + static_cast<float>(i) * step);
  } else {
    const double s = a.GetAsDouble(0), step = d.GetAsDouble(0);
    for (int64_t i = 0; i < n; ++i) o.SetFromDouble(i, s + static_cast<double>(i) * step);
  }
  return Status::Ok();
}

Status ConstantOfShapeKernel(KernelContext& c) {
  const auto shape = c.in(0).ToInt64Vector();
  for (int64_t v : shape)
    if (v < 0) return Err(StatusCode::kInvalidArgument, "{}: negative dim in shape {}", c.node.Where(), shape);
  Tensor value = Tensor::Scalar(DataType::kFloat32, 0.0);
  if (auto it = c.node.attrs.find("value"); it != c.node.attrs.end()) {
    if (it->second.kind != Attribute::Kind::kTensor || it->second.t.numel() != 1)
      return Err(StatusCode::kInvalidModel, "{}: 'value' must be a one-element tensor", c.node.Where());
    value = it->second.t;
  }
  const size_t es = DataTypeSize(value.dtype());
  if (es == 0) return Err(StatusCode::kUnsupported, "{}: unsupported value type", c.node.Where());
  Tensor& o = AllocOutput(c, 0, value.dtype(), shape);
  const auto* vb = static_cast<const uint8_t*>(value.raw());
  bool zero = true;
  for (size_t b = 0; b < es; ++b) zero = zero && vb[b] == 0;
  FillValue(static_cast<uint8_t*>(o.raw()), o.numel(), vb, es, zero);
  return Status::Ok();
}

}  // namespace

void RegisterGeneratorKernels(KernelRegistry& r);     // generators.cpp: EyeLike, the window ops
void RegisterTensorMoreOpKernels(KernelRegistry& r);  // tensor_more_ops.cpp: ReverseSequence, Compress, LRN, MVN,
                                                      // DynamicQuantizeLinear
void RegisterBitCastScatterKernels(KernelRegistry& r);  // bitcast_scatter.cpp: BitCast, TensorScatter

void RegisterTensorMiscKernels(KernelRegistry& r) {
  RegisterGeneratorKernels(r);
  RegisterTensorMoreOpKernels(r);
  RegisterBitCastScatterKernels(r);
  r.Add("Pad", PadKernel);
  r.Add("Trilu", TriluKernel);
  r.Add("Range", RangeKernel);
  r.Add("ConstantOfShape", ConstantOfShapeKernel);
}

}  // namespace kiln::cpu
