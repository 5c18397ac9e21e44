// EngineImpl <-> engine file bytes.
#include "runtime/engine_io.h"

#include "core/error.h"
#include "engine/engine_file.h"

namespace kiln {

Result<std::vector<uint8_t>> SerializeEngineImpl(const EngineImpl& e) {
  EngineContents c;
  c.target.backend = e.backend;
  c.target.build_flags = kBuildFlagTF32 | kBuildFlagOptimized;
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
  EngineCompat compat;  // this runtime runs the cpu backend
  compat.backend = "cpu";
  KILN_ASSIGN_OR_RETURN(EngineContents c, DeserializeEngine(data, size, compat));
  auto e = std::make_unique<EngineImpl>();
  e->backend = c.target.backend;
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
