// KServe v2 JSON requests and responses (tensor_json.h).
#include "tensor_json.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace kiln::serve {

using json = nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 64;
constexpr int64_t kMaxElements = int64_t{1} << 40;

// The deepest array/object nesting of a JSON text (outside strings); parsing (and freeing) nests that deep.
int JsonDepth(std::string_view s) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Appends one JSON element as `t`'s bytes; a sentence on failure.
std::string PutElement(const json& v, DataType t, std::string* out) {
  auto want_int = [&](auto lo, auto hi) -> std::string {
    using I = decltype(lo);
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) return fmt::format("{} does not fit {}", v.dump(), V2Datatype(t));
      Put<I>(out, static_cast<I>(u));
      return "";
    }
    if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      if constexpr (std::is_signed_v<I>) {
        if (i < static_cast<int64_t>(lo) || i > static_cast<int64_t>(hi))
          return fmt::format("{} does not fit {}", v.dump(), V2Datatype(t));
      } else {
        if (i < 0 || static_cast<uint64_t>(i) > static_cast<uint64_t>(hi))
          return fmt::format("{} does not fit {}", v.dump(), V2Datatype(t));
      }
      Put<I>(out, static_cast<I>(i));
      return "";
    }
    return fmt::format("{} is not an integer", v.dump());
  };
  switch (t) {
    case DataType::kBool:
      if (!v.is_boolean()) return fmt::format("{} is not true or false", v.dump());
      Put<uint8_t>(out, v.get<bool>() ? 1 : 0);
      return "";
    case DataType::kInt8: return want_int(int8_t{-128}, int8_t{127});
    case DataType::kInt16: return want_int(std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max());
    case DataType::kInt32: return want_int(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
    case DataType::kInt64: return want_int(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    case DataType::kUInt8: return want_int(uint8_t{0}, uint8_t{255});
    case DataType::kUInt16: return want_int(uint16_t{0}, std::numeric_limits<uint16_t>::max());
    case DataType::kUInt32: return want_int(uint32_t{0}, std::numeric_limits<uint32_t>::max());
    case DataType::kUInt64: return want_int(uint64_t{0}, std::numeric_limits<uint64_t>::max());
    default: break;
  }
  if (!v.is_number()) return fmt::format("{} is not a number", v.dump());
  const double d = v.get<double>();
  switch (t) {
    case DataType::kFloat32: Put<float>(out, static_cast<float>(d)); return "";
    case DataType::kFloat64: Put<double>(out, d); return "";
    case DataType::kFloat16: Put<uint16_t>(out, FloatToHalf(static_cast<float>(d))); return "";
    case DataType::kBFloat16: Put<uint16_t>(out, FloatToBFloat16(static_cast<float>(d))); return "";
    default: return fmt::format("datatype {} cannot be given as JSON", V2Datatype(t));
  }
}

// Flattens (nested) "data" into bytes; stops at the first bad element.
std::string Flatten(const json& data, DataType t, std::string* out, int64_t* count, int64_t limit) {
  if (!data.is_array()) {
    if (++*count > limit) return "more elements than the shape holds";
    return PutElement(data, t, out);
  }
  for (const json& e : data) {
    std::string err = Flatten(e, t, out, count, limit);
    if (!err.empty()) return err;
  }
  return "";
}

// Triton's shared-memory parameters of an input or a requested output (shared_memory_region, shared_memory_offset,
// shared_memory_byte_size): empty when there are none; a sentence when they are malformed.
std::string ReadSharedMemory(const json* params, const std::string& who, std::optional<SharedMemoryRef>* out) {
  if (!params) return "";
  const bool named = params->contains("shared_memory_region");
  for (const char* k : {"shared_memory_offset", "shared_memory_byte_size"})
    if (params->contains(k) && !named)
      return fmt::format("{}: '{}' can not be specified without 'shared_memory_region'", who, k);
  if (!named) return "";
  SharedMemoryRef ref;
  const json& region = (*params)["shared_memory_region"];
  if (!region.is_string() || region.get<std::string>().empty())
    return fmt::format("{}: 'shared_memory_region' must be a region's name (a non-empty string)", who);
  ref.region = region.get<std::string>();
  if (!params->contains("shared_memory_byte_size"))
    return fmt::format("{}: 'shared_memory_byte_size' must be specified along with 'shared_memory_region'", who);
  for (auto [k, v] : {std::pair<const char*, uint64_t*>{"shared_memory_offset", &ref.offset},
                      std::pair<const char*, uint64_t*>{"shared_memory_byte_size", &ref.byte_size}}) {
    if (!params->contains(k)) continue;
    const json& n = (*params)[k];
    if (!n.is_number_unsigned()) return fmt::format("{}: '{}' must be an integer >= 0", who, k);
    *v = n.get<uint64_t>();
  }
  *out = std::move(ref);
  return "";
}

template <typename T>
T Get(const std::string& b, size_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}

json ElementsJson(const TensorData& t) {
  json a = json::array();
  const size_t n = DataTypeSize(t.dtype) ? t.bytes.size() / DataTypeSize(t.dtype) : 0;
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DataType::kBool: a.push_back(Get<uint8_t>(t.bytes, i) != 0); break;
      case DataType::kInt8: a.push_back(Get<int8_t>(t.bytes, i)); break;
      case DataType::kInt16: a.push_back(Get<int16_t>(t.bytes, i)); break;
      case DataType::kInt32: a.push_back(Get<int32_t>(t.bytes, i)); break;
      case DataType::kInt64: a.push_back(Get<int64_t>(t.bytes, i)); break;
      case DataType::kUInt8: a.push_back(Get<uint8_t>(t.bytes, i)); break;
      case DataType::kUInt16: a.push_back(Get<uint16_t>(t.bytes, i)); break;
      case DataType::kUInt32: a.push_back(Get<uint32_t>(t.bytes, i)); break;
      case DataType::kUInt64: a.push_back(Get<uint64_t>(t.bytes, i)); break;
      case DataType::kFloat32: a.push_back(Get<float>(t.bytes, i)); break;
      case DataType::kFloat64: a.push_back(Get<double>(t.bytes, i)); break;
      case DataType::kFloat16: a.push_back(HalfToFloat(Get<uint16_t>(t.bytes, i))); break;
      case DataType::kBFloat16: a.push_back(BFloat16ToFloat(Get<uint16_t>(t.bytes, i))); break;
      default: break;
    }
  }
  return a;
}

}  // namespace

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));  // inf / NaN
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (e <= 0) {                                              // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still right (inf at top)
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

Outcome ParseInferRequest(std::string_view header, std::string_view binary, InferRequest* request) {
  if (JsonDepth(header) > kMaxJsonDepth)
    return Outcome::BadRequest(fmt::format("the request JSON nests deeper than {} levels", kMaxJsonDepth));
  const json j = json::parse(header.begin(), header.end(), nullptr, false);
  if (j.is_discarded()) return Outcome::BadRequest("the request body is not valid JSON");
  if (!j.is_object()) return Outcome::BadRequest("the request must be a JSON object with \"inputs\"");
  if (j.contains("id")) {
    if (!j["id"].is_string()) return Outcome::BadRequest("\"id\" must be a string");
    request->id = j["id"].get<std::string>();
  }
  if (j.contains("parameters")) {
    const json& p = j["parameters"];
    if (!p.is_object()) return Outcome::BadRequest("\"parameters\" must be an object");
    for (const char* k : {"sequence_id", "sequence_start", "sequence_end", "priority"})
      if (p.contains(k))
        return Outcome::BadRequest(fmt::format("parameter \"{}\": kiln serve has no sequence batching or priorities",
                                               k));
    if (p.contains("binary_data_output")) {
      if (!p["binary_data_output"].is_boolean())
        return Outcome::BadRequest("parameter \"binary_data_output\" must be true or false");
      request->binary_outputs = p["binary_data_output"].get<bool>();
    }
    if (p.contains("timeout")) {
      if (!p["timeout"].is_number_integer() || p["timeout"].get<int64_t>() < 0)
        return Outcome::BadRequest("parameter \"timeout\" must be microseconds (an integer >= 0)");
      // (at most a day: a larger one is no timeout, and would overflow the clock)
      const int64_t us = std::min<int64_t>(p["timeout"].get<int64_t>(), int64_t{86400} * 1000000);
      if (us > 0) request->deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    }
  }
  if (!j.contains("inputs") || !j["inputs"].is_array() || j["inputs"].empty())
    return Outcome::BadRequest("the request needs \"inputs\": a non-empty array");
  size_t offset = 0;
  for (const json& in : j["inputs"]) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string())
      return Outcome::BadRequest("each input needs a \"name\" string");
    TensorData t;
    t.name = in["name"].get<std::string>();
    const std::string who = fmt::format("input '{}'", t.name);
    if (!in.contains("datatype") || !in["datatype"].is_string())
      return Outcome::BadRequest(fmt::format("{} needs a \"datatype\" string", who));
    auto dt = FromV2Datatype(in["datatype"].get<std::string>());
    if (!dt.ok()) return Outcome::BadRequest(fmt::format("{}: {}", who, dt.status().message()));
    t.dtype = *dt;
    if (!in.contains("shape") || !in["shape"].is_array())
      return Outcome::BadRequest(fmt::format("{} needs a \"shape\" array", who));
    int64_t volume = 1;
    for (const json& d : in["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return Outcome::BadRequest(fmt::format("{}: shape {} must hold integers >= 0", who, in["shape"].dump()));
      const int64_t v = d.get<int64_t>();
      if (v > 0 && volume > kMaxElements / v)
        return Outcome::TooLarge(fmt::format("{}: shape {} holds too many elements", who, in["shape"].dump()));
      volume *= v;
      t.shape.push_back(v);
    }
    const size_t elem = DataTypeSize(t.dtype);
    const json* params = in.contains("parameters") ? &in["parameters"] : nullptr;
    if (params && !params->is_object()) return Outcome::BadRequest(fmt::format("{}: \"parameters\" must be an object",
                                                                               who));
    if (std::string err = ReadSharedMemory(params, who, &t.shm); !err.empty()) return Outcome::BadRequest(err);
    if (t.shm) {  // the bytes are in the region (the server looks it up)
      if (in.contains("data") || params->contains("binary_data_size"))
        return Outcome::BadRequest(fmt::format("{}: set only one of \"data\", 'binary_data_size' in 'parameters' and "
                                               "'shared_memory_region' in 'parameters'", who));
    } else if (params && params->contains("binary_data_size")) {
      const json& n = (*params)["binary_data_size"];
      if (!n.is_number_integer() || n.get<int64_t>() < 0)
        return Outcome::BadRequest(fmt::format("{}: binary_data_size must be an integer >= 0", who));
      const uint64_t size = n.get<uint64_t>();
      if (size > binary.size() - offset)
        return Outcome::BadRequest(fmt::format("{}: binary_data_size {} runs past the {} bytes of binary data left "
                                               "(a truncated body, or a wrong Inference-Header-Content-Length)",
                                               who, size, binary.size() - offset));
      t.bytes.assign(binary.substr(offset, size));
      offset += size;
      if (in.contains("data"))
        return Outcome::BadRequest(fmt::format("{} has both \"data\" and binary_data_size", who));
    } else {
      if (!in.contains("data")) return Outcome::BadRequest(fmt::format("{} needs \"data\" (or binary_data_size, or "
                                                                       "shared_memory_region)", who));
      int64_t count = 0;
      // (no reserve from the shape: a huge shape with little data must not allocate; the count is checked below)
      const std::string err = Flatten(in["data"], t.dtype, &t.bytes, &count, volume);
      if (!err.empty()) return Outcome::BadRequest(fmt::format("{}: data: {}", who, err));
      if (count != volume)
        return Outcome::BadRequest(fmt::format("{}: data holds {} elements; shape {} takes {}", who, count,
                                               in["shape"].dump(), volume));
    }
    request->inputs.push_back(std::move(t));
  }
  if (offset != binary.size())
    return Outcome::BadRequest(fmt::format("{} bytes after the JSON header belong to no input (binary_data_size "
                                           "adds up to {})", binary.size(), offset));
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) return Outcome::BadRequest("\"outputs\" must be an array");
    for (const json& o : j["outputs"]) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        return Outcome::BadRequest("each requested output needs a \"name\" string");
      RequestedOutput r{o["name"].get<std::string>(), std::nullopt, std::nullopt};
      if (o.contains("parameters")) {
        const json& p = o["parameters"];
        if (!p.is_object()) return Outcome::BadRequest(fmt::format("output '{}': \"parameters\" must be an object",
                                                                   r.name));
        if (p.contains("classification"))
          return Outcome::BadRequest(fmt::format("output '{}': kiln serve has no classification extension", r.name));
        if (p.contains("binary_data")) {
          if (!p["binary_data"].is_boolean())
            return Outcome::BadRequest(fmt::format("output '{}': binary_data must be true or false", r.name));
          r.binary = p["binary_data"].get<bool>();
        }
        const std::string who = fmt::format("output '{}'", r.name);
        if (std::string err = ReadSharedMemory(&p, who, &r.shm); !err.empty()) return Outcome::BadRequest(err);
        if (r.shm && r.binary.value_or(false))
          return Outcome::BadRequest(fmt::format("{} can't set both 'shared_memory_region' and 'binary_data'", who));
      }
      request->outputs.push_back(std::move(r));
    }
  }
  return Outcome::Ok();
}

void WriteInferResponse(const InferResponse& response, std::string* header, std::string* binary) {
  json j = {{"model_name", response.model}, {"model_version", response.version}};
  if (!response.id.empty()) j["id"] = response.id;
  json outs = json::array();
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const TensorData& t = response.outputs[i];
    json o = {{"name", t.name}, {"datatype", V2Datatype(t.dtype)}, {"shape", t.shape}};
    if (t.shm) {  // written to the shared-memory region the request named: no data here
      o["parameters"] = {{"shared_memory_region", t.shm->region},
                         {"shared_memory_offset", t.shm->offset},
                         {"shared_memory_byte_size", t.shm->byte_size}};
    } else if (i < response.binary.size() && response.binary[i]) {
      o["parameters"] = {{"binary_data_size", t.bytes.size()}};
      binary->append(t.bytes);
    } else {
      o["data"] = ElementsJson(t);
    }
    outs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outs);
  *header = j.dump();
}

}  // namespace kiln::serve
