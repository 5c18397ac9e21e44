// CUDA graph capture against the host calls that must not run while another thread captures. cudaFree and
// cudaFreeHost synchronize the device, and creating cuDNN / cuBLASLt handles may allocate and synchronize; any of
// them in one thread during another thread's capture invalidates that capture (seen as a cuBLASLt launch failure
// in the next captured layer). A process-wide reader/writer lock keeps them apart: captures hold it shared (several
// contexts may capture at once), those calls hold it exclusively. A thread that is capturing, or already holds it
// exclusively, does not take it again (an unsafe call inside a capture is an error CUDA reports, not a deadlock).
// Lock order: this lock first, then a layer's own mutex (conv plan caches), then cuDNN's build mutex. So a
// NoCaptureScope is taken around whole steps (engine creation, a context's plan building), never inside code that
// already holds one of the others.
#pragma once

#include <string>

#include "kiln/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace kiln::cuda {

// Held around cudaStreamBeginCapture .. cudaStreamEndCapture.
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  bool locked_ = false;
};

// Held around a call that must not overlap any capture (allocation, free, handle creation).
class NoCaptureScope {
 public:
  NoCaptureScope();
  ~NoCaptureScope();
  NoCaptureScope(const NoCaptureScope&) = delete;
  NoCaptureScope& operator=(const NoCaptureScope&) = delete;

 private:
  bool locked_ = false;
};

// Layers that must wait for the device on the host while they run (an If reads its condition, a Loop its trip count
// or its condition each iteration) cannot be captured in a CUDA graph. Such a layer asks IsCapturing(stream) first
// and, when it is, returns RefuseCapture(why): the engine then ends the capture and runs that launch plan without a
// CUDA graph (TakeCaptureRefusal tells it why).
Result<bool> IsCapturing(cudaStream_t stream);
Status RefuseCapture(const std::string& why);
// Whether a layer refused the capture that just ended on this thread (and why); clears the refusal.
bool TakeCaptureRefusal(std::string* why);

}  // namespace kiln::cuda
