// cuFFT plan cache of the spectral layers (see fft_plan.h).
#include "backends/cuda/fft_plan.h"

#include <cufft.h>

#include <tuple>

#include "backends/cuda/capture_guard.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

const char* CufftResultName(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "an unknown cufftResult";
  }
}

Status CufftStatus(const std::string& where, cufftResult r, const char* call) {
  if (r == CUFFT_SUCCESS) return Status::Ok();
  return Err(StatusCode::kCudaError, "{}: {} failed: {} ({})", where, call, CufftResultName(r), static_cast<int>(r));
}

}  // namespace

FftPlans::~FftPlans() {
  if (plans_.empty()) return;
  NoCaptureScope no_capture;  // destroying a plan frees device memory, which synchronizes
  int previous = -1;
  cudaGetDevice(&previous);
  int current = previous;
  for (auto& [key, plan] : plans_) {
    const int device = std::get<0>(key);
    if (device >= 0 && device != current && cudaSetDevice(device) == cudaSuccess) current = device;
    cufftDestroy(plan.handle);
  }
  if (previous >= 0 && current != previous) cudaSetDevice(previous);
}

Result<const FftPlans::Plan*> FftPlans::Find(const Key& key, bool may_create) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  }
  const int64_t len = std::get<1>(key), batch = std::get<2>(key);
  const bool f64 = std::get<3>(key);
  if (!may_create)
    return Err(StatusCode::kInternal,
               "{}: no cuFFT plan for {} transforms of {} points was made before this CUDA graph capture (the layer "
               "makes its plans when asked for its workspace size at the launch's shapes)",
               where_, batch, len);
  NoCaptureScope no_capture;  // the capture lock first, then the cache's mutex (capture_guard.h)
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  cufftHandle h = 0;
  KILN_RETURN_IF_ERROR(CufftStatus(where_, cufftCreate(&h), "cufftCreate"));
  Status st = CufftStatus(where_, cufftSetAutoAllocation(h, 0), "cufftSetAutoAllocation");
  long long n = len;
  size_t work = 0;
  if (st.ok())
    st = CufftStatus(where_,
                     cufftMakePlanMany64(h, 1, &n, nullptr, 1, n, nullptr, 1, n, f64 ? CUFFT_Z2Z : CUFFT_C2C,
                                         static_cast<long long>(batch), &work),
                     "cufftMakePlanMany64");
  if (!st.ok()) {
    cufftDestroy(h);
    return st.WithContext(fmt::format("planning {} {} transforms of {} points", batch, f64 ? "double" : "float", len));
  }
  auto [it, inserted] = plans_.emplace(key, Plan{h, work});
  return &it->second;
}

Result<size_t> FftPlans::WorkBytes(int64_t len, int64_t batch, bool f64) const {
  int device = -1;
  cudaGetDevice(&device);
  KILN_ASSIGN_OR_RETURN(const Plan* p, Find(Key{device, len, batch, f64}, true));
  return p->work;
}

Status FftPlans::Exec(int64_t len, int64_t batch, bool f64, bool inverse, void* data, void* work, size_t work_bytes,
                      cudaStream_t stream) const {
  if (len <= 0 || batch <= 0) return Status::Ok();
  int device = -1;
  cudaGetDevice(&device);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) capture = cudaStreamCaptureStatusActive;
  KILN_ASSIGN_OR_RETURN(const Plan* p, Find(Key{device, len, batch, f64}, capture == cudaStreamCaptureStatusNone));
  if (p->work > 0 && (work == nullptr || p->work > work_bytes))
    return Err(StatusCode::kInternal, "{}: the cuFFT plan needs {} bytes of work area, {} were given", where_, p->work,
               work_bytes);
  // The plan's stream and work area are its own state: set and used under the mutex (contexts share the layer).
  std::lock_guard<std::mutex> lock(mu_);
  KILN_RETURN_IF_ERROR(CufftStatus(where_, cufftSetStream(p->handle, stream), "cufftSetStream"));
  if (p->work > 0) KILN_RETURN_IF_ERROR(CufftStatus(where_, cufftSetWorkArea(p->handle, work), "cufftSetWorkArea"));
  const int direction = inverse ? CUFFT_INVERSE : CUFFT_FORWARD;
  if (f64) {
    auto* z = static_cast<cufftDoubleComplex*>(data);
    return CufftStatus(where_, cufftExecZ2Z(p->handle, z, z, direction), "cufftExecZ2Z");
  }
  auto* c = static_cast<cufftComplex*>(data);
  return CufftStatus(where_, cufftExecC2C(p->handle, c, c, direction), "cufftExecC2C");
}

}  // namespace kiln::cuda
