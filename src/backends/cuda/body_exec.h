// Runs a control-flow body (an If branch, a Loop or Scan body: subgraphs made self-contained at import) on the CUDA
// layers, from inside the Enqueue of the If/Loop/Scan layer that owns it (control_flow_layers.cpp).
//
// A body is planned once per set of input types, shapes and host-known captured values: the body is inferred at
// those shapes (shape arithmetic and captured constants fold), each node that still runs gets a layer made for its
// concrete shapes, every value a place in the owner's scratch memory, and the layers' workspace a place after them.
// Planning allocates and uploads, so it runs from the owner's WorkspaceBytes / MaxOutputElements, which the engine
// and the node-by-node runner call before Enqueue and outside any CUDA graph capture; Enqueue only finds the plan.
// A run of the body is then a list of layer launches with no host work, repeated per iteration.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/layer.h"

namespace kiln::cuda {

// What one body input holds during a run of the node: its type and shape and, for a captured value whose contents
// the host knows (a constant, a folded shape value), those contents, which fold into the body.
struct BodyInput {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  const Tensor* host = nullptr;
};

// The body typed and inferred at these inputs (a clone). With require_static, an error names the first value whose
// shape the inputs do not fix (it depends on data computed in the body, such as a Slice by the iteration number).
Result<std::shared_ptr<Graph>> ShapeBody(const Node& owner, const std::string& attr, const Graph& body,
                                         const std::vector<BodyInput>& inputs, bool require_static);

// Whether every node of a shaped body has a CUDA layer (nested bodies included); the error lists those that do not.
Status CheckBodyLayers(const Node& owner, const std::string& attr, const Graph& shaped, bool allow_tf32);

class BodyExec {
 public:
  // `body` must outlive this (it is the owner node's graph attribute).
  BodyExec(const Node& owner, std::string attr, const Graph& body, bool allow_tf32)
      : owner_(owner), attr_(std::move(attr)), body_(body), allow_tf32_(allow_tf32) {}
  const Graph& body() const { return body_; }

  struct Place {
    enum class Kind { kScratch, kDevice, kInput } kind = Kind::kScratch;
    size_t offset = 0;        // kScratch: bytes from the start of the body's scratch
    void* ptr = nullptr;      // kDevice: a constant's device copy
    size_t input = 0;         // kInput: the body input it is
  };
  struct Plan {
    std::shared_ptr<Graph> shaped;                       // the body at these inputs; layers refer to its nodes
    std::vector<size_t> steps;                           // indices of the nodes that run, in order
    std::vector<std::unique_ptr<Layer>> layers;          // one per step
    std::unordered_map<const Value*, Place> places;
    std::vector<DeviceBuffer> constants;                 // device copies of the body's constants
    size_t value_bytes = 0;                              // the body's values, from the start of its scratch
    size_t workspace_bytes = 0;                          // the layers' own scratch, after the values
    size_t bytes() const { return value_bytes + workspace_bytes; }
  };
  // The plan at these inputs, made on first use and kept (as is a failure to plan, but for CUDA errors).
  Result<const Plan*> PlanFor(const std::vector<BodyInput>& inputs) const;

  // A plan's launches with every address resolved, for a scratch area and the body inputs' device addresses: made
  // once per Enqueue of the owner and run once per iteration.
  struct Bound {
    const Plan* plan = nullptr;
    std::vector<std::vector<DeviceTensor>> ins, outs;
    void* workspace = nullptr;
  };
  Result<Bound> Bind(const Plan& p, void* scratch, const std::vector<void*>& inputs) const;
  Status Run(Bound& b, const LaunchContext& ctx) const;
  // Body output i (its device address, type and shape) under a binding.
  DeviceTensor Output(const Plan& p, size_t i, void* scratch, const std::vector<void*>& inputs) const;

 private:
  Result<std::unique_ptr<Plan>> MakePlan(const std::vector<BodyInput>& inputs) const;
  void* Address(const Plan& p, const Value* v, void* scratch, const std::vector<void*>& inputs) const;

  const Node& owner_;
  std::string attr_;
  const Graph& body_;
  bool allow_tf32_ = true;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<Plan>> plans_;  // kept for the layer's life (no eviction yet)
  mutable std::map<std::string, Status> failures_;
};

}  // namespace kiln::cuda
