// What an Engine holds once built or loaded, and what one ExecutionContext holds while it runs.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/runtime.h"
#include "plan/memory_plan.h"

namespace kiln {

namespace cuda {
class GpuEngine;
class GpuContext;
}  // namespace cuda

// One optimization profile: per dynamic input, {min, opt, max}.
using ProfileShapes = std::map<std::string, std::vector<Dims>>;

class EngineImpl {
 public:
  std::unique_ptr<Graph> graph;          // the optimized graph, nodes in execution order
  std::vector<ProfileShapes> profiles;   // at least one (empty maps for fully static networks)
  MemoryPlan plan;                       // at the profiles' largest shapes
  std::vector<std::string> tactics;      // per node, the kernel chosen
  std::string build_report_json;
  std::string backend = "cpu";
  bool allow_tf32 = true;
  uint64_t build_flags = 0;  // EngineBuildFlag bits (engine/engine_file.h)
  std::unordered_map<std::string, const BufferPlan*> plan_by_name;

  // cuda: layers and weights on the device, created with the first context (a context needs the device).
  mutable std::mutex gpu_mu;
  mutable std::shared_ptr<cuda::GpuEngine> gpu;
  Result<const cuda::GpuEngine*> Gpu() const;

  void Index();  // fills plan_by_name
  const Value* FindIO(const std::string& name) const;
};

class ExecutionContextImpl {
 public:
  explicit ExecutionContextImpl(const EngineImpl& e);
  const EngineImpl& engine;
  int profile = 0;
  std::map<std::string, Dims> input_shapes;   // set by setInputShape (static inputs are filled in at start)
  std::map<std::string, void*> addresses;     // caller-bound tensors
  std::map<std::string, Tensor> last_outputs; // outputs of the last enqueue (for getOutputBuffer)
  std::vector<uint8_t> arena_storage;
  uint8_t* arena = nullptr;
  IProfiler* profiler = nullptr;
  std::shared_ptr<cuda::GpuContext> gpu;  // cuda: arena, workspace, launch plans, CUDA graph
  bool use_cuda_graph = false;

  // The shape set for graph input `in`; an error where a dynamic input has none yet.
  Result<const Dims*> InputShape(const Value& in) const;
  // Output shapes at the current input shapes (cached per input-shape key).
  Result<std::map<std::string, Dims>> OutputShapes();
  // The engine graph inferred at the current input shapes (shape subgraphs folded), and its key.
  Result<std::shared_ptr<const Graph>> ShapedGraph();
  const std::string& shape_key() const { return cached_key_; }

 private:
  std::string cached_key_;
  std::map<std::string, Dims> cached_shapes_;
  std::shared_ptr<const Graph> cached_graph_;
};

// The graph inferred (and folded) at the given input shapes; inputs not named keep their shapes.
Result<std::shared_ptr<Graph>> InferAtShapes(const Graph& g, const std::map<std::string, Dims>& shapes);
// The CUDA backend's side of a context (execution_context_cuda.cpp): device state, and enqueue.
Status InitCudaContext(ExecutionContextImpl& c);
Status EnqueueCuda(ExecutionContextImpl& c, void* stream);

}  // namespace kiln
