// Launchers of the data-movement kernels (strided_copy.cu): one strided copy that serves Transpose, Concat,
// Split, Slice, Expand, Tile, DepthToSpace and SpaceToDepth, plus a modulo-indexed Tile kernel. They move raw
// elements: only the element size (1, 2, 4 or 8 bytes) matters, never the dtype. No IR here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

// For every multi-index i over shape[0..rank): dst[sum(i * dst_strides)] = src[sum(i * src_strides)]
// (strides in elements; src strides may be 0 or negative). Unit dims are dropped and dims contiguous in both
// views merged first; then: one cudaMemcpyAsync for a contiguous block, a tiled shared-memory transpose when the
// source is contiguous along another dim than the destination, else an element (or 16/8/4-byte vector) loop.
// Returns cudaErrorNotSupported when more than 8 dims remain after merging or elem_size is not 1/2/4/8.
// Enqueues only (no synchronization, no allocation); nothing is launched for 0 elements.
cudaError_t LaunchStridedCopy(const void* src, void* dst, int rank, const int64_t* shape, const int64_t* src_strides,
                              const int64_t* dst_strides, int elem_size, cudaStream_t stream);

// Concat in one launch (concat_copy.cu): dst is [outer, sum(widths)] elements and input i, [outer, widths[i]]
// contiguous, fills its columns of every row. Inputs of width 0 are skipped; more than 64 inputs take one launch per
// 64. elem_size 1/2/4/8; copies in the widest unit (up to 16 bytes) every width and pointer allows.
cudaError_t LaunchConcat(int n, const void* const* srcs, const int64_t* widths, void* dst, int64_t outer,
                         int elem_size, cudaStream_t stream);

// Tile: out (contiguous, out_shape) at index o reads the contiguous input at o[d] % in_shape[d]. rank <= 8.
cudaError_t LaunchTileCopy(const void* src, void* dst, int rank, const int64_t* in_shape, const int64_t* out_shape,
                           int elem_size, cudaStream_t stream);

}  // namespace kiln::cuda
