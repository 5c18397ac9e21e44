// What the Hopper kernels (qconv_sm90_impl.cuh, qgemm_sm90_impl.cuh) launch with: the current device and its SM
// count (queried once per process, for the persistent tile scheduler's grid).
#pragma once

#include <cuda_runtime.h>

#include "cutlass/kernel_hardware_info.h"

namespace kiln::cuda::cutlass_sm90::detail {

inline cutlass::KernelHardwareInfo HardwareInfo() {
  static const int sm_count = [] {
    int device = 0;
    cudaGetDevice(&device);
    return cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);
  }();
  cutlass::KernelHardwareInfo hw;
  cudaGetDevice(&hw.device_id);
  hw.sm_count = sm_count;
  return hw;
}

}  // namespace kiln::cuda::cutlass_sm90::detail
