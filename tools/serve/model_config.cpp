// config.pbtxt: parsed as protobuf text format (Triton's message and field names), completed from the engine, checked
// against it, and written back as JSON for GET /v2/models/{m}/config.
#include "model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "infer_types.h"

namespace kiln::serve {
namespace {

namespace pb = google::protobuf;

// Collects the parser's messages: errors fail the parse; with unknown fields allowed, each skipped field is a warning.
class Collector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    errors.push_back(fmt::format("line {}:{}: {}", line + 1, column + 1, message));
  }
  void AddWarning(int line, pb::io::ColumnNumber column, const std::string& message) override {
    warnings.push_back(fmt::format("line {}:{}: {}", line + 1, column + 1, message));
  }
  std::vector<std::string> errors, warnings;
};

// The field name in a text-format "unknown field" message, e.g. `Message type "inference.ModelConfig" has no field
// named "optimization".`
std::string UnknownFieldName(const std::string& message) {
  const std::string key = "no field named \"";
  const size_t p = message.find(key);
  if (p == std::string::npos) return "";
  const size_t q = message.find('"', p + key.size());
  return q == std::string::npos ? "" : message.substr(p + key.size(), q - p - key.size());
}

std::string DimsText(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

Result<std::vector<int64_t>> ParseDims(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(part, &used);
      if (used != part.size() || v < 0) throw std::invalid_argument(part);
      dims.push_back(v);
    } catch (const std::exception&) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: '{}' is not a shape like 1x3x224x224", what, text));
    }
  }
  return dims;
}

// "name:1x3x224x224,mask:1x128" -> {name: dims}.
Status ParseShapeList(const std::string& text, const std::string& key,
                      std::map<std::string, std::vector<int64_t>>* out) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("parameters {{ key: \"{}\" }}: '{}' is not name:shape (e.g. x:1x3x224x224)", key, item));
    auto dims = ParseDims(item.substr(colon + 1), "parameters { key: \"" + key + "\" }");
    if (!dims.ok()) return dims.status();
    (*out)[item.substr(0, colon)] = *dims;
  }
  return Status::Ok();
}

}  // namespace

Result<inference::ModelConfig> ParseModelConfig(const std::string& text, const std::string& path,
                                                std::vector<std::string>* warnings) {
  inference::ModelConfig config;
  Collector strict;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&strict);
  if (parser.ParseFromString(text, &config)) return config;
  // Unknown fields: which are they? Refuse the ones that change what a request means; skip the rest with a warning.
  std::vector<std::string> unknown;
  for (const std::string& e : strict.errors) {
    const std::string f = UnknownFieldName(e);
    if (f.empty()) return Status(StatusCode::kInvalidModel, fmt::format("{}: {}", path, e));
    if (f == "sequence_batching" || f == "ensemble_scheduling")
      return Status(StatusCode::kUnsupported,
                    fmt::format("{}: {}: kiln serve has no {} (only the default scheduler and dynamic_batching)", path,
                                e, f == "sequence_batching" ? "sequence batching" : "ensembles"));
    unknown.push_back(f);
  }
  config.Clear();
  Collector lenient;
  pb::TextFormat::Parser relaxed;
  relaxed.AllowUnknownField(true);
  relaxed.RecordErrorsTo(&lenient);
  if (!relaxed.ParseFromString(text, &config))
    return Status(StatusCode::kInvalidModel,
                  fmt::format("{}: {}", path, lenient.errors.empty() ? "not a model configuration" : lenient.errors[0]));
  for (const std::string& f : unknown)
    warnings->push_back(fmt::format("{}: field '{}' is not one kiln serve reads; it is ignored", path, f));
  return config;
}

Status CompleteAndCheckConfig(const Engine& engine, const std::string& model_name, bool have_config,
                              inference::ModelConfig* config) {
  const std::string where = fmt::format("model '{}'", model_name);
  if (config->name().empty()) config->set_name(model_name);
  if (config->name() != model_name)
    return Status(StatusCode::kInvalidModel,
                  fmt::format("{}: config.pbtxt names the model '{}'; it must be the folder's name", where,
                              config->name()));
  if (config->max_batch_size() < 0)
    return Status(StatusCode::kInvalidModel, fmt::format("{}: max_batch_size must be 0 or more", where));

  std::vector<std::string> inputs, outputs;
  for (int i = 0; i < engine.getNbIOTensors(); ++i) {
    const std::string n = engine.getIOTensorName(i);
    (engine.getTensorIOMode(n) == TensorIOMode::kInput ? inputs : outputs).push_back(n);
  }
  auto first_dim_dynamic = [&](const std::string& n) {
    const Dims d = engine.getTensorShape(n);
    return !d.empty() && d[0] < 0;
  };
  auto profile_max0 = [&](const std::string& n) -> int64_t {
    if (engine.getNbOptimizationProfiles() == 0) return 0;
    const Dims d = engine.getProfileShape(n, 0, ProfileSelector::kMax);
    return d.empty() ? 0 : d[0];
  };
  if (!have_config) {  // auto-complete: batch where every tensor's first dim is dynamic
    bool all = !inputs.empty();
    for (const auto& n : inputs) all = all && first_dim_dynamic(n);
    for (const auto& n : outputs) all = all && first_dim_dynamic(n);
    int64_t mb = 0;
    if (all) {
      mb = INT32_MAX;
      for (const auto& n : inputs) mb = std::min(mb, profile_max0(n));
    }
    config->set_max_batch_size(static_cast<int32_t>(std::max<int64_t>(mb, 0)));
  }
  const int64_t mb = config->max_batch_size();
  if (mb > 0) {
    for (const auto& n : inputs) {
      if (!first_dim_dynamic(n))
        return Status(StatusCode::kInvalidModel,
                      fmt::format("{}: max_batch_size is {} but input '{}' has a fixed first dim ({}): build the "
                                  "engine with a dynamic batch dim, or set max_batch_size: 0",
                                  where, mb, n, ShapeToString(engine.getTensorShape(n))));
      if (profile_max0(n) < mb)
        return Status(StatusCode::kInvalidModel,
                      fmt::format("{}: max_batch_size is {} but the engine's profile lets input '{}' have at most {} "
                                  "in its first dim: lower max_batch_size or rebuild with --maxShapes",
                                  where, mb, n, profile_max0(n)));
    }
    for (const auto& n : outputs)
      if (!first_dim_dynamic(n))
        return Status(StatusCode::kInvalidModel,
                      fmt::format("{}: max_batch_size is {} but output '{}' has a fixed first dim ({}), so batched "
                                  "results cannot be split: set max_batch_size: 0",
                                  where, mb, n, ShapeToString(engine.getTensorShape(n))));
  }
  // The dims a config lists for a tensor: the engine's, less the batch dim when batching.
  auto config_dims = [&](const std::string& n) {
    Dims d = engine.getTensorShape(n);
    if (mb > 0 && !d.empty()) d.erase(d.begin());
    return std::vector<int64_t>(d.begin(), d.end());
  };
  auto check = [&](const std::string& kind, const std::string& name, int data_type, const auto& dims,
                   const std::vector<std::string>& names) -> Status {
    if (std::find(names.begin(), names.end(), name) == names.end())
      return Status(StatusCode::kInvalidModel,
                    fmt::format("{}: config.pbtxt lists {} '{}', which the engine does not have (its {}s: {})", where,
                                kind, name, kind, fmt::join(names, ", ")));
    const std::string want_type = TritonConfigType(engine.getTensorDataType(name));
    const std::string got_type = inference::DataType_Name(static_cast<inference::DataType>(data_type));
    if (data_type != 0 && got_type != want_type)
      return Status(StatusCode::kInvalidModel, fmt::format("{}: {} '{}' is {} in config.pbtxt but {} in the engine",
                                                           where, kind, name, got_type, want_type));
    const std::vector<int64_t> want = config_dims(name);
    std::vector<int64_t> got(dims.begin(), dims.end());
    bool same = got.size() == want.size();
    for (size_t i = 0; same && i < got.size(); ++i) same = got[i] == want[i] || (want[i] < 0 && got[i] == -1);
    if (!got.empty() && !same)
      return Status(StatusCode::kInvalidModel,
                    fmt::format("{}: {} '{}' has dims {} in config.pbtxt but {} in the engine{}", where, kind, name,
                                DimsText(got), DimsText(want), mb > 0 ? " (without the batch dim)" : ""));
    return Status::Ok();
  };
  for (const auto& in : config->input()) KILN_RETURN_IF_ERROR(check("input", in.name(), in.data_type(), in.dims(), inputs));
  for (const auto& out : config->output())
    KILN_RETURN_IF_ERROR(check("output", out.name(), out.data_type(), out.dims(), outputs));
  // Fill what is missing: every tensor listed, with its datatype and dims.
  auto fill = [&](auto* list, const std::vector<std::string>& names) {
    for (const auto& n : names) {
      auto it = std::find_if(list->begin(), list->end(), [&](const auto& t) { return t.name() == n; });
      auto* t = it == list->end() ? list->Add() : &*it;
      t->set_name(n);
      inference::DataType dt;
      inference::DataType_Parse(TritonConfigType(engine.getTensorDataType(n)), &dt);
      t->set_data_type(dt);
      if (t->dims_size() == 0)
        for (int64_t d : config_dims(n)) t->add_dims(d);
    }
  };
  fill(config->mutable_input(), inputs);
  fill(config->mutable_output(), outputs);
  if (config->has_dynamic_batching() && mb == 0)
    return Status(StatusCode::kInvalidModel,
                  fmt::format("{}: dynamic_batching needs max_batch_size > 0 (requests are merged along the batch "
                              "dim)", where));
  for (int32_t p : config->dynamic_batching().preferred_batch_size())
    if (p < 1 || p > mb)
      return Status(StatusCode::kInvalidModel,
                    fmt::format("{}: preferred_batch_size {} is outside 1..max_batch_size ({})", where, p, mb));
  if (config->instance_group_size() == 0) config->add_instance_group()->set_count(1);
  for (auto& g : *config->mutable_instance_group()) {
    if (g.count() == 0) g.set_count(1);
    if (g.count() < 0 || g.count() > 64)
      return Status(StatusCode::kInvalidModel,
                    fmt::format("{}: instance_group count {} is outside 1..64", where, g.count()));
  }
  return Status::Ok();
}

std::string ModelConfigJson(const inference::ModelConfig& config) {
  std::string text;
  pb::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  (void)pb::util::MessageToJsonString(config, &text, opts);
  // protobuf's JSON writes 64-bit integers as strings; Triton's config JSON has numbers (dims: [3, 224, 224]).
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return text;
  auto numbers = [](nlohmann::json& v) {
    if (v.is_string()) {
      try {
        v = std::stoll(v.get<std::string>());
      } catch (const std::exception&) {
      }
    }
  };
  std::function<void(nlohmann::json&)> walk = [&](nlohmann::json& v) {
    if (v.is_object()) {
      for (auto& [k, e] : v.items()) {
        if (k == "dims" || k == "shape" || k == "versions")
          for (auto& d : e) numbers(d);
        else if (k == "max_queue_delay_microseconds" || k == "num_versions")
          numbers(e);
        else
          walk(e);
      }
    } else if (v.is_array()) {
      for (auto& e : v) walk(e);
    }
  };
  walk(j);
  return j.dump();
}

Result<BuildParameters> ReadBuildParameters(const inference::ModelConfig& config, std::vector<std::string>* warnings) {
  BuildParameters p;
  for (const auto& [key, value] : config.parameters()) {
    const std::string& v = value.string_value();
    if (key == "precision") {
      if (v != "fp32" && v != "fp16" && v != "bf16" && v != "best")
        return Status(StatusCode::kInvalidModel,
                      fmt::format("parameters {{ key: \"precision\" }}: '{}' is not one of fp32, fp16, bf16, best "
                                  "(INT8 needs calibration: build the engine with kiln build and serve model.engine)",
                                  v));
      p.precision = v;
    } else if (key == "min_shapes") {
      KILN_RETURN_IF_ERROR(ParseShapeList(v, key, &p.min_shapes));
    } else if (key == "opt_shapes") {
      KILN_RETURN_IF_ERROR(ParseShapeList(v, key, &p.opt_shapes));
    } else if (key == "max_shapes") {
      KILN_RETURN_IF_ERROR(ParseShapeList(v, key, &p.max_shapes));
    } else if (key == "workspace_mb") {
      try {
        p.workspace_bytes = static_cast<size_t>(std::stoull(v)) << 20;
      } catch (const std::exception&) {
        return Status(StatusCode::kInvalidModel, fmt::format("parameters {{ key: \"workspace_mb\" }}: '{}' is not a "
                                                             "number", v));
      }
    } else {
      warnings->push_back(fmt::format("parameters key '{}' is not one kiln serve reads (precision, min_shapes, "
                                      "opt_shapes, max_shapes, workspace_mb); it is ignored", key));
    }
  }
  return p;
}

}  // namespace kiln::serve
