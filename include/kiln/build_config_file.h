// kiln — a build described in a YAML file: `kiln build --config=kiln.yaml` and kiln.BuildConfig in Python read it.
//
// Every field is optional; a field absent from the file leaves the flag's default (and a flag given on the command
// line overrides the file). The keys, at the top level or under `tensorrt:`:
//   onnx / onnx_path, engine / engine_path: the model and the engine file
//   fp16, bf16, int8, fp8, best, tf32, strongly_typed: booleans, as the flags
//   workspace_mb (or max_workspace_gb), activations_mb: memory pool limits
//   shapes, min_shapes, opt_shapes, max_shapes: {input: [dims]}; min_shape, opt_shape, max_shape: [dims] of a
//     one-input model; max_batch_size: checked against the max shapes' first dimension
//   calibration_cache (calib), calibration_data (a folder of .npy/.npz batches), calibration_algorithm
//     (entropy, minmax, percentile)
//   timing_cache, backend (cpu, cuda), builder_optimization_level (0..5), profiling_verbosity
//     (layer_names_only, detailed, none), avg_timing, max_aux_streams (0..64), precision_constraints (none, prefer, obey),
//     layer_precisions: {layer: fp32|fp16|bf16|int8|fp8}
// An unknown key, or a value of the wrong kind, is an error naming the key (and the file's line) and what it takes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

struct BuildConfigFile {
  std::optional<std::string> onnx, engine;
  std::optional<bool> fp16, bf16, int8, fp8, best, tf32, strongly_typed;
  std::optional<double> workspace_mb, activations_mb;
  std::map<std::string, Dims> shapes, min_shapes, opt_shapes, max_shapes;
  std::optional<Dims> min_shape, opt_shape, max_shape;  // a one-input model's
  std::optional<int64_t> max_batch_size;
  std::optional<std::string> calibration_cache, calibration_data, calibration_algorithm;
  std::optional<std::string> timing_cache, backend, profiling_verbosity, precision_constraints;
  std::optional<int> builder_optimization_level, avg_timing, max_aux_streams;
  std::map<std::string, std::string> layer_precisions;

  // min/opt/max shapes per input: the per-input maps, with `shapes` for every one of them, and the one-input
  // min_shape/opt_shape/max_shape given to `inputs` (the model's input names; an error unless there is exactly
  // one). Checks max_batch_size against the max shapes.
  Status ResolveShapes(const std::vector<std::string>& inputs, std::map<std::string, Dims>* min,
                       std::map<std::string, Dims>* opt, std::map<std::string, Dims>* max) const;
};

// Reads a build config from YAML text; `source` names it in errors ("kiln.yaml").
Result<BuildConfigFile> ParseBuildConfig(const std::string& yaml, const std::string& source);
Result<BuildConfigFile> ReadBuildConfigFile(const std::string& path);
// The config as YAML (kiln's key names; what ParseBuildConfig reads back to the same config).
std::string WriteBuildConfig(const BuildConfigFile& config);

}  // namespace kiln
