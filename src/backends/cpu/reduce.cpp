// CPU reference kernels of the reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp
// (axes as input 1, keepdims, noop_with_empty_axes, empty reductions give the identity) and ArgMax/ArgMin.
// Float sums accumulate in double, integer sums in int64. Softmax/TopK/CumSum live in reduce_*.cpp.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/families.h"
#include "backends/cpu/reduce_util.h"

namespace kiln::cpu {

void RegisterSoftmaxKernels(KernelRegistry& r);  // reduce_softmax.cpp
void RegisterTopKKernels(KernelRegistry& r);     // reduce_topk.cpp

namespace {

// ---- accumulators: Init / Add / Finish over the compute type C ----
template <typename C>
using SumAcc = std::conditional_t<std::is_floating_point_v<C>, double,
                                  std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>>;

template <typename C> struct SumOp {
  using Acc = SumAcc<C>;
  Acc Init() const { return 0; }
  void Add(Acc& a, C v) const { a += static_cast<Acc>(v); }
  C Finish(Acc a, int64_t) const { return static_cast<C>(a); }
};
template <typename C> struct MeanOp {
  using Acc = double;
  Acc Init() const { return 0; }
  void Add(Acc& a, C v) const { a += static_cast<double>(v); }
  C Finish(Acc a, int64_t n) const { return static_cast<C>(a / static_cast<double>(n)); }
};
template <typename C> struct SumSquareOp {
  using Acc = SumAcc<C>;
  Acc Init() const { return 0; }
  void Add(Acc& a, C v) const { a += static_cast<Acc>(v) * static_cast<Acc>(v); }
  C Finish(Acc a, int64_t) const { return static_cast<C>(a); }
};
template <typename C> struct L1Op {
  using Acc = SumAcc<C>;
  Acc Init() const { return 0; }
  void Add(Acc& a, C v) const {
    if constexpr (std::is_signed_v<C> || std::is_floating_point_v<C>) a += static_cast<Acc>(v < 0 ? -v : v);
    else a += static_cast<Acc>(v);
  }
  C Finish(Acc a, int64_t) const { return static_cast<C>(a); }
};
template <typename C> struct L2Op {
  using Acc = double;
  Acc Init() const { return 0; }
  void Add(Acc& a, C v) const { a += static_cast<double>(v) * static_cast<double>(v); }
  C Finish(Acc a, int64_t) const { return static_cast<C>(std::sqrt(a)); }
};
template <typename C> struct LogSumOp {
  using Acc = double;
  Acc Init() const { return 0; }
  void Add(Acc& a, C v) const { a += static_cast<double>(v); }
  C Finish(Acc a, int64_t) const { return static_cast<C>(std::log(a)); }
};
// Online log-sum-exp: running max m and sum s of exp(x - m).
template <typename C> struct LogSumExpOp {
  struct Acc {
    double m, s;
  };
  Acc Init() const { return {-std::numeric_limits<double>::infinity(), 0.0}; }
  void Add(Acc& a, C v) const {
    const double x = static_cast<double>(v);
    if (std::isnan(x)) { a.m = x; a.s = 1; return; }
    if (x == -std::numeric_limits<double>::infinity() || std::isnan(a.m)) return;
    if (x > a.m) { a.s = a.s * std::exp(a.m - x) + 1.0; a.m = x; }
    else a.s += std::exp(x - a.m);
  }
  C Finish(Acc a, int64_t) const {
    return static_cast<C>(a.s == 0 ? -std::numeric_limits<double>::infinity() : a.m + std::log(a.s));
  }
};
template <typename C> struct ProdOp {
  using Acc = SumAcc<C>;
  Acc Init() const { return 1; }
  void Add(Acc& a, C v) const { a *= static_cast<Acc>(v); }
  C Finish(Acc a, int64_t) const { return static_cast<C>(a); }
};
template <typename C> C Lowest() {
  if constexpr (std::is_floating_point_v<C>) return -std::numeric_limits<C>::infinity();
  else return std::numeric_limits<C>::lowest();
}
template <typename C> C Highest() {
  if constexpr (std::is_floating_point_v<C>) return std::numeric_limits<C>::infinity();
  else return std::numeric_limits<C>::max();
}
template <typename C> struct MaxOp {
  using Acc = C;
  Acc Init() const { return Lowest<C>(); }
  void Add(Acc& a, C v) const { if (v > a || v != v) { if (a == a) a = v; } }  // NaN propagates
  C Finish(Acc a, int64_t) const { return a; }
};
template <typename C> struct MinOp {
  using Acc = C;
  Acc Init() const { return Highest<C>(); }
  void Add(Acc& a, C v) const { if (v < a || v != v) { if (a == a) a = v; } }
  C Finish(Acc a, int64_t) const { return a; }
};

// ---- the iteration plan: kept and reduced dims, size-1 dims dropped, adjacent dims merged ----
struct ReducePlan {
  std::vector<int64_t> kshape, kstride;  // kept dims in output order, with input strides
  std::vector<int64_t> rshape, rstride;  // reduced dims
  int64_t out_count = 1, red_count = 1;
};

ReducePlan MakePlan(const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
  ReducePlan p;
  const auto strides = Strides(shape);
  int last = -1;  // kind of the previous non-unit dim: 0 kept, 1 reduced
  for (size_t d = 0; d < shape.size(); ++d) {
    (reduced[d] ? p.red_count : p.out_count) *= shape[d];
    if (shape[d] == 1) continue;
    auto& s = reduced[d] ? p.rshape : p.kshape;
    auto& t = reduced[d] ? p.rstride : p.kstride;
    const int kind = reduced[d] ? 1 : 0;
    if (kind == last && t.back() == strides[d] * shape[d]) {
      s.back() *= shape[d];
      t.back() = strides[d];
    } else {
      s.push_back(shape[d]);
      t.push_back(strides[d]);
    }
    last = kind;
  }
  return p;
}

template <typename T, typename Op>
void ReduceLoop(const T* x, T* y, const ReducePlan& p, const Op& op) {
  if (p.out_count == 0) return;
  if (p.red_count == 0) {  // empty reduction: the identity of the op
    for (int64_t o = 0; o < p.out_count; ++o) Store(y, o, op.Finish(op.Init(), 0));
    return;
  }
  const int64_t kr = static_cast<int64_t>(p.kshape.size()), rr = static_cast<int64_t>(p.rshape.size());
  ParallelFor(
      p.out_count,
      [&](int64_t b, int64_t e) {
        std::vector<int64_t> kidx(kr, 0), ridx(rr, 0);
        int64_t base = 0;
        for (int64_t d = kr - 1, rem = b; d >= 0; --d) {
          kidx[d] = rem % p.kshape[d];
          rem /= p.kshape[d];
          base += kidx[d] * p.kstride[d];
        }
        for (int64_t o = b; o < e; ++o) {
          auto acc = op.Init();
          if (rr == 1) {
            const int64_t s = p.rstride[0];
            for (int64_t r = 0; r < p.rshape[0]; ++r) op.Add(acc, Load(x, base + r * s));
          } else {
            int64_t off = base;
            for (int64_t r = 0; r < p.red_count; ++r) {
              op.Add(acc, Load(x, off));
              for (int64_t d = rr - 1; d >= 0; --d) {
                if (++ridx[d] < p.rshape[d]) { off += p.rstride[d]; break; }
                off -= p.rstride[d] * (p.rshape[d] - 1);
                ridx[d] = 0;
              }
            }
          }
          Store(y, o, op.Finish(acc, p.red_count));
          for (int64_t d = kr - 1; d >= 0; --d) {
            if (++kidx[d] < p.kshape[d]) { base += p.kstride[d]; break; }
            base -= p.kstride[d] * (p.kshape[d] - 1);
            kidx[d] = 0;
          }
        }
      },
      GrainFor(p.red_count));
}

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

template <typename T>
void RunReduce(ReduceKind k, const T* x, T* y, const ReducePlan& p) {
  using C = ComputeT<T>;
  switch (k) {
    case ReduceKind::kSum: return ReduceLoop(x, y, p, SumOp<C>{});
    case ReduceKind::kMean: return ReduceLoop(x, y, p, MeanOp<C>{});
    case ReduceKind::kMax: return ReduceLoop(x, y, p, MaxOp<C>{});
    case ReduceKind::kMin: return ReduceLoop(x, y, p, MinOp<C>{});
    case ReduceKind::kProd: return ReduceLoop(x, y, p, ProdOp<C>{});
    case ReduceKind::kL1: return ReduceLoop(x, y, p, L1Op<C>{});
    case ReduceKind::kL2: return ReduceLoop(x, y, p, L2Op<C>{});
    case ReduceKind::kSumSquare: return ReduceLoop(x, y, p, SumSquareOp<C>{});
    case ReduceKind::kLogSum: return ReduceLoop(x, y, p, LogSumOp<C>{});
    case ReduceKind::kLogSumExp: return ReduceLoop(x, y, p, LogSumExpOp<C>{});
  }
}

KernelFn MakeReduceKernel(ReduceKind kind) {
  return [kind](KernelContext& ctx) -> Status {
    const Node& n = ctx.node;
    const Tensor& x = ctx.in(0);
    const int64_t rank = x.rank();
    std::vector<int64_t> axes;
    if (const Tensor* a = ctx.input(1)) axes = a->ToInt64Vector();
    const bool keepdims = n.geti("keepdims", 1) != 0;
    if (axes.empty() && n.geti("noop_with_empty_axes", 0) != 0) {
      Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
      if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
      return Status::Ok();
    }
    std::vector<bool> reduced(rank, axes.empty());
    for (int64_t a : axes) {
      auto na = NormalizeAxis(a, rank);
      if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", n.Where(), a, rank);
      if (reduced[*na]) return Err(StatusCode::kInvalidArgument, "{}: axis {} is repeated", n.Where(), a);
      reduced[*na] = true;
    }
    std::vector<int64_t> out_shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[d]) out_shape.push_back(x.dim(d));
      else if (keepdims) out_shape.push_back(1);
    }
    if (x.dtype() == DataType::kBool && kind != ReduceKind::kMax && kind != ReduceKind::kMin)
      return Err(StatusCode::kUnsupported, "{}: bool input is supported only by ReduceMax and ReduceMin", n.Where());
    Tensor& y = EnsureOutput(ctx, 0, x.dtype(), out_shape);
    const ReducePlan plan = MakePlan(x.shape(), reduced);
    return DispatchAll(x.dtype(), n, [&]<typename T>() {
      if constexpr (std::is_same_v<T, bool>) {
        if (kind == ReduceKind::kMax) ReduceLoop(x.data<T>(), y.data<T>(), plan, MaxOp<bool>{});
        else ReduceLoop(x.data<T>(), y.data<T>(), plan, MinOp<bool>{});
      } else {
        RunReduce<T>(kind, x.data<T>(), y.data<T>(), plan);
      }
    });
  };
}

// ArgMax / ArgMin along `axis`, ties to the first (or last with select_last_index) occurrence.
template <typename T>
void ArgLoop(const T* x, int64_t* y, const AxisSplit& s, bool is_max, bool last) {
  ParallelFor(
      s.outer * s.inner,
      [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const int64_t o = k / s.inner, i = k % s.inner;
          const T* p = x + o * s.n * s.inner + i;
          auto best = Load(p, 0);
          int64_t bi = 0;
          for (int64_t r = 1; r < s.n; ++r) {
            const auto v = Load(p, r * s.inner);
            const bool better = is_max ? v > best : v < best;
            if (better || (last && v == best)) {
              best = v;
              bi = r;
            }
          }
          y[k] = bi;
        }
      },
      GrainFor(s.n));
}

Status ArgKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  const int64_t axis = n.geti("axis", 0);
  auto na = NormalizeAxis(axis, x.rank());
  if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", n.Where(), axis, x.rank());
  if (x.dim(*na) == 0)
    return Err(StatusCode::kInvalidArgument, "{}: cannot take the {} of an empty axis", n.Where(), n.op_type);
  std::vector<int64_t> out_shape;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != *na) out_shape.push_back(x.dim(d));
    else if (n.geti("keepdims", 1)) out_shape.push_back(1);
  }
  Tensor& y = EnsureOutput(ctx, 0, DataType::kInt64, out_shape);
  const AxisSplit s = SplitAt(x.shape(), *na);
  const bool is_max = n.op_type == "ArgMax", last = n.geti("select_last_index", 0) != 0;
  return DispatchAll(x.dtype(), n, [&]<typename T>() { ArgLoop(x.data<T>(), y.data<int64_t>(), s, is_max, last); });
}

}  // namespace

void RegisterReduceKernels(KernelRegistry& r) {
  r.Add("ReduceSum", MakeReduceKernel(ReduceKind::kSum));
  r.Add("ReduceMean", MakeReduceKernel(ReduceKind::kMean));
  r.Add("ReduceMax", MakeReduceKernel(ReduceKind::kMax));
  r.Add("ReduceMin", MakeReduceKernel(ReduceKind::kMin));
  r.Add("ReduceProd", MakeReduceKernel(ReduceKind::kProd));
  r.Add("ReduceL1", MakeReduceKernel(ReduceKind::kL1));
  r.Add("ReduceL2", MakeReduceKernel(ReduceKind::kL2));
  r.Add("ReduceSumSquare", MakeReduceKernel(ReduceKind::kSumSquare));
  r.Add("ReduceLogSum", MakeReduceKernel(ReduceKind::kLogSum));
  r.Add("ReduceLogSumExp", MakeReduceKernel(ReduceKind::kLogSumExp));
  r.Add("ArgMax", ArgKernel);
  r.Add("ArgMin", ArgKernel);
  RegisterSoftmaxKernels(r);
  RegisterTopKKernels(r);
}

}  // namespace kiln::cpu
