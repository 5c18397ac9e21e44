// Launchers of OneHot and NonZero (index_misc.cu). Plain C++ (no IR).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// True where OneHot's indices may have this dtype (every numeric type: floats are truncated like the CPU does).
bool OneHotSupportsIndexType(int dtype);

// OneHot: out viewed as [outer, depth, inner] elements of value_bytes (1, 2, 4 or 8);
// out[o, d, i] = values[1] where d == index(o, i) (negative indices count from depth), else values[0].
// `values` is the device tensor [off, on]. Non-finite or out-of-range indices give an all-off row (ONNX).
cudaError_t LaunchOneHot(const void* indices, int index_dtype, const void* values, int value_bytes, void* out,
                         int64_t outer, int64_t depth, int64_t inner, cudaStream_t stream);

// True where NonZero supports the input dtype.
bool NonZeroSupportsType(int dtype);
// Scratch bytes RunNonZero needs for `count` input elements.
size_t NonZeroWorkspaceBytes(int64_t count);
// NonZero of the `count` elements of x (shape[0..rank), rank 0 treated as [1]): counts the nonzero elements on the
// device, SYNCHRONIZES the stream, writes *nonzero_count and the int64 coordinates out[d * nonzero_count + c]
// (out must hold max(rank, 1) * count elements).
cudaError_t RunNonZero(const void* x, int dtype, int64_t count, int rank, const int64_t* shape, void* workspace,
                       size_t workspace_bytes, int64_t* out, int64_t* nonzero_count, cudaStream_t stream);

}  // namespace kiln::cuda
