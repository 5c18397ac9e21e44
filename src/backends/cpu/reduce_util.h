// Small helpers shared by the CPU reduction and normalization kernels (reduce*.cpp, norm*.cpp):
// float-only type dispatch, output allocation, and the (outer, n, inner) split of a shape at an axis.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/common.h"

namespace kiln::cpu {

// Output i with the given type and shape: the pre-allocated tensor when it matches, else a fresh one.
inline Tensor& EnsureOutput(KernelContext& ctx, size_t i, DataType t, const std::vector<int64_t>& shape) {
  Tensor& o = ctx.out(i);
  if (!o.defined() || o.dtype() != t || o.shape() != shape) o = Tensor(t, shape);
  return o;
}

// A shape seen as [outer, n, inner] around `axis` (already normalized to [0, rank)).
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit SplitAt(const std::vector<int64_t>& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.n = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

// Grain for ParallelFor over items of `work` elements each: about 32K elements per task.
inline int64_t GrainFor(int64_t work) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work)); }

}  // namespace kiln::cpu
