#include "options.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include "kiln/error.h"

namespace kiln::cli {

void AddOptions(CLI::App& app, Options& o, Mode mode) {
  const bool infer = mode == Mode::kTrtexec || mode == Mode::kRun || mode == Mode::kBench;
  const bool build = mode != Mode::kInspect && mode != Mode::kCalibrate;
  app.add_option("--onnx", o.onnx, "ONNX model to build from");
  app.add_option("--externalDataDir", o.external_data_dirs,
                 "Another folder the model's external data may be read from (after the model's own folder)")
      ->delimiter(',');
  if (mode != Mode::kBuild) app.add_option("--loadEngine", o.load_engine, "Engine file to load");
  if (mode == Mode::kTrtexec || mode == Mode::kBuild) app.add_option("--saveEngine", o.save_engine, "Write the built engine here");
  app.add_flag("--verbose", o.verbose, "Print the build log (passes and what they changed) and more");
  app.add_option("--json", o.json, "Write this command's report as JSON");
  if (build) {
    app.add_option("--config", o.config,
                   "A YAML build config (README: Build configs); flags given on the command line override it");
    app.add_option("--shapes", o.shapes, "Shapes for dynamic inputs: name:1x3x224x224[,...] (build: min=opt=max; run: the run shape)");
    app.add_option("--minShapes", o.min_shapes, "Optimization profile minimum shapes");
    app.add_option("--optShapes", o.opt_shapes, "Optimization profile opt shapes");
    app.add_option("--maxShapes", o.max_shapes, "Optimization profile maximum shapes");
    app.add_flag("--fp16", o.fp16, "Allow FP16 kernels");
    app.add_flag("--bf16", o.bf16, "Allow BF16 kernels");
    app.add_flag("--int8", o.int8, "Allow INT8 kernels");
    app.add_flag("--fp8", o.fp8,
                 "Allow FP8 (E4M3) kernels: a float network's matrix products quantized from its ranges (--calib, as "
                 "--int8 takes them); models with float8 Q/DQ nodes build FP8 layers without it");
    app.add_flag("--noTF32", o.no_tf32, "Forbid TF32 for float32 math");
    app.add_flag("--noFallback", o.no_fallback,
                 "Fail the build, listing every node, where a GPU engine would run nodes without a GPU kernel on the CPU");
    app.add_flag("--best", o.best, "Allow every precision");
    app.add_flag("--stronglyTyped", o.strongly_typed, "Keep the network's types exactly");
    app.add_option("--precisionConstraints", o.precision_constraints, "none|prefer|obey");
    app.add_option("--layerPrecisions", o.layer_precisions, "layer:fp16[,...]");
    app.add_option("--layerOutputTypes", o.layer_output_types, "layer:fp16[,...]");
    app.add_option("--inputIOFormats", o.input_io_formats, "Input formats, e.g. fp32:chw");
    app.add_option("--outputIOFormats", o.output_io_formats, "Output formats, e.g. fp32:chw");
    app.add_option("--calib", o.calib, "INT8 calibration cache");
    app.add_option("--memPoolSize", o.mem_pool_size,
                   "Memory pool limits in MiB: workspace:1024 (the most scratch memory a chosen GPU kernel may take "
                   "at the tuning shapes), activations:8192 (one context's activation memory; default: the device's)");
    app.add_option("--maxTensorElements", o.max_tensor_elements,
                   "The most elements one tensor may hold at the largest shapes (default 2^35)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 62));
    app.add_option("--int4Weights", o.int4_weights,
                   "INT4 weight-only: quantize every MatMul's float weight to int4 at build time, with one scale per "
                   "this many K along each column (e.g. 128); the layers read 4-bit weights")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    app.add_option("--timingCacheFile", o.timing_cache_file, "Timing cache file");
    app.add_option("--builderOptimizationLevel", o.builder_optimization_level, "0..5 (0: no fusion)")->check(CLI::Range(0, 5));
    app.add_option("--disablePasses", o.disable_passes, "Optimizer passes to skip, e.g. fuse-residual-add[,...]")
        ->delimiter(',');
    app.add_option("--profilingVerbosity", o.profiling_verbosity, "layer_names_only|detailed|none");
    app.add_option("--avgTiming", o.avg_timing, "Iterations averaged when timing tactics");
    app.add_option("--maxAuxStreams", o.max_aux_streams,
                   "Auxiliary streams independent branches of the graph may run on beside the main stream (default 0)")
        ->check(CLI::Range(0, 64));
    app.add_option("--backend", o.backend, "cpu (the reference backend) or cuda");
  }
  // Every subcommand imports a model or loads an engine, so each takes plugins.
  app.add_option("--staticPlugins", o.static_plugins,
                 "Linked-in plugins to register: domain.Name[,...] or all (a library path is loaded)")
      ->delimiter(',');
  app.add_option("--dynamicPlugins", o.dynamic_plugins, "Plugin libraries to load: lib.so[,...]")->delimiter(',');
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
    app.add_option("--device", o.device, "Device to build and run on (its index; default 0, the first visible GPU)");
    app.add_option("--seed", o.seed, "Seed of the random inputs");
  }
  if (mode == Mode::kCompare) {
    app.add_option("--loadInputs", o.load_inputs, "Inputs: name:file.npy[,...] (random where absent)");
    app.add_option("--seed", o.seed, "Seed of the random inputs");
    app.add_option("--atol", o.atol, "Absolute tolerance (pass: |engine - reference| <= atol + rtol * |reference|)");
    app.add_option("--rtol", o.rtol, "Relative tolerance");
    app.add_option("--reference", o.reference, "cpu (kiln's reference backend, unoptimized graph) or onnxruntime")
        ->check(CLI::IsMember(std::vector<std::string>{debug::ReferenceBackendName(), "onnxruntime"}));
    app.add_flag("--markAll", o.mark_all, "Compare every intermediate tensor and name the first layer that drifts");
    app.add_option("--compareRun", o.compare_run,
                   "Compare the outputs of the Nth run of one execution context (default 1): a layer that depends on "
                   "what an earlier run left in memory drifts on the 2nd")
        ->check(CLI::Range(1, 1000));
    app.add_option("--exportOutput", o.export_output, "Write the engine's outputs: a .json file, or a folder of .npy");
  } else if (mode == Mode::kCalibrate) {
    app.add_option("--config", o.config,
                   "A YAML build config giving the model, calibration_data, calibration_algorithm, calibration_cache "
                   "and backend; flags given on the command line override it");
    app.add_option("--data", o.data,
                   "Folder of calibration batches: .npz files (an array per input, named like it) or, for a model with "
                   "one input, .npy files; taken in file-name order (required, here or in --config)");
    app.add_option("--algo", o.algo, "entropy (TensorRT's entropy-2), minmax or percentile")
        ->check(CLI::IsMember(std::vector<std::string>{"entropy", "minmax", "percentile"}));
    app.add_option("--calib", o.calib,
                   "Write the calibration cache (TensorRT's format) here (required, here or in --config)");
    app.add_option("--calibBatches", o.calib_batches, "Calibrate on at most this many batches (default: all)")
        ->check(CLI::Range(1, 100000000));
    app.add_option("--calibPercentile", o.calib_percentile, "The percentile --algo=percentile keeps (default 99.99)")
        ->check(CLI::Range(1e-9, 100.0));
    app.add_option("--backend", o.backend, "Where the float network runs: cpu or cuda (default: cuda where a GPU is found)");
    app.add_option("--accuracyTarget", o.accuracy_target,
                   "Keep the INT8 layers whose quantization hurts most in float until the INT8 engine's outputs are "
                   "within this relative L2 error of the float model's on the first --accuracyBatches batches")
        ->check(CLI::Range(1e-12, 1e6));
    app.add_option("--accuracyBatches", o.accuracy_batches, "Batches --accuracyTarget measures on (default 4)")
        ->check(CLI::Range(1, 100000));
  } else if (mode == Mode::kInspect) {
    app.add_flag("--dumpLayerInfo", o.dump_layer_info, "Print every layer");
  }
}

Status ApplyConfigFile(Options& o, const CLI::App& app, bool calibrate) {
  KILN_ASSIGN_OR_RETURN(BuildConfigFile c, ReadBuildConfigFile(o.config));
  auto take = [&](const char* flag, auto& field, const auto& value) {
    if (value && !Given(app, flag)) field = *value;
  };
  take("--onnx", o.onnx, c.onnx);
  take("--saveEngine", o.save_engine, c.engine);
  take("--fp16", o.fp16, c.fp16);
  take("--bf16", o.bf16, c.bf16);
  take("--int8", o.int8, c.int8);
  take("--fp8", o.fp8, c.fp8);
  take("--best", o.best, c.best);
  take("--stronglyTyped", o.strongly_typed, c.strongly_typed);
  if (c.tf32 && !Given(app, "--noTF32")) o.no_tf32 = !*c.tf32;
  take("--calib", o.calib, c.calibration_cache);
  take("--timingCacheFile", o.timing_cache_file, c.timing_cache);
  take("--backend", o.backend, c.backend);
  take("--builderOptimizationLevel", o.builder_optimization_level, c.builder_optimization_level);
  take("--profilingVerbosity", o.profiling_verbosity, c.profiling_verbosity);
  take("--avgTiming", o.avg_timing, c.avg_timing);
  take("--maxAuxStreams", o.max_aux_streams, c.max_aux_streams);
  take("--precisionConstraints", o.precision_constraints, c.precision_constraints);
  if (!c.layer_precisions.empty() && !Given(app, "--layerPrecisions")) {
    o.layer_precisions.clear();
    for (const auto& [layer, p] : c.layer_precisions)
      o.layer_precisions += (o.layer_precisions.empty() ? "" : ",") + layer + ":" + p;
  }
  if ((c.workspace_mb || c.activations_mb) && !Given(app, "--memPoolSize")) {
    o.mem_pool_size.clear();
    if (c.workspace_mb) o.mem_pool_size = fmt::format("workspace:{}", *c.workspace_mb);
    if (c.activations_mb)
      o.mem_pool_size += fmt::format("{}activations:{}", o.mem_pool_size.empty() ? "" : ",", *c.activations_mb);
  }
  if (calibrate) {
    take("--data", o.data, c.calibration_data);
    take("--algo", o.algo, c.calibration_algorithm);
  } else if (c.calibration_data || c.calibration_algorithm)
    return Err(StatusCode::kInvalidArgument,
               "{}: calibration_data and calibration_algorithm are for calibrating: run kiln calibrate --onnx=... "
               "--data=... --calib=cache, then build with calibration_cache: cache",
               o.config);
  o.config_file = std::move(c);
  return Status::Ok();
}

bool Given(const CLI::App& app, const char* flag) {
  try {
    return app.count(flag) > 0;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

namespace {

using Trait = bool BackendInfo::*;

// "the cuda backend": a backend of this build that has `trait`.
std::string BackendWith(Trait trait) {
  for (const auto& name : GetBackendNames())
    if (auto info = GetBackendInfo(name); info.ok() && (*info).*trait) return "the " + name + " backend";
  return "a backend this kiln was built without";
}

// "cpu or cuda".
std::string OneOf(const std::vector<std::string>& names) {
  std::string r;
  for (size_t i = 0; i < names.size(); ++i) r += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return r;
}
}  // namespace

Status SelectDevice(const Options& o, const CLI::App& app) {
  if (!Given(app, "--device")) return Status::Ok();
  const std::string backend = o.backend.empty() ? GetDefaultBackendName() : o.backend;
  return SetDevice(backend, o.device).WithContext(fmt::format("--device={}", o.device));
}

Status CheckUnbuiltFlags(const Options& o, const CLI::App& app) {
  // Numbers CLI11's range checks let through (NaN compares false against any bound).
  for (const auto& [flag, v] : {std::pair{"--warmUp", o.warm_up_ms}, std::pair{"--duration", o.duration_s}})
    if (Given(app, flag) && !std::isfinite(v))
      return Err(StatusCode::kInvalidArgument, "{} must be a finite number, not {}", flag, v);
  if (Given(app, "--avgTiming") && o.avg_timing < 1)
    return Err(StatusCode::kInvalidArgument, "--avgTiming must be at least 1, not {}", o.avg_timing);
  // What the backend named by --backend takes (where this build has it; the build reports the others).
  std::optional<BackendInfo> info;
  if (!o.backend.empty())
    if (auto i = GetBackendInfo(o.backend); i.ok()) info = *i;
  const std::tuple<const char*, const char*, Trait> needs[] = {
      {"--fp16", "reduced-precision kernels", &BackendInfo::reduced_precision},
      {"--bf16", "reduced-precision kernels", &BackendInfo::reduced_precision},
      {"--best", "reduced-precision kernels", &BackendInfo::reduced_precision},
      {"--timingCacheFile", "kernel auto-tuning (and so the timing cache)", &BackendInfo::tunes_tactics},
      {"--avgTiming", "kernel auto-tuning", &BackendInfo::tunes_tactics},
      {"--useCudaGraph", "CUDA graphs", &BackendInfo::graph_capture},
  };
  for (const auto& [flag, what, trait] : needs)
    if (info && !((*info).*trait) && Given(app, flag))
      return Err(StatusCode::kUnsupported,
                 "{} is not available on the {} backend: {} come with {} (drop --backend={} on a machine where that "
                 "backend runs)",
                 flag, info->name, what, BackendWith(trait), info->name);
  // Auxiliary streams on the backend the build will use, named or the default (0 asks for nothing any backend lacks).
  if (o.max_aux_streams > 0) {
    const std::string name = o.backend.empty() ? GetDefaultBackendName() : o.backend;
    if (auto bi = GetBackendInfo(name); bi.ok() && !bi->concurrent_streams)
      return Err(StatusCode::kUnsupported,
                 "--maxAuxStreams={} is not available on the {} backend, which runs one layer at a time: auxiliary "
                 "streams come with {} ({})",
                 o.max_aux_streams, name, BackendWith(&BackendInfo::concurrent_streams),
                 o.backend.empty() ? "it is the default here because no GPU was found; drop --maxAuxStreams"
                                   : "drop --backend=" + name + ", or --maxAuxStreams");
  }
  if (!o.precision_constraints.empty() && o.precision_constraints != "none" && o.precision_constraints != "prefer" &&
      o.precision_constraints != "obey")
    return Err(StatusCode::kInvalidArgument, "--precisionConstraints must be none, prefer or obey, not '{}'",
               o.precision_constraints);
  // Every backend takes other I/O types: the builder casts at the engine's boundary where its layers compute in
  // the network's types.
  for (const auto& [flag, spec] : {std::pair{"--inputIOFormats", o.input_io_formats}, std::pair{"--outputIOFormats", o.output_io_formats}})
    if (!spec.empty()) KILN_RETURN_IF_ERROR(ParseIOFormats(spec, flag).status());
  const std::vector<std::string> names = GetBackendNames();
  if (!o.backend.empty() && std::find(names.begin(), names.end(), o.backend) == names.end())
    return Err(StatusCode::kInvalidArgument, "--backend must be {}, not '{}'", OneOf(names), o.backend);
  if (!o.profiling_verbosity.empty() && o.profiling_verbosity != "layer_names_only" &&
      o.profiling_verbosity != "detailed" && o.profiling_verbosity != "none")
    return Err(StatusCode::kInvalidArgument, "--profilingVerbosity must be layer_names_only, detailed or none, not '{}'",
               o.profiling_verbosity);
  return Status::Ok();
}

Result<DataType> ParsePrecision(const std::string& s, const char* flag) {
  if (s == "fp32") return DataType::kFloat32;
  if (s == "fp16") return DataType::kFloat16;
  if (s == "bf16") return DataType::kBFloat16;
  if (s == "int8") return DataType::kInt8;
  if (s == "fp8") return DataType::kFloat8E4M3FN;
  return Err(StatusCode::kInvalidArgument, "{}: '{}' is not a precision (fp32, fp16, bf16, int8, fp8)", flag, s);
}

Result<std::vector<DataType>> ParseIOFormats(const std::string& spec, const char* flag) {
  std::vector<DataType> r;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string f = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t colon = f.find(':');
    const std::string type = f.substr(0, colon), layout = colon == std::string::npos ? "chw" : f.substr(colon + 1);
    if (layout != "chw" && layout != "linear")
      return Err(StatusCode::kUnsupported, "{}: layout '{}' of '{}' is not available: kiln's I/O tensors are linear "
                 "(chw)", flag, layout, f);
    if (type != "fp32" && type != "fp16" && type != "bf16")
      return Err(StatusCode::kUnsupported, "{}: type '{}' of '{}' is not available (fp32, fp16, bf16)", flag, type, f);
    KILN_ASSIGN_OR_RETURN(DataType t, ParsePrecision(type, flag));
    r.push_back(t);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return r;
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
