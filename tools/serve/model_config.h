// kiln serve — a model's configuration: Triton's config.pbtxt (the subset in proto/model_config.proto), read as
// protobuf text format, completed from the engine where it is silent (inputs, outputs, max_batch_size), and checked
// against the engine (names, datatypes, dims, the batch dim's profile range).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "model_config.pb.h"

namespace kiln::serve {

// Parses config.pbtxt text. Fields outside kiln's subset (optimization, model_warmup, ...) are skipped with one
// warning each in `warnings`; sequence batching and ensembles are refused (kiln serve has neither).
Result<inference::ModelConfig> ParseModelConfig(const std::string& text, const std::string& path,
                                                std::vector<std::string>* warnings);

// Fills what the config leaves out from the engine and checks what it says against it:
//  - inputs/outputs: missing ones are added with the engine's datatype and dims; listed ones must name engine
//    tensors with its datatype and dims (without the batch dim when max_batch_size > 0; -1 where the engine's dim
//    is dynamic);
//  - max_batch_size: where absent (no config), the smallest profile max of the inputs' first dims when every input
//    and output has a dynamic first dim, else 0. Where given (> 0), every input's first dim must be dynamic with a
//    profile max of at least max_batch_size.
Status CompleteAndCheckConfig(const Engine& engine, const std::string& model_name, bool have_config,
                              inference::ModelConfig* config);

// The config as JSON, in the shape Triton's GET /v2/models/{m}/config returns (protobuf's JSON mapping).
std::string ModelConfigJson(const inference::ModelConfig& config);

// kiln's parameters in a config's `parameters` map (string values): "precision" (fp32, fp16, bf16, best),
// "min_shapes"/"opt_shapes"/"max_shapes" (trtexec syntax: name:1x3x224x224,...), "workspace_mb". Unknown keys warn.
struct BuildParameters {
  std::string precision = "fp32";
  std::map<std::string, std::vector<int64_t>> min_shapes, opt_shapes, max_shapes;
  size_t workspace_bytes = 0;
};
Result<BuildParameters> ReadBuildParameters(const inference::ModelConfig& config, std::vector<std::string>* warnings);

}  // namespace kiln::serve
