// Launchers of the small device steps of If/Loop/Scan layers (control_flow.cu). Plain C++ (no IR). Every launcher
// only enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda {

// *counter += 1 (a Loop's iteration number, kept on the device so that no iteration needs the host).
cudaError_t LaunchIncrementInt64(int64_t* counter, cudaStream_t stream);

}  // namespace kiln::cuda
