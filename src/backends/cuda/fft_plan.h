// cuFFT plans of a layer (DFT, STFT): batched 1-D complex-to-complex transforms of contiguous lines, one plan per
// (device, length, batch, precision), created on first sight and kept for the layer's life.
//
// Plans run on the caller's work area (cufftSetAutoAllocation off): the layer adds WorkBytes() to its
// WorkspaceBytes(), so no memory is allocated while it runs. Creating a plan allocates device memory (twiddles) and
// may synchronize, which must not happen during a CUDA graph capture: the runtimes ask WorkspaceBytes() with each
// launch's tensors before any capture (engine_exec.cpp BuildPlan, graph_runner.cpp), which creates the plan there;
// Exec creates a plan it has not seen only outside a capture (an error inside one). A plan's stream and work area
// are set under the cache's mutex right before each execution, so contexts on several threads may share the layer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kiln/status.h"

namespace kiln::cuda {

class FftPlans {
 public:
  explicit FftPlans(std::string where) : where_(std::move(where)) {}
  ~FftPlans();
  FftPlans(const FftPlans&) = delete;
  FftPlans& operator=(const FftPlans&) = delete;

  // The work-area bytes of `batch` transforms of `len` points (creating the plan if new).
  Result<size_t> WorkBytes(int64_t len, int64_t batch, bool f64) const;
  // Transforms `data` (batch * len complex points: double2 with f64, float2 otherwise) in place, unnormalized:
  // y[k] = sum_j x[j] e^(-+2 pi i jk / len), + for the inverse.
  Status Exec(int64_t len, int64_t batch, bool f64, bool inverse, void* data, void* work, size_t work_bytes,
              cudaStream_t stream) const;

 private:
  struct Plan {
    int handle = 0;  // cufftHandle
    size_t work = 0;
  };
  using Key = std::tuple<int, int64_t, int64_t, bool>;  // device, len, batch, f64
  Result<const Plan*> Find(const Key& key, bool may_create) const;

  std::string where_;
  mutable std::mutex mu_;
  mutable std::map<Key, Plan> plans_;  // never erased before the destructor: pointers stay valid
};

}  // namespace kiln::cuda
