// Small helpers shared by the CPU index-family kernels (index.cpp, index_misc.cpp, nms.cpp, resize.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/kernel.h"

namespace kiln::cpu::idx {

// Output i with this dtype and shape: the pre-allocated one when it matches, else a fresh allocation.
// Error naming the node when the shape is absurd (negative, overflowing) or the allocation fails.
Result<Tensor*> EnsureOutput(KernelContext& ctx, size_t i, DataType dtype, const std::vector<int64_t>& shape);
// int32/int64 index tensor -> int64 values; error naming the node for other types.
Result<std::vector<int64_t>> ReadIndices(const Node& n, const Tensor& t);
// Wraps a negative index and checks it against [0, dim); error names the node, the index and the axis.
Result<int64_t> FixIndex(const Node& n, int64_t v, int64_t dim, int64_t axis);

}  // namespace kiln::cpu::idx
