// Runtime compilation of generated CUDA source (NVRTC) for the current device, and a process-wide module cache
// keyed by (device, source): engines that load the same fused kernel twice compile it once. The source must be
// self-contained (no #include): the NVRTC built-ins (math functions, __umulhi, __float_as_uint...) are there.
#pragma once

#include <string>

#include "kiln/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace kiln::cuda {

struct NvrtcKernel {
  const void* fn = nullptr;  // a cudaKernel_t (runtime API: no link to the driver library)
  bool cached = false;     // found in the cache (no compile)
  double compile_ms = 0;   // NVRTC compile + module load time when not cached
  int sm = 0;              // the device's compute capability (major * 10 + minor)
};

// The current device's compute capability (major * 10 + minor); initializes the runtime's primary context.
Result<int> CurrentDeviceSm();

// Compiles `source` for the current device (cached) and returns the function `kernel` (an extern "C" name).
// Errors carry `where` (the node) and NVRTC's log.
Result<NvrtcKernel> CompileNvrtcKernel(const std::string& where, const std::string& source, const std::string& kernel);

// Compiles `source` with NVRTC for compute capability `sm` (a cubin, or PTX for a device newer than this NVRTC
// knows) without touching a device (tests use it where there is none). Errors carry `where` and NVRTC's log.
Result<std::string> CompileNvrtcImage(const std::string& where, const std::string& source, int sm);

// cudaLaunchKernel with one grid/block dimension and no dynamic shared memory; `args` as cudaLaunchKernel takes them.
Status LaunchNvrtcKernel(const void* fn, unsigned grid, unsigned block, cudaStream_t stream, void** args);

}  // namespace kiln::cuda
