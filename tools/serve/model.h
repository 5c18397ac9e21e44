// kiln serve — one loaded model version: its engine (one copy per GPU it runs on), its instances (an execution
// context each, on its own stream on its GPU, with device buffers it keeps between runs), the queue its requests wait
// in, and the dynamic batcher that merges them along the batch dim. Each instance has a worker thread that takes the
// next batch when it is free; the instances of every GPU share the one queue (data parallel).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "infer_types.h"
#include "kiln/backend.h"
#include "kiln/logger.h"
#include "kiln/runtime.h"
#include "model_config.h"

namespace kiln::serve {

// Counters and durations of one model version (Triton's metric set), read by the metrics endpoint.
// Durations are per request, as Triton counts them: a batch's compute time counts once for each request in it.
struct ModelStats {
  std::atomic<uint64_t> request_success{0}, request_failure{0};
  std::atomic<uint64_t> inference_count{0};  // samples run (a batch of 8 counts 8)
  std::atomic<uint64_t> execution_count{0};  // engine runs
  std::atomic<uint64_t> computed{0};         // requests that reached the engine (the compute and queue counts)
  std::atomic<uint64_t> request_us{0}, success_us{0}, fail_us{0}, queue_us{0};
  std::atomic<uint64_t> compute_input_us{0}, compute_infer_us{0}, compute_output_us{0};
  std::atomic<uint64_t> last_inference_ms{0};  // since the epoch
  static constexpr int kBatchBuckets = 12;                 // batch sizes <= 1, 2, 4, ..., 1024, 2048, +Inf
  std::atomic<uint64_t> batch_buckets[kBatchBuckets] = {};  // cumulative counts are built when exposed
  std::atomic<uint64_t> batch_sum{0};
  // Per batch size the engine ran: executions and their input / infer / output microseconds (Triton's batch_stats).
  struct PerBatch {
    uint64_t count = 0, input_us = 0, infer_us = 0, output_us = 0;
  };
  mutable std::mutex batch_mu;
  std::map<int64_t, PerBatch> per_batch;
  void AddBatch(int64_t size);
  void AddExecution(int64_t size, uint64_t input_us, uint64_t infer_us, uint64_t output_us);
  std::map<int64_t, PerBatch> PerBatchCopy() const;
  void Reset();
};

struct Pending;  // a queued request (model.cpp)

class LoadedModel {
 public:
  // Builds or loads the engine (model.engine, or model.onnx built for the instance kind's backend), completes and
  // checks the config, creates the instances and starts their workers.
  static Result<std::unique_ptr<LoadedModel>> Load(const std::string& name, const std::string& version,
                                                   const std::string& version_dir, const std::string& config_text,
                                                   bool have_config, const std::string& default_backend,
                                                   const std::string& timing_cache, size_t max_queue,
                                                   ILogger& logger);
  ~LoadedModel();

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const inference::ModelConfig& config() const { return config_; }
  const ModelMetadata& metadata() const { return metadata_; }
  ModelStats& stats() { return stats_; }
  // Device memory the instances hold (activations and staging buffers), per GPU; empty on a host backend.
  std::map<int, size_t> device_memory_bytes() const;

  // Checks the request against the model, queues it and waits for its answer (or its deadline).
  Outcome Infer(InferRequest request, InferResponse* response);
  // Stops taking requests, answers those still queued after `drain` with 503, and joins the workers.
  void Stop(std::chrono::milliseconds drain);
  size_t in_flight() const { return in_flight_.load(); }

 private:
  struct Instance;
  LoadedModel() = default;
  Outcome Validate(const InferRequest& r, int64_t* batch) const;
  void Worker(Instance* inst);
  std::vector<std::unique_ptr<Pending>> NextBatch(std::unique_lock<std::mutex>& lock);
  void ExpireQueued();
  void RunBatch(Instance* inst, std::vector<std::unique_ptr<Pending>>& batch);
  void RunBatchUnguarded(Instance* inst, std::vector<std::unique_ptr<Pending>>& batch);
  int64_t PaddedBatch(int64_t rows) const;
  Status WarmUp();

  std::string name_, version_;
  inference::ModelConfig config_;
  ModelMetadata metadata_;
  std::vector<std::string> inputs_, outputs_;
  std::map<int, std::unique_ptr<Engine>> engines_;  // one per GPU the instances run on (by device; host: [0])
  const Engine* engine_ = nullptr;                   // the first: what metadata and request checks read
  std::string backend_;
  bool device_memory_ = false;
  ModelStats stats_;
  ILogger* logger_ = nullptr;
  size_t max_queue_ = 4096;
  std::vector<int64_t> buckets_;  // batch sizes a batch is padded to (empty: run as it comes)

  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<std::thread> workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Pending>> queue_;
  bool stopping_ = false;
  std::atomic<size_t> in_flight_{0};
};

}  // namespace kiln::serve
