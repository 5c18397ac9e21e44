// What the Hopper kernels (qconv_sm90_impl.cuh, qgemm_sm90_impl.cuh) launch with: the current device and its SM
// count (queried once per device, for the persistent tile scheduler's grid). This stage sees only its own folder,
// so the per-device memo is written out here (backends/cuda/per_device.h is its twin).
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "cutlass/kernel_hardware_info.h"

namespace kiln::cuda::cutlass_sm90::detail {

inline cutlass::KernelHardwareInfo HardwareInfo() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> sm_counts[kMaxDevices] = {};  // per device; 0: not asked yet
  cutlass::KernelHardwareInfo hw;
  cudaGetDevice(&hw.device_id);
  const bool memo = hw.device_id >= 0 && hw.device_id < kMaxDevices;
  int sm_count = memo ? sm_counts[hw.device_id].load(std::memory_order_relaxed) : 0;
  if (sm_count == 0) {
    sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw.device_id);
    if (memo) sm_counts[hw.device_id].store(sm_count, std::memory_order_relaxed);
  }
  hw.sm_count = sm_count;
  return hw;
}

}  // namespace kiln::cuda::cutlass_sm90::detail
