// What an Engine holds once built or loaded, and what one ExecutionContext holds while it runs. The backend's side
// of each is opaque here (backends/backend.h): an engine holds its backend's engine state, a context its backend's
// context state.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "plan/memory_plan.h"

namespace kiln {

class EngineImpl final : public EngineDesc {
 public:
  const Backend* backend = nullptr;  // found through backends/factory.h at build or load; never null after
  // The device its backend state lives on (backends with device memory): the calling thread's current device when
  // the engine was built or deserialized. Its contexts are created, run and destroyed there (DeviceScope).
  int device = 0;
  std::string build_report_json;
  uint64_t build_flags = 0;  // EngineBuildFlag bits (engine/engine_file.h)
  ProfilingVerbosity profiling_verbosity = ProfilingVerbosity::kDetailed;  // what getLayerInformationJson tells

  void Index();  // fills plan_by_name
  const Value* FindIO(const std::string& name) const;
  Result<std::shared_ptr<const Graph>> TuningGraph() const override;
  Result<std::shared_ptr<const Graph>> GraphAtShapes(const std::map<std::string, Dims>& shapes) const override;
  // The backend's engine state, created with the first context (a context may need the device).
  Result<const BackendEngine*> State() const;
  // Makes the engine's device current for the calling thread while it lives (and restores the one before).
  ScopedDevice DeviceScope() const { return ScopedDevice(backend ? backend->Device() : nullptr, device); }
  ~EngineImpl();  // frees the backend state on the engine's device

 private:
  mutable std::mutex tuning_mu_, state_mu_;
  mutable std::shared_ptr<const Graph> tuning_graph_;
  mutable std::shared_ptr<BackendEngine> state_;
};

class ExecutionContextImpl {
 public:
  explicit ExecutionContextImpl(const EngineImpl& e);
  ~ExecutionContextImpl();  // frees the backend's context on the engine's device
  const EngineImpl& engine;
  int profile = 0;
  std::map<std::string, Dims> input_shapes;   // set by setInputShape (static inputs are filled in at start)
  std::map<std::string, void*> addresses;     // caller-bound tensors
  IProfiler* profiler = nullptr;
  bool capture_graph = false;                 // setUseCudaGraph
  std::vector<void*> aux_streams;             // setAuxStreams
  std::unique_ptr<BackendContext> backend;    // made by Init (or the first enqueue)

  // Creates the backend's context state (and the engine's, with the engine's first context), on the engine's device.
  Status Init();
  // The status of a switch to the engine's device, with what failed where it did.
  Status EnterDevice(const ScopedDevice& on) const;
  // The shape set for graph input `in`; an error where a dynamic input has none yet.
  Result<const Dims*> InputShape(const Value& in) const;
  // Output shapes at the current input shapes (cached per input-shape key).
  Result<std::map<std::string, Dims>> OutputShapes();
  // The engine graph inferred at the current input shapes (shape subgraphs folded), and its key.
  Result<ShapedGraph> Shaped();

 private:
  std::string cached_key_;
  std::map<std::string, Dims> cached_shapes_;
  std::shared_ptr<const Graph> cached_graph_;
};

// The EngineImpl behind an Engine (the public header declares this accessor as a friend, nothing more).
const EngineImpl& ImplOf(const Engine& engine);

// The graph inferred (and folded) at the given input shapes; inputs not named keep their shapes.
Result<std::shared_ptr<Graph>> InferAtShapes(const Graph& g, const std::map<std::string, Dims>& shapes);

}  // namespace kiln
