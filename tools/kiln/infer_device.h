// Timing inference of an engine whose backend keeps tensors in device memory (kiln/backend.h): device buffers for
// every I/O tensor, pinned host copies, one stream per context, and device events around the transfers and the
// compute of each run.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::cli {

struct RunTimes {
  double h2d_ms = 0, compute_ms = 0, d2h_ms = 0, latency_ms = 0, enqueue_ms = 0;
};

class DeviceRun;  // one context's device state (infer_device.cpp)

// Binds device buffers for the context's inputs (filled from `inputs`) and outputs; CUDA graphs on request.
Result<std::shared_ptr<DeviceRun>> DeviceSetup(ExecutionContext& ctx, const Engine& e,
                                               const std::map<std::string, std::vector<uint8_t>>& inputs,
                                               const std::vector<std::string>& outputs, bool use_cuda_graph);
// One run: H2D of the inputs (when `transfers`), enqueue, D2H of the outputs, synchronize; times from events.
Status DeviceRunOnce(DeviceRun& run, ExecutionContext& ctx, bool transfers, RunTimes* t);
// Copies the outputs of the last run to the host.
Result<std::map<std::string, std::vector<uint8_t>>> DeviceFetchOutputs(DeviceRun& run, ExecutionContext& ctx);

}  // namespace kiln::cli
