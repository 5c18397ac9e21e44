// A value computed once per CUDA device and kept for the process: what differs between the GPUs of one machine
// (SM counts, compute capability) or must be done on each of them (cudaFuncSetAttribute applies to the current
// device's context only). A plain function-local static would compute it on the first device that asks and give
// that answer on every other. Header-only, for .cu and .cpp files alike.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace kiln::cuda {

class PerDeviceValue {
 public:
  static constexpr int kMaxDevices = 64;
  // The value for the calling thread's current device: `compute()` (an int >= 0) the first time on each device.
  // Devices numbered kMaxDevices and above, and a failing cudaGetDevice, compute it on every call. Two threads may
  // both compute it the first time (the computations are idempotent queries or settings); one answer is kept.
  template <typename F>
  int Get(F&& compute) {
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return compute();
    const int stored = slots_[device].load(std::memory_order_acquire);
    if (stored != 0) return stored - 1;
    const int v = compute();
    slots_[device].store(v + 1, std::memory_order_release);
    return v;
  }

 private:
  std::atomic<int> slots_[kMaxDevices] = {};  // value + 1; 0: not computed on that device yet
};

}  // namespace kiln::cuda
