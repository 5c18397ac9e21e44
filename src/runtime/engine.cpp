// Engine and Runtime: the read-only side of a built network.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ops/op_def.h"
#include "ops/quantized_ops.h"
#include "runtime/engine_impl.h"
#include "runtime/engine_io.h"

namespace kiln {

void EngineImpl::Index() {
  plan_by_name.clear();
  for (const auto& b : plan.buffers) plan_by_name[b.name] = &b;
}

const Value* EngineImpl::FindIO(const std::string& name) const {
  const Value* v = graph->FindValue(name);
  return v && (v->is_graph_input || v->is_graph_output) ? v : nullptr;
}

Result<std::shared_ptr<const Graph>> EngineImpl::TuningGraph() const {
  std::lock_guard<std::mutex> lock(tuning_mu_);
  if (tuning_graph_) return tuning_graph_;
  std::map<std::string, Dims> opt;
  for (const auto& [name, v] : profiles[0]) opt[name] = v[1];
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, InferAtShapes(*graph, opt));
  tuning_graph_ = std::move(g);
  return tuning_graph_;
}

Result<std::shared_ptr<const Graph>> EngineImpl::GraphAtShapes(const std::map<std::string, Dims>& shapes) const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, InferAtShapes(*graph, shapes));
  return std::shared_ptr<const Graph>(std::move(g));
}

EngineImpl::~EngineImpl() {
  ScopedDevice on = DeviceScope();  // the backend state (weights on the device) is freed where it lives
  state_.reset();
}

Result<const BackendEngine*> EngineImpl::State() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  if (!state_) {
    KILN_ASSIGN_OR_RETURN(state_, backend->CreateEngine(*this));
  }
  return state_.get();
}

const EngineImpl& ImplOf(const Engine& engine) { return *engine.impl_; }

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

int Engine::getNbIOTensors() const {
  return static_cast<int>(impl_->graph->inputs.size() + impl_->graph->outputs.size());
}

std::string Engine::getIOTensorName(int i) const {
  const auto& g = *impl_->graph;
  if (i < 0) return "";
  if (static_cast<size_t>(i) < g.inputs.size()) return g.inputs[i]->name;
  i -= static_cast<int>(g.inputs.size());
  return static_cast<size_t>(i) < g.outputs.size() ? g.outputs[i]->name : "";
}

TensorIOMode Engine::getTensorIOMode(const std::string& name) const {
  const Value* v = impl_->FindIO(name);
  if (!v) return TensorIOMode::kNone;
  return v->is_graph_input ? TensorIOMode::kInput : TensorIOMode::kOutput;
}

DataType Engine::getTensorDataType(const std::string& name) const {
  const Value* v = impl_->FindIO(name);
  return v ? v->dtype : DataType::kUndefined;
}

Dims Engine::getTensorShape(const std::string& name) const {
  const Value* v = impl_->FindIO(name);
  Dims d;
  if (!v) return d;
  for (const Dim& x : v->shape) d.push_back(x.known() ? x.value : -1);
  return d;
}

int Engine::getNbOptimizationProfiles() const { return static_cast<int>(impl_->profiles.size()); }

Dims Engine::getProfileShape(const std::string& input, int profile, ProfileSelector which) const {
  if (profile < 0 || profile >= getNbOptimizationProfiles()) return {};
  const auto& p = impl_->profiles[profile];
  auto it = p.find(input);
  if (it != p.end()) return it->second[static_cast<int>(which)];
  return getTensorShape(input);  // a static input: its own shape
}

size_t Engine::getDeviceMemorySize() const { return static_cast<size_t>(impl_->plan.arena_bytes); }
int Engine::getNbLayers() const { return static_cast<int>(impl_->graph->nodes().size()); }
int Engine::getNbAuxStreams() const { return impl_->num_streams - 1; }
std::string Engine::getBackend() const { return std::string(impl_->backend->Name()); }
int Engine::getDevice() const { return impl_->device; }
std::string Engine::getBuildReportJson() const { return impl_->build_report_json; }

namespace {

// The quantization parameters of an INT8 layer (input scale and zero point, weight scales, output scale and zero
// point when it writes int8) or of a per-tensor QuantizeLinear / DequantizeLinear; nullopt for other layers.
std::optional<nlohmann::json> QuantizationOf(const Node& n) {
  if (n.domain == kKilnDomain && (n.op_type == "QConv" || n.op_type == "QMatMul")) {
    auto p = quant_attrs::Read(n);
    if (!p.ok()) return std::nullopt;
    nlohmann::json j = {{"x_scale", p->x_scale}, {"x_zero_point", p->x_zero_point}, {"w_scales", p->w_scales}};
    if (p->y_type == DataType::kInt8 || p->y_type == DataType::kUInt8 || p->y_type == DataType::kFloat8E4M3FN) {
      j["y_scale"] = p->y_scale;
      j["y_zero_point"] = p->y_zero_point;
    }
    return j;
  }
  if (n.domain == kKilnDomain && n.op_type == "WeightOnlyMatMul") {  // the packed weight's type and grouping
    auto p = woq_attrs::Read(n);
    if (!p.ok()) return std::nullopt;
    const Value* s = n.input(2);
    return nlohmann::json{{"weight_type", DataTypeName(p->w_type)},
                          {"group_size", p->group_size},
                          {"groups", p->groups()},
                          {"scale_type", s ? DataTypeName(s->dtype) : ""},
                          {"zero_points", n.input(3) != nullptr}};
  }
  if (n.domain.empty() && n.op_type == "LayerNormalization" && n.output(3))  // its quantized output (kQScale)
    return nlohmann::json{{"y_scale", n.getf(quant_attrs::kQScale, 0.f)},
                          {"y_zero_point", n.geti(quant_attrs::kQZeroPoint, 0)}};
  if (!n.domain.empty() || (n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear")) return std::nullopt;
  const Value* s = n.input(1);
  const Value* z = n.input(2);
  if (!s || !s->is_const() || s->const_value->numel() != 1) return std::nullopt;
  nlohmann::json j = {{"scale", s->const_value->GetAsDouble(0)},
                      {"zero_point", z && z->is_const() && z->const_value->numel() == 1 ? z->const_value->GetAsInt(0) : 0}};
  if (n.op_type == "QuantizeLinear") {
    j["y_scale"] = j["scale"];
    j["y_zero_point"] = j["zero_point"];
  }
  return j;
}

}  // namespace

std::string Engine::getLayerInformationJson() const {
  nlohmann::json layers = nlohmann::json::array();
  const auto& nodes = impl_->graph->nodes();
  const ProfilingVerbosity verbosity = impl_->profiling_verbosity;
  for (size_t k = 0; k < nodes.size() && verbosity != ProfilingVerbosity::kNone; ++k) {
    const Node& n = *nodes[k];
    if (verbosity == ProfilingVerbosity::kLayerNamesOnly) {  // what the layer is, not how it runs
      layers.push_back({{"name", n.name}, {"op_type", n.domain.empty() ? n.op_type : n.domain + "." + n.op_type}});
      continue;
    }
    nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
    for (const Value* v : n.inputs)
      if (v) ins.push_back({{"name", v->name}, {"type", v->TypeString()}, {"constant", v->is_const()}});
    const auto q = QuantizationOf(n);
    for (const Value* v : n.outputs) {
      if (!v) continue;
      nlohmann::json o = {{"name", v->name}, {"type", v->TypeString()}};
      if (q && q->contains("y_scale") &&
          (v->dtype == DataType::kInt8 || v->dtype == DataType::kUInt8 || v->dtype == DataType::kFloat8E4M3FN)) {
        o["scale"] = (*q)["y_scale"];
        o["zero_point"] = (*q)["y_zero_point"];
      }
      outs.push_back(std::move(o));
    }
    // An INT8 (FP8) layer computes in int8 (float8e4m3fn) whatever type it writes; other layers in their output's type.
    std::string precision = n.outputs.empty() || !n.outputs[0] ? "" : DataTypeName(n.outputs[0]->dtype);
    if (n.domain == kKilnDomain && (n.op_type == "QConv" || n.op_type == "QMatMul"))
      precision = n.input(0) && n.input(0)->dtype == DataType::kFloat8E4M3FN ? "float8e4m3fn" : "int8";
    if (n.domain == kKilnDomain && n.op_type == "WeightOnlyMatMul")  // X's type computes; the weight stays 4-bit
      precision = fmt::format("{} ({} weights)", precision,
                              DataTypeName(static_cast<DataType>(n.geti(woq_attrs::kWType, 0))));
    nlohmann::json layer = {{"name", n.name},
                            {"op_type", n.domain.empty() ? n.op_type : n.domain + "." + n.op_type},
                            {"precision", precision},
                            {"tactic", k < impl_->tactics.size() ? impl_->tactics[k] : ""},
                            {"inputs", ins},
                            {"outputs", outs}};
    if (q) layer["quantization"] = *q;
    if (k < impl_->streams.size()) layer["stream"] = impl_->streams[k];  // engines with auxiliary streams
    if (k < impl_->tactic_variants.size() && !impl_->tactic_variants[k].empty()) {  // per-shape tactics
      nlohmann::json v = nlohmann::json::array();
      for (const auto& [point, tactic] : impl_->tactic_variants[k]) {
        nlohmann::json shapes = nlohmann::json::object();
        if (point >= 0 && static_cast<size_t>(point) < impl_->tactic_points.size())
          for (const auto& [name, d] : impl_->tactic_points[point]) shapes[name] = d;
        v.push_back({{"shapes", shapes}, {"tactic", tactic}});
      }
      layer["per_shape_tactics"] = std::move(v);
    }
    layers.push_back(std::move(layer));
  }
  const char* verbosity_name = verbosity == ProfilingVerbosity::kNone             ? "none"
                               : verbosity == ProfilingVerbosity::kLayerNamesOnly ? "layer_names_only"
                                                                                  : "detailed";
  nlohmann::json j = {{"backend", getBackend()},
                      {"profiling_verbosity", verbosity_name},
                      {"layers", layers},
                      {"memory", {{"arena_bytes", impl_->plan.arena_bytes}, {"naive_bytes", impl_->plan.naive_bytes}}}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // names from a file may be any bytes
}

Result<std::unique_ptr<ExecutionContext>> Engine::createExecutionContext() const {
  auto c = std::make_unique<ExecutionContextImpl>(*impl_);
  KILN_RETURN_IF_ERROR(c->Init());
  return std::make_unique<ExecutionContext>(std::move(c));
}

Result<std::unique_ptr<Engine>> Runtime::deserializeEngine(const void* data, size_t size) const {
  auto e = DeserializeEngineImpl(static_cast<const uint8_t*>(data), size);
  if (!e.ok()) {
    logger_.log(Severity::kError, e.status().ToString().c_str());
    return e.status();
  }
  (*e)->Index();  // (DeserializeEngineImpl recorded the calling thread's current device as the engine's)
  return std::make_unique<Engine>(std::move(*e));
}

Result<std::unique_ptr<Engine>> Runtime::loadEngineFile(const std::string& path) const {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Err(StatusCode::kNotFound, "cannot open engine file '{}'", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  auto e = deserializeEngine(bytes.data(), bytes.size());
  if (!e.ok()) return e.status().WithContext("engine file '" + path + "'");
  return e;
}

}  // namespace kiln
