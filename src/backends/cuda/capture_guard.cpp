// The capture / unsafe-call lock (see capture_guard.h).
#include "backends/cuda/capture_guard.h"

#include <shared_mutex>

namespace kiln::cuda {
namespace {

std::shared_mutex& Lock() {
  static std::shared_mutex m;
  return m;
}
thread_local int captures_here = 0;  // captures this thread is inside
thread_local int exclusive_here = 0;  // NoCaptureScopes this thread is inside

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

}  // namespace kiln::cuda
