// Launchers of LRN and MeanVarianceNormalization (lrn_mvn.cu). Plain C++ (no IR); dtypes are DTypeCode ints
// (float32, float16, bfloat16, float64). Every launcher only enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// LRN across channels of x [n, c, spatial] (spatial: the product of the dims after 1):
// y = x / (bias + alpha / size * sum of x^2 over channels [k - (size - 1) / 2, k + size - 1 - (size - 1) / 2] within
// [0, c)) ^ beta, computed in float32 (float64 for float64 data).
cudaError_t LaunchLrn(int dtype, const void* x, void* y, int64_t n, int64_t c, int64_t spatial, int64_t size,
                      float alpha, float beta, float bias, cudaStream_t stream);

// MeanVarianceNormalization of x seen as `rank` dims (at most 8; adjacent dims of the same kind merged by the
// caller), `reduced[d]` marking the normalized axes: for each group (one index of the kept dims),
// y = (x - mean) / sqrt(mean(x^2) - mean^2 + 1e-9) over the group's elements, statistics in double as the CPU
// reference computes them.
struct MvnArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int dtype = 0;
  int rank = 0;
  int64_t dims[8] = {};
  bool reduced[8] = {};
};
// Scratch bytes LaunchMvn needs for these dims.
size_t MvnWorkspaceBytes(const MvnArgs& a);
cudaError_t LaunchMvn(const MvnArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace kiln::cuda
