// The CPU backend's engine executor: each context places activations in the memory plan's arena, runs the nodes
// in order on the calling thread, reports per-layer times, and copies outputs to bound memory (keeping its own
// copy for getOutputBuffer). Sequences and optionals inside the graph (a Loop-carried sequence, SplitToSequence)
// live beside the tensors outside the plan: what they keep is copied out of the arena.
#include <chrono>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/executor.h"
#include "core/error.h"

namespace kiln::cpu {

namespace {

class CpuContext final : public BackendContext {
 public:
  explicit CpuContext(const EngineDesc& e) : e_(e), has_values_(HasNonTensorValues(*e.graph)) {
    arena_storage_.resize(static_cast<size_t>(e.plan.arena_bytes) + 256);
    arena_ = arena_storage_.data() + (256 - reinterpret_cast<uintptr_t>(arena_storage_.data()) % 256) % 256;
  }

  Status Enqueue(const EnqueueArgs& args) override;

  Result<const void*> OutputBuffer(const std::string& name, const std::map<std::string, void*>&) const override {
    auto it = last_outputs_.find(name);
    if (it == last_outputs_.end())
      return Err(StatusCode::kNotFound, "no output named '{}' has been computed (call enqueue first)", name);
    return static_cast<const void*>(it->second.raw());
  }

  std::optional<Dims> LastOutputShape(const std::string& name) const override {
    auto it = last_outputs_.find(name);
    if (it == last_outputs_.end()) return std::nullopt;
    return it->second.shape();
  }

 private:
  const EngineDesc& e_;
  const bool has_values_;  // the graph has sequences or optionals
  std::vector<uint8_t> arena_storage_;
  uint8_t* arena_ = nullptr;
  std::map<std::string, Tensor> last_outputs_;  // outputs of the last enqueue
};

Status CpuContext::Enqueue(const EnqueueArgs& args) {
  if (args.stream != nullptr)
    return Err(StatusCode::kInvalidArgument, "this engine runs on the cpu backend, which takes no stream (pass nullptr)");
  const Graph& g = *e_.graph;
  std::unordered_map<const Value*, Tensor> env;
  std::unordered_map<const Value*, OnnxValue> values;  // sequences and optionals
  for (const Value* in : g.inputs) {
    auto shape = args.input_shapes.find(in->name);
    if (shape == args.input_shapes.end())
      return Err(StatusCode::kInternal, "input '{}' has no shape at enqueue", in->name);
    auto addr = args.addresses.find(in->name);
    const bool empty = NumElements(shape->second) == 0;  // an empty tensor needs no memory (its address may be null)
    if (!empty && (addr == args.addresses.end() || !addr->second))
      return Err(StatusCode::kInvalidArgument, "input '{}' has no address: call setTensorAddress first", in->name);
    env[in] = Tensor::View(in->dtype, shape->second, addr == args.addresses.end() ? nullptr : addr->second);
  }
  // Activations go to their arena slot when the plan has one and the shape fits it.
  auto in_arena = [&](const void* p) {
    return p >= static_cast<const void*>(arena_) && p < static_cast<const void*>(arena_ + e_.plan.arena_bytes);
  };
  std::unordered_map<const Value*, size_t> last_use;
  const auto& nodes = g.nodes();
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const Value* in : nodes[k]->inputs)
      if (in) last_use[in] = k;

  // A sequence or optional may outlive the arena slots of the tensors it was made from: it keeps copies.
  auto own = [&](Tensor& t) {
    if (in_arena(t.raw())) t = t.Clone();
  };

  using Clock = std::chrono::steady_clock;
  NodeValues nv;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = *nodes[k];
    std::vector<const Tensor*> ins(n.inputs.size(), nullptr);
    if (has_values_) nv.inputs.assign(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = n.inputs[i];
      if (!v) continue;
      if (v->is_const()) {
        ins[i] = &*v->const_value;
        continue;
      }
      auto it = env.find(v);
      if (it != env.end()) {
        ins[i] = &it->second;
        continue;
      }
      auto iv = has_values_ ? values.find(v) : values.end();
      if (iv == values.end()) return Err(StatusCode::kInternal, "{}: input '{}' was not computed", n.Where(), v->name);
      nv.inputs[i] = &iv->second;
      ins[i] = iv->second.is_tensor() ? &iv->second.tensor : nullptr;
    }
    OutputAllocator alloc = [&](const Node& node, size_t i, DataType dtype, const std::vector<int64_t>& shape) -> Tensor {
      const Value* v = node.outputs[i];
      auto p = e_.plan_by_name.find(v->name);
      if (p == e_.plan_by_name.end() || p->second->kind != BufferPlan::Kind::kArena) return Tensor();
      int64_t need = 0;
      if (__builtin_mul_overflow(NumElements(shape), static_cast<int64_t>(DataTypeSize(dtype)), &need) ||
          need > p->second->bytes)
        return Tensor();  // not the planned size: the executor allocates it (within the engine's element cap)
      void* slot = arena_ + p->second->offset;
      std::memset(slot, 0, static_cast<size_t>(need));
      return Tensor::View(dtype, shape, slot);
    };
    const auto t0 = Clock::now();
    auto outs = EvaluateNodeInto(n, ins, alloc, e_.max_tensor_elements, has_values_ ? &nv : nullptr);
    if (!outs.ok()) return outs.status();
    if (args.profiler)
      args.profiler->reportLayerTime(n.name.c_str(),
                                     std::chrono::duration<float, std::milli>(Clock::now() - t0).count());
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* v = n.outputs[i];
      if (!v) continue;
      if (has_values_ && nv.output_kinds[i] != ValueKind::kTensor) {
        OnnxValue& x = nv.outputs[i];
        own(x.tensor);
        for (Tensor& t : x.sequence) own(t);
        values[v] = std::move(x);
        continue;
      }
      Tensor& t = (*outs)[i];
      // A kernel may hand back its input's buffer. That is safe only where the plan knows the output as a view
      // (the root then lives as long as the view); anything else that points into the arena is copied out.
      if (in_arena(t.raw())) {
        auto p = e_.plan_by_name.find(v->name);
        const bool planned = p != e_.plan_by_name.end() &&
                             ((p->second->kind == BufferPlan::Kind::kArena && t.raw() == arena_ + p->second->offset) ||
                              p->second->kind == BufferPlan::Kind::kView);
        if (!planned) t = t.Clone();
      }
      env[v] = std::move(t);
    }
    for (const Value* in : n.inputs)
      if (in && !in->is_graph_output && !in->is_graph_input && !in->is_const() && last_use[in] == k) {
        env.erase(in);
        if (has_values_) values.erase(in);
      }
  }
  last_outputs_.clear();
  KILN_ASSIGN_OR_RETURN(ShapedGraph shaped, args.shaped_graph());
  for (const Value* o : g.outputs) {
    Tensor t;
    if (o->is_const()) t = *o->const_value;
    else if (auto it = env.find(o); it != env.end()) t = it->second;
    else if (auto iv = values.find(o); iv != values.end() && iv->second.is_tensor()) t = iv->second.tensor;
    else if (iv != values.end())
      return Err(StatusCode::kInvalidModel, "output '{}' is {}: an engine's outputs are tensors", o->name,
                 iv->second.Describe());
    else return Err(StatusCode::kInternal, "output '{}' was not computed", o->name);
    // Keep a copy the context owns: arena slots are reused by the next enqueue.
    t = t.Clone();
    // The caller's buffer holds the shape getTensorShape gave before the run: copy only an output of exactly that
    // shape. One whose shape depends on data is read with getOutputBuffer.
    auto addr = args.addresses.find(o->name);
    const Value* declared = shaped.graph->FindValue(o->name);
    if (addr != args.addresses.end() && addr->second && declared && declared->has_shape &&
        IsStatic(declared->shape)) {
      if (ToStatic(declared->shape) != t.shape())
        return Err(StatusCode::kInvalidModel,
                   "output '{}' came out with shape {}, but the engine's shapes at these inputs say {}: the engine is "
                   "inconsistent (corrupted, or a kernel and its shape function disagree)",
                   o->name, ShapeToString(t.shape()), ShapeToString(declared->shape));
      std::memcpy(addr->second, t.raw(), t.nbytes());
    }
    last_outputs_[o->name] = std::move(t);
  }
  return Status::Ok();
}

class CpuEngine final : public BackendEngine {
 public:
  explicit CpuEngine(const EngineDesc& e) : e_(e) {}
  Result<std::unique_ptr<BackendContext>> CreateContext() const override {
    return std::unique_ptr<BackendContext>(std::make_unique<CpuContext>(e_));
  }

 private:
  const EngineDesc& e_;
};

}  // namespace

std::shared_ptr<BackendEngine> MakeEngine(const EngineDesc& engine) { return std::make_shared<CpuEngine>(engine); }

}  // namespace kiln::cpu
