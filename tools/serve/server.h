// kiln serve — the server core the protocol front ends (http_server.cpp, grpc_server.cpp) call: a model repository
// in Triton's layout, models loaded into instances (execution contexts on their own streams), a dynamic batcher per
// model, and the metrics. Thread-safe: every call may come from any front-end thread at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "infer_types.h"
#include "kiln/logger.h"

namespace kiln::serve {

struct ServerOptions {
  std::string model_repository;
  // "none": every model of the repository is loaded at start and stays; "explicit": only those named in
  // load_models (or "*" for all) are, and the repository API loads and unloads (Triton's --model-control-mode).
  std::string model_control_mode = "none";
  std::vector<std::string> load_models;
  std::string backend;                   // "" = the default (cuda where a GPU is found, else cpu)
  std::string timing_cache;              // where ONNX models' builds keep their timing cache ("" = none)
  std::chrono::microseconds request_timeout{0};  // 0 = none
  size_t max_queue_size = 4096;          // requests waiting per model; more are refused with 503
  int log_verbose = 0;
  bool strict_model_config = false;      // a config.pbtxt is required (no auto-complete from the engine)
  // Clients may register shared-memory regions and name them in requests (tritonserver's --allow-client-shm; off by
  // default, as there: a client that can reach the server can then have it map any shared-memory object it may open).
  bool allow_client_shm = false;
};

struct SharedMemoryRegionStatus;  // shared_memory.h

// Triton's statistics extension: per model version, request counts and cumulative durations (ns), and per batch size
// the engine ran, its executions and their compute durations.
struct DurationStat {
  uint64_t count = 0, ns = 0;
};
struct BatchStatistics {
  int64_t batch_size = 0;
  DurationStat compute_input, compute_infer, compute_output;
};
struct ModelStatisticsData {
  std::string name, version;
  uint64_t last_inference_ms = 0, inference_count = 0, execution_count = 0;
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::vector<BatchStatistics> batches;
};

struct RepositoryEntry {
  std::string name, version, state, reason;  // state: READY, UNAVAILABLE, LOADING, UNLOADING
};

class ServerImpl;

class Server {
 public:
  // Loads the repository's models as the control mode says; a model that fails to load is UNAVAILABLE with its
  // reason (the server starts anyway, as Triton's does with --exit-on-error=false), unless `exit_on_error`.
  static Result<std::unique_ptr<Server>> Create(const ServerOptions& options, ILogger& logger,
                                                bool exit_on_error = true);
  ~Server();

  bool Live() const;
  bool Ready() const;  // live, not shutting down, and every model that should be loaded is READY
  std::string Name() const { return "kiln"; }
  std::string Version() const;
  std::vector<std::string> Extensions() const;

  // version "" = the model's latest ready version.
  Outcome ModelReady(const std::string& model, const std::string& version) const;
  Outcome Metadata(const std::string& model, const std::string& version, ModelMetadata* out) const;
  // The model's configuration, Triton's ModelConfig as JSON (what GET /v2/models/{m}/config returns) and as the
  // serialized inference.ModelConfig protobuf (gRPC ModelConfig).
  Outcome ConfigJson(const std::string& model, const std::string& version, std::string* json) const;
  Outcome ConfigProto(const std::string& model, const std::string& version, std::string* serialized) const;

  // Runs one request (blocking the calling thread until it is answered): validated against the model, queued,
  // batched with others where the model batches, run on a free instance, and split back.
  Outcome Infer(InferRequest request, InferResponse* response);

  // model "" = every loaded model; version "" = every loaded version of it.
  Outcome Statistics(const std::string& model, const std::string& version,
                     std::vector<ModelStatisticsData>* out) const;

  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const;
  Outcome LoadModel(const std::string& model);
  Outcome UnloadModel(const std::string& model);

  // Triton's system shared memory extension: regions are shared-memory objects (shm_open keys) a client registers by
  // name; an input or output that names one (shared_memory_region, _offset, _byte_size) is read from or written to it.
  // name "" = every region (status, unregister). Register and unregister answer 501 unless allow_client_shm.
  Outcome RegisterSystemSharedMemory(const std::string& name, const std::string& key, uint64_t offset,
                                     uint64_t byte_size);
  Outcome UnregisterSystemSharedMemory(const std::string& name);
  Outcome SystemSharedMemoryStatus(const std::string& name, std::vector<SharedMemoryRegionStatus>* out) const;
  // Triton's CUDA shared memory extension is not supported: no region is ever registered (status lists none; a name
  // is 404), unregister has nothing to do, register answers 400.
  Outcome RegisterCudaSharedMemory(const std::string& name);
  Outcome UnregisterCudaSharedMemory(const std::string& name);
  Outcome CudaSharedMemoryStatus(const std::string& name) const;

  // Prometheus text exposition of every model's counters, durations and batch sizes, and device memory.
  std::string MetricsText() const;

  // Stops taking requests (new ones get 503), waits for those queued or running to finish (at most `drain`), then
  // unloads everything.
  void Shutdown(std::chrono::milliseconds drain);

 private:
  explicit Server(std::unique_ptr<ServerImpl> impl);
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace kiln::serve
