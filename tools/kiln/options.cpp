#include "kiln/options.h"  // tools/kiln/options.h

#include "core/error.h"

namespace kiln::cli {

void AddOptions(CLI::App& app, Options& o, Mode mode) {
  const bool infer = mode == Mode::kTrtexec || mode == Mode::kRun || mode == Mode::kBench;
  const bool build = mode != Mode::kInspect;
  app.add_option("--onnx", o.onnx, "ONNX model to build from");
  if (mode != Mode::kBuild) app.add_option("--loadEngine", o.load_engine, "Engine file to load");
  if (mode == Mode::kTrtexec || mode == Mode::kBuild) app.add_option("--saveEngine", o.save_engine, "Write the built engine here");
  app.add_flag("--verbose", o.verbose, "Print the build log (passes and what they changed) and more");
  app.add_option("--json", o.json, "Write this command's report as JSON");
  if (build) {
    app.add_option("--shapes", o.shapes, "Shapes for dynamic inputs: name:1x3x224x224[,...] (build: min=opt=max; run: the run shape)");
    app.add_option("--minShapes", o.min_shapes, "Optimization profile minimum shapes");
    app.add_option("--optShapes", o.opt_shapes, "Optimization profile opt shapes");
    app.add_option("--maxShapes", o.max_shapes, "Optimization profile maximum shapes");
    app.add_flag("--fp16", o.fp16, "Allow FP16 kernels");
    app.add_flag("--bf16", o.bf16, "Allow BF16 kernels");
    app.add_flag("--int8", o.int8, "Allow INT8 kernels");
    app.add_flag("--fp8", o.fp8, "Allow FP8 kernels");
    app.add_flag("--noTF32", o.no_tf32, "Forbid TF32 for float32 math");
    app.add_flag("--best", o.best, "Allow every precision");
    app.add_flag("--stronglyTyped", o.strongly_typed, "Keep the network's types exactly");
    app.add_option("--precisionConstraints", o.precision_constraints, "none|prefer|obey");
    app.add_option("--layerPrecisions", o.layer_precisions, "layer:fp16[,...]");
    app.add_option("--layerOutputTypes", o.layer_output_types, "layer:fp16[,...]");
    app.add_option("--inputIOFormats", o.input_io_formats, "Input formats, e.g. fp32:chw");
    app.add_option("--outputIOFormats", o.output_io_formats, "Output formats, e.g. fp32:chw");
    app.add_option("--calib", o.calib, "INT8 calibration cache");
    app.add_option("--memPoolSize", o.mem_pool_size, "Memory pool limits in MiB: workspace:1024[,...]");
    app.add_option("--timingCacheFile", o.timing_cache_file, "Timing cache file");
    app.add_option("--builderOptimizationLevel", o.builder_optimization_level, "0..5 (0: no fusion)")->check(CLI::Range(0, 5));
    app.add_option("--profilingVerbosity", o.profiling_verbosity, "layer_names_only|detailed|none");
    app.add_option("--avgTiming", o.avg_timing, "Iterations averaged when timing tactics");
    app.add_option("--backend", o.backend, "cpu (the reference backend) or cuda");
    app.add_option("--staticPlugins", o.static_plugins, "Plugin libraries linked statically");
    app.add_option("--dynamicPlugins", o.dynamic_plugins, "Plugin libraries to load");
  }
  if (infer) {
    app.add_option("--iterations", o.iterations, "Run at least this many inferences")->check(CLI::Range(1, 100000000));
    app.add_option("--warmUp", o.warm_up_ms, "Warm up for this many ms")->check(CLI::Range(0.0, 1e9));
    app.add_option("--duration", o.duration_s, "Run for at least this many seconds")->check(CLI::Range(0.0, 1e9));
    app.add_option("--avgRuns", o.avg_runs, "Report the average of this many consecutive runs")->check(CLI::Range(1, 1000000));
    app.add_option("--percentile", o.percentile, "Latency percentiles to report, e.g. 90,95,99");
    app.add_option("--infStreams", o.inf_streams, "Contexts run at once (one thread each on the cpu backend)")->check(CLI::Range(1, 256));
    app.add_flag("--useCudaGraph", o.use_cuda_graph, "Capture and replay a CUDA graph");
    app.add_flag("--noDataTransfers", o.no_data_transfers, "Do not copy inputs and outputs");
    app.add_flag("--useSpinWait", o.use_spin_wait, "Spin instead of blocking while waiting");
    app.add_flag("--separateProfileRun", o.separate_profile_run, "Profile layers in a run apart from the timed runs");
    app.add_flag("--skipInference", o.skip_inference, "Build only");
    app.add_option("--loadInputs", o.load_inputs, "Inputs: name:file.npy[,...] (random where absent)");
    app.add_option("--exportTimes", o.export_times, "Write each inference's times as JSON");
    app.add_option("--exportOutput", o.export_output, "Write outputs: a .json file, or a folder for one .npy each");
    app.add_option("--exportProfile", o.export_profile, "Write the per-layer profile as JSON");
    app.add_option("--exportLayerInfo", o.export_layer_info, "Write the engine's layer information as JSON");
    app.add_flag("--dumpProfile", o.dump_profile, "Print the per-layer profile");
    app.add_flag("--dumpLayerInfo", o.dump_layer_info, "Print the engine's layer information");
    app.add_flag("--dumpOutput", o.dump_output, "Print the outputs");
    app.add_option("--device", o.device, "GPU index");
    app.add_option("--seed", o.seed, "Seed of the random inputs");
  } else if (mode == Mode::kInspect) {
    app.add_flag("--dumpLayerInfo", o.dump_layer_info, "Print every layer");
  }
}

namespace {
bool Given(const CLI::App& app, const char* flag) {
  try {
    return app.count(flag) > 0;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}
}  // namespace

Status CheckUnbuiltFlags(const Options& o, const CLI::App& app) {
  const char* precision_msg =
      "reduced-precision kernels come with the CUDA backend, which is not built yet; the cpu reference backend "
      "computes in the network's own types";
  const std::pair<const char*, const char*> unbuilt[] = {
      {"--fp16", precision_msg},
      {"--bf16", precision_msg},
      {"--int8", precision_msg},
      {"--fp8", precision_msg},
      {"--best", precision_msg},
      {"--calib", "INT8 calibration is not built yet"},
      {"--layerPrecisions", "per-layer precisions need the precision planner, which is not built yet"},
      {"--layerOutputTypes", "per-layer output types need the precision planner, which is not built yet"},
      {"--timingCacheFile", "kernel auto-tuning (and so the timing cache) comes with the CUDA backend, which is not built yet"},
      {"--avgTiming", "kernel auto-tuning comes with the CUDA backend, which is not built yet"},
      {"--useCudaGraph", "CUDA graphs come with the CUDA backend, which is not built yet"},
      {"--staticPlugins", "plugins are not built yet"},
      {"--dynamicPlugins", "plugins are not built yet"},
      {"--device", "--device selects a GPU for the CUDA backend, which is not built yet (kiln runs on the cpu backend)"},
  };
  for (const auto& [flag, why] : unbuilt)
    if (Given(app, flag)) return Err(StatusCode::kUnsupported, "{} is not available: {}", flag, why);
  if (!o.precision_constraints.empty() && o.precision_constraints != "none" && o.precision_constraints != "prefer" &&
      o.precision_constraints != "obey")
    return Err(StatusCode::kInvalidArgument, "--precisionConstraints must be none, prefer or obey, not '{}'",
               o.precision_constraints);
  for (const auto& [flag, spec] : {std::pair{"--inputIOFormats", o.input_io_formats}, std::pair{"--outputIOFormats", o.output_io_formats}}) {
    if (spec.empty()) continue;
    size_t pos = 0;
    while (pos <= spec.size()) {
      size_t comma = spec.find(',', pos);
      std::string f = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (f != "fp32:chw" && f != "fp32:linear")
        return Err(StatusCode::kUnsupported,
                   "{}: format '{}' is not available: the cpu backend takes and returns tensors in the network's types "
                   "and linear (chw) layout (fp32:chw); other formats come with the CUDA backend",
                   flag, f);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  if (!o.backend.empty() && o.backend != "cpu" && o.backend != "cuda")
    return Err(StatusCode::kInvalidArgument, "--backend must be cpu or cuda, not '{}'", o.backend);
  if (!o.profiling_verbosity.empty() && o.profiling_verbosity != "layer_names_only" &&
      o.profiling_verbosity != "detailed" && o.profiling_verbosity != "none")
    return Err(StatusCode::kInvalidArgument, "--profilingVerbosity must be layer_names_only, detailed or none, not '{}'",
               o.profiling_verbosity);
  return Status::Ok();
}

Result<std::map<std::string, std::string>> ParseNameValueList(const std::string& spec, const char* flag) {
  std::map<std::string, std::string> r;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      return Err(StatusCode::kInvalidArgument, "{}: '{}' is not of the form name:value", flag, item);
    r[item.substr(0, colon)] = item.substr(colon + 1);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return r;
}

Result<std::map<std::string, Dims>> ParseShapeList(const std::string& spec, const char* flag) {
  std::map<std::string, Dims> r;
  if (spec.empty()) return r;
  KILN_ASSIGN_OR_RETURN(auto pairs, ParseNameValueList(spec, flag));
  for (const auto& [name, dims] : pairs) {
    Dims s;
    size_t pos = 0;
    while (true) {
      size_t x = dims.find('x', pos);
      std::string d = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      char* end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0)
        return Err(StatusCode::kInvalidArgument, "{}: '{}' for input '{}' is not a shape like 1x3x224x224", flag, dims,
                   name);
      s.push_back(v);
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    r[name] = s;
  }
  return r;
}

}  // namespace kiln::cli
