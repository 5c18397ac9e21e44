// OptimizationProfile, BuilderConfig and BuildReport: the builder's inputs and its report.
#include <nlohmann/json.hpp>

#include "core/dims.h"
#include "core/error.h"
#include "kiln/builder.h"

namespace kiln {

Status OptimizationProfile::setDimensions(const std::string& input, ProfileSelector which, const Dims& dims) {
  for (int64_t d : dims)
    if (d < 0)
      return Err(StatusCode::kInvalidArgument, "profile shape {} for input '{}' has a negative dim", ShapeToString(dims),
                 input);
  auto& v = shapes_[input];
  if (v.empty()) v.assign(3, Dims{});
  v[static_cast<int>(which)] = dims;
  return Status::Ok();
}

Dims OptimizationProfile::getDimensions(const std::string& input, ProfileSelector which) const {
  auto it = shapes_.find(input);
  return it == shapes_.end() ? Dims{} : it->second[static_cast<int>(which)];
}

Status OptimizationProfile::validate() const {
  for (const auto& [name, v] : shapes_) {
    // A missing opt defaults to max, a missing min to opt (as trtexec does when only some are given).
    const Dims& mn = v[0];
    const Dims& op = v[1];
    const Dims& mx = v[2];
    if (mn.empty() || op.empty() || mx.empty())
      return Err(StatusCode::kInvalidArgument, "the profile for input '{}' needs min, opt and max shapes", name);
    if (mn.size() != op.size() || op.size() != mx.size())
      return Err(StatusCode::kInvalidArgument, "the profile for input '{}' has shapes of different ranks: min {} opt {} max {}",
                 name, ShapeToString(mn), ShapeToString(op), ShapeToString(mx));
    for (size_t i = 0; i < mn.size(); ++i)
      if (!(mn[i] <= op[i] && op[i] <= mx[i]))
        return Err(StatusCode::kInvalidArgument,
                   "the profile for input '{}' must have min <= opt <= max in every dim: min {} opt {} max {}", name,
                   ShapeToString(mn), ShapeToString(op), ShapeToString(mx));
  }
  return Status::Ok();
}

BuilderConfig::BuilderConfig() { setFlag(BuilderFlag::kTF32); }

size_t BuilderConfig::getMemoryPoolLimit(const std::string& pool) const {
  auto it = pools_.find(pool);
  return it == pools_.end() ? 0 : it->second;
}

Result<int> BuilderConfig::addOptimizationProfile(const OptimizationProfile& p) {
  KILN_RETURN_IF_ERROR(p.validate());
  profiles_.push_back(p);
  return static_cast<int>(profiles_.size()) - 1;
}

std::string BuildReport::ToJson(const std::string& input_model, const std::string& output_engine,
                                const BuilderConfig& config, bool dynamic_shapes) const {
  std::string precision = "fp32";
  if (config.getFlag(BuilderFlag::kFP16)) precision = "fp16";
  if (config.getFlag(BuilderFlag::kBF16)) precision = "bf16";
  if (config.getFlag(BuilderFlag::kINT8)) precision = "int8";
  if (config.getFlag(BuilderFlag::kFP8)) precision = "fp8";
  nlohmann::json passes_json = nlohmann::json::array();
  for (const auto& [name, n] : passes) passes_json.push_back({{"name", name}, {"rewrites", n}});
  nlohmann::json phases_json = nlohmann::json::array();
  for (const auto& [name, s] : phases_s) phases_json.push_back({{"phase", name}, {"s", s}});
  int total_fusions = 0;
  for (const auto& [k, n] : fusions) total_fusions += n;
  nlohmann::json j = {
      {"operation", "build"},
      {"status", "success"},
      {"input_model", input_model},
      {"output_engine", output_engine},
      {"backend", backend},
      {"device", device},
      {"configuration",
       {{"precision", precision},
        {"tf32", config.getFlag(BuilderFlag::kTF32)},
        {"workspace_mb", static_cast<double>(config.getMemoryPoolLimit("workspace")) / (1 << 20)},
        {"dynamic_shapes", dynamic_shapes},
        {"profiles", config.profiles().size()},
        {"builder_optimization_level", config.builderOptimizationLevel()},
        {"int4_weight_block_size", config.int4WeightBlockSize()}}},
      {"optimization",
       {{"layers_before", layers_before},
        {"layers_after", layers_after},
        {"layer_fusions", total_fusions},
        {"fusions", fusions},
        {"op_counts", op_counts},
        {"reformats_eliminated", reformats_eliminated},
        {"reformats_inserted", reformats_inserted},
        {"tactics_selected", tactics_selected},
        {"layers_timed", layers_timed},
        {"timing_cache_hits", timing_cache_hits},
        {"tactic_repeats", tactic_repeats},
        {"tactics_across_profile", tactics_across_profile},
        {"tactics_profile_changed", tactics_profile_changed},
        {"tactic_variants", tactic_variants},
        {"candidates_timed", candidates_timed},
        {"tuning_time_s", tuning_time_s},
        {"tactic_create_s", tactic_create_s},
        {"tactic_timing_s", tactic_timing_s},
        {"layers_reduced_precision", layers_reduced_precision},
        {"layers_fp32", layers_fp32},
        {"casts_inserted", casts_inserted},
        {"layers_int8", layers_int8},
        {"passes", passes_json}}},
      {"int8",
       {{"calibration_source", calibration_source},
        {"tensors_calibrated", int8_tensors_calibrated},
        {"layers_int8", layers_int8},
        {"layers_without_range", int8_layers_without_range},
        {"quantized_layers", int8_candidate_layers},
        {"fallbacks", [&] {
           nlohmann::json f = nlohmann::json::array();
           for (const auto& [layer, why] : int8_fallbacks) f.push_back({{"layer", layer}, {"reason", why}});
           return f;
         }()}}},
      {"int4_weight_only",
       {{"layers", layers_int4_weight_only},
        {"fallbacks", [&] {
           nlohmann::json f = nlohmann::json::array();
           for (const auto& [layer, why] : weight_only_fallbacks) f.push_back({{"layer", layer}, {"reason", why}});
           return f;
         }()}}},
      {"aux_streams",
       {{"max", aux_streams_max},
        {"used", aux_streams_used},
        {"cross_stream_waits", cross_stream_waits},
        {"layers", [&] {  // per auxiliary stream, the layers it runs beside the main stream's
           nlohmann::json a = nlohmann::json::array();
           for (size_t s = 0; s < aux_stream_layers.size(); ++s)
             a.push_back({{"stream", s + 1}, {"layers", aux_stream_layers[s]}});
           return a;
         }()}}},
      {"fallback", [&] {
         nlohmann::json f = nlohmann::json::array();
         for (const CpuFallback& c : cpu_fallbacks)
           f.push_back({{"layer", c.layer}, {"op", c.op}, {"reason", c.reason},
                        {"bytes_per_inference", c.bytes_per_inference}});
         return f;
       }()},
      {"memory",
       {{"arena_bytes", arena_bytes},
        {"naive_activation_bytes", naive_activation_bytes},
        {"arena_fraction_of_naive",
         naive_activation_bytes ? static_cast<double>(arena_bytes) / static_cast<double>(naive_activation_bytes) : 0.0}}},
      {"performance",
       {{"build_time_s", build_time_s},
        {"phases_s", phases_json},
        {"engine_size_mb", static_cast<double>(engine_bytes) / (1 << 20)},
        {"estimated_latency_ms", estimated_latency_ms}}},
  };
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // names from a file may be any bytes
}

}  // namespace kiln
