// The CUDA engine executor (see engine_exec.h).
#include "backends/cuda/engine_exec.h"

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "backends/cuda/capture_guard.h"
#include "backends/cuda/cuda_check.h"
#include "core/error.h"

namespace kiln::cuda {

Result<std::unique_ptr<GpuEngine>> GpuEngine::Create(const Graph& g, const Graph& tuned,
                                                     const std::vector<std::string>& tactics, bool allow_tf32,
                                                     const std::vector<int32_t>& streams, int32_t num_streams,
                                                     const LayerVariants* variants) {
  auto e = std::make_unique<GpuEngine>();
  e->graph_ = &g;
  if (!streams.empty() && num_streams > 1) {
    auto sc = ScheduleStreams(g, streams, num_streams);
    if (!sc.ok()) return sc.status().WithContext("the engine's auxiliary streams");
    e->used_.assign(static_cast<size_t>(num_streams), false);
    for (int32_t s : streams) e->used_[s] = true;
    if (sc->AuxUsed() > 0) e->schedule_ = std::move(*sc);
  }
  const auto& nodes = g.nodes();
  const auto& tnodes = tuned.nodes();
  if (tnodes.size() != nodes.size())
    return Err(StatusCode::kInternal, "the tuning graph has {} nodes, the engine {}", tnodes.size(), nodes.size());
  // Weights: every constant a node reads, uploaded once.
  for (const auto& n : nodes)
    for (const Value* v : n->inputs) {
      if (!v || !v->is_const() || e->weights_.count(v->name)) continue;
      const Tensor& t = *v->const_value;
      KILN_ASSIGN_OR_RETURN(DeviceBuffer b, UploadToDevice(t.raw(), t.nbytes(), v->name));
      e->weight_bytes_ += t.nbytes();
      e->weights_.emplace(v->name, std::move(b));
    }
  std::string errors;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::string tactic = k < tactics.size() && !tactics[k].empty() ? tactics[k] : "default";
    auto layer = CreateLayer(SpecAt(*nodes[k], *tnodes[k], allow_tf32), tactic);
    if (!layer.ok()) {
      errors += "\n  - " + layer.status().message();
      e->layers_.emplace_back();
      continue;
    }
    e->layers_.push_back(std::move(*layer));
  }
  if (!errors.empty()) return Status(StatusCode::kUnsupported, "the CUDA backend cannot create these layers:" + errors);
  // Per-shape tactics: the layer made again at its point's shapes with that point's tactic.
  if (variants && !variants->variants.empty()) {
    if (variants->variants.size() != nodes.size() || variants->graphs.size() != variants->points.size())
      return Err(StatusCode::kInternal, "per-shape tactics for {} nodes and {} points ({} graphs), the engine has {} nodes",
                 variants->variants.size(), variants->points.size(), variants->graphs.size(), nodes.size());
    e->opt_ = variants->opt;
    e->points_ = variants->points;
    e->variant_layers_.resize(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k)
      for (const auto& [point, tactic] : variants->variants[k]) {
        if (point < 0 || static_cast<size_t>(point) >= variants->graphs.size() ||
            variants->graphs[point]->nodes().size() != nodes.size())
          return Err(StatusCode::kInternal, "{}: a per-shape tactic for point {} of {}", nodes[k]->Where(), point,
                     variants->graphs.size());
        auto layer = CreateLayer(SpecAt(*nodes[k], *variants->graphs[point]->nodes()[k], allow_tf32), tactic);
        if (!layer.ok())
          return layer.status().WithContext(fmt::format("creating the per-shape layer (tactic {}) for point {}", tactic,
                                                        point));
        e->variant_layers_[k].emplace_back(point, std::move(*layer));
        ++e->variant_count_;
      }
  }
  // Uploads from pageable memory (weights here, repacked weights in layers) may still be in flight when cudaMemcpy
  // returns, and the contexts' streams do not wait for the legacy stream.
  KILN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return e;
}

const Layer* GpuEngine::layer(size_t k, int32_t point) const {
  if (point >= 0 && k < variant_layers_.size())
    for (const auto& [p, l] : variant_layers_[k])
      if (p == point) return l.get();
  return layers_[k].get();
}

int32_t GpuEngine::NearestPoint(const Graph& shaped) const {
  if (points_.empty()) return -1;
  auto distance = [&](const std::map<std::string, Dims>& at) {
    double d = 0;
    for (const Value* in : shaped.inputs) {
      auto it = at.find(in->name);
      if (it == at.end() || !in->has_shape || in->shape.size() != it->second.size()) continue;
      for (size_t i = 0; i < it->second.size(); ++i)
        if (in->shape[i].known())
          d += std::fabs(std::log(std::max<double>(1, static_cast<double>(in->shape[i].value))) -
                         std::log(std::max<double>(1, static_cast<double>(it->second[i]))));
    }
    return d;
  };
  int32_t best = -1;
  double best_d = distance(opt_);
  for (size_t p = 0; p < points_.size(); ++p)
    if (const double d = distance(points_[p]); d < best_d) {
      best_d = d;
      best = static_cast<int32_t>(p);
    }
  return best;
}

void* GpuEngine::weight(const std::string& name) const {
  auto it = weights_.find(name);
  return it == weights_.end() ? nullptr : it->second.get();
}

GpuContext::GpuContext(const GpuEngine& engine, const MemoryPlan& plan) : engine_(engine), mplan_(plan) {}

GpuContext::Plan::~Plan() {
  if (graph_exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph_exec));
}

GpuContext::~GpuContext() {
  // The auxiliary streams' handles and buffers go before the streams they are bound to; streams and events are
  // released once the work queued on them is done.
  std::vector<cudaStream_t> own;
  for (auto& a : aux_)
    if (a->own) own.push_back(a->own);
  aux_.clear();
  for (cudaStream_t s : own) cudaStreamDestroy(s);
  for (cudaEvent_t ev : events_) cudaEventDestroy(ev);
}

Status GpuContext::Init() {
  const StreamSchedule* sc = engine_.schedule();
  if (!sc || !aux_.empty()) return Status::Ok();
  for (int32_t s = 1; s < sc->num_streams; ++s) {
    auto a = std::make_unique<Aux>();
    if (engine_.uses_stream(s)) {
      KILN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&a->own, cudaStreamNonBlocking));
      a->stream = a->own;
    }
    aux_.push_back(std::move(a));
  }
  events_.resize(static_cast<size_t>(sc->events) + 1 + aux_.size(), nullptr);
  for (cudaEvent_t& ev : events_) KILN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  return Status::Ok();
}

Status GpuContext::SetAuxStreams(const std::vector<void*>* streams) {
  for (size_t i = 0; i < aux_.size(); ++i) {
    void* given = streams && i < streams->size() ? (*streams)[i] : nullptr;
    aux_[i]->stream = given ? static_cast<cudaStream_t>(given) : aux_[i]->own;
  }
  return Status::Ok();
}

void GpuContext::DropGraphs() {
  for (auto& p : plans_) {
    if (p->graph_exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(p->graph_exec));
    p->graph_exec = nullptr;
  }
}

Status GpuContext::BuildPlan(std::shared_ptr<const Graph> shaped_graph, const std::string& key,
                             const std::map<std::string, void*>& addresses) {
  // Allocations, synchronous uploads, a device synchronize and cuDNN plan building: never while another thread
  // captures (capture_guard.h).
  NoCaptureScope no_capture;
  const Graph& shaped = *shaped_graph;
  if (!arena_.get() && mplan_.arena_bytes > 0) {
    auto arena = DeviceBuffer::Allocate(static_cast<size_t>(mplan_.arena_bytes));
    if (!arena.ok())
      return arena.status().WithContext(fmt::format(
          "allocating this execution context's activation memory ({:.1f} MiB at the profiles' largest shapes): "
          "free GPU memory (fewer contexts, smaller --maxShapes)", mplan_.arena_bytes / 1048576.0));
    arena_ = std::move(*arena);
  }
  auto p = std::make_unique<Plan>();
  p->key = key;
  p->shaped = shaped_graph;
  std::unordered_map<std::string, const BufferPlan*> by_name;
  for (const auto& b : mplan_.buffers) by_name[b.name] = &b;
  std::unordered_map<const Value*, void*> folded_addr;

  // The device address of a value at these shapes.
  std::function<Result<void*>(const Value*)> address = [&](const Value* v) -> Result<void*> {
    if (v->is_graph_input || v->is_graph_output) {
      auto it = addresses.find(v->name);
      if (it == addresses.end() || !it->second)
        return Err(StatusCode::kInvalidArgument, "'{}' has no device address: call setTensorAddress first", v->name);
      return it->second;
    }
    if (void* w = engine_.weight(v->name)) return w;
    if (v->is_const()) {  // folded at these shapes
      if (auto it = folded_addr.find(v); it != folded_addr.end()) return it->second;
      const Tensor& t = *v->const_value;
      KILN_ASSIGN_OR_RETURN(DeviceBuffer b, UploadToDevice(t.raw(), t.nbytes(), v->name));
      void* a = b.get();
      p->folded.push_back(std::move(b));
      folded_addr[v] = a;
      return a;
    }
    auto it = by_name.find(v->name);
    if (it == by_name.end()) return Err(StatusCode::kInternal, "value '{}' has no place in the memory plan", v->name);
    const BufferPlan& b = *it->second;
    const int64_t need = v->has_shape && IsStatic(v->shape)
                             ? NumElements(ToStatic(v->shape)) * static_cast<int64_t>(DataTypeSize(v->dtype))
                             : -1;
    if (need < 0)
      return Err(StatusCode::kUnsupported,
                 "'{}' has a data-dependent shape ({}): engines with data-dependent shapes (NonZero, "
                 "NonMaxSuppression) do not run on the CUDA backend yet; use kiln run or the cpu backend",
                 v->name, ShapeToString(v->shape));
    if (b.kind == BufferPlan::Kind::kArena) {
      if (need > b.bytes)
        return Err(StatusCode::kInternal, "'{}' needs {} bytes at these shapes but the plan gave it {}", v->name, need,
                   b.bytes);
      return static_cast<void*>(static_cast<uint8_t*>(arena_.get()) + b.offset);
    }
    if (b.kind == BufferPlan::Kind::kView) {
      const Value* root = shaped.FindValue(b.alias_of);
      if (!root) return Err(StatusCode::kInternal, "view '{}' of unknown value '{}'", v->name, b.alias_of);
      return address(root);
    }
    return Err(StatusCode::kInternal, "'{}' is external in the plan but not a graph input or output", v->name);
  };
  auto tensor = [&](const Value* v) -> Result<DeviceTensor> {
    DeviceTensor t;
    if (!v) return t;
    KILN_ASSIGN_OR_RETURN(t.data, address(v));
    t.dtype = v->dtype;
    if (!v->has_shape || !IsStatic(v->shape))
      return Err(StatusCode::kUnsupported, "'{}' has no static shape at these input shapes ({})", v->name,
                 ShapeToString(v->shape));
    t.shape = ToStatic(v->shape);
    if (v->is_const()) t.host = &*v->const_value;
    return t;
  };

  const auto& nodes = shaped.nodes();
  const int32_t point = engine_.NearestPoint(shaped);  // per-shape tactics: the layers made for the nearest point
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = *nodes[k];
    bool folded = true;
    for (const Value* o : n.outputs) folded &= !o || o->is_const();
    if (folded) continue;  // computed on the host at these shapes (shape arithmetic)
    Launch l;
    l.node = k;
    l.layer = engine_.layer(k, point);
    for (const Value* v : n.inputs) {
      auto t = tensor(v);
      if (!t.ok()) return t.status().WithContext(n.Where());
      l.inputs.push_back(*t);
    }
    const Layer* layer = l.layer;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* v = n.outputs[i];
      // An output that shape inference leaves open at these input shapes: its size depends on the data.
      if (v && !(v->has_shape && IsStatic(v->shape)) && layer->MaxOutputElements(i, l.inputs) >= 0)
        return Err(StatusCode::kUnsupported,
                   "{}: its output size depends on the data; such layers do not run inside CUDA engines yet (use kiln "
                   "run or the cpu backend)",
                   n.Where());
      auto t = tensor(v);
      if (!t.ok()) return t.status().WithContext(n.Where());
      l.outputs.push_back(*t);
    }
    const size_t ws = layer->WorkspaceBytes(l.inputs, l.outputs), hws = layer->HostWorkspaceBytes(l.inputs, l.outputs);
    p->workspace = std::max(p->workspace, ws);
    p->host_workspace = std::max(p->host_workspace, hws);
    if (const StreamSchedule* sc = engine_.schedule(); sc && sc->stream[k] > 0) {
      const size_t a = static_cast<size_t>(sc->stream[k] - 1);
      p->aux_workspace.resize(std::max(p->aux_workspace.size(), a + 1), 0);
      p->aux_host_workspace.resize(std::max(p->aux_host_workspace.size(), a + 1), 0);
      p->aux_workspace[a] = std::max(p->aux_workspace[a], ws);
      p->aux_host_workspace[a] = std::max(p->aux_host_workspace[a], hws);
    }
    p->launches.push_back(std::move(l));
  }
  // Graph outputs that folded to constants at these shapes: copied from a device copy at every run.
  for (const Value* o : shaped.outputs) {
    if (!o->is_const()) continue;
    auto dst = addresses.find(o->name);
    if (dst == addresses.end() || !dst->second)
      return Err(StatusCode::kInvalidArgument, "output '{}' has no device address: call setTensorAddress first", o->name);
    const Tensor& t = *o->const_value;
    KILN_ASSIGN_OR_RETURN(DeviceBuffer b, UploadToDevice(t.raw(), t.nbytes(), o->name));
    p->output_copies.push_back({dst->second, {b.get(), t.nbytes()}});
    p->folded.push_back(std::move(b));
  }
  if (p->workspace > workspace_.bytes()) {
    auto grown = DeviceBuffer::Allocate(p->workspace);
    if (!grown.ok())
      return grown.status().WithContext(
          fmt::format("allocating the layers' scratch memory ({:.1f} MiB)", p->workspace / 1048576.0));
    DeviceBuffer bigger = std::move(*grown);
    DropGraphs();  // they captured the old workspace
    workspace_ = std::move(bigger);
  }
  if (p->host_workspace > host_workspace_.bytes()) {
    auto grown = PinnedBuffer::Allocate(p->host_workspace);
    if (!grown.ok())
      return grown.status().WithContext(fmt::format("allocating page-locked host memory for the layers that run on the "
                                                    "CPU ({:.1f} MiB)", p->host_workspace / 1048576.0));
    DropGraphs();  // they captured the old host scratch
    host_workspace_ = std::move(*grown);
  }
  KILN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the folded values' uploads have landed
  if (plans_.size() >= kMaxPlans) plans_.erase(plans_.begin());  // the least recently used
  plans_.push_back(std::move(p));
  return Status::Ok();
}

Status GpuContext::PrepareAuxStreams() {
  const Plan& p = *current_;
  for (size_t a = 0; a < aux_.size(); ++a) {
    Aux& x = *aux_[a];
    if (!x.stream) continue;  // runs no layer
    const size_t ws = a < p.aux_workspace.size() ? p.aux_workspace[a] : 0;
    const size_t hws = a < p.aux_host_workspace.size() ? p.aux_host_workspace[a] : 0;
    if (ws > x.workspace.bytes()) {
      NoCaptureScope no_capture;
      auto grown = DeviceBuffer::Allocate(ws);
      if (!grown.ok())
        return grown.status().WithContext(
            fmt::format("allocating auxiliary stream {}'s layer scratch memory ({:.1f} MiB)", a + 1, ws / 1048576.0));
      DropGraphs();  // they captured the old workspace
      x.workspace = std::move(*grown);
    }
    if (hws > x.host_workspace.bytes()) {
      NoCaptureScope no_capture;
      auto grown = PinnedBuffer::Allocate(hws);
      if (!grown.ok())
        return grown.status().WithContext(fmt::format(
            "allocating page-locked host memory for auxiliary stream {}'s CPU layers ({:.1f} MiB)", a + 1,
            hws / 1048576.0));
      DropGraphs();
      x.host_workspace = std::move(*grown);
    }
    if (!x.handles_ready || x.handles_stream != x.stream) {
      NoCaptureScope no_capture;
      KILN_RETURN_IF_ERROR(x.handles.Init(x.stream));
      x.handles_ready = true;
      x.handles_stream = x.stream;
    }
  }
  return Status::Ok();
}

Status GpuContext::LaunchLayer(const LaunchContext& lc, Launch& l) {
  const Node& n = *engine_.graph().nodes()[l.node];
  if (annotate_) nvtxRangePushA(n.name.c_str());
  Status st = l.layer->Enqueue(lc, l.inputs, l.outputs);
  if (annotate_) nvtxRangePop();
  if (!st.ok() && st.message().find(n.name) == std::string::npos) st = st.WithContext(n.Where());
  return st;
}

Status GpuContext::Launches(cudaStream_t stream, IProfiler* profiler) {
  LaunchContext lc{stream,           workspace_.get(),      workspace_.bytes(), handles_.cublaslt(),
                   handles_.cudnn(), host_workspace_.get(), host_workspace_.bytes()};
  for (const auto& [dst, src] : current_->output_copies)
    KILN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src.first, src.second, cudaMemcpyDeviceToDevice, stream));
  const auto& nodes = engine_.graph().nodes();
  const StreamSchedule* sc = engine_.schedule();
  if (sc && !profiler) {
    // Every layer on its stream. The auxiliary streams start after what the main stream holds (the inputs), and
    // the main stream ends after them; in between, the schedule's waits order each layer after its producers.
    const int32_t ns = sc->num_streams;
    std::vector<LaunchContext> lcs(static_cast<size_t>(ns), lc);
    for (int32_t s = 1; s < ns; ++s) {
      Aux& a = *aux_[s - 1];
      if (!a.stream) continue;
      lcs[s] = LaunchContext{a.stream,           a.workspace.get(),      a.workspace.bytes(), a.handles.cublaslt(),
                             a.handles.cudnn(), a.host_workspace.get(), a.host_workspace.bytes()};
    }
    cudaEvent_t fork = events_[sc->events];
    Status st = KILN_CUDA_STATUS(cudaEventRecord(fork, stream));
    std::vector<bool> forked(static_cast<size_t>(ns), false);  // joined back below, whatever fails after
    for (int32_t s = 1; s < ns && st.ok(); ++s)
      if (aux_[s - 1]->stream) {
        st = KILN_CUDA_STATUS(cudaStreamWaitEvent(lcs[s].stream, fork, 0));
        forked[s] = st.ok();
      }
    size_t li = 0;
    auto& launches = current_->launches;
    for (size_t k = 0; k < nodes.size() && st.ok(); ++k) {
      const LaunchContext& on = lcs[sc->stream[k]];
      for (int32_t e : sc->waits[k])
        if (st.ok()) st = KILN_CUDA_STATUS(cudaStreamWaitEvent(on.stream, events_[e], 0));
      if (st.ok() && li < launches.size() && launches[li].node == k) st = LaunchLayer(on, launches[li++]);
      if (st.ok() && sc->record[k] >= 0) st = KILN_CUDA_STATUS(cudaEventRecord(events_[sc->record[k]], on.stream));
    }
    // Joined back even after a failure, so the main stream (and a capture) never ends before the auxiliary work.
    for (int32_t s = 1; s < ns; ++s) {
      if (!forked[s]) continue;
      cudaEvent_t join = events_[static_cast<size_t>(sc->events) + s];
      Status j = KILN_CUDA_STATUS(cudaEventRecord(join, lcs[s].stream));
      if (j.ok()) j = KILN_CUDA_STATUS(cudaStreamWaitEvent(stream, join, 0));
      if (st.ok()) st = j;
    }
    return st;
  }
  std::vector<cudaEvent_t> events;
  if (profiler) {
    events.resize(current_->launches.size() + 1);
    for (auto& ev : events) KILN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&ev));
    KILN_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[0], stream));
  }
  Status st = Status::Ok();
  for (size_t i = 0; i < current_->launches.size() && st.ok(); ++i) {
    st = LaunchLayer(lc, current_->launches[i]);
    if (st.ok() && profiler) st = KILN_CUDA_STATUS(cudaEventRecord(events[i + 1], stream));
  }
  if (profiler) {
    if (st.ok()) st = KILN_CUDA_STATUS(cudaEventSynchronize(events.back()));
    for (size_t i = 0; st.ok() && i < current_->launches.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events[i], events[i + 1]);
      profiler->reportLayerTime(nodes[current_->launches[i].node]->name.c_str(), ms);
    }
    for (auto& ev : events) cudaEventDestroy(ev);
  }
  return st;
}

Status GpuContext::Enqueue(cudaStream_t stream, std::shared_ptr<const Graph> shaped, const std::string& shape_key,
                           const std::map<std::string, void*>& addresses, IProfiler* profiler) {
  std::string key = shape_key;
  for (const auto& [name, a] : addresses) key += fmt::format("|{}={}", name, a);
  current_ = nullptr;
  for (size_t i = 0; i < plans_.size(); ++i) {
    if (plans_[i]->key != key) continue;
    std::rotate(plans_.begin() + i, plans_.begin() + i + 1, plans_.end());  // now the most recently used
    current_ = plans_.back().get();
    break;
  }
  if (!current_) {
    KILN_RETURN_IF_ERROR(BuildPlan(std::move(shaped), key, addresses));
    current_ = plans_.back().get();
  }
  if (!handles_ready_ || handles_stream_ != stream) {
    KILN_RETURN_IF_ERROR(handles_.Init(stream));
    handles_ready_ = true;
    handles_stream_ = stream;
  }
  if (engine_.schedule() && !profiler) KILN_RETURN_IF_ERROR(PrepareAuxStreams());
  // Profiled runs time each layer with events; the legacy default stream cannot be captured.
  if (!use_graph_ || profiler || stream == nullptr || !current_->eager_reason.empty()) return Launches(stream, profiler);

  Plan& plan = *current_;
  const std::string gkey = fmt::format("stream={}", static_cast<void*>(stream));
  if (!plan.graph_exec || plan.graph_key != gkey) {
    if (plan.graph_exec) {
      cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(plan.graph_exec));
      plan.graph_exec = nullptr;
    }
    cudaGraph_t graph = nullptr;
    Status st;
    cudaError_t end = cudaSuccess;
    {
      CaptureScope capturing;  // no other thread frees memory or creates handles meanwhile (capture_guard.h)
      TakeCaptureRefusal(nullptr);
      KILN_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      st = Launches(stream, nullptr);
      end = cudaStreamEndCapture(stream, &graph);
    }
    std::string why;
    if (!st.ok() && TakeCaptureRefusal(&why)) {
      // A layer needs the host mid-run (an If's condition, a Loop's): this plan runs without a graph from now on.
      if (graph) cudaGraphDestroy(graph);
      plan.eager_reason = why;
      return Launches(stream, nullptr);
    }
    if (!st.ok()) {
      if (graph) cudaGraphDestroy(graph);
      return st.WithContext("capturing the engine into a CUDA graph");
    }
    KILN_CUDA_RETURN_IF_ERROR(end);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    KILN_CUDA_RETURN_IF_ERROR(inst);
    plan.graph_exec = exec;
    plan.graph_key = gkey;
    ++captures_;
  }
  return KILN_CUDA_STATUS(cudaGraphLaunch(static_cast<cudaGraphExec_t>(plan.graph_exec), stream));
}

}  // namespace kiln::cuda
