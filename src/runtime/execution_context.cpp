// ExecutionContext: checks shapes against the selected profile, keeps the caller's tensor addresses, infers output
// shapes, and enqueues on the engine's backend (backends/backend.h), which owns the context's memory and kernels.
#include <new>

#include "backends/factory.h"
#include "core/error.h"
#include "runtime/engine_impl.h"
#include "ops/infer.h"

namespace kiln {

ExecutionContextImpl::ExecutionContextImpl(const EngineImpl& e) : engine(e) {
  for (const Value* in : e.graph->inputs)
    if (IsStatic(in->shape)) input_shapes[in->name] = ToStatic(in->shape);
}

ExecutionContextImpl::~ExecutionContextImpl() {
  ScopedDevice on = engine.DeviceScope();  // the context's device memory and handles are freed on their device
  backend.reset();
}

Status ExecutionContextImpl::EnterDevice(const ScopedDevice& on) const {
  if (on.status().ok()) return Status::Ok();
  return on.status().WithContext(fmt::format("the engine was loaded on {} device {}, and switching to it failed",
                                             engine.backend->Name(), engine.device));
}

Status ExecutionContextImpl::Init() {
  ScopedDevice on = engine.DeviceScope();  // the engine's state and the context's are created on its device
  KILN_RETURN_IF_ERROR(EnterDevice(on));
  KILN_ASSIGN_OR_RETURN(const BackendEngine* state, engine.State());
  KILN_ASSIGN_OR_RETURN(backend, state->CreateContext());
  return Status::Ok();
}

Result<std::shared_ptr<Graph>> InferAtShapes(const Graph& graph, const std::map<std::string, Dims>& shapes) {
  std::shared_ptr<Graph> g = graph.Clone();
  for (Value* in : g->inputs)
    if (auto it = shapes.find(in->name); it != shapes.end()) in->shape = FromStatic(it->second);
  for (Value* v : g->values())
    if (!v->is_const() && !v->is_graph_input) v->sym_value.reset();
  InferOptions opts;
  opts.evaluator = ConstantFolder();
  KILN_RETURN_IF_ERROR(InferGraph(*g, opts));
  return g;
}

Result<ShapedGraph> ExecutionContextImpl::Shaped() {
  KILN_RETURN_IF_ERROR(OutputShapes().status());
  return ShapedGraph{cached_graph_, cached_key_};
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
  KILN_ASSIGN_OR_RETURN(auto shapes, impl_->OutputShapes());
  const Dims& d = shapes.at(name);
  for (int64_t x : d)
    if (x < 0 && impl_->backend)
      if (std::optional<Dims> last = impl_->backend->LastOutputShape(name)) return *last;
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
  if (!impl_->backend)
    return Err(StatusCode::kNotFound, "no output named '{}' has been computed (call enqueue first)", name);
  return impl_->backend->OutputBuffer(name, impl_->addresses);
}

Status ExecutionContext::enqueue(void* stream) {
  ExecutionContextImpl& c = *impl_;
  for (const Value* in : c.engine.graph->inputs) KILN_RETURN_IF_ERROR(c.InputShape(*in).status());
  if (!c.backend) KILN_RETURN_IF_ERROR(c.Init());
  // The work runs on the engine's device whatever the calling thread's current device is; it is restored after.
  ScopedDevice on = c.engine.DeviceScope();
  KILN_RETURN_IF_ERROR(c.EnterDevice(on));
  EnqueueArgs args{stream, c.input_shapes, c.addresses, c.profiler, c.capture_graph, [&c] { return c.Shaped(); }};
  args.annotate_layers = c.engine.profiling_verbosity == ProfilingVerbosity::kDetailed;
  args.aux_streams = &c.aux_streams;
  try {  // an allocation that fails inside a backend (a context's arena, an output) becomes an error, not an abort
    return c.backend->Enqueue(args);
  } catch (const std::bad_alloc&) {
    return Err(StatusCode::kOutOfRange,
               "enqueue ran out of host memory (the context's activation memory or outputs at these input shapes): "
               "give smaller input shapes");
  }
}

void ExecutionContext::setUseCudaGraph(bool on) { impl_->capture_graph = on; }

Status ExecutionContext::setAuxStreams(void* const* streams, int count) {
  if (count < 0 || (count > 0 && !streams))
    return Err(StatusCode::kInvalidArgument, "setAuxStreams: {} streams at {}: give a count >= 0 and that many streams",
               count, static_cast<const void*>(streams));
  if (!impl_->engine.backend->Traits().concurrent_streams && count > 0)
    return Err(StatusCode::kUnsupported, "setAuxStreams: the {} backend runs one layer at a time and takes no streams",
               impl_->engine.backend->Name());
  impl_->aux_streams.assign(streams, streams + count);
  return Status::Ok();
}

}  // namespace kiln
