// CPU kernels of EyeLike (an identity-like matrix of the input's shape) and the window generators HannWindow,
// HammingWindow and BlackmanWindow (computed in double, then stored as the output type). Shrink is a pointwise
// formula (ops/pointwise_formulas.h; its integer path is in elementwise.cpp).
#include <cmath>
#include <numbers>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

// Ones where column - row == k, zeros elsewhere, of `dtype` (default: the input's).
Status EyeLikeKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  if (x.rank() != 2)
    return Err(StatusCode::kInvalidArgument, "{}: the input must be 2-D, got {}", c.node.Where(), x.Describe());
  KILN_ASSIGN_OR_RETURN(const int64_t k, c.node.attr_int("k", 0));
  DataType t = x.dtype();
  if (c.node.attrs.count("dtype")) {
    KILN_ASSIGN_OR_RETURN(const int64_t code, c.node.attr_int("dtype", 0));
    t = static_cast<DataType>(code);
  }
  Tensor& y = AllocOutput(c, 0, t, x.shape());
  const int64_t rows = x.dim(0), cols = x.dim(1);
  for (int64_t i = 0; i < y.numel(); ++i) y.SetFromDouble(i, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t col = r + k;
    if (col >= 0 && col < cols) y.SetFromDouble(r * cols + col, 1.0);
  }
  return Status::Ok();
}

enum class Window { kHann, kHamming, kBlackman };

template <Window W>
Status WindowKernel(KernelContext& c) {
  const Tensor& size = c.in(0);
  if (size.numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: size must be a scalar, got {}", c.node.Where(), size.Describe());
  const int64_t n = size.GetAsInt(0);
  if (n < 0) return Err(StatusCode::kInvalidArgument, "{}: size {} is negative", c.node.Where(), n);
  KILN_ASSIGN_OR_RETURN(const int64_t periodic, c.node.attr_int("periodic", 1));
  KILN_ASSIGN_OR_RETURN(const int64_t code, c.node.attr_int("output_datatype", 1));
  Tensor& y = AllocOutput(c, 0, static_cast<DataType>(code), {n});
  // The period: N for a periodic window (the DFT's), N - 1 for a symmetric one.
  const double period = static_cast<double>(periodic ? n : n - 1);
  constexpr double pi = std::numbers::pi;
  for (int64_t i = 0; i < n; ++i) {
    const double a = period > 0 ? 2.0 * pi * static_cast<double>(i) / period : 0.0;
    double v;
    if constexpr (W == Window::kHann) v = 0.5 - 0.5 * std::cos(a);
    else if constexpr (W == Window::kHamming) v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(a);
    else v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2.0 * a);
    y.SetFromDouble(i, v);
  }
  return Status::Ok();
}

}  // namespace

void RegisterGeneratorKernels(KernelRegistry& r) {
  r.Add("EyeLike", EyeLikeKernel);
  r.Add("HannWindow", WindowKernel<Window::kHann>);
  r.Add("HammingWindow", WindowKernel<Window::kHamming>);
  r.Add("BlackmanWindow", WindowKernel<Window::kBlackman>);
}

}  // namespace kiln::cpu
