// Launchers of Compress (compress.cu). Plain C++ (no IR). Both only enqueue work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// Scratch bytes for a condition of n entries: the selected indices (n int64) and their count (one int64).
size_t CompressWorkspaceBytes(int64_t n);
// Where the selected indices and the count lie in such a workspace.
int64_t* CompressSelected(void* workspace);
int64_t* CompressCount(void* workspace, int64_t n);

// The indices j < n where cond[j] (bool, one byte each) is true, in increasing order, into selected[0..count), and
// count into *count (device memory). One block scans the condition in chunks.
cudaError_t LaunchCompressSelect(const void* cond, int64_t n, int64_t* selected, int64_t* count, cudaStream_t stream);

// out[o, k, :] = x[o, selected[k], :] for o < outer, k < count: x is [outer, dim, row_bytes] and out
// [outer, count, row_bytes] in bytes (elements of any size); selected[k] < dim.
cudaError_t LaunchCompressGather(const void* x, void* out, const int64_t* selected, int64_t outer, int64_t dim,
                                 int64_t count, int64_t row_bytes, cudaStream_t stream);

}  // namespace kiln::cuda
