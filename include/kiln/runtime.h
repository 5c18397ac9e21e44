// kiln — the runtime: engines from serialized bytes, and execution contexts that run them.
//
// An Engine is immutable and shared; each ExecutionContext holds the activation memory of one in-flight
// inference. Several contexts of one engine may run at once from different threads; one context must be used
// by one thread at a time.
//
// Devices (backends with device memory, kiln/backend.h): as in TensorRT, an engine belongs to the device that was
// the calling thread's current device when it was deserialized (SetDevice chooses it). Its weights and every
// context's memory live there. Unlike TensorRT, a context need not be used from a thread with that device current:
// createExecutionContext, enqueue and the destructors switch the calling thread to the engine's device for the call
// and restore the thread's device afterwards. The tensors bound with setTensorAddress and the stream given to enqueue
// must be of the engine's device (allocate them with that device current). For several GPUs (data parallel),
// deserialize the same bytes once per device, each with that device current.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/logger.h"
#include "kiln/profiler.h"
#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

class EngineImpl;
class ExecutionContextImpl;
class ExecutionContext;

class Engine {
 public:
  ~Engine();
  int getNbIOTensors() const;
  std::string getIOTensorName(int index) const;  // inputs first, then outputs
  TensorIOMode getTensorIOMode(const std::string& name) const;
  DataType getTensorDataType(const std::string& name) const;
  Dims getTensorShape(const std::string& name) const;  // -1 for dynamic dims
  int getNbOptimizationProfiles() const;
  Dims getProfileShape(const std::string& input, int profile, ProfileSelector which) const;
  // Bytes of activation memory one context needs (the memory plan's arena at the profiles' largest shapes).
  size_t getDeviceMemorySize() const;
  int getNbLayers() const;
  // The auxiliary streams the engine runs layers on besides the caller's stream (BuilderConfig::setMaxAuxStreams).
  int getNbAuxStreams() const;
  std::string getBackend() const;
  // The device the engine was deserialized (or built) on and its contexts run on; 0 on a host backend.
  int getDevice() const;
  // A JSON description of the layers, as much as the engine's profiling verbosity allows: none, name and op type
  // (kLayerNamesOnly, the default), or also precision, tactic, inputs and outputs (kDetailed).
  std::string getLayerInformationJson() const;
  std::string getBuildReportJson() const;
  Result<std::unique_ptr<ExecutionContext>> createExecutionContext() const;

  explicit Engine(std::unique_ptr<EngineImpl> impl);

 private:
  friend const EngineImpl& ImplOf(const Engine& engine);  // the library's access (internal)
  std::unique_ptr<EngineImpl> impl_;
};

class ExecutionContext {
 public:
  ~ExecutionContext();
  Status setOptimizationProfile(int index);
  int getOptimizationProfile() const;
  // Sets a dynamic input's shape; fails naming the input and the profile's allowed range when outside it.
  Status setInputShape(const std::string& name, const Dims& dims);
  // Shape of an input or output at the current input shapes (outputs whose size depends on data: after enqueue).
  Result<Dims> getTensorShape(const std::string& name) const;
  // Where a tensor lives (host memory for the cpu backend, device memory for cuda). Outputs must have room for
  // getTensorShape(name) elements.
  Status setTensorAddress(const std::string& name, void* data);
  // Runs the network on `stream` (nullptr: the cpu backend runs synchronously on the calling thread; on cuda,
  // nullptr is the default stream). On cuda, tensor addresses are device memory, enqueue does not wait for the
  // GPU, and the first enqueue at new input shapes prepares a launch plan (host work, small uploads). The work runs
  // on the engine's device (Engine::getDevice) whichever device the calling thread has current; the stream and
  // the bound tensors must be of that device.
  Status enqueue(void* stream = nullptr);
  // After enqueue: an output as the context holds it (valid until the next enqueue). Outputs whose size
  // depends on data (NonZero, NonMaxSuppression) are read this way; their shape is getTensorShape(name).
  Result<const void*> getOutputBuffer(const std::string& name) const;
  void setProfiler(IProfiler* profiler);
  // cuda: capture the engine's launches into a CUDA graph on the first enqueue and replay it on later ones;
  // a change of input shapes, tensor addresses or stream captures again. Ignored on the cpu backend.
  void setUseCudaGraph(bool on);
  // cuda, engines with auxiliary streams (Engine::getNbAuxStreams): the streams later enqueues launch the auxiliary
  // streams' layers on (cudaStream_t, of the engine's device), as TensorRT's setAuxStreams. Without it (or for the
  // ones past `count`) the context uses streams it creates; extra ones are not used. Either way every enqueue makes
  // them wait for the enqueue's stream at its start and the enqueue's stream wait for them at its end.
  Status setAuxStreams(void* const* streams, int count);

  explicit ExecutionContext(std::unique_ptr<ExecutionContextImpl> impl);

 private:
  std::unique_ptr<ExecutionContextImpl> impl_;
};

// What an engine file's fixed header says: for tools that describe an engine before (or without) loading it.
struct EngineFileInfo {
  uint32_t format_version = 0;
  std::string kiln_version;        // of the kiln that built it
  std::string backend;             // the backend it was built for
  std::string device_name;         // the GPU it was built on; empty for a host backend
  int32_t compute_capability = 0;  // major*10 + minor; 0 for a host backend
  uint64_t size_bytes = 0;
};

// Reads an engine file's header (magic, format version, size and layout are checked; not the checksum, and not
// whether this process can run it: Runtime::deserializeEngine does that).
Result<EngineFileInfo> ReadEngineFileInfo(const void* data, size_t size);

class Runtime {
 public:
  explicit Runtime(ILogger& logger) : logger_(logger) {}
  // Checks the header (format version, backend, GPU architecture, size, checksum) and fails with a sentence
  // that says what does not match and what to do. The engine belongs to the calling thread's current device (the
  // header is checked against that one).
  Result<std::unique_ptr<Engine>> deserializeEngine(const void* data, size_t size) const;
  Result<std::unique_ptr<Engine>> loadEngineFile(const std::string& path) const;

 private:
  ILogger& logger_;
};

}  // namespace kiln
