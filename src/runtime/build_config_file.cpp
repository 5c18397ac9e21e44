// Build config files (include/kiln/build_config_file.h), read with yaml-cpp.
#include "kiln/build_config_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "kiln/backend.h"

namespace kiln {
namespace {

// The keys, each with the name it is read under (aliases: the documents' TensorRTBuildConfig names).
const std::map<std::string, std::string>& Keys() {
  static const std::map<std::string, std::string> k = {
      {"onnx", "onnx"}, {"onnx_path", "onnx"}, {"engine", "engine"}, {"engine_path", "engine"},
      {"fp16", "fp16"}, {"bf16", "bf16"}, {"int8", "int8"}, {"fp8", "fp8"}, {"best", "best"}, {"tf32", "tf32"},
      {"strongly_typed", "strongly_typed"}, {"workspace_mb", "workspace_mb"}, {"max_workspace_gb", "workspace_mb"},
      {"activations_mb", "activations_mb"}, {"shapes", "shapes"}, {"min_shapes", "min_shapes"},
      {"opt_shapes", "opt_shapes"}, {"max_shapes", "max_shapes"}, {"min_shape", "min_shape"},
      {"opt_shape", "opt_shape"}, {"max_shape", "max_shape"}, {"max_batch_size", "max_batch_size"},
      {"calibration_cache", "calibration_cache"}, {"calib", "calibration_cache"},
      {"calibration_data", "calibration_data"}, {"calibration_algorithm", "calibration_algorithm"},
      {"timing_cache", "timing_cache"}, {"backend", "backend"},
      {"builder_optimization_level", "builder_optimization_level"}, {"optimization_level", "builder_optimization_level"},
      {"profiling_verbosity", "profiling_verbosity"}, {"avg_timing", "avg_timing"},
      {"max_aux_streams", "max_aux_streams"},
      {"precision_constraints", "precision_constraints"}, {"layer_precisions", "layer_precisions"},
  };
  return k;
}

std::string KeyList() {
  std::string s;
  for (const auto& [k, _] : Keys()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

struct Reader {
  const std::string& source;
  Status Bad(const YAML::Node& n, const std::string& key, const std::string& want) const {
    return Err(StatusCode::kInvalidArgument, "{}:{}: '{}' takes {}", source, n.Mark().line + 1, key, want);
  }
  Result<bool> Bool(const YAML::Node& n, const std::string& key) const {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) return Bad(n, key, "true or false");
    return v;
  }
  Result<double> Number(const YAML::Node& n, const std::string& key) const {
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v) || v < 0)
      return Bad(n, key, "a number >= 0");
    return v;
  }
  Result<int64_t> Int(const YAML::Node& n, const std::string& key, int64_t lo, int64_t hi) const {
    int64_t v = 0;
    if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v) || v < lo || v > hi)
      return Bad(n, key, fmt::format("an integer from {} to {}", lo, hi));
    return v;
  }
  Result<std::string> Text(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) return Bad(n, key, "a string");
    return n.as<std::string>();
  }
  Result<std::string> OneOf(const YAML::Node& n, const std::string& key, const std::vector<std::string>& values) const {
    std::string v;
    if (n.IsScalar()) v = n.as<std::string>();
    for (const auto& a : values)
      if (v == a) return v;
    std::string list;
    for (const auto& a : values) list += (list.empty() ? "" : ", ") + a;
    return Bad(n, key, "one of " + list);
  }
  Result<Dims> Shape(const YAML::Node& n, const std::string& key) const {
    if (!n.IsSequence()) return Bad(n, key, "a list of dimensions, e.g. [1, 3, 224, 224]");
    Dims d;
    for (const auto& e : n) {
      int64_t v = 0;
      if (!e.IsScalar() || !YAML::convert<int64_t>::decode(e, v) || v < 0)
        return Bad(e, key, "dimensions >= 0 (a list of integers)");
      d.push_back(v);
    }
    return d;
  }
  Result<std::map<std::string, Dims>> Shapes(const YAML::Node& n, const std::string& key) const {
    if (!n.IsMap()) return Bad(n, key, "a map from input name to dimensions, e.g. {x: [1, 3, 224, 224]}");
    std::map<std::string, Dims> m;
    for (const auto& kv : n) {
      KILN_ASSIGN_OR_RETURN(Dims d, Shape(kv.second, key + "." + kv.first.as<std::string>()));
      m[kv.first.as<std::string>()] = d;
    }
    return m;
  }
};

}  // namespace

Result<BuildConfigFile> ParseBuildConfig(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Err(StatusCode::kInvalidArgument, "{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg);
  }
  BuildConfigFile c;
  if (root.IsNull()) return c;
  if (!root.IsMap())
    return Err(StatusCode::kInvalidArgument, "{}: a build config is a map of keys ({}), at the top level or under "
               "'tensorrt:'", source, KeyList());
  Reader r{source};
  std::set<std::string> seen;
  auto read = [&](const YAML::Node& map, const std::string& prefix) -> Status {
    for (const auto& kv : map) {
      if (!kv.first.IsScalar())
        return Err(StatusCode::kInvalidArgument, "{}:{}: a key must be a name", source, kv.first.Mark().line + 1);
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (prefix.empty() && key == "tensorrt") continue;  // read after this level
      auto it = Keys().find(key);
      if (it == Keys().end())
        return Err(StatusCode::kInvalidArgument, "{}:{}: unknown key '{}{}' (keys: {})", source,
                   kv.first.Mark().line + 1, prefix, key, KeyList());
      const std::string& name = it->second;
      if (!seen.insert(name).second)
        return Err(StatusCode::kInvalidArgument, "{}:{}: '{}{}' is given twice (or with one of its other names)",
                   source, kv.first.Mark().line + 1, prefix, key);
      if (name == "onnx") { KILN_ASSIGN_OR_RETURN(c.onnx, r.Text(v, key)); }
      else if (name == "engine") { KILN_ASSIGN_OR_RETURN(c.engine, r.Text(v, key)); }
      else if (name == "fp16") { KILN_ASSIGN_OR_RETURN(c.fp16, r.Bool(v, key)); }
      else if (name == "bf16") { KILN_ASSIGN_OR_RETURN(c.bf16, r.Bool(v, key)); }
      else if (name == "int8") { KILN_ASSIGN_OR_RETURN(c.int8, r.Bool(v, key)); }
      else if (name == "fp8") { KILN_ASSIGN_OR_RETURN(c.fp8, r.Bool(v, key)); }
      else if (name == "best") { KILN_ASSIGN_OR_RETURN(c.best, r.Bool(v, key)); }
      else if (name == "tf32") { KILN_ASSIGN_OR_RETURN(c.tf32, r.Bool(v, key)); }
      else if (name == "strongly_typed") { KILN_ASSIGN_OR_RETURN(c.strongly_typed, r.Bool(v, key)); }
      else if (name == "workspace_mb") {  // or max_workspace_gb, in GiB
        KILN_ASSIGN_OR_RETURN(double amount, r.Number(v, key));
        c.workspace_mb = key == "max_workspace_gb" ? amount * 1024 : amount;
      }
      else if (name == "activations_mb") { KILN_ASSIGN_OR_RETURN(c.activations_mb, r.Number(v, key)); }
      else if (name == "shapes") { KILN_ASSIGN_OR_RETURN(c.shapes, r.Shapes(v, key)); }
      else if (name == "min_shapes") { KILN_ASSIGN_OR_RETURN(c.min_shapes, r.Shapes(v, key)); }
      else if (name == "opt_shapes") { KILN_ASSIGN_OR_RETURN(c.opt_shapes, r.Shapes(v, key)); }
      else if (name == "max_shapes") { KILN_ASSIGN_OR_RETURN(c.max_shapes, r.Shapes(v, key)); }
      else if (name == "min_shape") { KILN_ASSIGN_OR_RETURN(c.min_shape, r.Shape(v, key)); }
      else if (name == "opt_shape") { KILN_ASSIGN_OR_RETURN(c.opt_shape, r.Shape(v, key)); }
      else if (name == "max_shape") { KILN_ASSIGN_OR_RETURN(c.max_shape, r.Shape(v, key)); }
      else if (name == "max_batch_size") { KILN_ASSIGN_OR_RETURN(c.max_batch_size, r.Int(v, key, 1, int64_t{1} << 31)); }
      else if (name == "calibration_cache") { KILN_ASSIGN_OR_RETURN(c.calibration_cache, r.Text(v, key)); }
      else if (name == "calibration_data") { KILN_ASSIGN_OR_RETURN(c.calibration_data, r.Text(v, key)); }
      else if (name == "calibration_algorithm") {
        KILN_ASSIGN_OR_RETURN(c.calibration_algorithm, r.OneOf(v, key, {"entropy", "minmax", "percentile"}));
      }
      else if (name == "timing_cache") { KILN_ASSIGN_OR_RETURN(c.timing_cache, r.Text(v, key)); }
      else if (name == "backend") { KILN_ASSIGN_OR_RETURN(c.backend, r.OneOf(v, key, GetBackendNames())); }
      else if (name == "builder_optimization_level") {
        KILN_ASSIGN_OR_RETURN(int64_t level, r.Int(v, key, 0, 5));
        c.builder_optimization_level = static_cast<int>(level);
      }
      else if (name == "profiling_verbosity") {
        KILN_ASSIGN_OR_RETURN(c.profiling_verbosity, r.OneOf(v, key, {"layer_names_only", "detailed", "none"}));
      }
      else if (name == "avg_timing") {
        KILN_ASSIGN_OR_RETURN(int64_t n, r.Int(v, key, 1, 1000));
        c.avg_timing = static_cast<int>(n);
      }
      else if (name == "max_aux_streams") {
        KILN_ASSIGN_OR_RETURN(int64_t n, r.Int(v, key, 0, 64));
        c.max_aux_streams = static_cast<int>(n);
      }
      else if (name == "precision_constraints") {
        KILN_ASSIGN_OR_RETURN(c.precision_constraints, r.OneOf(v, key, {"none", "prefer", "obey"}));
      }
      else if (name == "layer_precisions") {
        if (!v.IsMap()) return r.Bad(v, key, "a map from layer name to fp32, fp16, bf16, int8 or fp8");
        for (const auto& lp : v) {
          KILN_ASSIGN_OR_RETURN(std::string p, r.OneOf(lp.second, key + "." + lp.first.as<std::string>(),
                                                       {"fp32", "fp16", "bf16", "int8", "fp8"}));
          c.layer_precisions[lp.first.as<std::string>()] = p;
        }
      }
    }
    return Status::Ok();
  };
  try {
    KILN_RETURN_IF_ERROR(read(root, ""));
  } catch (const YAML::Exception& e) {  // a map key that is not a name (shapes: {[x]: ...}) and the like
    return Err(StatusCode::kInvalidArgument, "{}:{}: {}", source, e.mark.line + 1, e.msg);
  }
  if (root["tensorrt"]) {
    if (!root["tensorrt"].IsMap())
      return Err(StatusCode::kInvalidArgument, "{}:{}: 'tensorrt' holds a map of keys ({})", source,
                 root["tensorrt"].Mark().line + 1, KeyList());
    try {
      KILN_RETURN_IF_ERROR(read(root["tensorrt"], "tensorrt."));
    } catch (const YAML::Exception& e) {
      return Err(StatusCode::kInvalidArgument, "{}:{}: {}", source, e.mark.line + 1, e.msg);
    }
  }
  return c;
}

Result<BuildConfigFile> ReadBuildConfigFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Err(StatusCode::kNotFound, "cannot open the build config '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (ss.str().size() > (size_t{1} << 24))
    return Err(StatusCode::kInvalidArgument, "build config '{}' is over 16 MiB; it is not a build config", path);
  return ParseBuildConfig(ss.str(), path);
}

Status BuildConfigFile::ResolveShapes(const std::vector<std::string>& inputs, std::map<std::string, Dims>* min,
                                      std::map<std::string, Dims>* opt, std::map<std::string, Dims>* max) const {
  *min = min_shapes;
  *opt = opt_shapes;
  *max = max_shapes;
  for (const auto& [name, d] : shapes) {
    min->emplace(name, d);
    opt->emplace(name, d);
    max->emplace(name, d);
  }
  if (min_shape || opt_shape || max_shape) {
    if (inputs.size() != 1) {
      std::string names;
      for (const auto& n : inputs) names += (names.empty() ? "" : ", ") + n;
      return Err(StatusCode::kInvalidArgument,
                 "min_shape / opt_shape / max_shape give one input's shapes; the model has {} inputs ({}): give "
                 "min_shapes / opt_shapes / max_shapes by input name",
                 inputs.size(), names);
    }
    if (!(min_shape && opt_shape && max_shape))
      return Err(StatusCode::kInvalidArgument, "give min_shape, opt_shape and max_shape together");
    (*min)[inputs[0]] = *min_shape;
    (*opt)[inputs[0]] = *opt_shape;
    (*max)[inputs[0]] = *max_shape;
  }
  if (max_batch_size) {
    if (max->empty())
      return Err(StatusCode::kInvalidArgument,
                 "max_batch_size {} needs the shapes it bounds: give max_shape (or max_shapes) whose first dimension "
                 "is the batch",
                 *max_batch_size);
    for (const auto& [name, d] : *max)
      if (d.empty() || d[0] != *max_batch_size)
        return Err(StatusCode::kInvalidArgument, "max_batch_size is {} but input '{}' has max shape {}", *max_batch_size,
                   name, ShapeToString(d));
  }
  return Status::Ok();
}

std::string WriteBuildConfig(const BuildConfigFile& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  auto str = [&](const char* k, const std::optional<std::string>& v) {
    if (v) out << YAML::Key << k << YAML::Value << *v;
  };
  auto flag = [&](const char* k, const std::optional<bool>& v) {
    if (v) out << YAML::Key << k << YAML::Value << *v;
  };
  auto shapes = [&](const char* k, const std::map<std::string, Dims>& m) {
    if (m.empty()) return;
    out << YAML::Key << k << YAML::Value << YAML::BeginMap;
    for (const auto& [name, d] : m) out << YAML::Key << name << YAML::Value << YAML::Flow << d;
    out << YAML::EndMap;
  };
  auto shape = [&](const char* k, const std::optional<Dims>& d) {
    if (d) out << YAML::Key << k << YAML::Value << YAML::Flow << *d;
  };
  str("onnx", c.onnx);
  str("engine", c.engine);
  flag("fp16", c.fp16);
  flag("bf16", c.bf16);
  flag("int8", c.int8);
  flag("fp8", c.fp8);
  flag("best", c.best);
  flag("tf32", c.tf32);
  flag("strongly_typed", c.strongly_typed);
  if (c.workspace_mb) out << YAML::Key << "workspace_mb" << YAML::Value << *c.workspace_mb;
  if (c.activations_mb) out << YAML::Key << "activations_mb" << YAML::Value << *c.activations_mb;
  shapes("shapes", c.shapes);
  shapes("min_shapes", c.min_shapes);
  shapes("opt_shapes", c.opt_shapes);
  shapes("max_shapes", c.max_shapes);
  shape("min_shape", c.min_shape);
  shape("opt_shape", c.opt_shape);
  shape("max_shape", c.max_shape);
  if (c.max_batch_size) out << YAML::Key << "max_batch_size" << YAML::Value << *c.max_batch_size;
  str("calibration_cache", c.calibration_cache);
  str("calibration_data", c.calibration_data);
  str("calibration_algorithm", c.calibration_algorithm);
  str("timing_cache", c.timing_cache);
  str("backend", c.backend);
  if (c.builder_optimization_level)
    out << YAML::Key << "builder_optimization_level" << YAML::Value << *c.builder_optimization_level;
  str("profiling_verbosity", c.profiling_verbosity);
  if (c.avg_timing) out << YAML::Key << "avg_timing" << YAML::Value << *c.avg_timing;
  if (c.max_aux_streams) out << YAML::Key << "max_aux_streams" << YAML::Value << *c.max_aux_streams;
  str("precision_constraints", c.precision_constraints);
  if (!c.layer_precisions.empty()) {
    out << YAML::Key << "layer_precisions" << YAML::Value << YAML::BeginMap;
    for (const auto& [l, p] : c.layer_precisions) out << YAML::Key << l << YAML::Value << p;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace kiln
