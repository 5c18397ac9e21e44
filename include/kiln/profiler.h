// kiln — per-layer profiling. Set an IProfiler on an ExecutionContext; after each enqueue it receives one call per
// layer, in execution order, with that layer's time.
#pragma once

namespace kiln {

class IProfiler {
 public:
  virtual ~IProfiler() = default;
  virtual void reportLayerTime(const char* layer_name, float ms) noexcept = 0;
};

}  // namespace kiln
