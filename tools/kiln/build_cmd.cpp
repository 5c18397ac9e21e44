// Building an engine from the command line: options -> BuilderConfig and profiles -> Builder.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/error.h"

namespace kiln::cli {

namespace {

// trtexec's rules: --min/--opt/--maxShapes give a profile (a missing one is taken from the others); --shapes
// fixes an input (min = opt = max) when the profile flags do not name it.
Result<OptimizationProfile> ProfileFromOptions(const Options& o, const NetworkDefinition& net, bool* dynamic) {
  KILN_ASSIGN_OR_RETURN(auto mins, ParseShapeList(o.min_shapes, "--minShapes"));
  KILN_ASSIGN_OR_RETURN(auto opts, ParseShapeList(o.opt_shapes, "--optShapes"));
  KILN_ASSIGN_OR_RETURN(auto maxs, ParseShapeList(o.max_shapes, "--maxShapes"));
  KILN_ASSIGN_OR_RETURN(auto fixed, ParseShapeList(o.shapes, "--shapes"));
  // A --config file's shapes, where no shape flag was given (the flags replace them all).
  if (o.config_file && mins.empty() && opts.empty() && maxs.empty() && fixed.empty()) {
    std::vector<std::string> inputs;
    for (int i = 0; i < net.getNbInputs(); ++i) inputs.push_back(net.getInputName(i));
    Status st = o.config_file->ResolveShapes(inputs, &mins, &opts, &maxs);
    if (!st.ok()) return st.WithContext(o.config);
  }
  OptimizationProfile p;
  std::map<std::string, bool> names;
  for (auto* m : {&mins, &opts, &maxs, &fixed})
    for (const auto& [k, v] : *m) names[k] = true;
  for (const auto& entry : names) {
    const std::string& name = entry.first;  // (not a structured binding: the lambda below captures it)
    bool found = false;
    for (int i = 0; i < net.getNbInputs(); ++i) found = found || net.getInputName(i) == name;
    if (!found) {
      std::string inputs;
      for (int i = 0; i < net.getNbInputs(); ++i) inputs += (i ? ", " : "") + net.getInputName(i);
      return Err(StatusCode::kInvalidArgument, "a shape was given for '{}', but the model's inputs are: {}", name, inputs);
    }
    auto pick = [&](std::initializer_list<const std::map<std::string, Dims>*> order) -> Dims {
      for (auto* m : order)
        if (auto it = m->find(name); it != m->end()) return it->second;
      return {};
    };
    Dims mn = pick({&mins, &opts, &maxs, &fixed});
    Dims op = pick({&opts, &maxs, &mins, &fixed});
    Dims mx = pick({&maxs, &opts, &mins, &fixed});
    if (fixed.count(name) && !mins.count(name) && !opts.count(name) && !maxs.count(name)) mn = op = mx = fixed[name];
    KILN_RETURN_IF_ERROR(p.setDimensions(name, ProfileSelector::kMin, mn));
    KILN_RETURN_IF_ERROR(p.setDimensions(name, ProfileSelector::kOpt, op));
    KILN_RETURN_IF_ERROR(p.setDimensions(name, ProfileSelector::kMax, mx));
    if (mn != mx) *dynamic = true;
  }
  return p;
}

}  // namespace

Result<BuildResult> BuildFromOnnx(const Options& o, ILogger& logger) {
  if (o.onnx.empty()) return Err(StatusCode::kInvalidArgument, "no model: give --onnx=model.onnx (or --loadEngine)");
  Builder builder(logger);
  auto net = builder.createNetwork();
  OnnxParser parser(*net, logger);
  std::printf("[kiln] parsing %s\n", o.onnx.c_str());
  const auto parse_t0 = std::chrono::steady_clock::now();
  parser.setExternalDataDirs(o.external_data_dirs);
  KILN_RETURN_IF_ERROR(parser.parseFromFile(o.onnx));
  const double parse_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - parse_t0).count();
  auto cfg = builder.createBuilderConfig();
  if (o.no_tf32) cfg->clearFlag(BuilderFlag::kTF32);
  if (o.no_fallback) cfg->setFlag(BuilderFlag::kNO_FALLBACK);
  if (o.strongly_typed) cfg->setFlag(BuilderFlag::kSTRONGLY_TYPED);
  if (o.precision_constraints == "obey") cfg->setFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS);
  cfg->setBuilderOptimizationLevel(o.builder_optimization_level);
  cfg->setDisabledPasses(o.disable_passes);
  if (o.profiling_verbosity == "detailed") cfg->setProfilingVerbosity(ProfilingVerbosity::kDetailed);
  if (o.profiling_verbosity == "none") cfg->setProfilingVerbosity(ProfilingVerbosity::kNone);
  cfg->setBackend(o.backend);  // empty: cuda where a GPU is found, else cpu
  if (o.fp16 || o.best) cfg->setFlag(BuilderFlag::kFP16);
  if (o.bf16 || o.best) cfg->setFlag(BuilderFlag::kBF16);
  if (o.int8) cfg->setFlag(BuilderFlag::kINT8);  // (--best: FP16 and BF16 until the cuda backend has INT8 kernels)
  if (!o.calib.empty()) {
    // trtexec's --calib: the cache's scales are the activations' dynamic ranges.
    if (!o.int8 && !o.fp8)
      return Err(StatusCode::kInvalidArgument,
                 "--calib={} is a calibration cache for implicit quantization: add --int8 (or --fp8)", o.calib);
    KILN_ASSIGN_OR_RETURN(const CalibrationTable table, ReadCalibrationCacheFile(o.calib));
    int used = 0;
    for (const auto& [tensor, scale] : table.scales)
      if (net->setDynamicRange(tensor, -scale * 127.f, scale * 127.f).ok()) ++used;
    std::printf("[kiln] --calib: %d of the %zu ranges in %s name tensors of the model (%s)\n", used,
                table.scales.size(), o.calib.c_str(), CalibrationAlgoName(table.algorithm));
    if (used == 0)
      return Err(StatusCode::kInvalidArgument,
                 "--calib={}: none of its {} tensor names is a tensor of {}: was it written for another model?", o.calib,
                 table.scales.size(), o.onnx);
  }
  if (o.fp8) cfg->setFlag(BuilderFlag::kFP8);
  if (!o.timing_cache_file.empty()) cfg->setTimingCacheFile(o.timing_cache_file);
  if (o.avg_timing > 0) cfg->setAvgTimingIterations(o.avg_timing);
  if (o.max_aux_streams >= 0) cfg->setMaxAuxStreams(o.max_aux_streams);
  if (!o.layer_precisions.empty()) {
    KILN_ASSIGN_OR_RETURN(auto lp, ParseNameValueList(o.layer_precisions, "--layerPrecisions"));
    for (const auto& [layer, type] : lp) {
      KILN_ASSIGN_OR_RETURN(DataType t, ParsePrecision(type, "--layerPrecisions"));
      cfg->setLayerPrecision(layer, t);
    }
  }
  if (!o.layer_output_types.empty()) {
    KILN_ASSIGN_OR_RETURN(auto lp, ParseNameValueList(o.layer_output_types, "--layerOutputTypes"));
    for (const auto& [layer, type] : lp) {
      KILN_ASSIGN_OR_RETURN(DataType t, ParsePrecision(type, "--layerOutputTypes"));
      cfg->setLayerOutputType(layer, t);
    }
  }
  // --inputIOFormats/--outputIOFormats: one type:layout per input/output, in order.
  for (const auto& [spec, is_input] : {std::pair{o.input_io_formats, true}, std::pair{o.output_io_formats, false}}) {
    if (spec.empty()) continue;
    KILN_ASSIGN_OR_RETURN(std::vector<DataType> types, ParseIOFormats(spec, is_input ? "--inputIOFormats" : "--outputIOFormats"));
    const int n = is_input ? net->getNbInputs() : net->getNbOutputs();
    if (static_cast<int>(types.size()) != 1 && static_cast<int>(types.size()) != n)
      return Err(StatusCode::kInvalidArgument, "{} gives {} format(s) but the model has {} {}: give one, or one each",
                 is_input ? "--inputIOFormats" : "--outputIOFormats", types.size(), n, is_input ? "inputs" : "outputs");
    for (int i = 0; i < n; ++i)
      cfg->setIOType(is_input ? net->getInputName(i) : net->getOutputName(i), types.size() == 1 ? types[0] : types[i]);
  }
  if (!o.mem_pool_size.empty()) {
    KILN_ASSIGN_OR_RETURN(auto pools, ParseNameValueList(o.mem_pool_size, "--memPoolSize"));
    for (const auto& [pool, mib] : pools) {
      if (pool == "dlaSRAM" || pool == "dlaLocalDRAM" || pool == "dlaGlobalDRAM" || pool == "tacticSharedMem")
        return Err(StatusCode::kUnsupported, "--memPoolSize: kiln has no '{}' pool ({}); drop it", pool,
                   pool == "tacticSharedMem" ? "its kernels do not take a shared-memory budget" : "there is no DLA");
      if (pool != "workspace" && pool != "activations")
        return Err(StatusCode::kInvalidArgument, "--memPoolSize: unknown pool '{}' (workspace, activations)", pool);
      char* end = nullptr;
      double v = std::strtod(mib.c_str(), &end);
      if (end == mib.c_str() || (*end != '\0' && *end != 'M' && *end != 'm') || !std::isfinite(v) || v < 0 ||
          v > 1e9)
        return Err(StatusCode::kInvalidArgument, "--memPoolSize: '{}' is not a size in MiB (a number from 0 to 1e9)",
                   mib);
      cfg->setMemoryPoolLimit(pool, static_cast<size_t>(v * 1024 * 1024));
    }
  }
  if (o.max_tensor_elements > 0) cfg->setMaxTensorElements(o.max_tensor_elements);
  if (o.int4_weights > 0) cfg->setInt4WeightBlockSize(o.int4_weights);
  BuildResult r;
  KILN_ASSIGN_OR_RETURN(OptimizationProfile profile, ProfileFromOptions(o, *net, &r.dynamic_shapes));
  if (!profile.shapes().empty()) KILN_RETURN_IF_ERROR(cfg->addOptimizationProfile(profile).status());

  // A progress line while the build runs (long builds: large models on 2 cores).
  std::atomic<bool> done{false};
  const auto t0 = std::chrono::steady_clock::now();
  std::thread progress([&] {
    int ticks = 0;
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (++ticks % 50 == 0 && !done.load())
        std::printf("[kiln] building... %.0f s\n",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()),
            std::fflush(stdout);
    }
  });
  auto bytes = builder.buildSerializedNetwork(*net, *cfg, &r.report);
  done = true;
  progress.join();
  if (!bytes.ok()) return bytes.status();
  r.engine = std::move(*bytes);
  r.report.engine_bytes = r.engine.size();
  r.report.phases_s.insert(r.report.phases_s.begin(), {"parse-onnx", parse_s});
  r.report_json = r.report.ToJson(o.onnx, o.save_engine, *cfg, r.dynamic_shapes);
  return r;
}

void PrintBuildSummary(const BuildResult& b, const Options& o) {
  const BuildReport& r = b.report;
  std::printf("[kiln] === Build Summary ===\n");
  std::printf("[kiln] backend: %s\n", r.backend.c_str());
  std::printf("[kiln] layers: %zu before optimization, %zu after\n", r.layers_before, r.layers_after);
  std::string passes;
  for (const auto& [name, n] : r.passes)
    if (n > 0) passes += (passes.empty() ? "" : ", ") + name + " (" + std::to_string(n) + ")";
  std::printf("[kiln] passes applied: %s\n", passes.empty() ? "none changed the graph" : passes.c_str());
  std::string fusions;
  for (const auto& [k, n] : r.fusions) fusions += (fusions.empty() ? "" : ", ") + k + " " + std::to_string(n);
  std::printf("[kiln] fusions: %s\n", fusions.empty() ? "none" : fusions.c_str());
  std::printf("[kiln] reformats: %d inserted, %d eliminated\n", r.reformats_inserted, r.reformats_eliminated);
  if (o.int8 || r.layers_int8 > 0) {
    std::printf("[kiln] int8: %d INT8 layer(s)%s%s\n", r.layers_int8,
                r.calibration_source.empty() ? "" : (", ranges from " + r.calibration_source).c_str(),
                r.int8_fallbacks.empty() ? "" : fmt::format("; {} in float:", r.int8_fallbacks.size()).c_str());
    for (const auto& [layer, why] : r.int8_fallbacks) std::printf("[kiln]   %s: %s\n", layer.c_str(), why.c_str());
  }
  if (!r.cpu_fallbacks.empty()) {
    int64_t bytes = 0;
    for (const auto& f : r.cpu_fallbacks) bytes += f.bytes_per_inference;
    std::printf("[kiln] CPU fallback: %zu layer(s) run on the CPU inside the engine, %.2f MiB copied per inference "
                "(--noFallback refuses them):\n", r.cpu_fallbacks.size(), bytes / 1048576.0);
    for (const auto& f : r.cpu_fallbacks)
      std::printf("[kiln]   %s (%s): %s\n", f.layer.c_str(), f.op.c_str(), f.reason.c_str());
  }
  if (r.layers_int4_weight_only > 0 || !r.weight_only_fallbacks.empty()) {
    std::printf("[kiln] int4 weight-only: %d layer(s)%s\n", r.layers_int4_weight_only,
                r.weight_only_fallbacks.empty() ? ""
                                                : fmt::format("; {} in float:", r.weight_only_fallbacks.size()).c_str());
    for (const auto& [layer, why] : r.weight_only_fallbacks) std::printf("[kiln]   %s: %s\n", layer.c_str(), why.c_str());
  }
  if (o.verbose)
    for (const auto& d : r.pass_details) std::printf("[kiln]   %s\n", d.c_str());
  std::printf("[kiln] activation memory: %.2f MiB arena (naive sum %.2f MiB, %.1f%%)\n", r.arena_bytes / 1048576.0,
              r.naive_activation_bytes / 1048576.0,
              r.naive_activation_bytes ? 100.0 * r.arena_bytes / r.naive_activation_bytes : 0.0);
  std::printf("[kiln] engine size: %.2f MiB; build time: %.2f s; estimated latency: %.3f ms\n",
              r.engine_bytes / 1048576.0, r.build_time_s, r.estimated_latency_ms);
  if (o.verbose) {
    std::string phases;
    for (const auto& [name, s] : r.phases_s) phases += fmt::format("{}{} {:.2f} s", phases.empty() ? "" : ", ", name, s);
    std::printf("[kiln] build phases: %s\n", phases.c_str());
  }
}

}  // namespace kiln::cli
