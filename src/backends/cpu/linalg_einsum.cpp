// CPU kernel of Einsum: a generic strided loop. Each label gets one stride per operand (the sum of the strides
// of the operand's dims carrying it, so a repeated label walks the diagonal; 0 where a dim of size 1
// broadcasts). Output elements are split across threads; summed labels are walked by an odometer.
// Floating types accumulate in double, integers in their own type.
// Fast path: two float32/float64 operands without diagonals or one-sided summed labels become
// permute -> batched OpenBLAS GEMM -> permute (batch labels, M labels, N labels, contracted K labels).
#include <algorithm>

#include "backends/cpu/common.h"
#include "backends/cpu/gemm_blas.h"
#include "ops/einsum_equation.h"

namespace kiln::cpu {

namespace {

template <typename T>
using EinsumAcc = std::conditional_t<std::is_floating_point_v<ComputeT<T>>, double, ComputeT<T>>;

template <typename T>
void EinsumLoop(const std::vector<const Tensor*>& ins, const std::vector<std::vector<int64_t>>& lstrides,
                const std::vector<int64_t>& sizes, size_t nout, Tensor& y) {
  const size_t nl = sizes.size(), ni = ins.size();
  int64_t out_count = 1, red_count = 1;
  for (size_t l = 0; l < nout; ++l) out_count *= sizes[l];
  for (size_t l = nout; l < nl; ++l) red_count *= sizes[l];
  std::vector<const T*> src(ni);
  for (size_t k = 0; k < ni; ++k) src[k] = ins[k]->data<T>();
  T* dst = y.data<T>();
  ParallelFor(out_count, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> base(ni), off(ni), ridx(nl, 0);
    for (int64_t o = begin; o < end; ++o) {
      std::fill(base.begin(), base.end(), 0);
      int64_t rem = o;
      for (int64_t l = static_cast<int64_t>(nout) - 1; l >= 0; --l) {
        const int64_t i = rem % sizes[l];
        rem /= sizes[l];
        for (size_t k = 0; k < ni; ++k) base[k] += i * lstrides[k][l];
      }
      EinsumAcc<T> acc = 0;
      off = base;
      std::fill(ridx.begin(), ridx.end(), 0);
      for (int64_t r = 0; r < red_count; ++r) {
        EinsumAcc<T> prod = 1;
        for (size_t k = 0; k < ni; ++k) prod *= static_cast<EinsumAcc<T>>(Load(src[k], off[k]));
        acc += prod;
        for (size_t l = nl; l-- > nout;) {  // odometer over the summed labels
          if (++ridx[l] < sizes[l]) {
            for (size_t k = 0; k < ni; ++k) off[k] += lstrides[k][l];
            break;
          }
          for (size_t k = 0; k < ni; ++k) off[k] -= lstrides[k][l] * (sizes[l] - 1);
          ridx[l] = 0;
        }
      }
      Store(dst, o, static_cast<ComputeT<T>>(acc));
    }
  }, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, red_count)));
}

// Copies `src` (shape `shape`) into `dst` with dims reordered by `perm` (dst dim i = src dim perm[i]).
template <typename T>
void Permute(const T* src, const std::vector<int64_t>& shape, const std::vector<size_t>& perm, T* dst) {
  const size_t r = perm.size();
  const auto st = Strides(shape);
  std::vector<int64_t> dshape(r), dstr(r);
  for (size_t i = 0; i < r; ++i) dshape[i] = shape[perm[i]], dstr[i] = st[perm[i]];
  const int64_t n = NumElements(shape);
  if (r == 0) {
    if (n) dst[0] = src[0];
    return;
  }
  BroadcastIterator it(dshape, {dstr});
  for (int64_t i = 0; i < n; ++i, it.Next()) dst[i] = src[it.offset(0)];
}

// Returns false (nothing written) when the equation does not fit the GEMM form.
template <typename T>
bool EinsumGemm(const EinsumSpec& spec, const Tensor& a, const Tensor& b, const std::vector<int64_t>& sizes,
                Tensor& y) {
  const auto& la = spec.inputs[0];
  const auto& lb = spec.inputs[1];
  const auto& lo = spec.output;
  auto pos = [](const std::vector<int>& v, int l) -> int64_t {
    auto it = std::find(v.begin(), v.end(), l);
    return it == v.end() ? -1 : it - v.begin();
  };
  std::vector<int> batch, ml, nl, kl;
  for (size_t i = 0; i < spec.all_labels.size(); ++i) {
    const int l = spec.all_labels[i];
    const bool ia = pos(la, l) >= 0, ib = pos(lb, l) >= 0, io = pos(lo, l) >= 0;
    if (std::count(la.begin(), la.end(), l) > 1 || std::count(lb.begin(), lb.end(), l) > 1) return false;
    if ((ia && a.dim(pos(la, l)) != sizes[i]) || (ib && b.dim(pos(lb, l)) != sizes[i])) return false;  // broadcast
    if (ia && ib && io) batch.push_back(l);
    else if (ia && io) ml.push_back(l);
    else if (ib && io) nl.push_back(l);
    else if (ia && ib) kl.push_back(l);
    else return false;  // summed over one operand only
  }
  auto size_of = [&](int l) { return sizes[pos(spec.all_labels, l)]; };
  auto prod = [&](const std::vector<int>& ls) {
    int64_t p = 1;
    for (int l : ls) p *= size_of(l);
    return p;
  };
  const int64_t nb = prod(batch), m = prod(ml), n = prod(nl), k = prod(kl);
  auto perm_of = [&](const std::vector<int>& labels, std::vector<std::vector<int>> groups) {
    std::vector<size_t> perm;
    for (const auto& g : groups)
      for (int l : g) perm.push_back(static_cast<size_t>(pos(labels, l)));
    return perm;
  };
  std::vector<T> pa(static_cast<size_t>(nb * m * k)), pb(static_cast<size_t>(nb * k * n)),
      pc(static_cast<size_t>(nb * m * n));
  Permute(a.data<T>(), a.shape(), perm_of(la, {batch, ml, kl}), pa.data());
  Permute(b.data<T>(), b.shape(), perm_of(lb, {batch, kl, nl}), pb.data());
  for (int64_t i = 0; i < nb; ++i) {
    if constexpr (std::is_same_v<T, float>)
      GemmF32(false, false, m, n, k, 1.f, pa.data() + i * m * k, k, pb.data() + i * k * n, n, 0.f,
              pc.data() + i * m * n, n);
    else
      GemmF64(false, false, m, n, k, 1.0, pa.data() + i * m * k, k, pb.data() + i * k * n, n, 0.0,
              pc.data() + i * m * n, n);
  }
  // pc has dims (batch, ml, nl); reorder to the output's label order.
  std::vector<int> cl = batch;
  cl.insert(cl.end(), ml.begin(), ml.end());
  cl.insert(cl.end(), nl.begin(), nl.end());
  std::vector<int64_t> cshape;
  for (int l : cl) cshape.push_back(size_of(l));
  std::vector<size_t> perm;
  for (int l : lo) perm.push_back(static_cast<size_t>(pos(cl, l)));
  Permute(pc.data(), cshape, perm, y.data<T>());
  return true;
}

}  // namespace

Status EinsumKernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (ctx.num_inputs() == 0) return Err(StatusCode::kInvalidArgument, "{}: Einsum needs inputs", node.Where());
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.input(i)) return Err(StatusCode::kInvalidArgument, "{}: input {} is missing", node.Where(), i);
    if (ctx.in(i).dtype() != ctx.in(0).dtype())
      return Err(StatusCode::kInvalidArgument, "{}: inputs have different element types", node.Where());
    ranks.push_back(ctx.in(i).rank());
    shapes.push_back(FromStatic(ctx.in(i).shape()));
  }
  KILN_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(node, node.gets("equation", ""), ranks));
  KILN_ASSIGN_OR_RETURN(auto dims, EinsumLabelSizes(node, spec, shapes));
  const std::vector<int64_t> sizes = ToStatic(dims);
  const size_t nl = sizes.size();
  std::vector<std::vector<int64_t>> lstrides(ctx.num_inputs(), std::vector<int64_t>(nl, 0));
  for (size_t k = 0; k < ctx.num_inputs(); ++k) {
    const auto st = Strides(ctx.in(k).shape());
    for (size_t d = 0; d < spec.inputs[k].size(); ++d) {
      if (ctx.in(k).dim(d) == 1) continue;
      const size_t l = std::find(spec.all_labels.begin(), spec.all_labels.end(), spec.inputs[k][d]) -
                       spec.all_labels.begin();
      lstrides[k][l] += st[d];
    }
  }
  const std::vector<int64_t> out_shape(sizes.begin(), sizes.begin() + spec.output.size());
  Tensor& y = ctx.out(0);
  const DataType t = ctx.in(0).dtype();
  EnsureOutput(y, t, out_shape);
  if (t == DataType::kBool) return Err(StatusCode::kUnsupported, "{}: Einsum on bool", node.Where());
  if (ctx.num_inputs() == 2 && y.numel() > 0) {
    if (t == DataType::kFloat32 && EinsumGemm<float>(spec, ctx.in(0), ctx.in(1), sizes, y)) return Status::Ok();
    if (t == DataType::kFloat64 && EinsumGemm<double>(spec, ctx.in(0), ctx.in(1), sizes, y)) return Status::Ok();
  }
  return DispatchAll(t, node, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) EinsumLoop<T>(ctx.inputs, lstrides, sizes, spec.output.size(), y);
  });
}

}  // namespace kiln::cpu
