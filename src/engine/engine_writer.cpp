// Engine writer: EngineContents -> header + FlatBuffers payload + 4096-aligned weights section.
// Only values that the graph references (graph inputs/outputs, node inputs/outputs) are written, in the
// graph's creation order, so dead constants left behind by passes cost nothing.
#include <flatbuffers/flatbuffers.h>

#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "engine/engine_file.h"
#include "engine/engine_internal.h"
#include "engine_generated.h"

namespace kiln {

namespace {

namespace fbs = flatbuffers;

static_assert(static_cast<int>(Attribute::Kind::kStrings) == static_cast<int>(fb::AttrKind::Strings));
static_assert(static_cast<int>(Attribute::Kind::kTensor) == static_cast<int>(fb::AttrKind::Tensor));
static_assert(static_cast<int>(BufferPlan::Kind::kView) == static_cast<int>(fb::BufferKind::View));

size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

class Writer {
 public:
  Result<std::vector<uint8_t>> Write(const EngineContents& e);

 private:
  Result<fbs::Offset<fb::TensorRef>> AddTensor(const Tensor& t, const std::string& what);
  fbs::Offset<fbs::Vector<fbs::Offset<fb::Dim>>> AddDims(const std::vector<Dim>& dims);
  Result<fbs::Offset<fb::Graph>> AddGraph(const Graph& g, const std::vector<std::string>& tactics);
  Result<fbs::Offset<fb::MemoryPlan>> AddPlan(const MemoryPlan& plan);
  fbs::Offset<fbs::Vector<fbs::Offset<fb::Profile>>> AddProfiles(const std::vector<EngineProfile>& profiles);

  fbs::FlatBufferBuilder fbb_{1 << 16};
  // Tensors to copy into the weights section once the file is laid out: (tensor, offset in the section).
  std::vector<std::pair<const Tensor*, size_t>> weights_;
  size_t weights_size_ = 0;
  std::unordered_map<const Value*, int32_t> vindex_;
  std::unordered_map<std::string, int32_t> vindex_by_name_;
};

Result<fbs::Offset<fb::TensorRef>> Writer::AddTensor(const Tensor& t, const std::string& what) {
  if (!t.defined()) return fb::CreateTensorRef(fbb_, 0, fbb_.CreateVector(std::vector<int64_t>{}), 0, 0);
  if (DataTypeSize(t.dtype()) == 0)
    return Err(StatusCode::kUnsupported, "{} has type {}, which engine files cannot hold", what,
               DataTypeName(t.dtype()));
  const size_t nbytes = t.nbytes();
  const size_t offset = AlignUp(weights_size_, kEngineTensorAlignment);
  weights_size_ = offset + nbytes;
  if (nbytes) weights_.emplace_back(&t, offset);
  auto shape = fbb_.CreateVector(t.shape());
  return fb::CreateTensorRef(fbb_, static_cast<int32_t>(t.dtype()), shape, offset, nbytes);
}

fbs::Offset<fbs::Vector<fbs::Offset<fb::Dim>>> Writer::AddDims(const std::vector<Dim>& dims) {
  std::vector<fbs::Offset<fb::Dim>> out;
  out.reserve(dims.size());
  for (const Dim& d : dims) {
    auto sym = d.sym.empty() ? fbs::Offset<fbs::String>() : fbb_.CreateString(d.sym);
    out.push_back(fb::CreateDim(fbb_, d.known() ? d.value : -1, sym));
  }
  return fbb_.CreateVector(out);
}

Result<fbs::Offset<fb::Graph>> Writer::AddGraph(const Graph& g, const std::vector<std::string>& tactics) {
  const auto& nodes = g.nodes();
  if (!tactics.empty() && tactics.size() != nodes.size())
    return Err(StatusCode::kInternal, "the engine has {} tactic names for {} nodes", tactics.size(), nodes.size());

  std::unordered_set<const Value*> used;
  for (const Value* v : g.inputs) used.insert(v);
  for (const Value* v : g.outputs) used.insert(v);
  for (const auto& n : nodes) {
    for (const Value* v : n->inputs) used.insert(v);
    for (const Value* v : n->outputs) used.insert(v);
  }
  used.erase(nullptr);

  std::vector<fbs::Offset<fb::Value>> values;
  for (const Value* v : g.values()) {
    if (!used.count(v)) continue;
    if (vindex_by_name_.count(v->name))
      return Err(StatusCode::kInternal, "two values are named '{}'; engine files need unique names", v->name);
    const int32_t idx = static_cast<int32_t>(values.size());
    vindex_[v] = idx;
    vindex_by_name_[v->name] = idx;
    fbs::Offset<fb::TensorRef> data;
    if (v->const_value) {
      KILN_ASSIGN_OR_RETURN(data, AddTensor(*v->const_value, fmt::format("constant '{}'", v->name)));
    }
    auto name = fbb_.CreateString(v->name);
    auto shape = AddDims(v->shape);
    fbs::Offset<fbs::Vector<fbs::Offset<fb::Dim>>> sym;
    if (v->sym_value) sym = AddDims(*v->sym_value);
    const uint32_t flags = (v->is_graph_input ? 1u : 0u) | (v->is_graph_output ? 2u : 0u);
    values.push_back(fb::CreateValue(fbb_, name, static_cast<int32_t>(v->dtype), v->has_shape, shape, flags, data,
                                     sym, static_cast<uint8_t>(v->kind)));
  }
  auto refs = [&](const std::vector<Value*>& vs) {
    std::vector<int32_t> r;
    r.reserve(vs.size());
    for (const Value* v : vs) r.push_back(v ? vindex_.at(v) : -1);
    return fbb_.CreateVector(r);
  };

  std::vector<fbs::Offset<fb::Node>> fnodes;
  fnodes.reserve(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = *nodes[k];
    std::vector<fbs::Offset<fb::Attribute>> attrs;
    for (const auto& [key, a] : n.attrs) {
      fbs::Offset<fb::TensorRef> t;
      if (a.kind == Attribute::Kind::kTensor) {
        KILN_ASSIGN_OR_RETURN(t, AddTensor(a.t, fmt::format("{}: tensor attribute '{}'", n.Where(), key)));
      }
      fbs::Offset<fb::Graph> sub;
      if (a.kind == Attribute::Kind::kGraph) {  // a control-flow body: its own value table, names of its own
        if (!a.g) return Err(StatusCode::kInternal, "{}: graph attribute '{}' holds no graph", n.Where(), key);
        auto saved = std::move(vindex_);
        auto saved_names = std::move(vindex_by_name_);
        vindex_.clear();
        vindex_by_name_.clear();
        auto r = AddGraph(*a.g, {});
        vindex_ = std::move(saved);
        vindex_by_name_ = std::move(saved_names);
        if (!r.ok()) return r.status().WithContext(fmt::format("{}: attribute '{}'", n.Where(), key));
        sub = *r;
      }
      auto name = fbb_.CreateString(key);
      auto s = a.kind == Attribute::Kind::kString ? fbb_.CreateString(a.s) : fbs::Offset<fbs::String>();
      auto floats = a.kind == Attribute::Kind::kFloats ? fbb_.CreateVector(a.floats) : fbs::Offset<fbs::Vector<float>>();
      auto ints = a.kind == Attribute::Kind::kInts ? fbb_.CreateVector(a.ints) : fbs::Offset<fbs::Vector<int64_t>>();
      auto strings = a.kind == Attribute::Kind::kStrings ? fbb_.CreateVectorOfStrings(a.strings)
                                                         : fbs::Offset<fbs::Vector<fbs::Offset<fbs::String>>>();
      attrs.push_back(fb::CreateAttribute(fbb_, name, static_cast<fb::AttrKind>(a.kind), a.f, a.i, s, floats, ints,
                                          strings, t, sub));
    }
    auto attr_vec = fbb_.CreateVector(attrs);
    auto name = fbb_.CreateString(n.name);
    auto op = fbb_.CreateString(n.op_type);
    auto domain = fbb_.CreateString(n.domain);
    auto ins = refs(n.inputs);
    auto outs = refs(n.outputs);
    auto tactic = fbb_.CreateString(tactics.empty() ? std::string() : tactics[k]);
    fnodes.push_back(fb::CreateNode(fbb_, name, op, domain, n.opset, ins, outs, attr_vec, tactic));
  }
  std::vector<fbs::Offset<fb::Opset>> opsets;
  for (const auto& [domain, version] : g.opsets)
    opsets.push_back(fb::CreateOpset(fbb_, fbb_.CreateString(domain), version));

  for (const Value* v : g.inputs)
    if (!v) return Err(StatusCode::kInternal, "the graph has a null input");
  for (const Value* v : g.outputs)
    if (!v) return Err(StatusCode::kInternal, "the graph has a null output");
  auto gname = fbb_.CreateString(g.name);
  auto opset_vec = fbb_.CreateVector(opsets);
  auto value_vec = fbb_.CreateVector(values);
  auto node_vec = fbb_.CreateVector(fnodes);
  auto in_vec = refs(g.inputs);
  auto out_vec = refs(g.outputs);
  return fb::CreateGraph(fbb_, gname, opset_vec, value_vec, node_vec, in_vec, out_vec);
}

Result<fbs::Offset<fb::MemoryPlan>> Writer::AddPlan(const MemoryPlan& plan) {
  std::vector<fbs::Offset<fb::Buffer>> bufs;
  bufs.reserve(plan.buffers.size());
  for (const BufferPlan& b : plan.buffers) {
    auto it = vindex_by_name_.find(b.name);
    if (it == vindex_by_name_.end())
      return Err(StatusCode::kInternal, "the memory plan names value '{}', which the graph does not have", b.name);
    int32_t alias = -1;
    if (b.kind == BufferPlan::Kind::kView) {
      auto r = vindex_by_name_.find(b.alias_of);
      if (r == vindex_by_name_.end())
        return Err(StatusCode::kInternal, "the memory plan's view '{}' names '{}', which the graph does not have",
                   b.name, b.alias_of);
      alias = r->second;
    }
    bufs.push_back(fb::CreateBuffer(fbb_, it->second, static_cast<fb::BufferKind>(b.kind), b.offset, b.bytes,
                                    b.first, b.last, alias));
  }
  auto vec = fbb_.CreateVector(bufs);
  return fb::CreateMemoryPlan(fbb_, vec, plan.alignment, plan.arena_bytes, plan.naive_bytes, plan.peak_live_bytes,
                              plan.external_bytes);
}

fbs::Offset<fbs::Vector<fbs::Offset<fb::Profile>>> Writer::AddProfiles(const std::vector<EngineProfile>& profiles) {
  std::vector<fbs::Offset<fb::Profile>> out;
  for (const EngineProfile& p : profiles) {
    std::vector<fbs::Offset<fb::ProfileInput>> ins;
    for (const auto& [name, d] : p.inputs)
      ins.push_back(fb::CreateProfileInput(fbb_, fbb_.CreateString(name), fbb_.CreateVector(d.min),
                                           fbb_.CreateVector(d.opt), fbb_.CreateVector(d.max)));
    out.push_back(fb::CreateProfile(fbb_, fbb_.CreateVector(ins)));
  }
  return fbb_.CreateVector(out);
}

Result<std::vector<uint8_t>> Writer::Write(const EngineContents& e) {
  if (!e.graph) return Err(StatusCode::kInvalidArgument, "the engine has no graph to serialize");
  if (e.target.backend.empty() || e.target.backend.size() >= engine_layout::kBackendLen)
    return Err(StatusCode::kInvalidArgument, "backend name '{}' must be 1..{} characters", e.target.backend,
               engine_layout::kBackendLen - 1);
  KILN_ASSIGN_OR_RETURN(auto graph, AddGraph(*e.graph, e.tactics));
  fbs::Offset<fb::MemoryPlan> plan;
  if (e.plan) {
    KILN_ASSIGN_OR_RETURN(plan, AddPlan(*e.plan));
  }
  auto profiles = AddProfiles(e.profiles);
  auto report = fbb_.CreateString(e.build_report_json);
  fbs::Offset<fbs::Vector<fbs::Offset<fb::PluginRef>>> plugins;
  if (auto refs = PluginsOfGraph(*e.graph); !refs.empty()) {
    std::vector<fbs::Offset<fb::PluginRef>> fr;
    for (const EnginePluginRef& r : refs)
      fr.push_back(fb::CreatePluginRef(fbb_, fbb_.CreateString(r.domain), fbb_.CreateString(r.name),
                                       fbb_.CreateString(r.version), fbb_.CreateString(r.library)));
    plugins = fbb_.CreateVector(fr);
  }
  fbs::Offset<fbs::Vector<int32_t>> node_streams;
  if (!e.node_streams.empty()) {
    if (e.node_streams.size() != e.graph->nodes().size())
      return Err(StatusCode::kInternal, "the engine has {} stream assignments for {} nodes", e.node_streams.size(),
                 e.graph->nodes().size());
    node_streams = fbb_.CreateVector(e.node_streams);
  }
  fbs::Offset<fbs::Vector<fbs::Offset<fb::Profile>>> points;
  fbs::Offset<fbs::Vector<fbs::Offset<fb::TacticVariant>>> variants;
  if (!e.tactic_points.empty()) {
    std::vector<EngineProfile> as_profiles;
    for (const auto& pt : e.tactic_points) {
      EngineProfile p;
      for (const auto& [name, d] : pt) p.inputs[name] = ProfileInputDims{d, d, d};
      as_profiles.push_back(std::move(p));
    }
    points = AddProfiles(as_profiles);
    std::vector<fbs::Offset<fb::TacticVariant>> v;
    for (size_t k = 0; k < e.tactic_variants.size(); ++k)
      for (const auto& [point, tactic] : e.tactic_variants[k])
        v.push_back(fb::CreateTacticVariant(fbb_, static_cast<int32_t>(k), point, fbb_.CreateString(tactic)));
    variants = fbb_.CreateVector(v);
  }
  fbb_.Finish(fb::CreateEngine(fbb_, graph, profiles, plan, report, plugins, e.max_tensor_elements,
                                e.profiling_verbosity, node_streams, e.num_streams, points, variants),
              fb::EngineIdentifier());
  const size_t payload_size = fbb_.GetSize();
  if (payload_size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return Err(StatusCode::kOutOfRange, "the engine's graph description is {} bytes, beyond FlatBuffers' 2 GiB",
               payload_size);

  EngineHeader h;
  h.format_version = kEngineFormatVersion;
  h.kiln_version = KilnVersion();
  h.target = e.target;
  h.payload_offset = kEngineHeaderSize;
  h.payload_size = payload_size;
  h.weights_offset = AlignUp(kEngineHeaderSize + payload_size, kEngineWeightsAlignment);
  h.weights_size = weights_size_;
  h.file_size = h.weights_offset + h.weights_size;
  std::vector<uint8_t> file(h.file_size, 0);
  engine_layout::EncodeHeader(h, file.data());
  std::memcpy(file.data() + kEngineHeaderSize, fbb_.GetBufferPointer(), payload_size);
  for (const auto& [t, offset] : weights_) std::memcpy(file.data() + h.weights_offset + offset, t->raw(), t->nbytes());
  ResealEngine(file);
  return file;
}

}  // namespace

Result<std::vector<uint8_t>> SerializeEngine(const EngineContents& engine) {
  Writer w;
  return w.Write(engine);
}

}  // namespace kiln
