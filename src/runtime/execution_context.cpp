// ExecutionContext on the CPU backend: checks shapes against the selected profile, places activations in the
// memory plan's arena, runs the nodes in order, reports per-layer times, and copies outputs to bound memory.
#include <chrono>
#include <cstring>

#include "backends/cpu/executor.h"
#include "core/error.h"
#include "runtime/engine_impl.h"
#include "ops/infer.h"

namespace kiln {

ExecutionContextImpl::ExecutionContextImpl(const EngineImpl& e) : engine(e) {
  if (e.backend != "cuda") arena_storage.resize(static_cast<size_t>(e.plan.arena_bytes) + 256);
  arena = arena_storage.data() + (256 - reinterpret_cast<uintptr_t>(arena_storage.data()) % 256) % 256;
  for (const Value* in : e.graph->inputs)
    if (IsStatic(in->shape)) input_shapes[in->name] = ToStatic(in->shape);
}

Result<std::shared_ptr<Graph>> InferAtShapes(const Graph& graph, const std::map<std::string, Dims>& shapes) {
  std::shared_ptr<Graph> g = graph.Clone();
  for (Value* in : g->inputs)
    if (auto it = shapes.find(in->name); it != shapes.end()) in->shape = FromStatic(it->second);
  for (Value* v : g->values())
    if (!v->is_const() && !v->is_graph_input) v->sym_value.reset();
  InferOptions opts;
  opts.evaluator = cpu::MakeConstEvaluator();
  KILN_RETURN_IF_ERROR(InferGraph(*g, opts));
  return g;
}

Result<std::shared_ptr<const Graph>> ExecutionContextImpl::ShapedGraph() {
  KILN_RETURN_IF_ERROR(OutputShapes().status());
  return cached_graph_;
}

Result<const Dims*> ExecutionContextImpl::InputShape(const Value& in) const {
  auto it = input_shapes.find(in.name);
  if (it == input_shapes.end())
    return Err(StatusCode::kInvalidArgument, "input '{}' has dynamic dims {}: call setInputShape first", in.name,
               ShapeToString(in.shape));
  return &it->second;
}

Result<std::map<std::string, Dims>> ExecutionContextImpl::OutputShapes() {
  std::string key;
  for (const Value* in : engine.graph->inputs) {
    KILN_ASSIGN_OR_RETURN(const Dims* shape, InputShape(*in));
    key += in->name + ShapeToString(*shape) + ";";
  }
  if (key == cached_key_) return cached_shapes_;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, InferAtShapes(*engine.graph, input_shapes));
  std::map<std::string, Dims> r;
  for (const Value* o : g->outputs) {
    Dims d;
    for (const Dim& x : o->shape) d.push_back(x.known() ? x.value : -1);
    r[o->name] = d;
  }
  cached_key_ = key;
  cached_shapes_ = r;
  cached_graph_ = std::move(g);
  return r;
}

ExecutionContext::ExecutionContext(std::unique_ptr<ExecutionContextImpl> impl) : impl_(std::move(impl)) {}
ExecutionContext::~ExecutionContext() = default;

Status ExecutionContext::setOptimizationProfile(int index) {
  const int n = static_cast<int>(impl_->engine.profiles.size());
  if (index < 0 || index >= n)
    return Err(StatusCode::kOutOfRange, "optimization profile {} does not exist: the engine has {} (0..{})", index, n,
               n - 1);
  impl_->profile = index;
  return Status::Ok();
}

int ExecutionContext::getOptimizationProfile() const { return impl_->profile; }

Status ExecutionContext::setInputShape(const std::string& name, const Dims& dims) {
  const Value* v = impl_->engine.FindIO(name);
  if (!v || !v->is_graph_input)
    return Err(StatusCode::kNotFound, "setInputShape: the engine has no input named '{}'", name);
  if (dims.size() != v->shape.size())
    return Err(StatusCode::kInvalidArgument, "input '{}' has rank {} ({}), but shape {} was given", name,
               v->shape.size(), ShapeToString(v->shape), ShapeToString(dims));
  const ProfileShapes& prof = impl_->engine.profiles[impl_->profile];
  auto range = prof.find(name);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (v->shape[i].known()) {
      if (dims[i] != v->shape[i].value)
        return Err(StatusCode::kInvalidArgument, "input '{}' dim {} is fixed at {} but {} was given (shape {})", name, i,
                   v->shape[i].value, dims[i], ShapeToString(dims));
      continue;
    }
    if (range == prof.end())
      return Err(StatusCode::kInvalidArgument, "input '{}' dim {} is dynamic but profile {} gives no range for it",
                 name, i, impl_->profile);
    const int64_t lo = range->second[0][i], hi = range->second[2][i];
    if (dims[i] < lo || dims[i] > hi)
      return Err(StatusCode::kOutOfRange,
                 "input '{}' shape {} is outside optimization profile {}: dim {} must lie in [{}, {}] (min {}, max {}); "
                 "rebuild with a wider --minShapes/--maxShapes or pick another profile",
                 name, ShapeToString(dims), impl_->profile, i, lo, hi, ShapeToString(range->second[0]),
                 ShapeToString(range->second[2]));
  }
  impl_->input_shapes[name] = dims;
  return Status::Ok();
}

Result<Dims> ExecutionContext::getTensorShape(const std::string& name) const {
  const Value* v = impl_->engine.FindIO(name);
  if (!v) return Err(StatusCode::kNotFound, "the engine has no input or output named '{}'", name);
  if (v->is_graph_input) {
    auto it = impl_->input_shapes.find(name);
    if (it != impl_->input_shapes.end()) return it->second;
    Dims d;
    for (const Dim& x : v->shape) d.push_back(x.known() ? x.value : -1);
    return d;
  }
  auto last = impl_->last_outputs.find(name);
  KILN_ASSIGN_OR_RETURN(auto shapes, impl_->OutputShapes());
  const Dims& d = shapes.at(name);
  for (int64_t x : d)
    if (x < 0 && last != impl_->last_outputs.end()) return last->second.shape();
  return d;
}

Status ExecutionContext::setTensorAddress(const std::string& name, void* data) {
  if (!impl_->engine.FindIO(name))
    return Err(StatusCode::kNotFound, "setTensorAddress: the engine has no input or output named '{}'", name);
  impl_->addresses[name] = data;
  return Status::Ok();
}

void ExecutionContext::setProfiler(IProfiler* p) { impl_->profiler = p; }

Result<const void*> ExecutionContext::getOutputBuffer(const std::string& name) const {
  if (impl_->engine.backend == "cuda") {
    auto a = impl_->addresses.find(name);
    if (!impl_->engine.FindIO(name) || a == impl_->addresses.end())
      return Err(StatusCode::kNotFound, "no output named '{}' is bound (call setTensorAddress and enqueue first)", name);
    return static_cast<const void*>(a->second);
  }
  auto it = impl_->last_outputs.find(name);
  if (it == impl_->last_outputs.end())
    return Err(StatusCode::kNotFound, "no output named '{}' has been computed (call enqueue first)", name);
  return static_cast<const void*>(it->second.raw());
}

Status ExecutionContext::enqueue(void* stream) {
  ExecutionContextImpl& c = *impl_;
  const EngineImpl& e = c.engine;
  if (e.backend == "cuda") return EnqueueCuda(c, stream);
  if (stream != nullptr)
    return Err(StatusCode::kInvalidArgument, "this engine runs on the cpu backend, which takes no stream (pass nullptr)");
  const Graph& g = *e.graph;
  std::unordered_map<const Value*, Tensor> env;
  for (const Value* in : g.inputs) {
    KILN_ASSIGN_OR_RETURN(const Dims* shape, c.InputShape(*in));
    auto addr = c.addresses.find(in->name);
    if (addr == c.addresses.end() || !addr->second)
      return Err(StatusCode::kInvalidArgument, "input '{}' has no address: call setTensorAddress first", in->name);
    env[in] = Tensor::View(in->dtype, *shape, addr->second);
  }
  // Activations go to their arena slot when the plan has one and the shape fits it.
  auto in_arena = [&](const void* p) {
    return p >= static_cast<const void*>(c.arena) && p < static_cast<const void*>(c.arena + e.plan.arena_bytes);
  };
  std::unordered_map<const Value*, size_t> last_use;
  const auto& nodes = g.nodes();
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const Value* in : nodes[k]->inputs)
      if (in) last_use[in] = k;

  using Clock = std::chrono::steady_clock;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = *nodes[k];
    std::vector<const Tensor*> ins(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = n.inputs[i];
      if (!v) continue;
      if (v->is_const()) {
        ins[i] = &*v->const_value;
        continue;
      }
      auto it = env.find(v);
      if (it == env.end()) return Err(StatusCode::kInternal, "{}: input '{}' was not computed", n.Where(), v->name);
      ins[i] = &it->second;
    }
    cpu::OutputAllocator alloc = [&](const Node& node, size_t i, DataType dtype, const std::vector<int64_t>& shape) -> Tensor {
      const Value* v = node.outputs[i];
      auto p = e.plan_by_name.find(v->name);
      if (p == e.plan_by_name.end() || p->second->kind != BufferPlan::Kind::kArena) return Tensor();
      const int64_t need = NumElements(shape) * static_cast<int64_t>(DataTypeSize(dtype));
      if (need > p->second->bytes) return Tensor();
      void* slot = c.arena + p->second->offset;
      std::memset(slot, 0, static_cast<size_t>(need));
      return Tensor::View(dtype, shape, slot);
    };
    const auto t0 = Clock::now();
    auto outs = cpu::EvaluateNodeInto(n, ins, alloc);
    if (!outs.ok()) return outs.status();
    if (c.profiler)
      c.profiler->reportLayerTime(n.name.c_str(),
                                  std::chrono::duration<float, std::milli>(Clock::now() - t0).count());
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* v = n.outputs[i];
      if (!v) continue;
      Tensor& t = (*outs)[i];
      // A kernel may hand back its input's buffer. That is safe only where the plan knows the output as a view
      // (the root then lives as long as the view); anything else that points into the arena is copied out.
      if (in_arena(t.raw())) {
        auto p = e.plan_by_name.find(v->name);
        const bool planned = p != e.plan_by_name.end() &&
                             ((p->second->kind == BufferPlan::Kind::kArena && t.raw() == c.arena + p->second->offset) ||
                              p->second->kind == BufferPlan::Kind::kView);
        if (!planned) t = t.Clone();
      }
      env[v] = std::move(t);
    }
    for (const Value* in : n.inputs)
      if (in && !in->is_graph_output && !in->is_graph_input && !in->is_const() && last_use[in] == k) env.erase(in);
  }
  c.last_outputs.clear();
  for (const Value* o : g.outputs) {
    Tensor t;
    if (o->is_const()) t = *o->const_value;
    else if (auto it = env.find(o); it != env.end()) t = it->second;
    else return Err(StatusCode::kInternal, "output '{}' was not computed", o->name);
    // Keep a copy the context owns: arena slots are reused by the next enqueue.
    t = t.Clone();
    auto addr = c.addresses.find(o->name);
    if (addr != c.addresses.end() && addr->second) std::memcpy(addr->second, t.raw(), t.nbytes());
    c.last_outputs[o->name] = std::move(t);
  }
  return Status::Ok();
}

}  // namespace kiln
