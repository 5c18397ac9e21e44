// Device steps of the If/Loop/Scan layers (control_flow_kernels.h).
#include "backends/cuda/control_flow_kernels.h"

namespace kiln::cuda {
namespace {

__global__ void IncrementKernel(int64_t* counter) { *counter += 1; }

}  // namespace

cudaError_t LaunchIncrementInt64(int64_t* counter, cudaStream_t stream) {
  IncrementKernel<<<1, 1, 0, stream>>>(counter);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
