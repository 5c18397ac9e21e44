// Launcher of kiln.Reformat's kernels (reformat.cu): Y = Transpose(Cast(X), perm) with Y's last axis zero-padded
// at its end (ops/fused_ops.h). No IR here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

// X: contiguous, x_shape[0..rank), dtype x_dtype; Y: contiguous, axis i of X's axis perm[i], except the last, which
// has y_last >= x_shape[perm[rank - 1]] entries (the rest zeros). Dtypes kF32, kF16, kBF16 (kernel_util.cuh), cast
// through float32 with round to nearest even. Dims are merged where the permutation keeps them together; a
// channels-first to channels-last move of at most 16 channels ([N, C, S] -> [N, S, C_pad]: NCHW -> NHWC) takes a
// kernel of one thread per pixel with vector stores, anything else one thread per element. Returns
// cudaErrorNotSupported for another dtype or more than 8 dims after merging. Enqueues only; nothing for 0 elements.
cudaError_t LaunchReformat(int x_dtype, int y_dtype, const void* x, void* y, int rank, const int64_t* x_shape,
                           const int64_t* perm, int64_t y_last, cudaStream_t stream);

}  // namespace kiln::cuda
