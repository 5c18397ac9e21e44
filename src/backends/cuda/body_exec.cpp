// Control-flow bodies on the CUDA layers (see body_exec.h).
#include "backends/cuda/body_exec.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cpu/executor.h"
#include "backends/cuda/cuda_check.h"
#include "core/error.h"
#include "ops/infer.h"
#include "ops/sequence.h"

namespace kiln::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// A plan's key: each input's type and shape and, for a host-known input, its contents (small values, such as shape
// vectors, by their bytes; larger ones, weights, by their stable host address, hashing no megabytes per enqueue).
constexpr size_t kKeyBytes = 256;
std::string PlanKey(const std::vector<BodyInput>& inputs) {
  std::string key;
  for (const BodyInput& in : inputs) {
    key += fmt::format("{}:{}", static_cast<int>(in.dtype), fmt::join(in.shape, "x"));
    if (in.host && in.host->nbytes() <= kKeyBytes) {
      key += "=";
      key.append(static_cast<const char*>(in.host->raw()), in.host->nbytes());
    } else if (in.host) {
      key += fmt::format("@{}", in.host->raw());
    }
    key += ";";
  }
  return key;
}

bool AllOutputsConst(const Node& n) {
  for (const Value* o : n.outputs)
    if (o && !o->is_const()) return false;
  return true;
}

}  // namespace

Result<std::shared_ptr<Graph>> ShapeBody(const Node& owner, const std::string& attr, const Graph& body,
                                         const std::vector<BodyInput>& inputs, bool require_static) {
  std::shared_ptr<Graph> g(body.Clone().release());
  if (g->inputs.size() != inputs.size())
    return Err(StatusCode::kInternal, "{} attribute '{}': the body takes {} inputs but {} were bound", owner.Where(),
               attr, g->inputs.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value* v = g->inputs[i];
    v->dtype = inputs[i].dtype;
    v->shape = FromStatic(inputs[i].shape);
    v->has_shape = true;
    v->sym_value.reset();
    v->kind = ValueKind::kTensor;
    if (inputs[i].host) v->const_value = *inputs[i].host;
    else v->const_value.reset();
  }
  for (Value* v : g->values())
    if (!v->is_graph_input && !v->is_const() && v->producer) {  // inferred afresh at these inputs
      v->has_shape = false;
      v->shape.clear();
      v->sym_value.reset();
    }
  InferOptions opts;
  opts.evaluator = cpu::MakeConstEvaluator();
  Status st = InferGraph(*g, opts);
  if (!st.ok()) return st.WithContext(fmt::format("{} attribute '{}'", owner.Where(), attr));
  if (!require_static) return g;
  auto check = [&](const Value* v) -> Status {
    if (!v || v->is_const() || (v->has_shape && IsStatic(v->shape))) return Status::Ok();
    return Err(StatusCode::kUnsupported,
               "{} attribute '{}': value '{}' has no fixed shape at these input shapes ({}): it depends on data "
               "computed in the body, which the CUDA layer cannot plan (engines run such a node on the CPU)",
               owner.Where(), attr, v->name, v->has_shape ? ShapeToString(v->shape) : "rank unknown");
  };
  for (const auto& n : g->nodes()) {
    if (AllOutputsConst(*n)) continue;
    for (const Value* o : n->outputs) KILN_RETURN_IF_ERROR(check(o));
  }
  for (const Value* o : g->outputs) KILN_RETURN_IF_ERROR(check(o));
  return g;
}

Status CheckBodyLayers(const Node& owner, const std::string& attr, const Graph& shaped, bool allow_tf32) {
  std::string errors;
  int count = 0;
  for (const auto& n : shaped.nodes()) {
    if (AllOutputsConst(*n)) continue;
    for (const auto* list : {&n->inputs, &n->outputs})
      for (const Value* v : *list)
        if (v && v->kind != ValueKind::kTensor) {
          errors += fmt::format("\n    - {}: reads or makes {}, which GPU engines do not hold", n->Where(),
                                AValueKind(v->kind));
          ++count;
        }
    auto t = TacticsFor(SpecAt(*n, *n, allow_tf32));
    if (!t.ok()) {
      errors += "\n    - " + t.status().message();
      ++count;
    }
  }
  if (count == 0) return Status::Ok();
  return Err(StatusCode::kUnsupported, "{}: {} node(s) of its '{}' cannot run on the CUDA backend:{}", owner.Where(),
             count, attr, errors);
}

Result<const BodyExec::Plan*> BodyExec::PlanFor(const std::vector<BodyInput>& inputs) const {
  const std::string key = PlanKey(inputs);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  if (auto it = failures_.find(key); it != failures_.end()) return it->second;
  auto p = MakePlan(inputs);
  if (!p.ok()) {
    // Kept, so that an enqueue (maybe during a capture) does not plan again; a CUDA error (memory) may pass.
    if (p.status().code() != StatusCode::kCudaError) failures_.emplace(key, p.status());
    return p.status();
  }
  const Plan* r = p->get();
  plans_.emplace(key, std::move(*p));
  return r;
}

Result<std::unique_ptr<BodyExec::Plan>> BodyExec::MakePlan(const std::vector<BodyInput>& inputs) const {
  auto p = std::make_unique<Plan>();
  KILN_ASSIGN_OR_RETURN(p->shaped, ShapeBody(owner_, attr_, body_, inputs, /*require_static=*/true));
  const Graph& g = *p->shaped;
  for (size_t i = 0; i < g.inputs.size(); ++i) p->places[g.inputs[i]] = Place{Place::Kind::kInput, 0, nullptr, i};
  // Every other value: a constant's device copy, or a place of its own in the scratch (no reuse between values:
  // bodies are small next to the graphs around them).
  auto place = [&](const Value* v) -> Status {
    if (!v || p->places.count(v)) return Status::Ok();
    if (v->is_const()) {
      const Tensor& t = *v->const_value;
      KILN_ASSIGN_OR_RETURN(DeviceBuffer b, UploadToDevice(t.raw(), t.nbytes(), v->name));
      p->places[v] = Place{Place::Kind::kDevice, 0, b.get(), 0};
      p->constants.push_back(std::move(b));
      return Status::Ok();
    }
    const size_t bytes = static_cast<size_t>(NumElements(ToStatic(v->shape))) * DataTypeSize(v->dtype);
    p->places[v] = Place{Place::Kind::kScratch, p->value_bytes, nullptr, 0};
    p->value_bytes += AlignUp(bytes);
    return Status::Ok();
  };
  const auto& nodes = g.nodes();
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = *nodes[k];
    if (AllOutputsConst(n)) continue;  // folded at these inputs
    for (const Value* v : n.inputs) KILN_RETURN_IF_ERROR(place(v));
    for (const Value* v : n.outputs) KILN_RETURN_IF_ERROR(place(v));
    p->steps.push_back(k);
  }
  for (const Value* v : g.outputs) KILN_RETURN_IF_ERROR(place(v));
  // Layers made for these shapes (their WorkspaceBytes may plan nested bodies in turn).
  for (size_t k : p->steps) {
    const Node& n = *nodes[k];
    const LayerSpec spec = SpecAt(n, n, allow_tf32_);
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> tactics, TacticsFor(spec));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, CreateLayer(spec, tactics.front()));
    std::vector<DeviceTensor> ins, outs;
    for (const auto* list : {&n.inputs, &n.outputs}) {
      auto& dst = list == &n.inputs ? ins : outs;
      for (const Value* v : *list) {
        DeviceTensor t;
        if (v) {
          t.dtype = v->dtype;
          t.shape = ToStatic(v->shape);
          if (v->is_const()) t.host = &*v->const_value;
        }
        dst.push_back(std::move(t));
      }
    }
    // (Every value has a fixed shape here, ShapeBody checked: a layer whose output size depends on the data, such as
    // NonZero, never reaches this point.)
    p->workspace_bytes = std::max(p->workspace_bytes, layer->WorkspaceBytes(ins, outs));
    p->layers.push_back(std::move(layer));
  }
  p->workspace_bytes = AlignUp(p->workspace_bytes);
  // The constants' uploads (and the layers' own) from pageable memory ran on the legacy stream: they land before any
  // stream runs the body.
  KILN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cudaStreamLegacy));
  return p;
}

void* BodyExec::Address(const Plan& p, const Value* v, void* scratch, const std::vector<void*>& inputs) const {
  auto it = p.places.find(v);
  if (it == p.places.end()) return nullptr;
  const Place& pl = it->second;
  switch (pl.kind) {
    case Place::Kind::kScratch: return static_cast<uint8_t*>(scratch) + pl.offset;
    case Place::Kind::kDevice: return pl.ptr;
    case Place::Kind::kInput: return pl.input < inputs.size() ? inputs[pl.input] : nullptr;
  }
  return nullptr;
}

Result<BodyExec::Bound> BodyExec::Bind(const Plan& p, void* scratch, const std::vector<void*>& inputs) const {
  Bound b;
  b.plan = &p;
  b.workspace = static_cast<uint8_t*>(scratch) + p.value_bytes;
  const auto& nodes = p.shaped->nodes();
  for (size_t k : p.steps) {
    const Node& n = *nodes[k];
    for (const auto* list : {&n.inputs, &n.outputs}) {
      std::vector<DeviceTensor> ts;
      for (const Value* v : *list) {
        DeviceTensor t;
        if (v) {
          t.dtype = v->dtype;
          t.shape = ToStatic(v->shape);
          t.data = Address(p, v, scratch, inputs);
          if (v->is_const()) t.host = &*v->const_value;
          if (!t.data && t.nbytes() > 0)
            return Err(StatusCode::kInternal, "{} attribute '{}': value '{}' has no device address", owner_.Where(),
                       attr_, v->name);
        }
        ts.push_back(std::move(t));
      }
      (list == &n.inputs ? b.ins : b.outs).push_back(std::move(ts));
    }
  }
  return b;
}

Status BodyExec::Run(Bound& b, const LaunchContext& ctx) const {
  const Plan& p = *b.plan;
  LaunchContext sub = ctx;
  sub.workspace = b.workspace;
  sub.workspace_bytes = p.workspace_bytes;
  const auto& nodes = p.shaped->nodes();
  for (size_t s = 0; s < p.steps.size(); ++s) {
    Status st = p.layers[s]->Enqueue(sub, b.ins[s], b.outs[s]);
    if (!st.ok()) {
      const Node& n = *nodes[p.steps[s]];
      if (st.message().find(n.name) == std::string::npos) st = st.WithContext(n.Where());
      return st.WithContext(fmt::format("{} attribute '{}'", owner_.Where(), attr_));
    }
  }
  return Status::Ok();
}

DeviceTensor BodyExec::Output(const Plan& p, size_t i, void* scratch, const std::vector<void*>& inputs) const {
  DeviceTensor t;
  if (i >= p.shaped->outputs.size()) return t;
  const Value* v = p.shaped->outputs[i];
  t.dtype = v->dtype;
  t.shape = ToStatic(v->shape);
  t.data = Address(p, v, scratch, inputs);
  if (v->is_const()) t.host = &*v->const_value;
  return t;
}

}  // namespace kiln::cuda
