// CPU kernels of TopK (K as input 1; largest, sorted; Values and int64 Indices; equal values keep the lower
// index first; NaN counts as the largest value), CumSum and CumProd (axis input; exclusive, reverse).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/families.h"
#include "backends/cpu/reduce_util.h"

namespace kiln::cpu {

void RegisterTopKKernels(KernelRegistry& r);

namespace {

template <typename C>
bool IsNaN(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  else return false;
}

template <typename T>
void TopKLoop(const T* x, T* vals, int64_t* idx, const AxisSplit& s, int64_t k, bool largest) {
  using C = ComputeT<T>;
  using Item = std::pair<C, int64_t>;
  // A strict weak order: NaN above every number, ties broken by the lower index.
  auto before = [largest](const Item& a, const Item& b) {
    const bool na = IsNaN(a.first), nb = IsNaN(b.first);
    if (na != nb) return largest ? na : nb;
    if (!na && a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  };
  ParallelFor(
      s.outer * s.inner,
      [&](int64_t b, int64_t e) {
        std::vector<Item> items(s.n);
        for (int64_t slice = b; slice < e; ++slice) {
          const int64_t o = slice / s.inner, i = slice % s.inner;
          const T* p = x + o * s.n * s.inner + i;
          for (int64_t r = 0; r < s.n; ++r) items[r] = {Load(p, r * s.inner), r};
          std::partial_sort(items.begin(), items.begin() + k, items.end(), before);
          const int64_t out_base = o * k * s.inner + i;
          for (int64_t j = 0; j < k; ++j) {
            Store(vals, out_base + j * s.inner, items[j].first);
            idx[out_base + j * s.inner] = items[j].second;
          }
        }
      },
      GrainFor(s.n));
}

Status TopKKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  const Tensor* kt = ctx.input(1);
  if (!kt || kt->numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: K (input 1) must hold exactly one value", n.Where());
  const int64_t k = kt->GetAsInt(0);
  const int64_t axis = n.geti("axis", -1);
  auto na = NormalizeAxis(axis, x.rank());
  if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", n.Where(), axis, x.rank());
  if (k < 0 || k > x.dim(*na))
    return Err(StatusCode::kInvalidArgument, "{}: K = {} must lie in [0, {}] (the size of axis {})", n.Where(), k,
               x.dim(*na), axis);
  std::vector<int64_t> out_shape = x.shape();
  out_shape[*na] = k;
  Tensor& vals = EnsureOutput(ctx, 0, x.dtype(), out_shape);
  Tensor dummy;
  Tensor& idx = ctx.num_outputs() > 1 ? EnsureOutput(ctx, 1, DataType::kInt64, out_shape) : dummy;
  if (!idx.defined()) idx = Tensor(DataType::kInt64, out_shape);
  const AxisSplit s = SplitAt(x.shape(), *na);
  if (k == 0 || x.numel() == 0) return Status::Ok();
  const bool largest = n.geti("largest", 1) != 0;
  if (x.dtype() == DataType::kBool)
    return Err(StatusCode::kUnsupported, "{}: TopK does not accept bool input", n.Where());
  return DispatchAll(x.dtype(), n, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>)
      TopKLoop(x.data<T>(), vals.data<T>(), idx.data<int64_t>(), s, k, largest);
  });
}

// CumSum (kProduct false) or CumProd along s.n. Sums accumulate in double (floats) or 64-bit integers; products in
// double (floats) or uint64_t (integers: wrapping, so the stored low bits are those of the type's own product).
template <bool kProduct, typename T>
void CumulativeLoop(const T* x, T* y, const AxisSplit& s, bool exclusive, bool reverse) {
  using C = ComputeT<T>;
  using IntAcc = std::conditional_t<kProduct || !std::is_signed_v<C>, uint64_t, int64_t>;
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, IntAcc>;
  const Acc init = kProduct ? Acc(1) : Acc(0);
  ParallelFor(
      s.outer,
      [&](int64_t b, int64_t e) {
        std::vector<Acc> acc(s.inner);
        for (int64_t o = b; o < e; ++o) {
          std::fill(acc.begin(), acc.end(), init);
          const int64_t base = o * s.n * s.inner;
          for (int64_t step = 0; step < s.n; ++step) {
            const int64_t r = reverse ? s.n - 1 - step : step;
            const int64_t off = base + r * s.inner;
            for (int64_t i = 0; i < s.inner; ++i) {
              const Acc v = static_cast<Acc>(Load(x, off + i));
              if (exclusive) Store(y, off + i, static_cast<C>(acc[i]));
              if constexpr (kProduct) acc[i] *= v;
              else acc[i] += v;
              if (!exclusive) Store(y, off + i, static_cast<C>(acc[i]));
            }
          }
        }
      },
      GrainFor(s.n * s.inner));
}

// CumSum and CumProd (kProduct): x and a one-element axis input; exclusive, reverse.
template <bool kProduct>
Status CumulativeKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  const Tensor* at = ctx.input(1);
  if (!at || at->numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: axis (input 1) must hold exactly one value", n.Where());
  const int64_t axis = at->GetAsInt(0);
  if (x.rank() == 0)
    return Err(StatusCode::kInvalidArgument, "{}: {} needs an input of rank >= 1", n.Where(), n.op_type);
  auto na = NormalizeAxis(axis, x.rank());
  if (!na)
    return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", n.Where(), axis, x.rank());
  Tensor& y = EnsureOutput(ctx, 0, x.dtype(), x.shape());
  if (x.numel() == 0) return Status::Ok();
  const bool exclusive = n.geti("exclusive", 0) != 0, reverse = n.geti("reverse", 0) != 0;
  if (x.dtype() == DataType::kBool)
    return Err(StatusCode::kUnsupported, "{}: {} does not accept bool input", n.Where(), n.op_type);
  const AxisSplit s = SplitAt(x.shape(), *na);
  return DispatchAll(x.dtype(), n, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>)
      CumulativeLoop<kProduct>(x.data<T>(), y.data<T>(), s, exclusive, reverse);
  });
}

}  // namespace

void RegisterTopKKernels(KernelRegistry& r) {
  r.Add("TopK", TopKKernel);
  r.Add("CumSum", CumulativeKernel<false>);
  r.Add("CumProd", CumulativeKernel<true>);
}

}  // namespace kiln::cpu
