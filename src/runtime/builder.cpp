// The builder: clone the network, check profiles, optimize, plan memory at the largest shapes, choose kernels,
// time the engine once at the opt shapes, and serialize.
#include <algorithm>
#include <chrono>
#include <functional>
#include <new>
#include <optional>
#include <random>

#include "backends/backend.h"
#include "backends/factory.h"
#include <set>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "engine/engine_file.h"
#include "kiln/builder.h"
#include "passes/pass.h"
#include "ops/op_def.h"
#include "ops/sequence.h"
#include "runtime/builder_int8.h"
#include "runtime/builder_plan.h"
#include "runtime/engine_impl.h"
#include "runtime/engine_io.h"
#include "runtime/network_graph.h"
#include "plan/streams.h"

namespace kiln {

namespace {

// Profiles as the engine keeps them: every dynamic input must be covered, fixed dims must match.
Result<std::vector<ProfileShapes>> ResolveProfiles(const Graph& g, const BuilderConfig& cfg) {
  std::vector<const Value*> dynamic;
  for (const Value* in : g.inputs)
    if (!IsStatic(in->shape)) dynamic.push_back(in);
  std::vector<ProfileShapes> out;
  if (cfg.profiles().empty()) {
    if (!dynamic.empty()) {
      std::string names;
      for (const Value* v : dynamic) names += fmt::format("{}'{}' {}", names.empty() ? "" : ", ", v->name, ShapeToString(v->shape));
      return Err(StatusCode::kInvalidArgument,
                 "the network has dynamic inputs ({}): give their ranges with an optimization profile "
                 "(--minShapes/--optShapes/--maxShapes, or --shapes to fix them)",
                 names);
    }
    out.emplace_back();
    return out;
  }
  for (size_t p = 0; p < cfg.profiles().size(); ++p) {
    ProfileShapes ps;
    for (const auto& [name, v] : cfg.profiles()[p].shapes()) {
      const Value* in = g.FindValue(name);
      if (!in || !in->is_graph_input)
        return Err(StatusCode::kInvalidArgument, "profile {} names '{}', which is not an input of the network", p, name);
      for (int s = 0; s < 3; ++s) {
        if (v[s].size() != in->shape.size())
          return Err(StatusCode::kInvalidArgument, "profile {}: input '{}' has rank {} ({}), the profile gives {}", p, name,
                     in->shape.size(), ShapeToString(in->shape), ShapeToString(v[s]));
        for (size_t i = 0; i < v[s].size(); ++i)
          if (in->shape[i].known() && in->shape[i].value != v[s][i])
            return Err(StatusCode::kInvalidArgument, "profile {}: input '{}' dim {} is fixed at {}, the profile gives {}", p,
                       name, i, in->shape[i].value, ShapeToString(v[s]));
      }
      ps[name] = v;
    }
    for (const Value* d : dynamic)
      if (!ps.count(d->name))
        return Err(StatusCode::kInvalidArgument, "profile {} gives no shapes for dynamic input '{}' {}", p, d->name,
                   ShapeToString(d->shape));
    out.push_back(std::move(ps));
  }
  return out;
}

// Forgets what inference derived for every activation, so it can run again from new input shapes.
void ClearInferredShapes(Graph& g) {
  for (Value* v : g.values())
    if (!v->is_const() && !v->is_graph_input) {
      v->sym_value.reset();
      v->shape.clear();
      v->has_shape = false;
    }
}

// Re-infers every activation's shape from the graph inputs' shapes (constant folding included) and drops the
// nodes that folded away.
Status Reinfer(Graph& g) {
  ClearInferredShapes(g);
  InferOptions io;
  io.evaluator = ConstantFolder();
  KILN_RETURN_IF_ERROR(InferGraph(g, io));
  g.RemoveFoldedNodes();
  g.RemoveDeadNodes();
  return VerifyGraph(g);
}

// An engine whose only profile fixes every dynamic input (min == max, as --shapes gives) is static: the graph is
// specialized to those shapes before optimization, so shape subgraphs fold and patterns see concrete shapes.
Result<bool> SpecializeStatic(Graph& g, const std::vector<ProfileShapes>& profiles) {
  if (profiles.size() != 1 || profiles[0].empty()) return false;
  for (const auto& [name, v] : profiles[0])
    if (v[0] != v[2]) return false;
  for (Value* in : g.inputs) {
    auto it = profiles[0].find(in->name);
    if (it != profiles[0].end()) in->shape = FromStatic(it->second[0]);
  }
  Status st = Reinfer(g);
  if (!st.ok()) return st.WithContext("specializing the network to the profile's fixed input shapes");
  return true;
}

const char* FusionKey(const std::string& pass) {
  if (pass == "fold-batchnorm") return "batchnorm_folded";
  if (pass == "fuse-bias-activation") return "bias_activation";
  if (pass == "fuse-residual-add") return "residual_add";
  if (pass == "fuse-qkv-projection") return "qkv_projection";
  if (pass == "fuse-pointwise") return "pointwise";
  if (pass == "fuse-quantized") return "int8_layers";
  if (pass == "fuse-weight-only") return "weight_only";
  if (pass == "recognize-gelu") return "gelu";
  if (pass == "recognize-layernorm") return "layernorm";
  if (pass == "recognize-attention") return "attention";
  return nullptr;
}

// The build report an engine carries: what the build did, without its wall-clock measurements (build and tuning
// times, the phases, the first run's latency) and without how INT8 ranges were obtained (calibrated now or read from
// the cache that calibration wrote), which kiln build prints and writes to --json instead. An engine file is
// thus a function of the model, the config, the device and the timing cache: the same inputs build the same bytes.
std::string EngineReportJson(const BuildReport& rep, const BuilderConfig& cfg, bool dynamic_shapes) {
  nlohmann::json j = nlohmann::json::parse(rep.ToJson("", "", cfg, dynamic_shapes), nullptr, false);
  if (j.is_discarded()) return rep.ToJson("", "", cfg, dynamic_shapes);
  for (const char* k : {"build_time_s", "phases_s", "estimated_latency_ms"}) j["performance"].erase(k);
  for (const char* k : {"tuning_time_s", "tactic_create_s", "tactic_timing_s"}) j["optimization"].erase(k);
  j["int8"].erase("calibration_source");  // how the ranges were obtained (a run or its cache): the same ranges
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Every tensor at the profiles' largest shapes holds at most `limit` elements; the error names the first that
// does not, the node that makes it, and how to get under the limit.
Status CheckTensorSizes(const Graph& g, int64_t limit) {
  for (const Value* v : g.values()) {
    if (!v->has_shape) continue;
    // What an engine file may hold (its loader checks the same): at most 64 dims, each at most 2^40.
    if (v->shape.size() > 64)
      return Err(StatusCode::kUnsupported, "tensor '{}'{} has rank {}: kiln supports at most 64 dims", v->name,
                 v->producer ? " (made by " + v->producer->Where() + ")" : std::string(), v->shape.size());
    for (const Dim& d : v->shape)
      if (d.known() && d.value > (int64_t{1} << 40))
        return Err(StatusCode::kOutOfRange, "tensor '{}'{} has shape {}: a dim over 2^40", v->name,
                   v->producer ? " (made by " + v->producer->Where() + ")" : std::string(), ShapeToString(v->shape));
    if (limit <= 0) continue;  // no element limit
    int64_t n = 1;
    bool over = false, known = true;
    for (const Dim& d : v->shape) {
      if (!d.known()) {
        known = false;
        break;
      }
      if (d.value != 0 && n > limit / d.value) over = true;
      if (!over) n *= d.value;
    }
    if (!known || (!over && n <= limit)) continue;
    return Err(StatusCode::kOutOfRange,
               "{} '{}'{} has shape {} at the profiles' largest input shapes: more than the limit of {} elements; "
               "give smaller shapes (--maxShapes / --shapes) or raise the limit (--maxTensorElements, "
               "BuilderConfig::setMaxTensorElements)",
               v->is_graph_input ? "input" : "tensor", v->name, v->producer ? " (made by " + v->producer->Where() + ")" : std::string(),
               ShapeToString(v->shape), limit);
  }
  return Status::Ok();
}

// One execution context's activation arena fits the "activations" pool limit (default: the backend's memory).
Status CheckArena(const MemoryPlan& plan, const BuilderConfig& cfg, const Backend& backend) {
  uint64_t limit = cfg.getMemoryPoolLimit("activations");
  std::string what = "the --memPoolSize=activations limit";
  if (limit == 0) {
    auto target = backend.Target();
    if (!target.ok() || target->memory_bytes == 0) return Status::Ok();
    limit = target->memory_bytes;
    what = fmt::format("the {} backend's memory", backend.Name());
  }
  if (plan.arena_bytes >= 0 && static_cast<uint64_t>(plan.arena_bytes) <= limit) return Status::Ok();
  std::vector<const BufferPlan*> arena;
  for (const BufferPlan& b : plan.buffers)
    if (b.kind == BufferPlan::Kind::kArena) arena.push_back(&b);
  std::sort(arena.begin(), arena.end(), [](const BufferPlan* a, const BufferPlan* b) { return a->bytes > b->bytes; });
  std::string largest;
  for (size_t i = 0; i < arena.size() && i < 3; ++i)
    largest += fmt::format("{}'{}' ({:.1f} MiB)", i ? ", " : "", arena[i]->name, arena[i]->bytes / 1048576.0);
  return Err(StatusCode::kOutOfRange,
             "the engine's activations need {:.1f} MiB per execution context at the profiles' largest shapes, more "
             "than {} ({:.1f} MiB); the largest tensors: {}. Give smaller shapes (--maxShapes / --shapes) or set "
             "--memPoolSize=activations:<MiB>",
             plan.arena_bytes / 1048576.0, what, limit / 1048576.0, largest);
}

// Runs the engine once at the first profile's opt shapes on random data; returns milliseconds. On a backend with
// device memory the inputs are uploaded and the outputs bound first, and a first enqueue prepares the launch plan.
Result<double> TimeOnce(const EngineImpl& e) {
  const DeviceApi* device = e.backend->Device();
  ExecutionContext context(std::make_unique<ExecutionContextImpl>(e));
  std::vector<Tensor> inputs;
  std::vector<std::unique_ptr<void, std::function<void(void*)>>> buffers;
  auto device_buffer = [&](size_t bytes) -> Result<void*> {
    KILN_ASSIGN_OR_RETURN(void* p, device->Allocate(bytes, DeviceApi::Memory::kDevice));
    buffers.emplace_back(p, [device](void* q) { device->Free(q, DeviceApi::Memory::kDevice); });
    return p;
  };
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const Value* in : e.graph->inputs) {
    auto it = e.profiles[0].find(in->name);
    const Dims d = it != e.profiles[0].end() ? it->second[1] : ToStatic(in->shape);
    // The timed run's input: its size checked (no overflow, at most 2^40 bytes) and its allocation too.
    uint64_t bytes = DataTypeSize(in->dtype);
    for (int64_t x : d) {
      if (x < 0 || (x != 0 && bytes > (uint64_t{1} << 40) / static_cast<uint64_t>(x)))
        return Err(StatusCode::kOutOfRange,
                   "input '{}' at shape {} is larger than 2^40 bytes: give smaller shapes (--shapes / --optShapes)",
                   in->name, ShapeToString(d));
      bytes *= static_cast<uint64_t>(x);
    }
    Tensor t(in->dtype, d);
    if (bytes > 0 && !t.raw())
      return Err(StatusCode::kOutOfRange,
                 "input '{}' at shape {} needs {} bytes of host memory for the build's timed run, which could not be "
                 "allocated: give smaller shapes (--shapes / --optShapes)",
                 in->name, ShapeToString(d), bytes);
    for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, IsFloatType(in->dtype) ? u(rng) : 0.0);
    void* address = t.raw();
    if (device) {
      KILN_ASSIGN_OR_RETURN(address, device_buffer(t.nbytes()));
      Status st = device->Copy(address, t.raw(), t.nbytes(), DeviceApi::Direction::kToDevice, nullptr);
      if (!st.ok()) return st.WithContext(fmt::format("uploading '{}' ({} bytes)", in->name, t.nbytes()));
    }
    KILN_RETURN_IF_ERROR(context.setInputShape(in->name, d));
    KILN_RETURN_IF_ERROR(context.setTensorAddress(in->name, address));
    inputs.push_back(std::move(t));
  }
  void* stream = nullptr;
  std::unique_ptr<void, std::function<void(void*)>> stream_owner;
  if (device) {
    for (const Value* o : e.graph->outputs) {
      KILN_ASSIGN_OR_RETURN(Dims d, context.getTensorShape(o->name));
      int64_t n = 1;
      for (int64_t x : d) n *= std::max<int64_t>(x, 0);
      KILN_ASSIGN_OR_RETURN(void* address, device_buffer(n * DataTypeSize(o->dtype)));
      KILN_RETURN_IF_ERROR(context.setTensorAddress(o->name, address));
    }
    KILN_RETURN_IF_ERROR(device->Synchronize(nullptr));  // the inputs' pageable uploads have landed
    KILN_ASSIGN_OR_RETURN(stream, device->CreateStream());
    stream_owner = {stream, [device](void* s) { device->DestroyStream(s); }};
    KILN_RETURN_IF_ERROR(context.enqueue(stream));  // prepares the launch plan
    KILN_RETURN_IF_ERROR(device->Synchronize(stream));
  }
  const auto t0 = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(context.enqueue(stream));
  if (device) KILN_RETURN_IF_ERROR(device->Synchronize(stream));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

namespace {

// The build proper (buildSerializedNetwork catches what it throws).
Result<std::vector<uint8_t>> BuildSerialized(const NetworkDefinition& network, const BuilderConfig& cfg,
                                             BuildReport* report_out, ILogger& logger_) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildReport rep;
  auto lap_start = t0;
  auto lap = [&](const char* phase) {  // closes the phase that ran since the last lap
    const auto now = std::chrono::steady_clock::now();
    rep.phases_s.emplace_back(phase, std::chrono::duration<double>(now - lap_start).count());
    lap_start = now;
  };
  const Backend* backend = &DefaultBackend();
  if (!cfg.backend().empty()) {
    KILN_ASSIGN_OR_RETURN(backend, FindBackend(cfg.backend()));
  }
  KILN_RETURN_IF_ERROR(backend->CheckAvailable());
  KILN_RETURN_IF_ERROR(backend->CheckConfig(cfg));
  const BackendTraits traits = backend->Traits();
  if (cfg.getMaxAuxStreams() < 0 || cfg.getMaxAuxStreams() > 64)
    return Err(StatusCode::kInvalidArgument,
               "--maxAuxStreams={}: give 0 (every layer on the caller's stream) up to 64 auxiliary streams",
               cfg.getMaxAuxStreams());

  auto e = std::make_unique<EngineImpl>();
  e->backend = backend;
  if (const DeviceApi* api = backend->Device()) {  // tactics are timed on the calling thread's current device
    KILN_ASSIGN_OR_RETURN(e->device, api->CurrentDevice());
  }
  e->graph = GraphOf(network).Clone();
  Graph& g = *e->graph;
  if (g.outputs.empty()) return Err(StatusCode::kInvalidArgument, "the network has no outputs: mark at least one");
  // Sequences and optionals run inside an engine (Loop-carried sequences, SplitToSequence, ConcatFromSequence), but
  // what it takes and gives are tensors.
  for (const auto* list : {&g.inputs, &g.outputs})
    for (const Value* v : *list)
      if (v->kind != ValueKind::kTensor)
        return Err(StatusCode::kUnsupported, "{} '{}' is {} ({}): an engine's inputs and outputs are tensors; run "
                   "this network node by node on the reference backend (kiln::debug::RunNetworkValues), or make the "
                   "{} a tensor in the model (ConcatFromSequence, OptionalGetElement)", list == &g.inputs ? "input"
                   : "output", v->name, AValueKind(v->kind), v->TypeString(), ValueKindName(v->kind));
  KILN_ASSIGN_OR_RETURN(e->profiles, ResolveProfiles(g, cfg));
  KILN_ASSIGN_OR_RETURN(const bool specialized, SpecializeStatic(g, e->profiles));
  if (specialized) logger_.log(Severity::kInfo, "every dynamic input is fixed by the profile: building a static engine");

  lap("copy-network");
  rep.backend = std::string(backend->Name());
  rep.layers_before = GraphOf(network).nodes().size();  // as the network was given, before any specialization
  KILN_ASSIGN_OR_RETURN(const Int8Plan int8, PlanInt8(network, g, cfg, *backend, rep, logger_));
  if (cfg.getFlag(BuilderFlag::kINT8) || cfg.getFlag(BuilderFlag::kFP8)) lap("int8-calibration");
  PassOptions po;
  po.evaluator = ConstantFolder();
  po.quantize_float_weights = int8.quantize_float_weights;
  po.keep_float_layers = int8.keep_float;
  if (cfg.int4WeightBlockSize() < 0)
    return Err(StatusCode::kInvalidArgument, "the INT4 weight block size (--int4Weights) is {}: give a positive "
               "number of K per scale, e.g. 128, or 0 for off", cfg.int4WeightBlockSize());
  po.int4_weight_block = cfg.int4WeightBlockSize();
  po.int4_scale_type = cfg.getFlag(BuilderFlag::kFP16)   ? DataType::kFloat16
                       : cfg.getFlag(BuilderFlag::kBF16) ? DataType::kBFloat16
                                                         : DataType::kUndefined;
  if (po.int4_weight_block > 0)
    for (const auto& [layer, t] : cfg.layerPrecisions())
      if (IsFloatType(t)) po.keep_float_layers.insert(layer);
  po.supports = [backend](const Node& n) { return backend->Prefers(n); };
  po.fuse = cfg.builderOptimizationLevel() > 0;
  po.disabled.insert(cfg.disabledPasses().begin(), cfg.disabledPasses().end());
  KILN_ASSIGN_OR_RETURN(OptimizeReport opt, OptimizeGraph(g, po));
  lap("optimize");
  for (const auto& p : opt.passes) {
    rep.passes.emplace_back(p.name, p.rewrites);
    for (const auto& d : p.details) rep.pass_details.push_back(p.name + ": " + d);
    if (const char* key = FusionKey(p.name)) rep.fusions[key] += p.rewrites;
    logger_.log(Severity::kVerbose, fmt::format("pass {}: {} rewrite(s)", p.name, p.rewrites).c_str());
    for (const auto& d : p.details) logger_.log(Severity::kVerbose, ("  " + d).c_str());
  }
  // A backend without reduced-precision kernels still plans the I/O types (--inputIOFormats: Casts at the engine's
  // boundary, the layers stay float32) and checks --stronglyTyped against the other flags.
  if (traits.reduced_precision || !cfg.ioTypes().empty() || cfg.getFlag(BuilderFlag::kSTRONGLY_TYPED)) {
    KILN_RETURN_IF_ERROR(PlanPrecision(g, cfg, *backend, rep, logger_));
    Status st = Reinfer(g);
    if (!st.ok()) return st.WithContext("re-inferring shapes after precision planning");
  }
  if (traits.channels_last && po.fuse) {
    KILN_RETURN_IF_ERROR(PlanLayout(g, cfg, rep, logger_));
    Status st = Reinfer(g);
    if (!st.ok()) return st.WithContext("re-inferring shapes after layout planning");
  }
  if ((traits.reduced_precision || traits.channels_last) && po.fuse) {
    KILN_ASSIGN_OR_RETURN(const int merged, PlanReformats(g, *backend, rep, logger_));
    Status st = merged > 0 ? Reinfer(g) : Status::Ok();
    if (!st.ok()) return st.WithContext("re-inferring shapes after merging reformats");
  }
  if (traits.reduced_precision || traits.channels_last) lap("precision-and-layout");
  rep.layers_after = g.nodes().size();
  e->allow_tf32 = cfg.getFlag(BuilderFlag::kTF32);
  e->max_tensor_elements = cfg.maxTensorElements();
  e->profiling_verbosity = cfg.profilingVerbosity();
  KILN_ASSIGN_OR_RETURN(e->tactics, backend->ChooseTactics(BuildRequest{*e, cfg, rep, logger_, &e->tactic_points,
                                                                        &e->tactic_variants}));
  for (const auto& n : g.nodes()) rep.op_counts[n->domain.empty() ? n->op_type : n->domain + "." + n->op_type] += 1;
  rep.layers_int8 = rep.op_counts["kiln.QConv"] + rep.op_counts["kiln.QMatMul"];
  {
    std::set<std::string> int8_names;
    for (const auto& n : g.nodes())
      if (n->domain == kKilnDomain && (n->op_type == "QConv" || n->op_type == "QMatMul")) int8_names.insert(n->name);
    for (const auto& l : rep.int8_layers_without_range) rep.int8_fallbacks.emplace_back(l, "no range for its input");
    for (const auto& l : cfg.layerPrecisions())
      if (l.second != DataType::kInt8 && std::find(rep.int8_candidate_layers.begin(), rep.int8_candidate_layers.end(),
                                                   l.first) == rep.int8_candidate_layers.end())
        for (const auto& n : GraphOf(network).nodes())
          if (n->name == l.first && TraitsOf(*n).int8_layer)
            rep.int8_fallbacks.emplace_back(l.first, "--layerPrecisions keeps it in " + std::string(DataTypeName(l.second)));
    for (const auto& l : rep.int8_candidate_layers)
      if (!int8_names.count(l))
        rep.int8_fallbacks.emplace_back(
            l, cfg.getFlag(BuilderFlag::kFP8)
                   ? fmt::format("not made an FP8 layer: FP8 layers are matrix products (not convolutions) where the "
                                 "{} backend has an FP8 kernel it prefers for them", backend->Name())
                   : fmt::format("not made an INT8 layer: the {} backend has no INT8 kernel it prefers for it, or its "
                                 "int32 sums could overflow", backend->Name()));
    for (const auto& [l, why] : rep.int8_fallbacks)
      if (cfg.getFlag(BuilderFlag::kINT8) || cfg.getFlag(BuilderFlag::kFP8))
        logger_.log(Severity::kInfo, fmt::format("{}: layer '{}' runs in float: {}",
                                                 cfg.getFlag(BuilderFlag::kFP8) ? "fp8" : "int8", l, why).c_str());
  }
  {
    // INT4 weight-only: the layers made, and the 4-bit weights that were dequantized to float instead (their readers
    // were not MatMuls the pass takes, or the backend refused the layer).
    rep.layers_int4_weight_only = rep.op_counts["kiln.WeightOnlyMatMul"];
    std::set<std::string> woq_names;
    for (const auto& n : g.nodes())
      if (n->domain == kKilnDomain && n->op_type == "WeightOnlyMatMul") woq_names.insert(n->name);
    const Graph& src = GraphOf(network);
    for (const auto& n : src.nodes()) {
      if (!n->domain.empty() || n->op_type != "DequantizeLinear" || n->outputs.empty() || !n->input(0) ||
          !n->input(0)->is_const() || !Is4BitType(n->input(0)->dtype))
        continue;
      for (const Node* c : Consumers(src, n->outputs[0]))
        if (!woq_names.count(c->name))
          rep.weight_only_fallbacks.emplace_back(
              c->name, c->op_type == "MatMul" && c->domain.empty()
                           ? fmt::format("its 4-bit weight was dequantized to float at build time: the {} backend did "
                                         "not take the weight-only layer, or the weight is not a [K, N] constant",
                                         backend->Name())
                           : fmt::format("{} reads the 4-bit weight and only MatMul runs weight-only: the weight was "
                                         "dequantized to float at build time", c->op_type));
    }
    for (const auto& [l, why] : rep.weight_only_fallbacks)
      logger_.log(Severity::kWarning, fmt::format("int4 weight-only: layer '{}' runs in float: {}", l, why).c_str());
  }
  for (const char* k : {"kiln.QConv", "kiln.QMatMul", "kiln.WeightOnlyMatMul"})
    if (rep.op_counts[k] == 0) rep.op_counts.erase(k);
  e->build_flags = kBuildFlagOptimized;
  if (e->allow_tf32) e->build_flags |= kBuildFlagTF32;
  if (cfg.getFlag(BuilderFlag::kFP16)) e->build_flags |= kBuildFlagFP16;
  if (cfg.getFlag(BuilderFlag::kBF16)) e->build_flags |= kBuildFlagBF16;
  if (traits.tunes_tactics) lap("tactics");
  if (cfg.getMemoryPoolLimit("workspace") > 0 && !traits.tunes_tactics)
    logger_.log(Severity::kWarning,
                fmt::format("the WORKSPACE limit applies to backends that choose among kernels by their scratch "
                            "memory; the {} backend's kernels take theirs from host memory, which it does not limit",
                            backend->Name())
                    .c_str());
  rep.tactics_selected = static_cast<int>(e->tactics.size());

  // Auxiliary streams (plan/streams.h): independent branches on streams beside the main one.
  std::optional<StreamSchedule> schedule;
  rep.aux_streams_max = cfg.getMaxAuxStreams();
  if (cfg.getMaxAuxStreams() > 0 && !traits.concurrent_streams) {
    logger_.log(Severity::kWarning, fmt::format("the {} backend runs one layer at a time: max aux streams {} does "
                                                "not apply (the engine uses none)", backend->Name(),
                                                cfg.getMaxAuxStreams()).c_str());
  } else if (cfg.getMaxAuxStreams() > 0) {
    std::vector<int32_t> streams = AssignStreams(g, cfg.getMaxAuxStreams());
    const int32_t ns = streams.empty() ? 1 : 1 + *std::max_element(streams.begin(), streams.end());
    if (ns > 1) {
      KILN_ASSIGN_OR_RETURN(StreamSchedule sc, ScheduleStreams(g, streams, ns));
      rep.aux_streams_used = sc.AuxUsed();
      rep.aux_stream_layers.assign(static_cast<size_t>(ns - 1), {});
      for (size_t k = 0; k < streams.size(); ++k) {
        rep.cross_stream_waits += static_cast<int>(sc.waits[k].size());
        if (streams[k] > 0) rep.aux_stream_layers[streams[k] - 1].push_back(g.nodes()[k]->name);
      }
      e->streams = std::move(streams);
      e->num_streams = ns;
      schedule = std::move(sc);
    }
    logger_.log(Severity::kInfo, fmt::format("auxiliary streams: {} of at most {} used, {} cross-stream waits per run",
                                             rep.aux_streams_used, cfg.getMaxAuxStreams(), rep.cross_stream_waits)
                                     .c_str());
  }

  // Memory plan at the largest shapes any profile allows.
  auto pg = g.Clone();
  for (Value* in : pg->inputs) {
    for (const auto& prof : e->profiles) {
      auto it = prof.find(in->name);
      if (it == prof.end()) continue;
      for (size_t i = 0; i < in->shape.size(); ++i)
        if (!in->shape[i].known() || in->shape[i].value < it->second[2][i]) in->shape[i] = Dim(it->second[2][i]);
    }
  }
  ClearInferredShapes(*pg);
  InferOptions io;
  io.evaluator = ConstantFolder();
  Status st = InferGraph(*pg, io);  // nodes stay as they are: the plan follows the engine's node order
  if (!st.ok()) return st.WithContext("inferring shapes at the profile's largest input shapes");
  KILN_RETURN_IF_ERROR(CheckTensorSizes(*pg, cfg.maxTensorElements()));
  ValueBytesFn bytes = [](const Value& v) -> Result<int64_t> {
    if (v.kind != ValueKind::kTensor) return 0;  // sequences and optionals live outside the arena
    auto n = v.has_shape ? NumElements(v.shape) : std::nullopt;
    return n ? *n * static_cast<int64_t>(DataTypeSize(v.dtype)) : 0;  // data-dependent sizes are allocated at run time
  };
  MemoryPlanOptions mo;
  mo.schedule = schedule ? &*schedule : nullptr;  // pg's nodes are g's, in the same order
  KILN_ASSIGN_OR_RETURN(e->plan, PlanMemory(*pg, bytes, mo));
  for (auto& b : e->plan.buffers) b.value = nullptr;  // pg is a temporary: keep names only
  KILN_RETURN_IF_ERROR(e->plan.Validate());
  KILN_RETURN_IF_ERROR(CheckArena(e->plan, cfg, *backend));
  e->Index();
  rep.arena_bytes = static_cast<size_t>(e->plan.arena_bytes);
  rep.naive_activation_bytes = static_cast<size_t>(e->plan.naive_bytes);
  lap("memory-plan");

  auto ms = TimeOnce(*e);
  if (ms.ok()) {
    rep.estimated_latency_ms = *ms;
  } else if (ms.status().code() == StatusCode::kInvalidArgument) {
    // The timed run feeds synthetic values (random floats, zeros elsewhere): a model whose control flow or indexing
    // depends on its input values may refuse them (a Loop whose condition is false builds an empty sequence). That
    // says nothing about the engine, which is kept without a latency estimate.
    logger_.log(Severity::kWarning,
                fmt::format("the build's timed run at the opt shapes, on synthetic inputs (random floats, zeros "
                            "elsewhere), failed: {}; the engine is kept without a latency estimate",
                            ms.status().message()).c_str());
  } else {
    return ms.status().WithContext("running the built engine once at the opt shapes");
  }
  lap("first-run");

  rep.build_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  e->build_report_json = EngineReportJson(rep, cfg, e->profiles.size() > 1 || !e->profiles[0].empty());
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes_out, SerializeEngineImpl(*e));
  lap("serialize");
  rep.engine_bytes = bytes_out.size();
  if (report_out) *report_out = rep;
  return bytes_out;
}

}  // namespace

Result<std::vector<uint8_t>> Builder::buildSerializedNetwork(const NetworkDefinition& network, const BuilderConfig& cfg,
                                                             BuildReport* report_out) const {
  // Library code returns Status; an allocation that fails deep inside (a huge arena, a weight copy) must not
  // escape as an exception.
  try {
    return BuildSerialized(network, cfg, report_out, logger_);
  } catch (const std::bad_alloc&) {
    return Err(StatusCode::kOutOfRange,
               "building the engine ran out of host memory: check the input shapes (--shapes, --maxShapes) and the "
               "model's sizes");
  }
}

}  // namespace kiln
