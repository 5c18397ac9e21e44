// The builder's CUDA steps: precision planning, the support check (one report listing every node without a GPU
// layer), tactic selection with the timing cache, and one timed run of the finished engine.
#include "runtime/builder_cuda.h"

#include <chrono>
#include <random>

#include "core/error.h"
#include "engine/engine_file.h"
#include "plan/precision.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/timing_cache.h"
#include "backends/cuda/tuning.h"
#endif

namespace kiln {

bool CudaDeviceAvailable() {
#ifdef KILN_HAVE_CUDA
  return cuda::DeviceCount() > 0;
#else
  return false;
#endif
}

#ifdef KILN_HAVE_CUDA

Status PlanPrecision(Graph& g, const BuilderConfig& cfg, BuildReport& rep, ILogger& logger) {
  PrecisionOptions po;
  if (cfg.getFlag(BuilderFlag::kFP16)) po.low = DataType::kFloat16;
  else if (cfg.getFlag(BuilderFlag::kBF16)) po.low = DataType::kBFloat16;
  for (const auto& [layer, t] : cfg.layerPrecisions()) {
    if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
      return Err(StatusCode::kUnsupported, "--layerPrecisions {}:{}: the cuda backend computes layers in fp32, fp16 or "
                 "bf16", layer, DataTypeName(t));
    bool found = false;
    for (const auto& n : g.nodes()) found |= n->name == layer;
    if (!found)
      logger.log(Severity::kWarning, fmt::format("--layerPrecisions names '{}', which is not a layer of the optimized "
                                                 "network (fused or renamed?): ignored",
                                                 layer)
                                         .c_str());
    po.layer_precision[layer] = t;
  }
  po.io_types = cfg.ioTypes();
  KILN_ASSIGN_OR_RETURN(PrecisionReport pr, AssignPrecision(g, po));
  rep.layers_reduced_precision = pr.lowered;
  rep.layers_fp32 = pr.kept_fp32;
  rep.casts_inserted = pr.casts_inserted;
  if (po.low != DataType::kFloat32)
    logger.log(Severity::kInfo, fmt::format("precision: {} layer(s) in {}, {} in fp32, {} cast(s) inserted, {} "
                                            "constant(s) converted",
                                            pr.lowered, DataTypeName(po.low), pr.kept_fp32, pr.casts_inserted,
                                            pr.constants_converted)
                                    .c_str());
  for (const auto& d : pr.details) logger.log(Severity::kVerbose, ("precision: " + d).c_str());
  return Status::Ok();
}

Result<std::vector<std::string>> ChooseCudaTactics(const Graph& g, const Graph& tuned, const BuilderConfig& cfg,
                                                   BuildReport& rep, ILogger& logger) {
  const bool tf32 = cfg.getFlag(BuilderFlag::kTF32);
  KILN_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> candidates, cuda::CheckSupport(g, tuned, tf32));
  cuda::TimingCache cache;
  const std::string& path = cfg.timingCacheFile();
  if (!path.empty()) {
    KILN_ASSIGN_OR_RETURN(std::string warning, cache.Load(path));
    if (!warning.empty()) logger.log(Severity::kWarning, warning.c_str());
    else if (cache.size())
      logger.log(Severity::kInfo, fmt::format("timing cache '{}': {} entries", path, cache.size()).c_str());
  }
  cuda::TuneOptions to;
  to.avg_timing = cfg.avgTimingIterations();
  to.allow_tf32 = tf32;
  to.cache = path.empty() ? nullptr : &cache;
  to.log = [&](const std::string& line) { logger.log(Severity::kVerbose, line.c_str()); };
  cuda::TuneReport tr;
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> tactics, cuda::SelectTactics(g, tuned, candidates, to, &tr));
  for (const auto& f : tr.failures) logger.log(Severity::kVerbose, ("tactic failed: " + f).c_str());
  rep.layers_timed = tr.timed;
  rep.timing_cache_hits = tr.cache_hits;
  rep.candidates_timed = tr.candidates;
  rep.tuning_time_s = tr.seconds;
  logger.log(Severity::kInfo, fmt::format("tactics: {} layer(s), {} timed ({} candidates, {:.2f} s), {} from the timing "
                                          "cache",
                                          tr.layers, tr.timed, tr.candidates, tr.seconds, tr.cache_hits)
                                  .c_str());
  if (!path.empty()) KILN_RETURN_IF_ERROR(cache.Save(path));
  auto info = cuda::GetDeviceInfo(0);
  if (info.ok()) rep.device = info->name;
  return tactics;
}

Result<double> TimeOnceCuda(const EngineImpl& e) {
  ExecutionContext context(std::make_unique<ExecutionContextImpl>(e));
  std::vector<cuda::DeviceBuffer> buffers;
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::map<std::string, Dims> shapes;
  for (const Value* in : e.graph->inputs) {
    auto it = e.profiles[0].find(in->name);
    const Dims d = it != e.profiles[0].end() ? it->second[1] : ToStatic(in->shape);
    Tensor t(in->dtype, d);
    for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, IsFloatType(in->dtype) ? u(rng) : 0.0);
    KILN_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::UploadToDevice(t.raw(), t.nbytes(), in->name));
    KILN_RETURN_IF_ERROR(context.setInputShape(in->name, d));
    KILN_RETURN_IF_ERROR(context.setTensorAddress(in->name, b.get()));
    buffers.push_back(std::move(b));
  }
  for (const Value* o : e.graph->outputs) {
    KILN_ASSIGN_OR_RETURN(Dims d, context.getTensorShape(o->name));
    int64_t n = 1;
    for (int64_t x : d) n *= std::max<int64_t>(x, 0);
    KILN_ASSIGN_OR_RETURN(cuda::DeviceBuffer b,
                          cuda::DeviceBuffer::Allocate(std::max<size_t>(n * DataTypeSize(o->dtype), 1)));
    KILN_RETURN_IF_ERROR(context.setTensorAddress(o->name, b.get()));
    buffers.push_back(std::move(b));
  }
  KILN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the inputs' pageable uploads have landed
  KILN_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create());
  KILN_RETURN_IF_ERROR(context.enqueue(stream.get()));  // prepares the launch plan
  KILN_RETURN_IF_ERROR(stream.Synchronize());
  const auto t0 = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(context.enqueue(stream.get()));
  KILN_RETURN_IF_ERROR(stream.Synchronize());
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

#else

Status PlanPrecision(Graph&, const BuilderConfig&, BuildReport&, ILogger&) {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA");
}
Result<std::vector<std::string>> ChooseCudaTactics(const Graph&, const Graph&, const BuilderConfig&, BuildReport&,
                                                   ILogger&) {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA");
}
Result<double> TimeOnceCuda(const EngineImpl&) {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA");
}

#endif

}  // namespace kiln
