// The CUDA backend behind the Backend interface (backends/backend.h): GPU layers chosen by timing (with the timing
// cache), the planned executor with CUDA graphs (engine_exec.h), and device memory, streams and events for
// bindings. Found through backends/factory.h; compiled whenever nvcc exists.
#pragma once

#include "backends/backend.h"

namespace kiln::cuda {

const Backend& CudaBackend();
// Device memory, streams and events of the current CUDA device (device_api.cpp).
const DeviceApi& CudaDeviceApi();

}  // namespace kiln::cuda
