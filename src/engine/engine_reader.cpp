// Engine reader: header checks, checksum, compatibility, FlatBuffers verification, then a payload -> Graph
// conversion that checks every index, size and offset before using it, so that no bytes can crash it.
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "engine/engine_file.h"
#include "engine/engine_internal.h"
#include "engine_generated.h"

namespace kiln {

namespace {

namespace fbs = flatbuffers;

Status Bad(const std::string& what) {
  return Err(StatusCode::kInvalidModel,
             "the engine payload is inconsistent ({}): the engine file is corrupted; copy it again or rebuild it",
             what);
}

// No tensor kiln builds has more dims or a larger dim (the element cap is far below 2^40).
constexpr size_t kMaxRank = 64;
constexpr int64_t kMaxDim = int64_t{1} << 40;

// 21, 22: uint4, int4; 23 to 26: float4e2m1, float8e8m0, uint2, int2
bool KnownDataType(int32_t c) { return (c >= 0 && c <= 13) || (c >= 16 && c <= 26); }

std::string Str(const fbs::String* s) { return s ? s->str() : std::string(); }

// Copies a vector of scalars. The verifier checks a vector's length prefix for alignment but not its 8-byte
// elements, so the bytes are copied rather than read in place.
template <typename T>
std::vector<T> Vec(const fbs::Vector<T>* v) {
  std::vector<T> out;
  if (!v || v->size() == 0) return out;
  out.resize(v->size());
  std::memcpy(out.data(), v->Data(), v->size() * sizeof(T));
  return out;
}

class Reader {
 public:
  Reader(const uint8_t* weights, uint64_t weights_size) : weights_(weights), weights_size_(weights_size) {}
  Result<EngineContents> Read(const fb::Engine& e);

 private:
  Result<Tensor> ReadTensor(const fb::TensorRef* t, const std::string& what);
  Result<std::vector<Dim>> ReadDims(const fbs::Vector<fbs::Offset<fb::Dim>>* dims, const std::string& what);
  Result<Value*> Ref(int32_t idx, bool allow_omitted, const std::string& what);
  Status ReadGraph(const fb::Graph& fg, EngineContents& out);
  // One graph (the engine's, or a control-flow body at `depth` > 0), its nodes' tactics into `tactics` when given.
  Result<std::unique_ptr<Graph>> ReadGraphBody(const fb::Graph& fg, std::vector<std::string>* tactics, int depth);
  Status ReadPlan(const fb::MemoryPlan& fp, EngineContents& out);

  const uint8_t* weights_;
  uint64_t weights_size_;
  std::vector<Value*> values_;
};

Result<Tensor> Reader::ReadTensor(const fb::TensorRef* t, const std::string& what) {
  if (!t) return Bad(what + " has no data");
  const int32_t code = t->dtype();
  if (!KnownDataType(code)) return Bad(fmt::format("{} has element type code {}", what, code));
  const DataType dt = static_cast<DataType>(code);
  std::vector<int64_t> shape = Vec(t->shape());
  if (dt == DataType::kUndefined) {
    if (!shape.empty() || t->size() != 0) return Bad(what + " has data but no element type");
    return Tensor();
  }
  const size_t es = DataTypeSize(dt);
  if (es == 0) return Bad(fmt::format("{} has type {}", what, DataTypeName(dt)));
  uint64_t bytes = es;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return Bad(fmt::format("{} has a negative dimension", what));
    if (d == 0) zero = true;
  }
  if (zero) {
    bytes = 0;
  } else {
    for (int64_t d : shape) {
      if (bytes > weights_size_ / static_cast<uint64_t>(d))
        return Bad(fmt::format("{} is larger than the weights section", what));
      bytes *= static_cast<uint64_t>(d);
    }
  }
  if (bytes != t->size())
    return Bad(fmt::format("{} has {} bytes for shape {}", what, t->size(), ShapeToString(shape)));
  if (t->offset() > weights_size_ || bytes > weights_size_ - t->offset())
    return Bad(fmt::format("{} lies outside the weights section", what));
  Tensor out(dt, std::move(shape));
  if (bytes) std::memcpy(out.raw(), weights_ + t->offset(), bytes);
  if (const int64_t i = FirstOutOf4BitRange(out); i >= 0)  // held one value per byte: each must be a value
    return Bad(fmt::format("{} holds {}, outside {}", what,
                           dt == DataType::kFloat4E2M1 ? static_cast<int64_t>(out.data<uint8_t>()[i]) : out.GetAsInt(i),
                           DataTypeName(dt)));
  return out;
}

Result<std::vector<Dim>> Reader::ReadDims(const fbs::Vector<fbs::Offset<fb::Dim>>* dims, const std::string& what) {
  std::vector<Dim> out;
  if (!dims) return out;
  if (dims->size() > kMaxRank) return Bad(fmt::format("{} has rank {} (at most {})", what, dims->size(), kMaxRank));
  out.reserve(dims->size());
  for (const fb::Dim* d : *dims) {
    if (!d || d->value() < -1 || d->value() > kMaxDim) return Bad(what + " has a bad dimension");
    if (d->value() >= 0) out.emplace_back(d->value());
    else out.push_back(d->sym() ? Dim::Symbol(d->sym()->str()) : Dim::Unknown());
  }
  return out;
}

Result<Value*> Reader::Ref(int32_t idx, bool allow_omitted, const std::string& what) {
  if (idx == -1 && allow_omitted) return static_cast<Value*>(nullptr);
  if (idx < 0 || static_cast<size_t>(idx) >= values_.size())
    return Bad(fmt::format("{} names value {} of {}", what, idx, values_.size()));
  return values_[static_cast<size_t>(idx)];
}

Status Reader::ReadGraph(const fb::Graph& fg, EngineContents& out) {
  KILN_ASSIGN_OR_RETURN(out.graph, ReadGraphBody(fg, &out.tactics, 0));
  return Status::Ok();
}

Result<std::unique_ptr<Graph>> Reader::ReadGraphBody(const fb::Graph& fg, std::vector<std::string>* tactics_out,
                                                     int depth) {
  constexpr int kMaxDepth = 32;
  if (depth > kMaxDepth) return Bad(fmt::format("control-flow bodies are nested more than {} deep", kMaxDepth));
  auto g = std::make_unique<Graph>();
  g->name = Str(fg.name());
  if (fg.opsets())
    for (const fb::Opset* o : *fg.opsets()) g->opsets[Str(o->domain())] = o->version();

  const auto* vals = fg.values();
  const size_t nv = vals ? vals->size() : 0;
  values_.assign(nv, nullptr);
  for (size_t i = 0; i < nv; ++i) {
    const fb::Value* fv = vals->Get(static_cast<fbs::uoffset_t>(i));
    if (!fv->name()) return Bad(fmt::format("value {} has no name", i));
    const std::string name = fv->name()->str();
    if (g->FindValue(name)) return Bad(fmt::format("value '{}' appears twice", name));
    if (!KnownDataType(fv->dtype())) return Bad(fmt::format("value '{}' has element type code {}", name, fv->dtype()));
    Value* v = g->GetOrAddValue(name);
    v->dtype = static_cast<DataType>(fv->dtype());
    v->has_shape = fv->has_shape();
    KILN_ASSIGN_OR_RETURN(v->shape, ReadDims(fv->shape(), fmt::format("value '{}'", name)));
    if (fv->sym_value()) {
      KILN_ASSIGN_OR_RETURN(std::vector<Dim> sym, ReadDims(fv->sym_value(), fmt::format("value '{}'", name)));
      v->sym_value = std::move(sym);
    }
    if (fv->const_data()) {
      KILN_ASSIGN_OR_RETURN(Tensor t, ReadTensor(fv->const_data(), fmt::format("constant '{}'", name)));
      if (t.dtype() != v->dtype) return Bad(fmt::format("constant '{}' has data of another type", name));
      v->const_value = std::move(t);
    }
    if ((fv->flags() & 1u) && v->is_const()) return Bad(fmt::format("constant '{}' is marked a graph input", name));
    if (fv->kind() > static_cast<uint8_t>(ValueKind::kOptionalSequence))
      return Bad(fmt::format("value '{}' has kind {}", name, fv->kind()));
    v->kind = static_cast<ValueKind>(fv->kind());
    values_[i] = v;
  }

  std::vector<int32_t> ins = Vec(fg.inputs()), outs = Vec(fg.outputs());
  for (int32_t idx : ins) {
    KILN_ASSIGN_OR_RETURN(Value * v, Ref(idx, false, "a graph input"));
    if (v->is_const() || v->is_graph_input) return Bad(fmt::format("graph input '{}' is a constant or listed twice", v->name));
    v->is_graph_input = true;
    g->inputs.push_back(v);
  }
  for (int32_t idx : outs) {
    KILN_ASSIGN_OR_RETURN(Value * v, Ref(idx, false, "a graph output"));
    v->is_graph_output = true;
    g->outputs.push_back(v);
  }
  for (size_t i = 0; i < nv; ++i) {
    const uint32_t want = (values_[i]->is_graph_input ? 1u : 0u) | (values_[i]->is_graph_output ? 2u : 0u);
    if ((vals->Get(static_cast<fbs::uoffset_t>(i))->flags() & 3u) != want)
      return Bad(fmt::format("value '{}' has input/output flags that the graph's lists contradict", values_[i]->name));
  }

  const auto* nodes = fg.nodes();
  const size_t nn = nodes ? nodes->size() : 0;
  std::vector<std::string> tactics;
  bool any_tactic = false;
  for (size_t k = 0; k < nn; ++k) {
    const fb::Node* fn = nodes->Get(static_cast<fbs::uoffset_t>(k));
    if (!fn->op_type() || fn->op_type()->size() == 0) return Bad(fmt::format("node {} has no op type", k));
    Node* n = g->AddNode(fn->op_type()->str(), Str(fn->name()));
    n->domain = Str(fn->domain());
    n->opset = fn->opset();
    const std::string where = fmt::format("node {} '{}'", k, n->name);
    for (int32_t idx : Vec(fn->inputs())) {
      KILN_ASSIGN_OR_RETURN(Value * v, Ref(idx, true, where + " input"));
      n->inputs.push_back(v);
    }
    if (!fn->outputs() || fn->outputs()->size() == 0) return Bad(where + " has no outputs");
    for (int32_t idx : Vec(fn->outputs())) {
      KILN_ASSIGN_OR_RETURN(Value * v, Ref(idx, true, where + " output"));
      if (v && (v->producer || v->is_const() || v->is_graph_input))
        return Bad(fmt::format("{} outputs '{}', which is already defined", where, v->name));
      if (v) v->producer = n;
      n->outputs.push_back(v);
    }
    if (fn->attrs()) {
      for (const fb::Attribute* fa : *fn->attrs()) {
        if (!fa->name()) return Bad(where + " has an attribute without a name");
        const std::string key = fa->name()->str();
        const int kind = static_cast<int>(fa->kind());
        if (kind < 0 || kind > static_cast<int>(fb::AttrKind::MAX))
          return Bad(fmt::format("{} attribute '{}' has kind {}", where, key, kind));
        if (n->attrs.count(key)) return Bad(fmt::format("{} has attribute '{}' twice", where, key));
        Attribute a;
        a.kind = static_cast<Attribute::Kind>(kind);
        a.f = fa->f();
        a.i = fa->i();
        a.s = Str(fa->s());
        a.floats = Vec(fa->floats());
        a.ints = Vec(fa->ints());
        if (fa->strings())
          for (const fbs::String* s : *fa->strings()) a.strings.push_back(Str(s));
        if (a.kind == Attribute::Kind::kTensor) {
          KILN_ASSIGN_OR_RETURN(a.t, ReadTensor(fa->t(), fmt::format("{} attribute '{}'", where, key)));
        }
        if (a.kind == Attribute::Kind::kGraph) {  // a control-flow body, with a value table of its own
          if (!fa->g()) return Bad(fmt::format("{} attribute '{}' has no graph", where, key));
          auto saved = std::move(values_);
          auto body = ReadGraphBody(*fa->g(), nullptr, depth + 1);
          values_ = std::move(saved);
          if (!body.ok()) return body.status();
          a.g = std::shared_ptr<const Graph>(std::move(*body));
        }
        n->attrs.emplace(key, std::move(a));
      }
    }
    std::string tactic = Str(fn->tactic());
    any_tactic = any_tactic || !tactic.empty();
    tactics.push_back(std::move(tactic));
  }
  if (!any_tactic) tactics.clear();
  if (tactics_out) *tactics_out = std::move(tactics);
  Status st = VerifyGraph(*g);
  if (!st.ok()) return Bad(st.message());
  return g;
}

Status Reader::ReadPlan(const fb::MemoryPlan& fp, EngineContents& out) {
  MemoryPlan plan;
  plan.alignment = fp.alignment();
  plan.arena_bytes = fp.arena_bytes();
  plan.naive_bytes = fp.naive_bytes();
  plan.peak_live_bytes = fp.peak_live_bytes();
  plan.external_bytes = fp.external_bytes();
  if (fp.buffers()) {
    plan.buffers.reserve(fp.buffers()->size());
    for (const fb::Buffer* fb_buf : *fp.buffers()) {
      BufferPlan b;
      KILN_ASSIGN_OR_RETURN(Value * v, Ref(fb_buf->value(), false, "a memory plan buffer"));
      const int kind = static_cast<int>(fb_buf->kind());
      if (kind < 0 || kind > static_cast<int>(fb::BufferKind::MAX))
        return Bad(fmt::format("memory plan buffer '{}' has kind {}", v->name, kind));
      b.name = v->name;
      b.value = v;
      b.kind = static_cast<BufferPlan::Kind>(kind);
      b.offset = fb_buf->offset();
      b.bytes = fb_buf->bytes();
      b.first = fb_buf->first();
      b.last = fb_buf->last();
      // Lifetimes are steps of the node order.
      const int64_t steps = static_cast<int64_t>(out.graph->nodes().size());
      if (b.first < 0 || b.last < b.first || b.last > std::max<int64_t>(steps, 1))
        return Bad(fmt::format("memory plan buffer '{}' lives over nodes [{}, {}] of {}", v->name, b.first, b.last,
                               steps));
      if (b.kind == BufferPlan::Kind::kView) {
        KILN_ASSIGN_OR_RETURN(Value * root, Ref(fb_buf->alias_of(), false, "a memory plan view"));
        b.alias_of = root->name;
      }
      plan.buffers.push_back(std::move(b));
    }
  }
  Status st = plan.Validate();
  if (!st.ok()) return Bad(st.message());
  out.plan = std::move(plan);
  return Status::Ok();
}

// A profile's shapes for one input, checked before anything is sized from them: the input exists with that
// rank, every dim satisfies 0 <= min <= opt <= max, and the max shape holds at most 2^40 elements.
Status CheckProfileInput(const Graph& g, const std::string& name, const ProfileInputDims& d) {
  const Value* v = g.FindValue(name);
  if (!v || !v->is_graph_input)
    return Err(StatusCode::kInvalidModel, "the engine is corrupted: its profile names '{}', which is no input of its "
               "graph; rebuild it", name);
  if (v->has_shape && d.min.size() != v->shape.size())
    return Err(StatusCode::kInvalidModel, "the engine is corrupted: profile input '{}' has rank {}, the input {}; "
               "rebuild it", name, d.min.size(), v->shape.size());
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t count = 1;
  for (size_t i = 0; i < d.min.size(); ++i) {
    if (d.min[i] < 0 || d.min[i] > d.opt[i] || d.opt[i] > d.max[i])
      return Err(StatusCode::kInvalidModel, "the engine is corrupted: profile input '{}' dim {} has min {}, opt {}, "
                 "max {} (want 0 <= min <= opt <= max); rebuild it", name, i, d.min[i], d.opt[i], d.max[i]);
    if (d.max[i] != 0 && count > kMaxElements / d.max[i])
      return Err(StatusCode::kInvalidModel, "the engine is corrupted: profile input '{}' allows more than 2^40 "
                 "elements; rebuild it", name);
    count *= d.max[i];
  }
  return Status::Ok();
}

Result<EngineContents> Reader::Read(const fb::Engine& e) {
  EngineContents out;
  if (!e.graph()) return Bad("no graph");
  KILN_RETURN_IF_ERROR(ReadGraph(*e.graph(), out));
  if (e.plan()) KILN_RETURN_IF_ERROR(ReadPlan(*e.plan(), out));
  if (e.profiles()) {
    for (const fb::Profile* fp : *e.profiles()) {
      EngineProfile p;
      if (fp->inputs())
        for (const fb::ProfileInput* in : *fp->inputs()) {
          ProfileInputDims d{Vec(in->min()), Vec(in->opt()), Vec(in->max())};
          if (d.min.size() != d.opt.size() || d.opt.size() != d.max.size())
            return Bad(fmt::format("profile input '{}' has min/opt/max of different ranks", Str(in->name())));
          KILN_RETURN_IF_ERROR(CheckProfileInput(*out.graph, Str(in->name()), d));
          p.inputs[Str(in->name())] = std::move(d);
        }
      out.profiles.push_back(std::move(p));
    }
  }
  out.build_report_json = Str(e.build_report());
  if (e.max_tensor_elements() < 0) return Bad("a negative tensor element limit");
  out.max_tensor_elements = e.max_tensor_elements();
  if (e.profiling_verbosity() < 0 || e.profiling_verbosity() > 2)
    return Bad(fmt::format("profiling verbosity {}", e.profiling_verbosity()));
  out.profiling_verbosity = e.profiling_verbosity();
  if (e.num_streams() < 1 || e.num_streams() > 65)
    return Bad(fmt::format("{} streams (the main one and at most 64 auxiliary)", e.num_streams()));
  out.num_streams = e.num_streams();
  if (e.node_streams()) {
    out.node_streams = Vec(e.node_streams());
    if (out.node_streams.size() != out.graph->nodes().size())
      return Bad(fmt::format("{} stream assignments for {} nodes", out.node_streams.size(), out.graph->nodes().size()));
    int32_t top = 0;
    for (int32_t s : out.node_streams) {
      if (s < 0 || s >= out.num_streams) return Bad(fmt::format("a node on stream {} of {}", s, out.num_streams));
      top = std::max(top, s);
    }
    if (top + 1 != out.num_streams)
      return Bad(fmt::format("{} streams, of which nodes use {}", out.num_streams, top + 1));
  } else if (out.num_streams != 1) {
    return Bad(fmt::format("{} streams and no node on any", out.num_streams));
  }
  if (e.tactic_points()) {
    // Points of the first profile, as the builder takes them: at most 16, each naming exactly the profile's inputs,
    // within its min..max.
    if (e.tactic_points()->size() > 16) return Bad(fmt::format("{} tactic points (at most 16)", e.tactic_points()->size()));
    if (e.tactic_points()->size() > 0 && out.profiles.empty()) return Bad("tactic points without a profile");
    for (const fb::Profile* fp : *e.tactic_points()) {
      std::map<std::string, std::vector<int64_t>> pt;
      if (fp->inputs())
        for (const fb::ProfileInput* in : *fp->inputs()) {
          ProfileInputDims d{Vec(in->min()), Vec(in->opt()), Vec(in->max())};
          const std::string name = Str(in->name());
          if (d.min != d.opt || d.opt != d.max) return Bad(fmt::format("tactic point input '{}' is not one shape", name));
          KILN_RETURN_IF_ERROR(CheckProfileInput(*out.graph, name, d));
          auto prof = out.profiles[0].inputs.find(name);
          if (prof == out.profiles[0].inputs.end() || prof->second.min.size() != d.opt.size())
            return Bad(fmt::format("tactic point input '{}' is not an input of the first profile", name));
          for (size_t i = 0; i < d.opt.size(); ++i)
            if (d.opt[i] < prof->second.min[i] || d.opt[i] > prof->second.max[i])
              return Bad(fmt::format("tactic point input '{}' dim {} is {}, outside the profile's {}..{}", name, i,
                                     d.opt[i], prof->second.min[i], prof->second.max[i]));
          if (!pt.emplace(name, std::move(d.opt)).second)
            return Bad(fmt::format("tactic point input '{}' given twice", name));
        }
      if (pt.size() != out.profiles[0].inputs.size())
        return Bad(fmt::format("a tactic point names {} of the first profile's {} inputs", pt.size(),
                               out.profiles[0].inputs.size()));
      out.tactic_points.push_back(std::move(pt));
    }
  }
  if (e.tactic_variants() && e.tactic_variants()->size() > 0) {
    const size_t n = out.graph->nodes().size();
    out.tactic_variants.resize(n);
    for (const fb::TacticVariant* v : *e.tactic_variants()) {
      if (v->node() < 0 || static_cast<size_t>(v->node()) >= n || v->point() < 0 ||
          static_cast<size_t>(v->point()) >= out.tactic_points.size() || Str(v->tactic()).empty())
        return Bad(fmt::format("a per-shape tactic for node {} at point {} (of {} nodes, {} points)", v->node(),
                               v->point(), n, out.tactic_points.size()));
      auto& list = out.tactic_variants[v->node()];
      for (const auto& [point, unused] : list)
        if (point == v->point())
          return Bad(fmt::format("two per-shape tactics for node {} at point {}", v->node(), v->point()));
      list.emplace_back(v->point(), Str(v->tactic()));
    }
  }
  // Every value whose shape is fixed holds at most the engine's element limit (its builder checked the same: shapes
  // with unknown dims are sized at run time).
  const int64_t cap = out.max_tensor_elements > 0 ? out.max_tensor_elements : (int64_t{1} << 40);
  for (const Value* v : out.graph->values()) {
    if (!v->has_shape || !IsStatic(v->shape)) continue;
    int64_t n = 1;
    bool over = false;
    for (const Dim& d : v->shape)
      if (__builtin_mul_overflow(n, d.value, &n)) over = true;
    if (over || n > cap) return Bad(fmt::format("value '{}' has shape {}, over {} elements", v->name,
                                                ShapeToString(v->shape), cap));
  }
  if (e.plugins())
    for (const fb::PluginRef* r : *e.plugins())
      out.plugins.push_back({Str(r->domain()), Str(r->name()), Str(r->version()), Str(r->library())});
  KILN_RETURN_IF_ERROR(CheckEnginePlugins(*out.graph, out.plugins));
  return out;
}

}  // namespace

Result<EngineContents> DeserializeEngine(const uint8_t* data, size_t size, const EngineCompat& expected) {
  KILN_ASSIGN_OR_RETURN(EngineHeader h, ReadEngineHeader(data, size));
  const uint64_t sum = EngineChecksum(data, size);
  if (sum != h.checksum)
    return Err(StatusCode::kInvalidModel,
               "checksum mismatch (the header says {:#018x}, the contents give {:#018x}): the engine file is "
               "corrupted; copy it again or rebuild it",
               h.checksum, sum);
  KILN_RETURN_IF_ERROR(CheckEngineCompat(h.target, expected));
  if (h.payload_size >= FLATBUFFERS_MAX_BUFFER_SIZE) return Bad("payload beyond 2 GiB");

  // FlatBuffers reads scalars in place: give it an 8-byte aligned copy when the caller's bytes are not.
  const uint8_t* payload = data + h.payload_offset;
  std::unique_ptr<uint64_t[]> aligned;
  if (reinterpret_cast<uintptr_t>(payload) % 8 != 0) {
    aligned.reset(new uint64_t[(h.payload_size + 7) / 8]);
    std::memcpy(aligned.get(), payload, h.payload_size);
    payload = reinterpret_cast<const uint8_t*>(aligned.get());
  }
  fbs::Verifier::Options vopts;
  vopts.max_depth = 32;
  vopts.max_tables = 100'000'000;
  fbs::Verifier verifier(payload, h.payload_size, vopts);
  if (!fb::VerifyEngineBuffer(verifier))
    return Err(StatusCode::kInvalidModel,
               "the engine payload fails FlatBuffers verification: the engine file is corrupted; copy it again or "
               "rebuild it");
  Reader reader(data + h.weights_offset, h.weights_size);
  KILN_ASSIGN_OR_RETURN(EngineContents out, reader.Read(*fb::GetEngine(payload)));
  out.target = h.target;
  out.kiln_version = h.kiln_version;
  return out;
}

}  // namespace kiln
