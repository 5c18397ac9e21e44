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

}  // namespace

CaptureScope::CaptureScope() {
  if (captures_here++ == 0) Lock().lock_shared();
}
CaptureScope::~CaptureScope() {
  if (--captures_here == 0) Lock().unlock_shared();
}

NoCaptureScope::NoCaptureScope() {
  if (captures_here > 0) return;
  Lock().lock();
  locked_ = true;
}
NoCaptureScope::~NoCaptureScope() {
  if (locked_) Lock().unlock();
}

}  // namespace kiln::cuda
