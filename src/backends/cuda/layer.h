// The CUDA backend's layer interface: what a GPU kernel for one node looks like to the builder and runtime.
//
// For each op type, a LayerFactory lists the node's candidate kernels ("tactics") and creates a Layer for one of
// them. The builder times every candidate on the device and keeps the fastest; the engine stores the tactic
// name and recreates the Layer when it is loaded. A Layer is created once per engine (weights it repacks or
// uploads itself live as long as it does) and is shared by every ExecutionContext, so Enqueue is const and must
// be safe to call from several threads at once on different streams.
//
// Host code of layers is C++20 (*.cpp, may use the IR); device code lives in *.cu files (C++17) behind plain
// launcher functions declared in *_kernels.h headers that include nothing of the IR.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_def.h"
#include "kiln/status.h"

typedef struct CUstream_st* cudaStream_t;
struct cublasLtContext;
struct cudnnContext;

namespace kiln::cuda {

// A tensor in device memory as a layer sees it when it runs. Tensors are dense and row-major (contiguous).
struct DeviceTensor {
  void* data = nullptr;                   // device address (nullptr only for an omitted optional input or 0 elements)
  DataType dtype = DataType::kUndefined;  // kUndefined: the optional input is omitted
  std::vector<int64_t> shape;
  const Tensor* host = nullptr;           // its contents on the host where known: constants, folded shape values
  bool present() const { return dtype != DataType::kUndefined; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DataTypeSize(dtype); }
};

// What one stream's work needs besides tensors. Handles belong to the ExecutionContext (one per stream).
struct LaunchContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;   // scratch device memory of at least the layer's WorkspaceBytes()
  size_t workspace_bytes = 0;
  cublasLtContext* cublaslt = nullptr;
  cudnnContext* cudnn = nullptr;
  // Page-locked host memory of at least the layer's HostWorkspaceBytes(), the context's own (CPU fallback layers
  // stage their inputs and outputs there); its address is stable for the launch plan, so it may be captured.
  void* host_workspace = nullptr;
  size_t host_workspace_bytes = 0;
};

// What a layer is created from. The node's input and output Values carry dtype (FP16/BF16 after precision
// lowering), shape (symbolic where dynamic) and, for constant inputs (weights), const_value on the host.
// `shapes` holds the concrete shapes the layer is tuned for (the profile's opt shapes): one per input
// (empty for omitted inputs) then one per output.
struct LayerSpec {
  const Node& node;
  std::vector<std::vector<int64_t>> input_shapes;   // at the tuning shapes; empty when unknown
  std::vector<std::vector<int64_t>> output_shapes;
  bool allow_tf32 = true;  // FP32 matmul/conv may use TF32 tensor cores (--noTF32 forbids)
};

class Layer {
 public:
  virtual ~Layer() = default;
  // Device scratch bytes Enqueue needs at these shapes (the runtime gives the max over its shapes).
  virtual size_t WorkspaceBytes(const std::vector<DeviceTensor>& inputs,
                                const std::vector<DeviceTensor>& outputs) const {
    return 0;
  }
  // Page-locked host scratch bytes Enqueue needs at these shapes (CPU fallback layers); the runtime gives the max.
  virtual size_t HostWorkspaceBytes(const std::vector<DeviceTensor>& inputs,
                                    const std::vector<DeviceTensor>& outputs) const {
    return 0;
  }
  // Layers whose output sizes depend on data (NonZero, NonMaxSuppression) return an upper bound on output i's
  // element count at these input shapes (-1: the output's shape is known from inference). The runtime then
  // allocates that many elements and passes the output with an empty shape; Enqueue synchronizes its stream,
  // reads the real size and sets outputs[i].shape. Engines with such layers are not captured in CUDA graphs.
  virtual int64_t MaxOutputElements(size_t i, const std::vector<DeviceTensor>& inputs) const { return -1; }
  // Enqueues the work on ctx.stream: no host synchronization and no allocation, so it can be captured into a
  // CUDA graph. Outputs arrive allocated with the shapes inference gave.
  virtual Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                         std::vector<DeviceTensor>& outputs) const = 0;
};

struct LayerFactory {
  // Candidate tactic names for this node, best guess first (the default when the builder does not time).
  // Unset: one tactic, "default". An error says why the node cannot run on the GPU (dtype, attribute...).
  std::function<Result<std::vector<std::string>>(const LayerSpec&)> tactics;
  // Creates the layer for one of the tactics (weights uploaded/repacked here, once).
  std::function<Result<std::unique_ptr<Layer>>(const LayerSpec&, const std::string& tactic)> create;
  // The float types the layer computes in (its float data inputs and outputs); the precision planner keeps a node
  // float32 where the engine's reduced type is not listed. A layer that takes only some lists them here.
  std::vector<DataType> compute_types = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
  // Whether the optimizer may create this (internal) op for the cuda backend (Backend::HasKernel). False for layers
  // kept as GPU references only, slower than the unfused graph they would replace.
  bool optimizer_may_create = true;
  // Where optimizer_may_create is false: the nodes the optimizer may still create (shapes and types the layer runs
  // fast). Unset: none.
  std::function<bool(const Node&)> preferred_for;
  // Whether the layer takes values of ONNX 1.18+'s narrow types (float4e2m1, float8e8m0, int2, uint2; one value per
  // byte). layer_registry.cpp refuses a node with such a value for every layer that does not say so.
  bool holds_narrow_types = false;
};

class LayerRegistry {
 public:
  // `op` is the OpDef's qualified name: "Relu" (ONNX), "kiln.FusedConv" (kiln's internal ops).
  void Add(const std::string& op, LayerFactory f) { factories_[op] = std::move(f); }
  const LayerFactory* Find(const std::string& op) const {
    auto it = factories_.find(op);
    return it == factories_.end() ? nullptr : &it->second;
  }
  // The node's factory: a built-in one, else the plugin layer (tactic "plugin") where a registered plugin defines
  // the node's op and has a CUDA implementation.
  const LayerFactory* Find(const Node& n) const;
  std::vector<std::string> OpTypes() const;  // qualified names

 private:
  std::unordered_map<std::string, LayerFactory> factories_;
};

// The one table (layer_registry.cpp lists the families).
const LayerRegistry& Layers();
// The factory of a node whose op a registered plugin defines, or nullptr (plugin_layer.cpp).
const LayerFactory* PluginLayerFactory(const Node& n);

// The LayerSpec of `node` at the tuning shapes: the static shapes of `tuned_node` (the same node in the graph
// inferred at those shapes), empty where unknown.
LayerSpec SpecAt(const Node& node, const Node& tuned_node, bool allow_tf32);

// The tactics of a node (factory's list, or {"default"}); an error names the node when the op has no GPU layer.
Result<std::vector<std::string>> TacticsFor(const LayerSpec& spec);
// Creates a node's layer; an error names the node.
Result<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec, const std::string& tactic);

// The tactic of a node that runs on the CPU inside a GPU engine (cpu_fallback_layer.cpp): its inputs are copied to
// page-locked host memory, the CPU reference kernel runs in a host callback on the stream, and its outputs are copied
// back, all enqueued (so CUDA graphs capture it too).
inline constexpr const char* kCpuFallbackTactic = "cpu-fallback";
// Whether the CPU backend has a kernel for the node (the condition for running it there).
bool CpuCanRun(const Node& node);
Result<std::unique_ptr<Layer>> CreateCpuFallbackLayer(const LayerSpec& spec);

// A Layer from a lambda, for the many layers that are just one launcher call.
class FnLayer : public Layer {
 public:
  using Fn = std::function<Status(const LaunchContext&, const std::vector<DeviceTensor>&, std::vector<DeviceTensor>&)>;
  explicit FnLayer(Fn fn) : fn_(std::move(fn)) {}
  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    return fn_(ctx, inputs, outputs);
  }

 private:
  Fn fn_;
};

}  // namespace kiln::cuda
