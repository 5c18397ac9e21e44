// The kiln command line's options: trtexec's flags with trtexec's spelling, shared by the trtexec-style
// invocation (`kiln --onnx=m.onnx ...`) and the subcommands (`kiln build|run|bench|inspect`).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kiln/debug.h"
#include "kiln/kiln.h"

namespace kiln::cli {

struct Options {
  // Model and engine.
  std::string onnx, save_engine, load_engine;
  std::vector<std::string> external_data_dirs;  // --externalDataDir
  // Shapes: name:1x3x224x224[,name:...].
  std::string shapes, min_shapes, opt_shapes, max_shapes;
  // Precision.
  bool fp16 = false, bf16 = false, int8 = false, fp8 = false, no_tf32 = false, best = false, strongly_typed = false;
  bool no_fallback = false;  // --noFallback: nodes without a GPU kernel fail the build instead of running on the CPU
  std::string precision_constraints, layer_precisions, layer_output_types, input_io_formats, output_io_formats, calib;
  // Build.
  std::string mem_pool_size, timing_cache_file, backend;
  int builder_optimization_level = 3;
  std::vector<std::string> disable_passes;
  std::string profiling_verbosity;
  int avg_timing = -1;
  int max_aux_streams = -1;  // -1: the builder's default
  int64_t max_tensor_elements = 0;  // 0: the builder's default
  int64_t int4_weights = 0;         // INT4 weight-only block size (0: off)
  // Inference.
  int iterations = 10, avg_runs = 10, inf_streams = 1;
  double warm_up_ms = 200, duration_s = 3;
  std::string percentile = "90,95,99";
  bool use_cuda_graph = false, no_data_transfers = false, use_spin_wait = false, separate_profile_run = false;
  bool skip_inference = false;
  std::string load_inputs, export_times, export_output, export_profile, export_layer_info;
  bool dump_profile = false, dump_layer_info = false, dump_output = false, verbose = false;
  int device = -1;
  std::vector<std::string> static_plugins, dynamic_plugins;
  // kiln's own.
  std::string json;  // write the command's report as JSON
  std::string config;  // --config: a YAML build config (kiln/build_config_file.h); the flags given override it
  std::optional<BuildConfigFile> config_file;  // its contents, read by ApplyConfigFile
  int64_t seed = 1;
  // kiln compare.
  double atol = 1e-3, rtol = 1e-3;
  std::string reference = debug::ReferenceBackendName();  // kiln's reference backend, or onnxruntime
  bool mark_all = false;
  int compare_run = 1;  // kiln compare: compare the Nth run of one context (state earlier runs leave shows up)
  // kiln calibrate.
  std::string data, algo = "entropy";
  int calib_batches = 0;  // 0: every batch
  double calib_percentile = 99.99;
  double accuracy_target = 0;  // --accuracyTarget (relative L2); 0: no search
  int accuracy_batches = 4;
};

enum class Mode { kTrtexec, kBuild, kRun, kBench, kInspect, kCompare, kCalibrate, kAnalyze };

// Registers the flags that `mode` takes.
void AddOptions(CLI::App& app, Options& o, Mode mode);

// Errors for flags whose feature is not built yet (each says so); Ok when every given flag is usable.
Status CheckUnbuiltFlags(const Options& o, const CLI::App& app);
// --device=N: makes device N of the backend (--backend, else the default) current before anything is built or loaded
// (engines are built for and loaded onto the current device); an error naming N and the device count where it does
// not exist.
Status SelectDevice(const Options& o, const CLI::App& app);
// --config: reads the file into o.config_file and sets each option the file gives and the command line does not
// (shapes are resolved against the model's inputs when the build parses it: ProfileFromOptions). `calibrate`: the
// calibration keys (data, algorithm, cache) apply; elsewhere calibration_data and calibration_algorithm are refused.
Status ApplyConfigFile(Options& o, const CLI::App& app, bool calibrate = false);
// Whether `flag` was given on the command line.
bool Given(const CLI::App& app, const char* flag);

// "name:1x3x224x224,other:2x8" -> shapes.
Result<std::map<std::string, Dims>> ParseShapeList(const std::string& spec, const char* flag);
// "fp16" -> DataType (fp32, fp16, bf16, int8, fp8).
Result<DataType> ParsePrecision(const std::string& s, const char* flag);
// "fp16:chw,fp32:chw" -> one type per tensor (layouts: chw/linear).
Result<std::vector<DataType>> ParseIOFormats(const std::string& spec, const char* flag);
// "name:value,name2:value2" -> map (the last ':' of an item splits, so names may hold ':').
Result<std::map<std::string, std::string>> ParseNameValueList(const std::string& spec, const char* flag);

}  // namespace kiln::cli
