// Launchers of the tensor-family kernels that are not plain copies (tensor_misc.cu): fill (ConstantOfShape,
// Dropout masks), Pad, Trilu, Range, and writing a few host-known int64 values (Shape, Size). No IR here.
// Every launcher only enqueues work on `stream` and launches nothing for 0 elements.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

// dst[0..n) = the element whose raw bytes are the low elem_size bytes of value_bits (elem_size 1/2/4/8).
cudaError_t LaunchFill(void* dst, int64_t n, int elem_size, uint64_t value_bits, cudaStream_t stream);

// Writes values[0..n) (host memory, passed to the kernel by value) to dst.
cudaError_t LaunchWriteInt64s(int64_t* dst, const int64_t* values, int n, cudaStream_t stream);

enum class PadMode : int { kConstant = 0, kReflect = 1, kEdge = 2, kWrap = 3 };
// Pad of a contiguous input of in_shape into a contiguous output of out_shape, `before[d]` elements added before
// dim d (negative: cropped). Positions outside the input take the constant (mode kConstant): *value_ptr when it
// is non-null (a device scalar of the element type), else the bits of value_bits. rank <= 8; elem_size 1/2/4/8.
cudaError_t LaunchPad(const void* src, void* dst, int rank, const int64_t* in_shape, const int64_t* out_shape,
                      const int64_t* before, PadMode mode, int elem_size, uint64_t value_bits, const void* value_ptr,
                      cudaStream_t stream);

// Trilu over the last two dims [rows, cols] of a contiguous tensor of `total` elements: keeps element (i, j) when
// j - i >= k (upper) or j - i <= k (lower), else writes zero bits. k is *k_ptr (device int64) when non-null.
cudaError_t LaunchTrilu(const void* src, void* dst, int64_t total, int64_t rows, int64_t cols, bool upper, int64_t k,
                        const int64_t* k_ptr, int elem_size, cudaStream_t stream);

// Range: out[i] = start + i * delta for i < n, start and delta read from device scalars of `dtype`
// (DTypeCode: F32, F64, I16, I32, I64, F16, BF16; integers in int64 arithmetic, float32/float64 in double; float16
// and bfloat16 in float32, or in double with stash_double (opset 27's stash_type 11), each rounded to the type as
// the CPU reference rounds it). Returns cudaErrorNotSupported for other dtypes.
cudaError_t LaunchRange(int dtype, const void* start, const void* delta, void* out, int64_t n, cudaStream_t stream,
                        bool stash_double = false);

}  // namespace kiln::cuda
