// Launchers of the generator ops EyeLike and HannWindow/HammingWindow/BlackmanWindow (generators.cu). Plain C++
// (no IR). Every launcher only enqueues work on `stream` and launches nothing for 0 elements.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda {

// EyeLike: y [rows, cols] of elements of elem_size bytes (1, 2, 4 or 8) holds the bits one_bits (the low elem_size
// bytes) where column - row == k, zero bits elsewhere.
cudaError_t LaunchEyeLike(void* y, int64_t rows, int64_t cols, int64_t k, int elem_size, uint64_t one_bits,
                          cudaStream_t stream);

// The window of n points, computed in double as the CPU reference does (a = 2 pi i / N with N = n for a periodic
// window, n - 1 otherwise; a = 0 when N is 0) and stored as `dtype` (DTypeCode: integers truncated and saturated,
// float16/bfloat16 through float32): Hann 0.5 - 0.5 cos a, Hamming 25/46 - 21/46 cos a, Blackman
// 0.42 - 0.5 cos a + 0.08 cos 2a.
enum WindowKind : int { kWindowHann = 0, kWindowHamming, kWindowBlackman };
// True where LaunchWindow supports the dtype (integers and float32/float16/bfloat16/float64).
bool WindowSupports(int dtype);
cudaError_t LaunchWindow(int kind, int dtype, void* y, int64_t n, bool periodic, cudaStream_t stream);

}  // namespace kiln::cuda
