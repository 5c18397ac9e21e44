// The CUDA backend (see cuda_backend.h): the settings it takes, the support check (one report listing every node
// without a GPU layer), tactic selection with the timing cache, the engine's layers and weights on the device, and
// contexts over the planned executor.
#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>

#include <cuda_runtime.h>

#include "backends/cuda/capture_guard.h"
#include "backends/cuda/device.h"
#include "backends/cuda/engine_exec.h"
#include "backends/cuda/graph_runner.h"
#include "backends/cuda/handles.h"
#include "backends/cuda/quantized_layer_util.h"
#include "backends/cuda/timing_cache.h"
#include "backends/cuda/tuning.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {

constexpr std::string_view kName = "cuda";

// One context: its arena, workspace and launch plans (engine_exec.h). Outputs go to the caller's addresses.
class CudaContext final : public BackendContext {
 public:
  CudaContext(const GpuEngine& engine, const MemoryPlan& plan) : gpu_(engine, plan) {}
  Status Init() { return gpu_.Init(); }

  Status Enqueue(const EnqueueArgs& args) override {
    KILN_ASSIGN_OR_RETURN(ShapedGraph shaped, args.shaped_graph());  // checks every input has a shape
    gpu_.set_use_cuda_graph(args.capture_graph);
    gpu_.set_annotate_layers(args.annotate_layers);
    KILN_RETURN_IF_ERROR(gpu_.SetAuxStreams(args.aux_streams));
    return gpu_.Enqueue(static_cast<cudaStream_t>(args.stream), std::move(shaped.graph), shaped.key, args.addresses,
                        args.profiler);
  }

  Result<const void*> OutputBuffer(const std::string& name,
                                   const std::map<std::string, void*>& addresses) const override {
    auto a = addresses.find(name);
    if (a == addresses.end())
      return Err(StatusCode::kNotFound, "no output named '{}' is bound (call setTensorAddress and enqueue first)", name);
    return static_cast<const void*>(a->second);
  }

 private:
  GpuContext gpu_;
};

class CudaEngine final : public BackendEngine {
 public:
  CudaEngine(const EngineDesc& e, std::unique_ptr<GpuEngine> gpu) : e_(e), gpu_(std::move(gpu)) {}
  Result<std::unique_ptr<BackendContext>> CreateContext() const override {
    auto c = std::make_unique<CudaContext>(*gpu_, e_.plan);
    KILN_RETURN_IF_ERROR(c->Init());
    return std::unique_ptr<BackendContext>(std::move(c));
  }

 private:
  const EngineDesc& e_;
  std::unique_ptr<GpuEngine> gpu_;
};

// The shapes of a profile other than its opt shapes that tactics are also timed at: min, max, and the geometric
// midpoints of min-opt and opt-max (every dynamic dim moves by the same fraction in log space), deduplicated; points
// with an empty input are left out.
std::vector<std::map<std::string, Dims>> ProfilePoints(const ProfileShapes& p) {
  std::vector<std::map<std::string, Dims>> points;
  std::map<std::string, Dims> opt;
  for (const auto& [name, v] : p) {
    if (v.size() != 3) return points;
    opt[name] = v[1];
  }
  auto at = [&](int from, int to, double f) {
    std::map<std::string, Dims> shapes;
    for (const auto& [name, v] : p) {
      if (v[from].size() != v[to].size()) return;
      Dims d(v[from].size());
      for (size_t i = 0; i < d.size(); ++i) {
        const double a = static_cast<double>(v[from][i]), b = static_cast<double>(v[to][i]);
        d[i] = a <= 0 || b <= 0 ? v[to][i]
                                : std::clamp<int64_t>(std::llround(std::exp(std::log(a) + f * (std::log(b) - std::log(a)))),
                                                      std::min(v[from][i], v[to][i]), std::max(v[from][i], v[to][i]));
        if (d[i] == 0) return;  // an empty tensor's timing says nothing about a tactic
      }
      shapes[name] = d;
    }
    if (shapes != opt && std::find(points.begin(), points.end(), shapes) == points.end()) points.push_back(shapes);
  };
  at(0, 0, 0);    // min
  at(0, 1, 0.5);  // between min and opt
  at(1, 2, 0.5);  // between opt and max
  at(2, 2, 0);    // max
  return points;
}

class CudaBackendImpl final : public Backend {
 public:
  std::string_view Name() const override { return kName; }

  Status CheckAvailable() const override {
    if (DeviceCount() > 0) return Status::Ok();
    return Err(StatusCode::kUnsupported,
               "the cuda backend needs a CUDA device and none was found: use the cpu reference backend "
               "(--backend=cpu), or run on a machine with an NVIDIA GPU");
  }

  // The calling thread's current device, and how many there are where there are several.
  std::string Description() const override {
    const int n = DeviceCount();
    if (n == 0) return "no CUDA device found";
    auto device = CurrentDevice();
    if (!device.ok()) return device.status().message();
    auto info = GetDeviceInfo(*device);
    if (!info.ok()) return info.status().message();
    return n == 1 ? info->ToString() : fmt::format("device {} of {}: {}", *device, n, info->ToString());
  }

  BackendTraits Traits() const override {
    BackendTraits t;
    t.reduced_precision = true;
    t.channels_last = true;
    t.tunes_tactics = true;
    t.graph_capture = true;
    t.concurrent_streams = true;
    return t;
  }

  const DeviceApi* Device() const override { return &CudaDeviceApi(); }

  bool ComputesIn(const Node& n, DataType t) const override {
    const LayerFactory* f = Layers().Find(n);
    if (!f) return t == DataType::kFloat32;  // no GPU layer: the node runs on the CPU (fallback), in float32
    return std::find(f->compute_types.begin(), f->compute_types.end(), t) != f->compute_types.end();
  }

  bool HasKernel(const std::string& op) const override { return Layers().Find(op) != nullptr; }
  bool Prefers(const Node& n) const override {
    const LayerFactory* f = Layers().Find(n);
    return f && (f->optimizer_may_create || (f->preferred_for && f->preferred_for(n)));
  }

  Status CheckConfig(const BuilderConfig& cfg) const override {
    if (cfg.getFlag(BuilderFlag::kINT8))
      if (const std::string why = quantized::QConvTensorCoresUnavailable(); !why.empty())
        return Err(StatusCode::kUnsupported,
                   "--int8 is not available on the cuda backend here: {}. Its other INT8 layers are exact but run "
                   "without tensor cores, so build INT8 engines for the cpu backend (--backend=cpu), or build with "
                   "--fp16 or --bf16 for speed",
                   why);
    if (cfg.getFlag(BuilderFlag::kFP8))
      if (const std::string why = quantized::Fp8GemmUnavailable(); !why.empty())
        return Err(StatusCode::kUnsupported,
                   "--fp8 is not available on the cuda backend here: {}. Build with --fp16 or --bf16, or build FP8 "
                   "engines for the cpu backend (--backend=cpu)", why);
    if (!cfg.layerOutputTypes().empty())
      return Err(StatusCode::kUnsupported, "--layerOutputTypes is not supported yet; use --layerPrecisions");
    for (const auto& [layer, t] : cfg.layerPrecisions())
      if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16 &&
          !(t == DataType::kInt8 && cfg.getFlag(BuilderFlag::kINT8)))
        return Err(StatusCode::kUnsupported,
                   "--layerPrecisions {}:{}: the cuda backend computes layers in fp32, fp16 or bf16, and int8 with "
                   "--int8",
                   layer, DataTypeName(t));
    return Status::Ok();
  }

  Result<std::vector<std::string>> ChooseTactics(const BuildRequest& r) const override {
    const BuilderConfig& cfg = r.config;
    ILogger& logger = r.logger;
    const Graph& g = *r.engine.graph;
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> tuned, r.engine.TuningGraph());
    const bool tf32 = cfg.getFlag(BuilderFlag::kTF32);
    const bool fallback = !cfg.getFlag(BuilderFlag::kNO_FALLBACK);
    std::vector<FallbackNode> fallbacks;
    KILN_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> candidates,
                          CheckSupport(g, *tuned, tf32, fallback ? &fallbacks : nullptr));
    for (const FallbackNode& f : fallbacks) {
      const Node& n = *g.nodes()[f.index];
      const Node& tn = *tuned->nodes()[f.index];
      // Bytes crossing PCIe per inference at the tuning shapes: non-constant inputs down, outputs up.
      int64_t bytes = 0;
      for (const auto* list : {&tn.inputs, &tn.outputs})
        for (const Value* v : *list)
          if (v && !v->is_const() && v->has_shape && IsStatic(v->shape))
            bytes += NumElements(ToStatic(v->shape)) * static_cast<int64_t>(DataTypeSize(v->dtype));
      r.report.cpu_fallbacks.push_back({n.name, QualifiedOpName(n), f.reason, bytes});
      logger.log(Severity::kWarning,
                 fmt::format("{} runs on the CPU inside the GPU engine ({} bytes copied per inference): {}. "
                             "--noFallback makes this an error",
                             n.Where(), bytes, f.reason).c_str());
    }
    TimingCache cache;
    const std::string& path = cfg.timingCacheFile();
    if (!path.empty()) {
      KILN_ASSIGN_OR_RETURN(std::string warning, cache.Load(path));
      if (!warning.empty()) logger.log(Severity::kWarning, warning.c_str());
      else if (cache.size())
        logger.log(Severity::kInfo, fmt::format("timing cache '{}': {} entries", path, cache.size()).c_str());
    }
    TuneOptions to;
    to.avg_timing = cfg.avgTimingIterations();
    to.workspace_limit = cfg.getMemoryPoolLimit("workspace");
    to.allow_tf32 = tf32;
    to.cache = path.empty() ? nullptr : &cache;
    to.log = [&](const std::string& line) { logger.log(Severity::kVerbose, line.c_str()); };
    // Dynamic profiles: the graph at the first profile's other shapes too, so the tactics hold up across it.
    std::vector<std::shared_ptr<const Graph>> at_points;
    std::vector<const Graph*> also_at;
    std::vector<std::map<std::string, Dims>> point_shapes;
    // Each point's candidate lists (per-shape tactics are chosen among the candidates made at the point's shapes).
    std::vector<std::vector<std::vector<std::string>>> point_candidates;
    for (const auto& shapes : ProfilePoints(r.engine.profiles[0])) {
      auto pg = r.engine.GraphAtShapes(shapes);
      if (!pg.ok()) {  // a point the graph cannot be inferred at is left out of tuning, with a note
        logger.log(Severity::kVerbose, ("tactics: not tuned at another profile point: " + pg.status().message()).c_str());
        continue;
      }
      std::vector<FallbackNode> point_fallbacks;
      auto listed = CheckSupport(g, **pg, tf32, fallback ? &point_fallbacks : nullptr);
      at_points.push_back(*pg);
      also_at.push_back(at_points.back().get());
      point_shapes.push_back(shapes);
      point_candidates.push_back(listed.ok() ? std::move(*listed)
                                             : std::vector<std::vector<std::string>>(g.nodes().size()));
    }
    TuneReport tr;
    TacticVariants variants;
    const bool per_shape = r.tactic_variants && r.tactic_points;
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> tactics,
                          SelectTactics(g, *tuned, candidates, to, &tr, also_at, per_shape ? &point_candidates : nullptr,
                                        per_shape ? &variants : nullptr));
    if (per_shape && tr.variants > 0) {
      // Every timed point is kept, those without a variant too: shapes nearest such a point run the main layers,
      // which were the faster there.
      *r.tactic_points = point_shapes;
      *r.tactic_variants = std::move(variants);
    }
    for (const auto& f : tr.failures) logger.log(Severity::kVerbose, ("tactic failed: " + f).c_str());
    if (tr.over_workspace > 0)
      logger.log(Severity::kInfo, fmt::format("tactics: {} candidate(s) left out for needing more scratch memory than "
                                              "the WORKSPACE limit of {:.2f} MiB",
                                              tr.over_workspace, to.workspace_limit / 1048576.0)
                                      .c_str());
    BuildReport& rep = r.report;
    rep.layers_timed = tr.timed;
    rep.timing_cache_hits = tr.cache_hits;
    rep.candidates_timed = tr.candidates;
    rep.tactic_repeats = tr.repeats;
    rep.tuning_time_s = tr.seconds;
    rep.tactic_create_s = tr.create_seconds;
    rep.tactics_across_profile = tr.range_timed;
    rep.tactics_profile_changed = tr.range_changed;
    rep.tactic_variants = tr.variants;
    rep.tactic_timing_s = tr.timing_seconds;
    logger.log(Severity::kInfo,
               fmt::format("tactics: {} layer(s), {} timed ({} candidates, {:.2f} s: {:.2f} s creating them, {:.2f} s "
                           "timing them), {} repeating an identical layer, {} from the timing cache",
                           tr.layers, tr.timed, tr.candidates, tr.seconds, tr.create_seconds, tr.timing_seconds,
                           tr.repeats, tr.cache_hits)
                   .c_str());
    if (!also_at.empty())
      logger.log(Severity::kInfo,
                 fmt::format("tactics across the profile: {} layer(s) also timed at {} other shape(s) of it, {} of them "
                             "choosing another tactic than the opt shape's fastest; {} per-shape tactic(s)",
                             tr.range_timed, also_at.size(), tr.range_changed, tr.variants)
                     .c_str());
    if (!path.empty()) KILN_RETURN_IF_ERROR(cache.Save(path));
    if (auto device = CurrentDevice(); device.ok())  // tactics were timed on the calling thread's current device
      if (auto info = GetDeviceInfo(*device); info.ok()) rep.device = info->name;
    return tactics;
  }

  // The calling thread's current device: engines are built for it, and loaded onto it.
  Result<DeviceTarget> Target() const override {
    KILN_ASSIGN_OR_RETURN(const int device, CurrentDevice());
    KILN_ASSIGN_OR_RETURN(DeviceInfo info, GetDeviceInfo(device));
    DeviceTarget t;
    t.device_name = info.name;
    t.compute_capability = info.cc_major * 10 + info.cc_minor;
    t.cuda_version = static_cast<uint32_t>(info.runtime_version);
    t.cublas_version = static_cast<uint32_t>(CublasLtVersion());
    t.cudnn_version = static_cast<uint32_t>(CudnnVersion());
    t.memory_bytes = info.total_memory;
    return t;
  }

  Result<std::shared_ptr<BackendEngine>> CreateEngine(const EngineDesc& e) const override {
    if (DeviceCount() == 0)
      return Err(StatusCode::kUnsupported, "this engine was built for the cuda backend but no CUDA device is available");
    // Layers are created for the shapes they were tuned at: the first profile's opt shapes.
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> tuned, e.TuningGraph());
    // Uploads, cuDNN plans and a device synchronize: not while another context captures (capture_guard.h).
    NoCaptureScope no_capture;
    // Per-shape tactics: the engine graph at each point, for their layers.
    LayerVariants lv;
    bool any_variant = false;
    for (const auto& v : e.tactic_variants) any_variant |= !v.empty();
    if (any_variant) {
      for (const auto& [name, v] : e.profiles[0])
        if (v.size() == 3) lv.opt[name] = v[1];
      lv.points = e.tactic_points;
      for (const auto& pt : e.tactic_points) {
        auto pg = e.GraphAtShapes(pt);
        if (!pg.ok()) return pg.status().WithContext("inferring the engine graph at a per-shape tactic's point");
        lv.graphs.push_back(*pg);
      }
      lv.variants = e.tactic_variants;
    }
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<GpuEngine> gpu,
                          GpuEngine::Create(*e.graph, *tuned, e.tactics, e.allow_tf32, e.streams, e.num_streams,
                                            any_variant ? &lv : nullptr));
    // Memory shared across streams only between ordered work (an engine file's plan is not trusted to say so).
    if (const StreamSchedule* sc = gpu->schedule()) KILN_RETURN_IF_ERROR(CheckPlanForStreams(e.plan, *e.graph, *sc));
    return std::shared_ptr<BackendEngine>(std::make_shared<CudaEngine>(e, std::move(gpu)));
  }

  Result<std::map<std::string, Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                 const GraphRunOptions& options) const override {
    GpuRunOptions go;
    go.keep_all = options.keep_all;
    go.tactics = options.tactics;
    go.allow_tf32 = options.allow_tf32;
    go.observe_float = options.observe_float;
    return cuda::RunGraph(g, inputs, go);
  }
};

}  // namespace

const Backend& CudaBackend() {
  static const CudaBackendImpl backend;
  return backend;
}

}  // namespace kiln::cuda
