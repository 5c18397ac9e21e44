// The node-by-node GPU executor (see graph_runner.h).
#include "backends/cuda/graph_runner.h"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"
#include "ops/infer.h"

namespace kiln::cuda {

namespace {

struct Slot {
  DeviceBuffer buf;
  DeviceTensor t;
  std::optional<Tensor> host;  // small integer tensors are mirrored for shape inference of later nodes
};

Result<Tensor> Download(const DeviceTensor& t, cudaStream_t stream) {
  Tensor h(t.dtype, t.shape);
  if (t.nbytes() > 0) {
    KILN_RETURN_IF_ERROR(CopyToHost(h.raw(), t.data, t.nbytes(), stream));
    KILN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  }
  return h;
}

Result<std::unique_ptr<Slot>> Upload(const Tensor& t, const std::string& name) {
  auto s = std::make_unique<Slot>();
  KILN_ASSIGN_OR_RETURN(s->buf, UploadToDevice(t.raw(), t.nbytes(), name));
  // The copy ran on the legacy stream, which the runner's (non-blocking) stream does not wait for.
  if (t.nbytes() > 0) KILN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cudaStreamLegacy));
  s->t.data = s->buf.get();
  s->t.dtype = t.dtype();
  s->t.shape = t.shape();
  s->host = t;
  s->t.host = &*s->host;
  return s;
}

// Small integer tensors (shape arithmetic) and scalars of any type (a Range's limit, an If's condition) are read back,
// so that shape inference of later nodes sees their values, as an engine's folding does for constants.
bool MirrorOnHost(const DeviceTensor& t) {
  if ((t.dtype == DataType::kInt64 || t.dtype == DataType::kInt32) && t.numel() <= 4096) return true;
  return t.numel() == 1;
}

}  // namespace

Result<std::map<std::string, Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                               const GpuRunOptions& opts) {
  if (DeviceCount() == 0) return Err(StatusCode::kUnsupported, "no CUDA device is available to run the graph");
  KILN_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  Handles handles;
  KILN_RETURN_IF_ERROR(handles.Init(stream.get()));
  std::unordered_map<const Value*, std::unique_ptr<Slot>> env;

  for (const Value* v : g.inputs) {
    auto it = inputs.find(v->name);
    if (it == inputs.end()) return Err(StatusCode::kInvalidArgument, "input '{}' ({}) was not given", v->name, v->TypeString());
    if (it->second.dtype() != v->dtype)
      return Err(StatusCode::kInvalidArgument, "input '{}' must be {} but {} was given", v->name,
                 DataTypeName(v->dtype), DataTypeName(it->second.dtype()));
    KILN_ASSIGN_OR_RETURN(env[v], Upload(it->second, v->name));
    if (opts.observe_float && IsFloatType(v->dtype)) KILN_RETURN_IF_ERROR(opts.observe_float(v->name, it->second));
  }
  // Last node that reads each value: without keep_all, a value's buffer is freed after it.
  std::unordered_map<const Value*, size_t> last_use;
  for (size_t k = 0; k < g.nodes().size(); ++k)
    for (const Value* in : g.nodes()[k]->inputs)
      if (in) last_use[in] = k;
  auto lookup = [&](const Value* v) -> Result<Slot*> {
    auto it = env.find(v);
    if (it != env.end()) return it->second.get();
    if (v->is_const()) {
      KILN_ASSIGN_OR_RETURN(env[v], Upload(*v->const_value, v->name));
      return env[v].get();
    }
    return Err(StatusCode::kInternal, "value '{}' has not been computed", v->name);
  };

  std::vector<DeviceBuffer> workspaces;  // the layers' scratch memory (kept to the end without sync_each_node)
  for (size_t node_index = 0; node_index < g.nodes().size(); ++node_index) {
    const Node& n = *g.nodes()[node_index];
    std::vector<DeviceTensor> ins(n.inputs.size());
    InferContext ictx{n, {}, {}};
    ictx.inputs.resize(n.inputs.size());
    ictx.outputs.resize(n.outputs.size());
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!n.inputs[i]) continue;
      KILN_ASSIGN_OR_RETURN(Slot * s, lookup(n.inputs[i]));
      ins[i] = s->t;
      TensorInfo info;
      info.dtype = s->t.dtype;
      info.shape = FromStatic(s->t.shape);
      info.has_shape = true;
      info.value = s->t.host;
      ictx.inputs[i] = std::move(info);
    }
    KILN_RETURN_IF_ERROR(InferNode(ictx));
    LayerSpec spec{n, {}, {}, opts.allow_tf32};
    for (const auto& t : ins) spec.input_shapes.push_back(t.shape);
    for (const auto& o : ictx.outputs)
      spec.output_shapes.push_back(o.has_shape && IsStatic(o.shape) ? ToStatic(o.shape) : std::vector<int64_t>{});
    KILN_ASSIGN_OR_RETURN(auto tactics, TacticsFor(spec));
    std::string tactic = tactics.front();
    if (auto t = opts.tactics.find(n.name); t != opts.tactics.end()) tactic = t->second;
    else if (!opts.tactic.empty()) tactic = opts.tactic;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, CreateLayer(spec, tactic));

    std::vector<std::unique_ptr<Slot>> outs(n.outputs.size());
    std::vector<DeviceTensor> out_t(n.outputs.size());
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      outs[i] = std::make_unique<Slot>();
      if (!n.outputs[i]) continue;  // an omitted optional output: not present (dtype undefined), no buffer
      const TensorInfo& o = ictx.outputs[i];
      out_t[i].dtype = o.dtype;
      int64_t elems = 0;
      if (o.has_shape && IsStatic(o.shape)) {
        out_t[i].shape = ToStatic(o.shape);
        elems = out_t[i].numel();
      } else {
        elems = layer->MaxOutputElements(i, ins);
        if (elems < 0)
          return Err(StatusCode::kInternal, "{}: output {} has no static shape ({}) and the layer gives no bound",
                     n.Where(), i, ShapeToString(o.shape));
      }
      KILN_ASSIGN_OR_RETURN(outs[i]->buf,
                            DeviceBuffer::Allocate(static_cast<size_t>(elems) * DataTypeSize(o.dtype)));
      out_t[i].data = outs[i]->buf.get();
    }
    DeviceBuffer& workspace = workspaces.emplace_back();
    const size_t ws = layer->WorkspaceBytes(ins, out_t);
    if (ws > 0) {
      KILN_ASSIGN_OR_RETURN(workspace, DeviceBuffer::Allocate(ws));
    }
    // A layer's creation (and a control-flow layer's planning in WorkspaceBytes) may upload weights from pageable
    // memory on the legacy stream, which this (non-blocking) stream does not wait for.
    KILN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cudaStreamLegacy));
    LaunchContext lc{stream.get(), workspace.get(), ws, handles.cublaslt(), handles.cudnn()};
    for (int r = 0; r < std::max(1, opts.repeat); ++r) {
      if (opts.poison_workspace && ws > 0)
        KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(workspace.get(), 0xA5 ^ (r * 0x3C), ws, stream.get()));
      Status st = layer->Enqueue(lc, ins, out_t);
      if (!st.ok()) return st.message().find(n.name) == std::string::npos ? st.WithContext(n.Where()) : st;
    }
    if (opts.sync_each_node) {
      Status sync = KILN_CUDA_STATUS(cudaStreamSynchronize(stream.get()));
      if (sync.ok()) sync = KILN_CUDA_STATUS(cudaGetLastError());
      if (!sync.ok()) return sync.WithContext(n.Where());
      workspaces.clear();
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      outs[i]->t = out_t[i];
      if (MirrorOnHost(out_t[i])) {
        KILN_ASSIGN_OR_RETURN(Tensor h, Download(out_t[i], stream.get()));
        outs[i]->host = std::move(h);
        outs[i]->t.host = &*outs[i]->host;
      }
      if (opts.observe_float && IsFloatType(out_t[i].dtype)) {
        KILN_ASSIGN_OR_RETURN(Tensor h, Download(out_t[i], stream.get()));
        KILN_RETURN_IF_ERROR(opts.observe_float(n.outputs[i]->name, h));
      }
      env[n.outputs[i]] = std::move(outs[i]);
    }
    if (!opts.keep_all && opts.sync_each_node)
      for (const Value* in : n.inputs)
        if (in && !in->is_graph_output && last_use[in] == node_index) env.erase(in);
  }

  std::map<std::string, Tensor> result;
  auto fetch = [&](const Value* v) -> Status {
    KILN_ASSIGN_OR_RETURN(Slot * s, lookup(v));
    KILN_ASSIGN_OR_RETURN(result[v->name], Download(s->t, stream.get()));
    return Status::Ok();
  };
  if (opts.keep_all)
    for (const auto& [v, s] : env)
      if (!v->is_const()) KILN_RETURN_IF_ERROR(fetch(v));
  for (const Value* o : g.outputs) KILN_RETURN_IF_ERROR(fetch(o));
  return result;
}

}  // namespace kiln::cuda
