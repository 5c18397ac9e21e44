// Random inputs for timing tactics (tuning.cpp): the activations a candidate layer reads while it is timed, filled on
// the device. Filling them on the host cost most of a build (a ResNet-50 at batch 64 spent 20 of its 22 s of tactic
// selection drawing tens of millions of numbers one by one and uploading them).
#pragma once

#include <cstdint>

#include "kiln/status.h"
#include "kiln/types.h"

typedef struct CUstream_st* cudaStream_t;

namespace kiln::cuda {

// Writes n values of `dtype` at `data` on `stream`, uniform in [-1, 1] (a hash of the seed and the index: the same
// seed gives the same data; [-1, 1) before rounding to 16-bit floats) for float32/float16/bfloat16/float64.
// Returns kUnsupported for every other type, which the caller fills itself (zeros for integers, the narrow float
// encodings on the host).
Status FillTuningInput(void* data, DataType dtype, int64_t n, uint32_t seed, cudaStream_t stream);

}  // namespace kiln::cuda
