// The CUDA backend's engine executor. A GpuEngine holds what every context of an engine shares: one Layer per
// node (created from the engine's tactics) and the weights in device memory, uploaded once. A GpuContext holds
// one in-flight inference's memory (the activation arena laid out by the memory plan, kernel workspace) and,
// per set of input shapes, a launch plan: every layer's input and output addresses and shapes, resolved once,
// so that enqueue is a loop of kernel launches with no host work, no allocation and no synchronization. With
// CUDA graphs on, the launches are captured once per (shapes, addresses, stream) and replayed. Engines with auxiliary
// streams (plan/streams.h) launch each layer on its stream, with the schedule's events between streams; each
// auxiliary stream has its own workspace, host scratch and library handles.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"
#include "backends/cuda/layer.h"
#include "ir/graph.h"
#include "kiln/profiler.h"
#include "plan/memory_plan.h"
#include "plan/streams.h"

typedef struct CUevent_st* cudaEvent_t;

namespace kiln::cuda {

// Per-shape tactics of an engine (EngineDesc::tactic_points / tactic_variants) and what creating their layers needs.
struct LayerVariants {
  std::map<std::string, Dims> opt;                  // the first profile's opt shapes (the main layers')
  std::vector<std::map<std::string, Dims>> points;  // the points' input shapes
  std::vector<std::shared_ptr<const Graph>> graphs;  // the engine graph inferred at each point
  std::vector<std::vector<std::pair<int32_t, std::string>>> variants;  // per node: (point, tactic)
};

class GpuEngine {
 public:
  // `tuned` is the engine graph inferred at the shapes the layers are tuned for (the first profile's opt shapes),
  // node for node the same as `g`.
  // `streams`: per node, the stream it runs on (empty: every node on the main stream); `num_streams` counts the main one.
  static Result<std::unique_ptr<GpuEngine>> Create(const Graph& g, const Graph& tuned,
                                                   const std::vector<std::string>& tactics, bool allow_tf32,
                                                   const std::vector<int32_t>& streams = {}, int32_t num_streams = 1,
                                                   const LayerVariants* variants = nullptr);
  const Graph& graph() const { return *graph_; }
  // Node k's layer, or its per-shape one made at `point` where it has one.
  const Layer* layer(size_t k, int32_t point = -1) const;
  // The per-shape tactics' point nearest to a graph's input shapes (log distance over their dims), or -1 where the
  // opt shapes are at least as near (or the engine has none).
  int32_t NearestPoint(const Graph& shaped) const;
  int variant_layers() const { return variant_count_; }
  // Device copy of a constant value (by name), or nullptr.
  void* weight(const std::string& name) const;
  size_t weight_bytes() const { return weight_bytes_; }
  // The engine's streams and the events between them; null where every layer runs on the main stream.
  const StreamSchedule* schedule() const { return schedule_ ? &*schedule_ : nullptr; }
  // Whether stream s (an auxiliary one) runs any layer.
  bool uses_stream(int32_t s) const { return s < static_cast<int32_t>(used_.size()) && used_[s]; }

 private:
  const Graph* graph_ = nullptr;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::map<std::string, DeviceBuffer> weights_;
  size_t weight_bytes_ = 0;
  std::optional<StreamSchedule> schedule_;
  std::vector<bool> used_;
  std::vector<std::vector<std::pair<int32_t, std::unique_ptr<Layer>>>> variant_layers_;  // per node
  std::map<std::string, Dims> opt_;
  std::vector<std::map<std::string, Dims>> points_;
  int variant_count_ = 0;
};

struct LayerTiming {
  std::string name;
  float ms = 0;
};

class GpuContext {
 public:
  GpuContext(const GpuEngine& engine, const MemoryPlan& plan);
  ~GpuContext();
  // Creates the context's own auxiliary streams and the events between streams (engines with auxiliary streams).
  Status Init();
  // The caller's streams for the auxiliary ones (ExecutionContext::setAuxStreams), in order; null or past its end:
  // the context's own.
  Status SetAuxStreams(const std::vector<void*>* streams);
  // Runs the engine on `stream`. `shaped` is the engine graph inferred (and shape subgraphs folded) at the
  // current input shapes; `addresses` are the caller's device addresses of the graph inputs and outputs.
  Status Enqueue(cudaStream_t stream, std::shared_ptr<const Graph> shaped, const std::string& shape_key,
                 const std::map<std::string, void*>& addresses, IProfiler* profiler);
  void set_use_cuda_graph(bool on) { use_graph_ = on; }
  // Each layer's launches inside an NVTX range named like the layer (Nsight Systems timelines). Ranges are host-side:
  // a replayed CUDA graph shows as one launch, so profile per layer without --useCudaGraph.
  void set_annotate_layers(bool on) { annotate_ = on; }
  bool graph_captured() const { return current_ && current_->graph_exec; }
  int captures() const { return captures_; }
  // Launch plans (and their CUDA graphs) kept per context: alternating between this many sets of shapes or
  // addresses neither rebuilds nor captures again.
  static constexpr size_t kMaxPlans = 16;

 private:
  struct Launch {
    size_t node = 0;
    const Layer* layer = nullptr;  // the node's layer, or its per-shape one for these shapes
    std::vector<DeviceTensor> inputs, outputs;
  };
  struct Plan {
    std::string key;
    std::vector<Launch> launches;
    std::vector<DeviceBuffer> folded;       // device copies of values folded at these shapes
    std::shared_ptr<const Graph> shaped;    // the DeviceTensors' host pointers point into it
    std::vector<std::pair<void*, std::pair<const void*, size_t>>> output_copies;  // dst, (src, bytes)
    size_t workspace = 0;        // the main stream's: the most any layer needs (profiled runs use one stream)
    size_t host_workspace = 0;   // page-locked host scratch (CPU fallback layers)
    std::vector<size_t> aux_workspace, aux_host_workspace;  // per auxiliary stream: the most its layers need
    void* graph_exec = nullptr;  // cudaGraphExec_t captured from these launches
    std::string eager_reason;    // non-empty: a layer needs the host mid-run, so this plan runs without a graph
    std::string graph_key;       // the stream it was captured on
    ~Plan();
  };
  Status BuildPlan(std::shared_ptr<const Graph> shaped_graph, const std::string& key, const std::map<std::string, void*>& addresses);
  Status Launches(cudaStream_t stream, IProfiler* profiler);
  // A layer's launch (with its NVTX range) and the error naming it.
  Status LaunchLayer(const LaunchContext& lc, Launch& l);
  Status PrepareAuxStreams();  // the auxiliary streams' workspaces and handles for the current plan
  // One auxiliary stream: the context's own (created by Init), the one in use (the caller's or its own), and what its
  // layers use besides it.
  struct Aux {
    cudaStream_t own = nullptr, stream = nullptr;
    DeviceBuffer workspace;
    PinnedBuffer host_workspace;
    Handles handles;
    cudaStream_t handles_stream = nullptr;
    bool handles_ready = false;
  };
  void DropGraphs();  // every plan's CUDA graph (they captured a workspace that is going away)

  const GpuEngine& engine_;
  const MemoryPlan& mplan_;
  DeviceBuffer arena_, workspace_;
  PinnedBuffer host_workspace_;
  Handles handles_;
  cudaStream_t handles_stream_ = nullptr;
  bool handles_ready_ = false;
  std::vector<std::unique_ptr<Aux>> aux_;      // stream s is aux_[s - 1]
  std::vector<cudaEvent_t> events_;            // the schedule's events, then the fork, then one join per aux stream
  std::vector<std::unique_ptr<Plan>> plans_;  // least recently used first, at most kMaxPlans
  Plan* current_ = nullptr;                   // the plan of the running Enqueue
  bool use_graph_ = false;
  bool annotate_ = false;
  int captures_ = 0;
};

}  // namespace kiln::cuda
