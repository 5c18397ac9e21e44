// CPU kernel of Einsum: a generic strided loop. Each label gets one stride per operand (the sum of the strides
// of the operand's dims carrying it, so a repeated label walks the diagonal; 0 where a dim of size 1
// broadcasts). Output elements are split across threads; summed labels are walked by an odometer.
// Floating types accumulate in double, integers in their own type.
#include <algorithm>

#include "backends/cpu/common.h"
#include "backends/cpu/gemm_blas.h"
#include "shape/einsum_equation.h"

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
  return DispatchAll(t, node, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) EinsumLoop<T>(ctx.inputs, lstrides, sizes, spec.output.size(), y);
  });
}

}  // namespace kiln::cpu
