// CPU reference kernel of CausalConvWithState (opset 27): per batch and channel, the row r = past_state (k - 1 values,
// zeros when absent) followed by the input (L values) is convolved with the channel's kernel w [k]:
//   output[t] = bias + sum_j w[j] * r[t + j],  t in [0, L)
// rounded to the element type, then, with activation silu (or its alias swish), x * sigmoid(x) in float32 as the ONNX
// reference does. present_state is r's last k - 1 values. Sums run in double.
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

Status CausalConvWithStateKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.in(0);
  const Tensor& w = c.in(1);
  const Tensor* bias = c.input(2);
  const Tensor* past = c.input(3);
  const std::string act = n.gets("activation", "none");
  if (act != "none" && act != "silu" && act != "swish")
    return Err(StatusCode::kInvalidArgument, "{}: activation must be 'none', 'silu' or 'swish', got '{}'", n.Where(),
               act);
  const bool silu = act != "none";
  if (x.rank() != 3 || w.rank() != 3 || w.dim(0) != x.dim(1) || w.dim(1) != 1 || w.dim(2) < 1)
    return Err(StatusCode::kInvalidArgument,
               "{}: input {} must be (batch, channels, length), weight {} (channels, 1, k)", n.Where(), x.Describe(),
               w.Describe());
  const int64_t batch = x.dim(0), ch = x.dim(1), len = x.dim(2), k = w.dim(2), keep = k - 1;
  const std::vector<int64_t> state_shape = {batch, ch, keep};
  if ((bias && (bias->rank() != 1 || bias->dim(0) != ch)) || (past && past->shape() != state_shape))
    return Err(StatusCode::kInvalidArgument, "{}: bias must be ({}) and past_state {}", n.Where(), ch,
               ShapeToString(state_shape));
  for (const Tensor* t : {&w, bias, past})
    if (t && t->dtype() != x.dtype())
      return Err(StatusCode::kInvalidArgument, "{}: {} must have input's type {}", n.Where(), t->Describe(),
                 DataTypeName(x.dtype()));
  Tensor& y = AllocOutput(c, 0, x.dtype(), {batch, ch, len});
  Tensor& present = AllocOutput(c, 1, x.dtype(), state_shape);

  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    using C = ComputeT<T>;
    const T* xp = x.data<T>();
    const T* wp = w.data<T>();
    const T* bp = bias ? bias->data<T>() : nullptr;
    const T* pp = past ? past->data<T>() : nullptr;
    T* yp = y.data<T>();
    T* sp = present.data<T>();
    ParallelFor(
        batch * ch,
        [&](int64_t begin, int64_t end) {
          std::vector<double> row(static_cast<size_t>(keep + len));
          for (int64_t bc = begin; bc < end; ++bc) {
            const int64_t ci = bc % ch;
            for (int64_t i = 0; i < keep; ++i)
              row[static_cast<size_t>(i)] = pp ? static_cast<double>(Load(pp, bc * keep + i)) : 0.0;
            for (int64_t i = 0; i < len; ++i)
              row[static_cast<size_t>(keep + i)] = static_cast<double>(Load(xp, bc * len + i));
            for (int64_t t = 0; t < len; ++t) {
              double acc = bp ? static_cast<double>(Load(bp, ci)) : 0.0;
              for (int64_t j = 0; j < k; ++j)
                acc += static_cast<double>(Load(wp, ci * k + j)) * row[static_cast<size_t>(t + j)];
              C v = static_cast<C>(acc);
              if (silu) {
                // The convolution is rounded to the element type first, then activated in float32 (or double).
                if constexpr (!std::is_same_v<C, double>) v = RoundTo(x.dtype(), v);
                v = v * (C{1} / (C{1} + std::exp(-v)));
              }
              Store(yp, bc * len + t, v);
            }
            for (int64_t i = 0; i < keep; ++i)
              Store(sp, bc * keep + i, static_cast<C>(row[static_cast<size_t>(len + i)]));
          }
        },
        16);
  });
}

}  // namespace

void RegisterCausalConvKernels(KernelRegistry& r) { r.Add("CausalConvWithState", CausalConvWithStateKernel); }

}  // namespace kiln::cpu
