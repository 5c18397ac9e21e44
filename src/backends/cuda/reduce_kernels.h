// Launchers of the reduce family's kernels (reduce.cu, softmax.cu, topk.cu, cumsum.cu). Plain C++: pointers,
// int64 sizes and DTypeCode ints (the ONNX TensorProto numbers, as kiln::DataType). Storage types accepted:
// float32, float16, bfloat16 (computed in float32), float64 (computed in double), int32, int64, int8, uint8 and bool
// where the op allows it.
// Every launcher returns cudaErrorInvalidValue for a dtype it does not handle (callers check dtypes first) and
// launches nothing for 0-element outputs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

enum class ReduceOpCode : int {
  kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp,
  kArgMax, kArgMin,  // int64 output: the position along the (single) reduced axis
};

// Storage types the launchers below accept (bool only where the op allows it).
bool ReduceDTypeSupported(int dtype);

// Reduces x (row-major, `rank` <= 8 dims of `shape`) over the dims whose bit is set in `reduced_mask`. y holds
// the kept dims in order (keepdims does not change the layout). ArgMax/ArgMin need exactly one reduced dim of
// size >= 1 and write int64; `select_last` picks the last of equal extremes. Empty reductions give the op's
// identity (Sum 0, Prod 1, Max lowest, Mean NaN...), like the CPU reference.
cudaError_t LaunchReduce(ReduceOpCode op, int dtype, const void* x, void* y, const int64_t* shape, int rank,
                         uint32_t reduced_mask, bool select_last, cudaStream_t stream);

// Softmax (or LogSoftmax) of x seen as [outer, n, inner] along n; float32/float16/bfloat16, and float64 (in
// double). `force_block_rows` uses the block-per-row kernel for inner == 1 even where a warp per row would do
// (float64 always runs its own block-per-row or per-column kernel).
cudaError_t LaunchSoftmax(int dtype, bool log, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                          bool force_block_rows, cudaStream_t stream);

// Hardmax of x seen as [outer, n, inner] along n: 1 at the first largest value of each row, 0 elsewhere; a NaN is
// never the largest (a row of NaNs gives its first element), as the CPU reference. float32/float16/bfloat16.
cudaError_t LaunchHardmax(int dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t stream);

// TopK along n of x seen as [outer, n, inner]: values [outer, k, inner] (x's dtype) and int64 indices (may be
// null), ordered like the CPU reference (NaN largest, equal values by lower index). The reduce family's types but
// bool, and int16, uint16, uint32, uint64 (TopKDTypeSupported). n <= 2^30.
bool TopKDTypeSupported(int dtype);
// Rows of more than TopKSharedSortMax() elements sort in `workspace` (TopKWorkspaceBytes).
int64_t TopKSharedSortMax();
size_t TopKWorkspaceBytes(int64_t outer, int64_t n, int64_t inner);
cudaError_t LaunchTopK(int dtype, const void* x, void* values, int64_t* indices, int64_t outer, int64_t n,
                       int64_t inner, int64_t k, bool largest, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream);

// CumSum along n of x seen as [outer, n, inner] (exclusive, reverse as in ONNX). Not bool.
cudaError_t LaunchCumSum(int dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                         bool reverse, cudaStream_t stream);

}  // namespace kiln::cuda
