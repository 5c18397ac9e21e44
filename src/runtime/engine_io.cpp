// EngineImpl <-> engine file bytes. The header names the engine's backend and device; the loader asks the factory
// for that backend and checks the engine against the device it runs on here.
#include "runtime/engine_io.h"

#include "backends/factory.h"
#include "core/error.h"
#include "engine/engine_file.h"

namespace kiln {

namespace {

void CopyDevice(const DeviceTarget& d, EngineTarget* t) {
  t->device_name = d.device_name;
  t->compute_capability = d.compute_capability;
  t->cuda_version = d.cuda_version;
  t->cublas_version = d.cublas_version;
  t->cudnn_version = d.cudnn_version;
}

// What this process runs an engine built for `header`'s backend on. A backend this kiln lacks (or does not know)
// is answered with the reference backend, so that the loader's compatibility check names both and says what to do.
Result<EngineCompat> CompatFor(const Result<EngineHeader>& header, const Backend** backend) {
  *backend = &ReferenceBackend();
  if (header.ok()) {
    auto found = FindBackend(header->target.backend);
    if (found.ok()) *backend = *found;
  }
  const Backend& b = **backend;
  const std::string context = fmt::format("loading a {} engine", b.Name());
  KILN_RETURN_IF_ERROR(b.CheckAvailable().WithContext(context));
  auto here = b.Target();
  if (!here.ok()) return here.status().WithContext(context);
  EngineCompat compat;
  compat.backend = std::string(b.Name());
  compat.device_name = here->device_name;
  compat.compute_capability = here->compute_capability;
  compat.cuda_version = here->cuda_version;
  return compat;
}

}  // namespace

Result<EngineFileInfo> ReadEngineFileInfo(const void* data, size_t size) {
  KILN_ASSIGN_OR_RETURN(EngineHeader h, ReadEngineHeader(static_cast<const uint8_t*>(data), size));
  EngineFileInfo info;
  info.format_version = h.format_version;
  info.kiln_version = h.kiln_version;
  info.backend = h.target.backend;
  info.device_name = h.target.device_name;
  info.compute_capability = h.target.compute_capability;
  info.size_bytes = size;
  return info;
}

Result<std::vector<uint8_t>> SerializeEngineImpl(const EngineImpl& e) {
  EngineContents c;
  c.target.backend = std::string(e.backend->Name());
  c.target.build_flags = e.build_flags;
  KILN_ASSIGN_OR_RETURN(DeviceTarget device, e.backend->Target());
  CopyDevice(device, &c.target);
  c.graph = e.graph->Clone();
  for (const ProfileShapes& p : e.profiles) {
    EngineProfile ep;
    for (const auto& [name, v] : p) ep.inputs[name] = ProfileInputDims{v[0], v[1], v[2]};
    c.profiles.push_back(std::move(ep));
  }
  c.plan = e.plan;
  c.tactics = e.tactics;
  c.build_report_json = e.build_report_json;
  c.max_tensor_elements = e.max_tensor_elements;
  c.profiling_verbosity = static_cast<int32_t>(e.profiling_verbosity);
  c.node_streams = e.streams;
  c.num_streams = e.num_streams;
  for (const auto& pt : e.tactic_points) {
    std::map<std::string, std::vector<int64_t>> m;
    for (const auto& [name, d] : pt) m[name] = d;
    c.tactic_points.push_back(std::move(m));
  }
  c.tactic_variants = e.tactic_variants;
  return SerializeEngine(c);
}

Result<std::unique_ptr<EngineImpl>> DeserializeEngineImpl(const uint8_t* data, size_t size) {
  const Backend* backend = nullptr;
  KILN_ASSIGN_OR_RETURN(EngineCompat compat, CompatFor(ReadEngineHeader(data, size), &backend));
  KILN_ASSIGN_OR_RETURN(EngineContents c, DeserializeEngine(data, size, compat));
  auto e = std::make_unique<EngineImpl>();
  e->backend = backend;
  // Like TensorRT, the engine belongs to the calling thread's current device (checked against it above by CompatFor,
  // through Backend::Target); its contexts run there whatever device their caller has current.
  if (const DeviceApi* api = backend->Device()) {
    KILN_ASSIGN_OR_RETURN(e->device, api->CurrentDevice());
  }
  e->build_flags = c.target.build_flags;
  e->allow_tf32 = (c.target.build_flags & kBuildFlagTF32) != 0;
  e->graph = std::move(c.graph);
  for (const EngineProfile& ep : c.profiles) {
    ProfileShapes p;
    for (const auto& [name, d] : ep.inputs) p[name] = {d.min, d.opt, d.max};
    e->profiles.push_back(std::move(p));
  }
  if (e->profiles.empty()) e->profiles.emplace_back();
  if (!c.plan)
    return Err(StatusCode::kInvalidModel, "the engine holds no memory plan: it is incomplete; rebuild it");
  // Each execution context allocates the arena: one larger than the memory it would live in cannot run here, and
  // trying would fail late or (host memory overcommitted) get the process killed.
  KILN_ASSIGN_OR_RETURN(DeviceTarget here, backend->Target());
  if (here.memory_bytes != 0 && static_cast<uint64_t>(c.plan->arena_bytes) > here.memory_bytes)
    return Err(StatusCode::kOutOfRange,
               "the engine needs {:.1f} MiB of activation memory per execution context, more than this {} backend's "
               "{:.1f} MiB: rebuild it with smaller --maxShapes on this machine",
               c.plan->arena_bytes / 1048576.0, backend->Name(), here.memory_bytes / 1048576.0);
  e->plan = std::move(*c.plan);
  e->tactics = std::move(c.tactics);
  e->build_report_json = std::move(c.build_report_json);
  if (c.max_tensor_elements > 0) e->max_tensor_elements = c.max_tensor_elements;
  e->profiling_verbosity = static_cast<ProfilingVerbosity>(c.profiling_verbosity);
  e->streams = std::move(c.node_streams);
  e->num_streams = c.num_streams;
  for (const auto& pt : c.tactic_points) {
    std::map<std::string, Dims> m;
    for (const auto& [name, d] : pt) m[name] = d;
    e->tactic_points.push_back(std::move(m));
  }
  e->tactic_variants = std::move(c.tactic_variants);
  e->Index();
  return e;
}

}  // namespace kiln
