#include "backends/cuda/timing_cache.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"
#include "core/error.h"

namespace kiln::cuda {

Result<std::string> TimingCache::CurrentDeviceKey() {
  KILN_ASSIGN_OR_RETURN(DeviceInfo d, GetDeviceInfo(0));
  return fmt::format("{}|sm_{}{}|cuda {}|cublasLt {}|cudnn {}", d.name, d.cc_major, d.cc_minor, d.runtime_version,
                     CublasLtVersion(), CudnnVersion());
}

Result<std::string> TimingCache::Load(const std::string& path) {
  entries_.clear();
  if (device_key_.empty()) {
    KILN_ASSIGN_OR_RETURN(device_key_, CurrentDeviceKey());
  }
  if (!std::filesystem::exists(path)) return std::string();
  std::ifstream f(path);
  nlohmann::json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    return fmt::format("timing cache '{}' is not valid JSON ({}): ignored, every layer is timed again", path, e.what());
  }
  if (!j.is_object() || j.value("format", "") != "kiln-timing-cache" || j.value("version", 0) != 1)
    return fmt::format("'{}' is not a kiln timing cache (version 1): ignored, every layer is timed again", path);
  const std::string dev = j.value("device", "");
  if (dev != device_key_)
    return fmt::format("timing cache '{}' was written for [{}], this is [{}]: ignored, every layer is timed again "
                       "(and the file is rewritten)",
                       path, dev, device_key_);
  try {
    for (const auto& [sig, e] : j.at("entries").items())
      entries_[sig] = TimingEntry{e.at("tactic").get<std::string>(), e.value("ms", 0.0), e.value("candidates", 0)};
  } catch (const std::exception& e) {
    entries_.clear();
    return fmt::format("timing cache '{}' has a malformed entry ({}): ignored", path, e.what());
  }
  return std::string();
}

Status TimingCache::Save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = "kiln-timing-cache";
  j["version"] = 1;
  j["device"] = device_key_;
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [sig, e] : entries_) entries[sig] = {{"tactic", e.tactic}, {"ms", e.ms}, {"candidates", e.candidates}};
  j["entries"] = entries;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return Err(StatusCode::kIoError, "cannot write timing cache '{}'", tmp);
    f << j.dump(1) << "\n";
    if (!f) return Err(StatusCode::kIoError, "writing timing cache '{}' failed (disk full?)", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Err(StatusCode::kIoError, "cannot move '{}' to '{}': {}", tmp, path, ec.message());
  return Status::Ok();
}

const TimingEntry* TimingCache::Find(const std::string& signature) const {
  auto it = entries_.find(signature);
  return it == entries_.end() ? nullptr : &it->second;
}

namespace {
std::string AttrString(const Attribute& a) {
  std::ostringstream s;
  switch (a.kind) {
    case Attribute::Kind::kInt: s << a.i; break;
    case Attribute::Kind::kFloat: s << a.f; break;
    case Attribute::Kind::kString: s << '"' << a.s << '"'; break;
    case Attribute::Kind::kInts:
      for (int64_t v : a.ints) s << v << ',';
      break;
    case Attribute::Kind::kFloats:
      for (float v : a.floats) s << v << ',';
      break;
    case Attribute::Kind::kStrings:
      for (const auto& v : a.strings) s << v << ',';
      break;
    case Attribute::Kind::kTensor: s << "tensor" << ShapeToString(a.t.shape()); break;
    default: s << '?';
  }
  return s.str();
}
}  // namespace

std::string LayerSignature(const LayerSpec& spec) {
  const Node& n = spec.node;
  std::string s = (n.domain.empty() ? "" : n.domain + ".") + n.op_type + "(";
  for (const auto& [k, a] : n.attrs) s += k + "=" + AttrString(a) + ";";
  s += ")";
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* v = n.inputs[i];
    s += " in" + std::to_string(i) + ":";
    if (!v) {
      s += "-";
      continue;
    }
    s += DataTypeName(v->dtype);
    s += i < spec.input_shapes.size() ? ShapeToString(spec.input_shapes[i]) : "?";
    if (v->is_const()) s += "c";
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const Value* v = n.outputs[i];
    s += " out" + std::to_string(i) + ":";
    if (!v) continue;
    s += DataTypeName(v->dtype);
    s += i < spec.output_shapes.size() ? ShapeToString(spec.output_shapes[i]) : "?";
  }
  if (!spec.allow_tf32) s += " notf32";
  return s;
}

}  // namespace kiln::cuda
