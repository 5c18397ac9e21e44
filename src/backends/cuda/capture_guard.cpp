// The capture / unsafe-call lock (see capture_guard.h).
#include "backends/cuda/capture_guard.h"

#include <cuda_runtime.h>

#include <shared_mutex>
#include <utility>

#include "backends/cuda/cuda_check.h"

namespace kiln::cuda {
namespace {

std::shared_mutex& Lock() {
  static std::shared_mutex m;
  return m;
}
thread_local int captures_here = 0;  // captures this thread is inside
thread_local int exclusive_here = 0;  // NoCaptureScopes this thread is inside
thread_local bool refused = false;     // a layer refused the running capture
thread_local std::string refusal;

}  // namespace

CaptureScope::CaptureScope() {
  if (captures_here++ == 0 && exclusive_here == 0) {
    Lock().lock_shared();
    locked_ = true;
  }
}
CaptureScope::~CaptureScope() {
  --captures_here;
  if (locked_) Lock().unlock_shared();
}

NoCaptureScope::NoCaptureScope() {
  if (captures_here == 0 && exclusive_here == 0) {
    Lock().lock();
    locked_ = true;
  }
  ++exclusive_here;
}
NoCaptureScope::~NoCaptureScope() {
  --exclusive_here;
  if (locked_) Lock().unlock();
}

Result<bool> IsCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  KILN_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &st));
  return st != cudaStreamCaptureStatusNone;
}

Status RefuseCapture(const std::string& why) {
  refused = true;
  refusal = why;
  return Status(StatusCode::kUnsupported, why + " (so the engine cannot be captured in a CUDA graph)");
}

bool TakeCaptureRefusal(std::string* why) {
  if (!refused) return false;
  refused = false;
  if (why) *why = std::move(refusal);
  refusal.clear();
  return true;
}

}  // namespace kiln::cuda
