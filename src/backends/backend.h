// The backend interface: what the builder, the runtime and the debug API ask of a backend, and all they may ask.
// A backend says whether it can run here, which builder settings it takes, chooses a kernel ("tactic") per node
// (timing candidates on the device where it has several), creates the engine's state when the engine is first used
// (layers and weights on the device), creates one state per execution context (activation memory, launch plans),
// and enqueues on a stream with the caller's addresses and shapes. Backends whose tensors live in device memory
// also lend their memory, streams and events (DeviceApi) for the bindings of the runtime and the tools.
//
// Backends are found by name through backends/factory.h; nothing outside src/backends/ and the factory branches on
// a backend's name. Builder settings a backend takes are described by BackendTraits, not by its name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/logger.h"
#include "kiln/onnx_value.h"
#include "kiln/profiler.h"
#include "plan/memory_plan.h"

namespace kiln {

// BuilderConfig's default cap on one tensor's elements (2^35).
inline constexpr int64_t kDefaultMaxTensorElements = int64_t{1} << 35;

// One optimization profile: per dynamic input, {min, opt, max}.
using ProfileShapes = std::map<std::string, std::vector<Dims>>;

// What a backend reads of an engine: the optimized graph and what the builder decided for it. The runtime's engine
// owns it; every backend engine and context made from it lives within that engine's lifetime.
class EngineDesc {
 public:
  std::unique_ptr<Graph> graph;         // the optimized graph, nodes in execution order
  std::vector<ProfileShapes> profiles;  // at least one (empty maps for fully static networks)
  MemoryPlan plan;                      // at the profiles' largest shapes
  std::unordered_map<std::string, const BufferPlan*> plan_by_name;
  std::vector<std::string> tactics;  // per node, the kernel chosen
  // Auxiliary streams (plan/streams.h): per node, the stream it runs on (empty: all on the main stream), and how many
  // streams the engine uses, the main one included.
  std::vector<int32_t> streams;
  int32_t num_streams = 1;
  // Per-shape tactics (dynamic profiles): input shapes of the first profile other than its opt shapes, and per node
  // (empty: none) the tactics chosen for some of them, as (point index, tactic). Such a node's layer is also created
  // at that point's shapes with that tactic, and runs it at input shapes nearer that point than the opt shapes or
  // any other point.
  std::vector<std::map<std::string, Dims>> tactic_points;
  std::vector<std::vector<std::pair<int32_t, std::string>>> tactic_variants;
  bool allow_tf32 = true;
  // The most elements one tensor may hold (BuilderConfig::setMaxTensorElements): outputs whose size depends on
  // data are checked against it at run time.
  int64_t max_tensor_elements = kDefaultMaxTensorElements;

  // The graph inferred at the first profile's opt shapes (the shapes layers are tuned and created for), node for
  // node the same as `graph`; computed on first use and kept.
  virtual Result<std::shared_ptr<const Graph>> TuningGraph() const = 0;
  // The graph inferred at other input shapes (node for node the same as `graph`), for tuning across a profile.
  virtual Result<std::shared_ptr<const Graph>> GraphAtShapes(const std::map<std::string, Dims>& shapes) const = 0;

 protected:
  ~EngineDesc() = default;
};

// The engine graph inferred at a context's current input shapes (shape subgraphs folded), and a key naming them.
struct ShapedGraph {
  std::shared_ptr<const Graph> graph;
  std::string key;
};

// One enqueue of a context: every graph input has its shape (the runtime checked them against the profile).
struct EnqueueArgs {
  void* stream = nullptr;                           // the backend's stream (nullptr: its default)
  const std::map<std::string, Dims>& input_shapes;  // by graph input name
  const std::map<std::string, void*>& addresses;    // the caller's tensor addresses, by I/O name
  IProfiler* profiler = nullptr;                    // per-layer times, when set
  bool capture_graph = false;                       // capture the launches once and replay them (setUseCudaGraph)
  // The graph at input_shapes; computed on first use per set of shapes (backends that need it call it).
  std::function<Result<ShapedGraph>()> shaped_graph;
  // Name each layer's work for profilers (NVTX ranges on the CUDA backend): engines built with detailed profiling
  // verbosity.
  bool annotate_layers = false;
  // The caller's streams for an engine's auxiliary streams (ExecutionContext::setAuxStreams), in order; streams past
  // its end are the context's own.
  const std::vector<void*>* aux_streams = nullptr;
};

// One execution context's backend state: its activation memory and whatever it prepares per set of shapes.
class BackendContext {
 public:
  virtual ~BackendContext() = default;
  virtual Status Enqueue(const EnqueueArgs& args) = 0;
  // After Enqueue: where output `name` is (the bytes the context keeps, or the caller's bound address).
  virtual Result<const void*> OutputBuffer(const std::string& name,
                                           const std::map<std::string, void*>& addresses) const = 0;
  // The shape of output `name` as the last Enqueue produced it, where the context keeps its outputs (outputs whose
  // size depends on data are known only then); nullopt otherwise.
  virtual std::optional<Dims> LastOutputShape(const std::string& name) const { return std::nullopt; }
};

// What every context of one engine shares (layers and weights on the device).
class BackendEngine {
 public:
  virtual ~BackendEngine() = default;
  virtual Result<std::unique_ptr<BackendContext>> CreateContext() const = 0;
};

// Builder steps a backend takes part in.
struct BackendTraits {
  bool reduced_precision = false;  // FP16/BF16 layers, per-layer precisions, I/O types (precision planning runs)
  bool channels_last = false;      // NHWC convolutions (layout planning runs)
  bool tunes_tactics = false;      // times candidate kernels on the device (timing cache, --avgTiming)
  bool graph_capture = false;      // contexts can capture and replay their launches (setUseCudaGraph)
  bool concurrent_streams = false; // layers may run on auxiliary streams beside the main one (setMaxAuxStreams)
};

// The device an engine is built for and must be loaded on (engine headers and their compatibility check).
struct DeviceTarget {
  std::string device_name;         // empty for a host backend
  int32_t compute_capability = 0;  // major*10 + minor; 0 for a host backend
  uint32_t cuda_version = 0, cublas_version = 0, cudnn_version = 0;
  uint64_t memory_bytes = 0;       // the memory activations live in: the GPU's, or the host's physical memory
};

struct BuildRequest {
  const EngineDesc& engine;  // graph optimized and planned; tactics not chosen yet
  const BuilderConfig& config;
  BuildReport& report;
  ILogger& logger;
  // Where a backend that chooses per-shape tactics writes them (EngineDesc::tactic_points / tactic_variants).
  std::vector<std::map<std::string, Dims>>* tactic_points = nullptr;
  std::vector<std::vector<std::pair<int32_t, std::string>>>* tactic_variants = nullptr;
};

// Node-by-node runs without an engine (tests, conformance, compare --markAll).
struct GraphRunOptions {
  bool keep_all = false;                       // return every intermediate value too
  std::map<std::string, std::string> tactics;  // node name -> tactic (default: the backend's first)
  bool allow_tf32 = true;
  // Called with a host copy of every float value as it is computed (graph inputs first, then each node's outputs in
  // node order; calibration reads them this way instead of keeping them all). An error stops the run.
  std::function<Status(const std::string& name, const Tensor& host)> observe_float;
};

// Memory, streams and events of a backend whose tensors live in device memory. Streams and events are the
// backend's own handles (cudaStream_t, cudaEvent_t); nullptr is the default stream. Like CUDA itself, everything
// here works on the calling thread's current device (CurrentDevice; SetCurrentDevice changes it for the thread).
class DeviceApi {
 public:
  enum class Memory { kDevice, kPinnedHost };  // page-locked host memory, for asynchronous copies
  enum class Direction { kToDevice, kToHost };
  virtual ~DeviceApi() = default;
  // The devices this process sees (0 where there is none), and the calling thread's current one.
  virtual int DeviceCount() const = 0;
  virtual Result<int> CurrentDevice() const = 0;
  // Makes `device` current for the calling thread; an error naming the device and the count where it does not exist.
  virtual Status SetCurrentDevice(int device) const = 0;
  virtual Result<void*> Allocate(size_t bytes, Memory kind) const = 0;  // at least one byte: never null
  virtual void Free(void* p, Memory kind) const = 0;
  virtual Status Copy(void* dst, const void* src, size_t bytes, Direction dir, void* stream) const = 0;
  virtual Result<void*> CreateStream() const = 0;
  virtual void DestroyStream(void* stream) const = 0;
  virtual Status Synchronize(void* stream) const = 0;  // nullptr: every stream of the device
  virtual Result<void*> CreateEvent() const = 0;
  virtual void DestroyEvent(void* event) const = 0;
  virtual Status RecordEvent(void* event, void* stream) const = 0;
  // Waits for `end`, then the milliseconds between the two recorded events.
  virtual Result<float> ElapsedMs(void* start, void* end) const = 0;
  // Page-locks host memory allocated elsewhere (an mmap, a shared-memory region) so that copies from and to it are
  // DMA, as with Memory::kPinnedHost; UnregisterHost undoes it before that memory is freed or unmapped.
  virtual Status RegisterHost(void* p, size_t bytes) const = 0;
  virtual Status UnregisterHost(void* p) const = 0;
};

// Makes `device` the calling thread's current device for the scope's lifetime and then restores the one before.
// Nothing is switched where it is current already, or for a host backend (api == nullptr). Check status() before
// the work that needs the device.
class ScopedDevice {
 public:
  ScopedDevice(const DeviceApi* api, int device) {
    if (!api || device < 0) return;
    Result<int> current = api->CurrentDevice();
    if (!current.ok()) {
      status_ = current.status();
      return;
    }
    if (*current == device) return;
    status_ = api->SetCurrentDevice(device);
    if (status_.ok()) {
      api_ = api;
      previous_ = *current;
    }
  }
  ~ScopedDevice() {
    if (api_) (void)api_->SetCurrentDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  const Status& status() const { return status_; }

 private:
  const DeviceApi* api_ = nullptr;  // set where the device was switched (and is restored)
  int previous_ = -1;
  Status status_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu", "cuda": what --backend and engine files call it.
  virtual std::string_view Name() const = 0;
  // Ok where it can run on this machine; otherwise a sentence that says why not and what to do.
  virtual Status CheckAvailable() const = 0;
  // The device it runs on ("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)").
  virtual std::string Description() const = 0;
  virtual BackendTraits Traits() const = 0;
  // Device memory, streams and events; nullptr where tensors live in host memory (enqueue then computes on the
  // calling thread, takes no stream, and the context keeps its outputs).
  virtual const DeviceApi* Device() const = 0;

  // ---- build ----
  // Checks the config's precision flags and per-layer settings against what the backend computes.
  virtual Status CheckConfig(const BuilderConfig& config) const = 0;
  // Whether the backend's kernel for `n` computes in float type `t` (kernels declare the types they take); the
  // precision planner keeps a node float32 where its kernel takes no reduced type. Nodes without a kernel: true
  // (ChooseTactics reports them).
  virtual bool ComputesIn(const Node& n, DataType t) const = 0;
  // Whether the backend has a kernel for an op (its qualified name: "Conv", "kiln.QConv").
  virtual bool HasKernel(const std::string& qualified_op) const = 0;
  // Whether the optimizer should create this node for the backend: it has a kernel for it, and one at least as fast
  // as the unfused nodes it replaces (a backend may keep a kernel as a reference only, or for some shapes).
  virtual bool Prefers(const Node& candidate) const = 0;
  // One tactic per node of request.engine.graph. Fails with one report listing every node the backend cannot run.
  virtual Result<std::vector<std::string>> ChooseTactics(const BuildRequest& request) const = 0;
  // The device engines are built for here (written into engine headers, checked when they load).
  virtual Result<DeviceTarget> Target() const = 0;

  // ---- run ----
  // The state every context of `engine` shares; made when the engine's first context is.
  virtual Result<std::shared_ptr<BackendEngine>> CreateEngine(const EngineDesc& engine) const = 0;
  // Runs `g` node by node on host `inputs` (named like the graph inputs); returns host copies of the outputs.
  virtual Result<std::map<std::string, Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                         const GraphRunOptions& options) const = 0;
  // RunGraph for graphs whose inputs or outputs are sequences or optionals (ONNX node tests of the sequence ops);
  // every input and output as an OnnxValue. Backends without them refuse.
  virtual Result<std::map<std::string, OnnxValue>> RunGraphValues(const Graph& g,
                                                                  const std::map<std::string, OnnxValue>& inputs,
                                                                  const GraphRunOptions& options) const {
    return Status(StatusCode::kUnsupported, "the " + std::string(Name()) + " backend runs tensors only: run "
                  "sequences and optionals on the reference backend (cpu)");
  }
};

}  // namespace kiln
