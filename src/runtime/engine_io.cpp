// EngineImpl <-> engine file bytes.
#include "runtime/engine_io.h"

#include "core/error.h"
#include "engine/engine_file.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"
#endif

namespace kiln {

namespace {

// What the current device is, as engine headers and timing caches name it (cuda only).
Status FillCudaTarget(EngineTarget* t) {
#ifdef KILN_HAVE_CUDA
  KILN_ASSIGN_OR_RETURN(cuda::DeviceInfo info, cuda::GetDeviceInfo(0));
  t->device_name = info.name;
  t->compute_capability = info.cc_major * 10 + info.cc_minor;
  t->cuda_version = static_cast<uint32_t>(info.runtime_version);
  t->cublas_version = static_cast<uint32_t>(cuda::CublasLtVersion());
  t->cudnn_version = static_cast<uint32_t>(cuda::CudnnVersion());
  return Status::Ok();
#else
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA: cuda engines cannot be made or loaded");
#endif
}

}  // namespace

Result<std::vector<uint8_t>> SerializeEngineImpl(const EngineImpl& e) {
  EngineContents c;
  c.target.backend = e.backend;
  c.target.build_flags = e.build_flags;
  if (e.backend == "cuda") KILN_RETURN_IF_ERROR(FillCudaTarget(&c.target));
  c.graph = e.graph->Clone();
  for (const ProfileShapes& p : e.profiles) {
    EngineProfile ep;
    for (const auto& [name, v] : p) ep.inputs[name] = ProfileInputDims{v[0], v[1], v[2]};
    c.profiles.push_back(std::move(ep));
  }
  c.plan = e.plan;
  c.tactics = e.tactics;
  c.build_report_json = e.build_report_json;
  return SerializeEngine(c);
}

Result<std::unique_ptr<EngineImpl>> DeserializeEngineImpl(const uint8_t* data, size_t size) {
  EngineCompat compat;
  compat.backend = "cpu";
  auto header = ReadEngineHeader(data, size);
  if (header.ok() && header->target.backend == "cuda") {
    // A cuda engine runs where a GPU of its architecture is.
    EngineTarget here;
    KILN_RETURN_IF_ERROR(FillCudaTarget(&here).WithContext("loading a cuda engine"));
    compat.backend = "cuda";
    compat.device_name = here.device_name;
    compat.compute_capability = here.compute_capability;
    compat.cuda_version = here.cuda_version;
  }
  KILN_ASSIGN_OR_RETURN(EngineContents c, DeserializeEngine(data, size, compat));
  auto e = std::make_unique<EngineImpl>();
  e->backend = c.target.backend;
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
  e->plan = std::move(*c.plan);
  e->tactics = std::move(c.tactics);
  e->build_report_json = std::move(c.build_report_json);
  e->Index();
  return e;
}

}  // namespace kiln
