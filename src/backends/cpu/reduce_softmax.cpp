// CPU kernels of Softmax and LogSoftmax in their canonical form: an explicit axis, and kiln_flatten_2d = 1
// for the opset < 13 semantics (the input is seen as 2-D [prod(dims[:axis]), prod(dims[axis:])]).
// Rows are processed in parallel; float16/bfloat16 compute in float.
#include <cmath>
#include <limits>

#include "backends/cpu/families.h"
#include "backends/cpu/reduce_util.h"

namespace kiln::cpu {

void RegisterSoftmaxKernels(KernelRegistry& r);

namespace {

// One contiguous row of n elements (inner == 1), the common case (last axis).
template <typename T, bool kLog>
void SoftmaxRow(const T* x, T* y, int64_t n, std::vector<ComputeT<T>>& buf) {
  using C = ComputeT<T>;
  C m = -std::numeric_limits<C>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, Load(x, j));
  buf.resize(n);
  C sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const C d = Load(x, j) - m;
    if constexpr (kLog) {
      buf[j] = d;
      sum += std::exp(d);
    } else {
      buf[j] = std::exp(d);
      sum += buf[j];
    }
  }
  if constexpr (kLog) {
    const C lse = std::log(sum);
    for (int64_t j = 0; j < n; ++j) Store(y, j, buf[j] - lse);
  } else {
    const C inv = C(1) / sum;
    for (int64_t j = 0; j < n; ++j) Store(y, j, buf[j] * inv);
  }
}

// One [n, inner] block reduced along n, vectorized over inner.
template <typename T, bool kLog>
void SoftmaxBlock(const T* x, T* y, int64_t n, int64_t inner, std::vector<ComputeT<T>>& mx,
                  std::vector<ComputeT<T>>& sum) {
  using C = ComputeT<T>;
  mx.assign(inner, -std::numeric_limits<C>::infinity());
  sum.assign(inner, C(0));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], Load(x, r * inner + i));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < inner; ++i) sum[i] += std::exp(Load(x, r * inner + i) - mx[i]);
  for (int64_t i = 0; i < inner; ++i) sum[i] = kLog ? mx[i] + std::log(sum[i]) : C(1) / sum[i];
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < inner; ++i) {
      const C v = Load(x, r * inner + i);
      Store(y, r * inner + i, kLog ? v - sum[i] : std::exp(v - mx[i]) * sum[i]);
    }
}

template <typename T, bool kLog>
void SoftmaxLoop(const T* x, T* y, const AxisSplit& s) {
  if (s.inner == 1) {
    ParallelFor(
        s.outer,
        [&](int64_t b, int64_t e) {
          std::vector<ComputeT<T>> buf;
          for (int64_t o = b; o < e; ++o) SoftmaxRow<T, kLog>(x + o * s.n, y + o * s.n, s.n, buf);
        },
        GrainFor(s.n));
  } else {
    ParallelFor(
        s.outer,
        [&](int64_t b, int64_t e) {
          std::vector<ComputeT<T>> mx, sum;
          for (int64_t o = b; o < e; ++o)
            SoftmaxBlock<T, kLog>(x + o * s.n * s.inner, y + o * s.n * s.inner, s.n, s.inner, mx, sum);
        },
        GrainFor(s.n * s.inner));
  }
}

// The rows Softmax, LogSoftmax and Hardmax work along: the axis, or (kiln_flatten_2d, opset < 13) everything from
// the axis on.
Result<AxisSplit> RowsOf(const Node& n, const Tensor& x) {
  const int64_t rank = x.rank();
  const int64_t axis = n.geti("axis", -1);
  AxisSplit s;
  if (n.geti("kiln_flatten_2d", 0)) {
    if (axis < -rank || axis > rank)
      return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", n.Where(), axis, rank);
    const int64_t a = axis < 0 ? axis + rank : axis;
    s.outer = 1;
    for (int64_t d = 0; d < a; ++d) s.outer *= x.dim(d);
    s.n = 1;
    for (int64_t d = a; d < rank; ++d) s.n *= x.dim(d);
  } else if (rank == 0) {
    s = AxisSplit{};
  } else {
    auto na = NormalizeAxis(axis, rank);
    if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", n.Where(), axis, rank);
    s = SplitAt(x.shape(), *na);
  }
  return s;
}

// Hardmax: per row, 1 at the first largest value and 0 elsewhere (a NaN is never the largest; a row of NaNs gives
// its first element).
Status HardmaxKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(const AxisSplit s, RowsOf(n, x));
  Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
  if (x.numel() == 0) return Status::Ok();
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t in = 0; in < s.inner; ++in) {
        const int64_t base = o * s.n * s.inner + in;
        int64_t best = 0;
        double best_v = static_cast<double>(Load(xp, base));
        for (int64_t i = 1; i < s.n; ++i) {
          const double v = static_cast<double>(Load(xp, base + i * s.inner));
          if (v > best_v || (std::isnan(best_v) && !std::isnan(v))) best = i, best_v = v;
        }
        for (int64_t i = 0; i < s.n; ++i) Store(yp, base + i * s.inner, ComputeT<T>(i == best ? 1 : 0));
      }
  });
}

Status SoftmaxKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(const AxisSplit s, RowsOf(n, x));
  Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
  if (x.numel() == 0) return Status::Ok();
  const bool log = n.op_type == "LogSoftmax";
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    if (log) SoftmaxLoop<T, true>(x.data<T>(), y.data<T>(), s);
    else SoftmaxLoop<T, false>(x.data<T>(), y.data<T>(), s);
  });
}

}  // namespace

void RegisterSoftmaxKernels(KernelRegistry& r) {
  r.Add("Softmax", SoftmaxKernel);
  r.Add("LogSoftmax", SoftmaxKernel);
  r.Add("Hardmax", HardmaxKernel);
}

}  // namespace kiln::cpu
