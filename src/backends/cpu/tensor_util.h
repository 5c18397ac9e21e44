// Helpers shared by the CPU kernels of the data-movement ops (tensor*.cpp): a strided copy that moves
// contiguous runs with memcpy and splits work across threads, and output allocation.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {

// Copies a strided view: for every multi-index i over `shape`,
//   dst[sum(i * dst_strides)] = src[sum(i * src_strides)]   (strides in elements, may be 0 or negative).
// Adjacent dims that are contiguous in both views are merged first; unit-stride rows use memcpy.
void StridedCopy(const void* src, void* dst, std::vector<int64_t> shape, std::vector<int64_t> src_strides,
                 std::vector<int64_t> dst_strides, size_t elem_size);

// Output i with this dtype and shape: the pre-allocated tensor when it matches, else a new one.
Tensor& AllocOutput(KernelContext& c, size_t i, DataType dtype, const std::vector<int64_t>& shape);

// Whether output i is wanted (present in the node and in the context).
inline bool WantOutput(const KernelContext& c, size_t i) {
  return i < c.num_outputs() && c.node.output(i) != nullptr;
}

void RegisterTensorCopyKernels(KernelRegistry& r);  // tensor_copy.cpp
void RegisterTensorMiscKernels(KernelRegistry& r);  // tensor_misc.cpp

}  // namespace kiln::cpu
