// The kiln command line's actions: build an engine, run and time it, inspect a model or engine, and the
// reference run of an ONNX model on the CPU backend.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/kiln.h"
#include "options.h"

namespace kiln::cli {

// Parses --onnx, builds an engine with the options' config; prints the build summary (with a progress line).
struct BuildResult {
  std::vector<uint8_t> engine;
  BuildReport report;
  bool dynamic_shapes = false;
  std::string report_json;  // the build report as JSON (with the config that was used)
};
Result<BuildResult> BuildFromOnnx(const Options& o, ILogger& logger);
void PrintBuildSummary(const BuildResult& b, const Options& o);

// Times inference like trtexec (warm-up, iterations, duration, streams) and prints the performance summary.
// Fills `report` (for --json).
Status RunInference(const Engine& engine, const Options& o, nlohmann::json* report);

// The inputs an engine runs on: --loadInputs files (their types and shapes checked), random data elsewhere
// (--seed); run shapes from --shapes, the loaded file, or the first profile's opt shapes. Keyed by input name.
Result<std::map<std::string, Tensor>> MakeEngineInputs(const Engine& e, const Options& o);

// `kiln run --onnx`: the model's graph as imported, unoptimized, on the CPU reference backend (the oracle).
Status RunReference(const Options& o, nlohmann::json* report);

// `kiln inspect`: a model's or an engine's inputs, outputs, layers, precisions, tactics and memory.
Status Inspect(const Options& o, ILogger& logger, nlohmann::json* report);

// `kiln compare`: runs an engine (built from --onnx or loaded) and the reference (the CPU backend on the unoptimized
// graph, or onnxruntime) on the same inputs; per output max abs/rel error and relative L2; fails when an output
// exceeds --atol/--rtol. --markAll compares every intermediate tensor and names the first layer that drifts.
Status Compare(const Options& o, ILogger& logger, nlohmann::json* report);

// `kiln calibrate`: runs the float model over the --data batches (on the GPU where there is one, else the CPU),
// picks each activation's INT8 range with --algo, writes the --calib cache (TensorRT's format) and, in the report,
// every tensor's range.
Status Calibrate(const Options& o, ILogger& logger, nlohmann::json* report);

// Writes the output tensors: a .json file (trtexec's form) or a folder of .npy files.
struct NamedTensor {
  std::string name;
  DataType dtype;
  Dims shape;
  const void* data;
};
Status ExportOutputs(const std::string& path, const std::vector<NamedTensor>& outputs);

Status WriteJsonFile(const std::string& path, const nlohmann::json& j);

// `kiln analyze`: builds as `kiln build` would and reports what the optimizer fused and, for each pointwise layer
// left after a layer with a fusable epilogue, why it was not folded in (analyze_cmd.cpp).
Status Analyze(const Options& o, ILogger& logger, nlohmann::json* report);

}  // namespace kiln::cli
