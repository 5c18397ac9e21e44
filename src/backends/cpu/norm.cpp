// CPU kernels of the normalizations: BatchNormalization (inference; training_mode=1 computes batch
// statistics and the running-mean/var outputs), InstanceNormalization, LayerNormalization (with optional
// Mean/InvStdDev outputs, and kiln's per-tensor quantized Y as output 3), GroupNormalization (scale/bias per channel, or per group with
// kiln_scale_per_group = 1), LpNormalization (p = 1 or 2). Statistics accumulate in double; work is split over
// planes/rows.
#include <cmath>

#include "backends/cpu/families.h"
#include "backends/cpu/quantized_copy.h"
#include "backends/cpu/reduce_util.h"
#include "ops/quantized_ops.h"

namespace kiln::cpu {

namespace {

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.GetAsDouble(i);
  return v;
}

bool Present(const KernelContext& ctx, size_t i) { return ctx.node.output(i) != nullptr && i < ctx.num_outputs(); }

// Mean and population variance of n strided-by-1 values, two passes in double.
template <typename T>
std::pair<double, double> MeanVar(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(Load(x, i));
  const double mean = n ? s / static_cast<double>(n) : 0.0;
  double v = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(Load(x, i)) - mean;
    v += d * d;
  }
  return {mean, n ? v / static_cast<double>(n) : 0.0};
}

// y[i] = x[i] * a + b over one plane of n elements.
template <typename T>
void AffinePlane(const T* x, T* y, int64_t n, double a, double b) {
  using C = ComputeT<T>;
  const C ca = static_cast<C>(a), cb = static_cast<C>(b);
  for (int64_t i = 0; i < n; ++i) Store(y, i, Load(x, i) * ca + cb);
}

// ---- BatchNormalization ----
Status BatchNormKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  if (x.rank() < 2)
    return Err(StatusCode::kInvalidArgument, "{}: X must have rank >= 2, its shape is {}", n.Where(),
               ShapeToString(x.shape()));
  const int64_t N = x.dim(0), C = x.dim(1), inner = x.numel() / std::max<int64_t>(1, N * C);
  const double eps = n.getf("epsilon", 1e-5f);
  const bool training = n.geti("training_mode", 0) != 0;
  const bool per_elem = n.geti("spatial", 1) == 0;
  const int64_t P = per_elem ? C * inner : C;
  for (size_t i = 1; i < 5; ++i)
    if (ctx.in(i).numel() != P)
      return Err(StatusCode::kInvalidArgument, "{}: input {} must have {} elements, its shape is {}", n.Where(), i, P,
                 ShapeToString(ctx.in(i).shape()));
  const auto scale = ToDoubles(ctx.in(1)), bias = ToDoubles(ctx.in(2));
  auto mean = ToDoubles(ctx.in(3)), var = ToDoubles(ctx.in(4));
  Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
  if (x.numel() == 0) return Status::Ok();
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    if (training && !per_elem) {
      // Batch statistics per channel over N and the spatial dims.
      std::vector<double> bm(C), bv(C);
      ParallelFor(C, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          double s = 0, s2 = 0;
          for (int64_t k = 0; k < N; ++k)
            for (int64_t i = 0; i < inner; ++i) s += static_cast<double>(Load(xp, (k * C + c) * inner + i));
          bm[c] = s / static_cast<double>(N * inner);
          for (int64_t k = 0; k < N; ++k)
            for (int64_t i = 0; i < inner; ++i) {
              const double d = static_cast<double>(Load(xp, (k * C + c) * inner + i)) - bm[c];
              s2 += d * d;
            }
          bv[c] = s2 / static_cast<double>(N * inner);
        }
      }, 1);
      const double momentum = n.getf("momentum", 0.9f);
      for (size_t o = 1; o < 3; ++o) {
        if (!Present(ctx, o)) continue;
        const Tensor& in = ctx.in(2 + o);
        Tensor& out = EnsureOutput(ctx, o, in.dtype(), {C});
        const auto& cur = o == 1 ? bm : bv;
        for (int64_t c = 0; c < C; ++c) out.SetFromDouble(c, in.GetAsDouble(c) * momentum + cur[c] * (1 - momentum));
      }
      mean = bm;
      var = bv;
    }
    // y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a.
    std::vector<double> a(P), bb(P);
    for (int64_t p = 0; p < P; ++p) {
      a[p] = scale[p] / std::sqrt(var[p] + eps);
      bb[p] = bias[p] - mean[p] * a[p];
    }
    ParallelFor(N * C, [&](int64_t b, int64_t e) {
      for (int64_t plane = b; plane < e; ++plane) {
        const int64_t c = plane % C, off = plane * inner;
        if (!per_elem) {
          AffinePlane(xp + off, yp + off, inner, a[c], bb[c]);
        } else {
          for (int64_t i = 0; i < inner; ++i)
            Store(yp, off + i, static_cast<ComputeT<T>>(Load(xp, off + i) * a[c * inner + i] + bb[c * inner + i]));
        }
      }
    }, GrainFor(inner));
  });
}

// ---- InstanceNormalization ----
Status InstanceNormKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  if (x.rank() < 2)
    return Err(StatusCode::kInvalidArgument, "{}: input must have rank >= 2, its shape is {}", n.Where(),
               ShapeToString(x.shape()));
  const int64_t N = x.dim(0), C = x.dim(1), inner = x.numel() / std::max<int64_t>(1, N * C);
  if (ctx.in(1).numel() != C || ctx.in(2).numel() != C)
    return Err(StatusCode::kInvalidArgument, "{}: scale and B must have {} elements (the channels)", n.Where(), C);
  const double eps = n.getf("epsilon", 1e-5f);
  const auto scale = ToDoubles(ctx.in(1)), bias = ToDoubles(ctx.in(2));
  Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
  if (x.numel() == 0) return Status::Ok();
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ParallelFor(N * C, [&](int64_t b, int64_t e) {
      for (int64_t plane = b; plane < e; ++plane) {
        const int64_t c = plane % C, off = plane * inner;
        const auto [mean, var] = MeanVar(xp + off, inner);
        const double a = scale[c] / std::sqrt(var + eps);
        AffinePlane(xp + off, yp + off, inner, a, bias[c] - mean * a);
      }
    }, GrainFor(inner));
  });
}

// Expands a Scale/B tensor broadcast onto the normalized dims `norm` into `cols` doubles.
Result<std::vector<double>> ExpandParam(const Node& n, const Tensor& t, const std::vector<int64_t>& norm,
                                        const char* what) {
  std::vector<int64_t> s = t.shape();
  while (s.size() > norm.size() && s.front() == 1) s.erase(s.begin());
  bool ok = s.size() <= norm.size();
  for (size_t d = 0; ok && d < s.size(); ++d) ok = s[d] == 1 || s[d] == norm[norm.size() - s.size() + d];
  if (!ok)
    return Err(StatusCode::kInvalidArgument, "{}: {} shape {} does not broadcast to the normalized shape {}",
               n.Where(), what, ShapeToString(t.shape()), ShapeToString(norm));
  const int64_t cols = NumElements(norm);
  std::vector<double> r(cols);
  if (t.numel() == cols) {
    for (int64_t j = 0; j < cols; ++j) r[j] = t.GetAsDouble(j);
    return r;
  }
  BroadcastIterator it(norm, {BroadcastStrides(s, norm)});
  for (int64_t j = 0; j < cols; ++j, it.Next()) r[j] = t.GetAsDouble(it.offset(0));
  return r;
}

// ---- LayerNormalization ----
Status LayerNormKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  const int64_t axis = n.geti("axis", -1);
  auto na = NormalizeAxis(axis, rank);
  if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", n.Where(), axis, rank);
  const std::vector<int64_t> norm(x.shape().begin() + *na, x.shape().end());
  int64_t rows = 1;
  for (int64_t d = 0; d < *na; ++d) rows *= x.dim(d);
  const int64_t cols = NumElements(norm);
  KILN_ASSIGN_OR_RETURN(std::vector<double> scale, ExpandParam(n, ctx.in(1), norm, "Scale"));
  std::vector<double> bias(cols, 0.0);
  if (const Tensor* b = ctx.input(2)) {
    KILN_ASSIGN_OR_RETURN(bias, ExpandParam(n, *b, norm, "B"));
  }
  const double eps = n.getf("epsilon", 1e-5f);
  const DataType stash = static_cast<DataType>(n.geti("stash_type", 1));
  const bool rms = n.op_type == "RMSNormalization";  // no mean: X / sqrt(mean(X^2) + eps) * Scale
  Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
  std::vector<int64_t> stat_shape = x.shape();
  for (int64_t d = *na; d < rank; ++d) stat_shape[d] = 1;
  std::vector<double> means(rows), invs(rows);
  Status st = DispatchFloat(x.dtype(), n, [&]<typename T>() {
    using C = ComputeT<T>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::vector<C> cs(scale.begin(), scale.end()), cb(bias.begin(), bias.end());
    ParallelFor(rows, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        auto [mean, var] = MeanVar(xp + r * cols, cols);
        if (rms) var += mean * mean, mean = 0;  // the mean of squares: variance + mean^2
        const double inv = 1.0 / std::sqrt(var + eps);
        means[r] = mean;
        invs[r] = inv;
        const C cm = static_cast<C>(mean), ci = static_cast<C>(inv);
        for (int64_t j = 0; j < cols; ++j) Store(yp, r * cols + j, (Load(xp, r * cols + j) - cm) * ci * cs[j] + cb[j]);
      }
    }, GrainFor(cols));
  });
  KILN_RETURN_IF_ERROR(st);
  for (size_t o = 1; o < 3; ++o) {
    if (!Present(ctx, o)) continue;
    Tensor& out = EnsureOutput(ctx, o, stash, stat_shape);
    const auto& v = o == 1 ? means : invs;
    for (int64_t r = 0; r < rows; ++r) out.SetFromDouble(r, v[r]);
  }
  if (Present(ctx, 3)) return WriteQuantizedCopy(ctx, 3, y);  // Y quantized per tensor (kQScale)
  return Status::Ok();
}

// ---- GroupNormalization ----
Status GroupNormKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  if (x.rank() < 2)
    return Err(StatusCode::kInvalidArgument, "{}: input must have rank >= 2, its shape is {}", n.Where(),
               ShapeToString(x.shape()));
  const int64_t G = n.geti("num_groups", 0);
  const int64_t N = x.dim(0), C = x.dim(1), inner = x.numel() / std::max<int64_t>(1, N * C);
  if (G <= 0 || C % G != 0)
    return Err(StatusCode::kInvalidArgument, "{}: {} channels do not split into num_groups = {}", n.Where(), C, G);
  const bool per_group = n.geti("kiln_scale_per_group", 0) != 0;
  const int64_t P = per_group ? G : C;
  if (ctx.in(1).numel() != P || ctx.in(2).numel() != P)
    return Err(StatusCode::kInvalidArgument, "{}: scale and bias must have {} elements (one per {})", n.Where(), P,
               per_group ? "group" : "channel");
  const double eps = n.getf("epsilon", 1e-5f);
  const auto scale = ToDoubles(ctx.in(1)), bias = ToDoubles(ctx.in(2));
  Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
  if (x.numel() == 0) return Status::Ok();
  const int64_t cpg = C / G, gsize = cpg * inner;
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ParallelFor(N * G, [&](int64_t b, int64_t e) {
      for (int64_t ng = b; ng < e; ++ng) {
        const int64_t g = ng % G, off = ng * gsize;
        const auto [mean, var] = MeanVar(xp + off, gsize);
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t k = 0; k < cpg; ++k) {
          const int64_t c = g * cpg + k, p = per_group ? g : c;
          const double a = scale[p] * inv;
          AffinePlane(xp + off + k * inner, yp + off + k * inner, inner, a, bias[p] - mean * a);
        }
      }
    }, GrainFor(gsize));
  });
}

// LpNormalization: y = x / ||x||_p along axis (p = 1: the sum of |x|; p = 2: the root of the sum of squares), in
// double; a zero norm gives zeros.
Status LpNormKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  const int64_t axis = n.geti("axis", -1), p = n.geti("p", 2);
  if (p != 1 && p != 2) return Err(StatusCode::kInvalidArgument, "{}: p must be 1 or 2, got {}", n.Where(), p);
  const auto na = NormalizeAxis(axis, x.rank());
  if (!na)
    return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for {}", n.Where(), axis, x.Describe());
  Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
  if (x.numel() == 0) return Status::Ok();
  const AxisSplit s = SplitAt(x.shape(), *na);
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ParallelFor(s.outer * s.inner, [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        const int64_t base = (line / s.inner) * s.n * s.inner + line % s.inner;
        double norm = 0;
        for (int64_t k = 0; k < s.n; ++k) {
          const double v = static_cast<double>(Load(xp, base + k * s.inner));
          norm += p == 1 ? std::fabs(v) : v * v;
        }
        if (p == 2) norm = std::sqrt(norm);
        for (int64_t k = 0; k < s.n; ++k) {
          const int64_t i = base + k * s.inner;
          Store(yp, i, static_cast<ComputeT<T>>(norm == 0 ? 0.0 : static_cast<double>(Load(xp, i)) / norm));
        }
      }
    }, GrainFor(s.n));
  });
}

}  // namespace

void RegisterNormKernels(KernelRegistry& r) {
  r.Add("BatchNormalization", BatchNormKernel);
  r.Add("InstanceNormalization", InstanceNormKernel);
  r.Add("LayerNormalization", LayerNormKernel);
  r.Add("RMSNormalization", LayerNormKernel);
  r.Add("GroupNormalization", GroupNormKernel);
  r.Add("LpNormalization", LpNormKernel);
}

}  // namespace kiln::cpu
