#include "backends/cuda/timing_cache.h"

#include <sstream>

#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"
#include "core/error.h"

namespace kiln::cuda {

Result<std::string> TimingCache::CurrentDeviceKey() {
  KILN_ASSIGN_OR_RETURN(const int device, CurrentDevice());  // the device the build times tactics on
  KILN_ASSIGN_OR_RETURN(DeviceInfo d, GetDeviceInfo(device));
  return fmt::format("{}|sm_{}{}|cuda {}|cublasLt {}|cudnn {}", d.name, d.cc_major, d.cc_minor, d.runtime_version,
                     CublasLtVersion(), CudnnVersion());
}

Result<std::string> TimingCache::Load(const std::string& path) {
  entries_.clear();
  if (device_key_.empty()) {
    KILN_ASSIGN_OR_RETURN(device_key_, CurrentDeviceKey());
  }
  bool found = false;
  auto read = ReadTimingCacheFile(path, &found);
  if (!read.ok()) return fmt::format("{}: ignored, every layer is timed again", read.status().message());
  if (!found) return std::string();
  if (read->device != device_key_)
    return fmt::format("timing cache '{}' was written for [{}], this is [{}]: ignored, every layer is timed again "
                       "(and the file is rewritten)",
                       path, read->device, device_key_);
  entries_ = std::move(read->entries);
  return std::string();
}

Status TimingCache::Save(const std::string& path) const {
  TimingCacheContents c;
  c.device = device_key_;
  c.entries = entries_;
  return WriteTimingCacheFile(path, c);
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
