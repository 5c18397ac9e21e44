// CUDA devices, streams, device/pinned memory, and a first kernel. This is the plumbing the CUDA backend
// (its kernels, cuBLASLt and cuDNN tactics) stands on. Nothing here is used by the core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace kiln::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  size_t total_memory = 0;
  int sm_count = 0;
  int runtime_version = 0, driver_version = 0;
  std::string ToString() const;  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"
};

// Number of usable CUDA devices; 0 (not an error) where there is no driver or no device.
int DeviceCount();
Result<DeviceInfo> GetDeviceInfo(int index);
// The calling thread's current device (cudaGetDevice). Every engine, context, buffer and stream the backend creates
// lives on the device current when it was created; caches of device-bound objects are keyed by it.
Result<int> CurrentDevice();
// Makes `index` the calling thread's current device (cudaSetDevice); an error naming the index and the device
// count where it does not exist.
Status SetDevice(int index);

// An owned CUDA stream.
class Stream {
 public:
  static Result<Stream> Create();
  Stream() = default;
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept;
  ~Stream();
  cudaStream_t get() const { return s_; }
  Status Synchronize() const;

 private:
  cudaStream_t s_ = nullptr;
};

// Device memory (cudaMalloc) owned by one object.
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> Allocate(size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// A new device buffer holding a copy of `bytes` bytes of host memory; at least one byte is allocated, so its
// address is never null. The copy (cudaMemcpy, legacy default stream) may still be in flight on return when the
// host memory is pageable: synchronize before another stream reads the buffer. Errors name the value uploaded.
Result<DeviceBuffer> UploadToDevice(const void* host, size_t bytes, const std::string& name);

// Page-locked host memory (cudaMallocHost) for asynchronous transfers.
class PinnedBuffer {
 public:
  static Result<PinnedBuffer> Allocate(size_t bytes);
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; o.bytes_ = 0; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  ~PinnedBuffer();
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

Status CopyToDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream);
Status CopyToHost(void* dst, const void* src, size_t bytes, cudaStream_t stream);

// y[i] = alpha * x[i] + y[i] on the stream (the first kernel; exercised by the gpu tests).
Status Axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace kiln::cuda
