// Launchers of CumProd, LpNormalization and BitCast's byte-to-bool copy (cumprod_lpnorm_bitcast.cu). Plain C++ (no
// IR); dtypes are DTypeCode ints. Every launcher only enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda {

// CumProd along n of x seen as [outer, n, inner] (exclusive, reverse as in ONNX), as the CPU reference: floats
// (float32/16, bfloat16, float64) multiply in double; integers (8 to 64 bits, signed or not) in uint64 (wrapping, so
// the stored low bits are those of the type's own product). Not bool.
bool CumProdSupports(int dtype);
cudaError_t LaunchCumProd(int dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                          bool reverse, cudaStream_t stream);

// LpNormalization along n of x seen as [outer, n, inner]: y = x / ||x||_p (p 1 or 2), the norm in double; a zero
// norm gives zeros. float32/16, bfloat16, float64.
bool LpNormSupports(int dtype);
cudaError_t LaunchLpNorm(int dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, int p,
                         cudaStream_t stream);

// BitCast to bool of a one-byte type: y[i] = x[i] != 0 (kiln's bools are the bytes 0 and 1).
cudaError_t LaunchBytesToBool(const void* x, void* y, int64_t count, cudaStream_t stream);

}  // namespace kiln::cuda
