// Device memory, streams and events of the CUDA backend for bindings (backends/backend.h: DeviceApi). Frees and
// handle-creating calls stay out of other threads' CUDA graph captures (capture_guard.h).
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/capture_guard.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"

namespace kiln::cuda {

namespace {

class CudaDeviceApiImpl final : public DeviceApi {
 public:
  int DeviceCount() const override { return cuda::DeviceCount(); }

  Result<int> CurrentDevice() const override { return cuda::CurrentDevice(); }

  Status SetCurrentDevice(int device) const override { return cuda::SetDevice(device); }

  Result<void*> Allocate(size_t bytes, Memory kind) const override {
    bytes = std::max<size_t>(bytes, 1);
    void* p = nullptr;
    NoCaptureScope no_capture;
    const bool device = kind == Memory::kDevice;
    Status st = device ? KILN_CUDA_STATUS(cudaMalloc(&p, bytes)) : KILN_CUDA_STATUS(cudaMallocHost(&p, bytes));
    if (!st.ok()) {
      cudaGetLastError();
      return st.WithContext(fmt::format("allocating {} bytes of {} memory", bytes, device ? "device" : "pinned host"));
    }
    return p;
  }

  void Free(void* p, Memory kind) const override {
    if (!p) return;
    NoCaptureScope no_capture;  // cudaFree and cudaFreeHost synchronize the device
    if (kind == Memory::kDevice)
      cudaFree(p);
    else
      cudaFreeHost(p);
  }

  Status Copy(void* dst, const void* src, size_t bytes, Direction dir, void* stream) const override {
    if (bytes == 0) return Status::Ok();
    const cudaMemcpyKind k = dir == Direction::kToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    return KILN_CUDA_STATUS(cudaMemcpyAsync(dst, src, bytes, k, static_cast<cudaStream_t>(stream)));
  }

  Result<void*> CreateStream() const override {
    cudaStream_t s = nullptr;
    KILN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return static_cast<void*>(s);
  }

  void DestroyStream(void* stream) const override {
    if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }

  Status Synchronize(void* stream) const override {
    if (!stream) return KILN_CUDA_STATUS(cudaDeviceSynchronize());
    return KILN_CUDA_STATUS(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  }

  Result<void*> CreateEvent() const override {
    cudaEvent_t e = nullptr;
    KILN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    return static_cast<void*>(e);
  }

  void DestroyEvent(void* event) const override {
    if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }

  Status RecordEvent(void* event, void* stream) const override {
    return KILN_CUDA_STATUS(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  }

  // Portable: pinned for every device's context, not only the current one's.
  Status RegisterHost(void* p, size_t bytes) const override {
    NoCaptureScope no_capture;
    Status st = KILN_CUDA_STATUS(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
    if (!st.ok()) {
      cudaGetLastError();
      return st.WithContext(fmt::format("page-locking {} bytes of host memory at {}", bytes, p));
    }
    return st;
  }

  Status UnregisterHost(void* p) const override {
    NoCaptureScope no_capture;
    Status st = KILN_CUDA_STATUS(cudaHostUnregister(p));
    if (!st.ok()) cudaGetLastError();
    return st;
  }

  Result<float> ElapsedMs(void* start, void* end) const override {
    KILN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(end)));
    float ms = 0;
    KILN_CUDA_RETURN_IF_ERROR(
        cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
    return ms;
  }
};

}  // namespace

const DeviceApi& CudaDeviceApi() {
  static const CudaDeviceApiImpl api;
  return api;
}

}  // namespace kiln::cuda
