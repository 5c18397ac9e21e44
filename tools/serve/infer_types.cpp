// KServe v2 / Triton datatype names and the Outcome mapping of kiln's status codes.
#include "infer_types.h"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace kiln::serve {
namespace {

struct TypeName {
  DataType type;
  const char* v2;      // KServe v2
  const char* triton;  // config.pbtxt
};
constexpr std::array<TypeName, 14> kTypes = {{
    {DataType::kBool, "BOOL", "TYPE_BOOL"},       {DataType::kUInt8, "UINT8", "TYPE_UINT8"},
    {DataType::kUInt16, "UINT16", "TYPE_UINT16"}, {DataType::kUInt32, "UINT32", "TYPE_UINT32"},
    {DataType::kUInt64, "UINT64", "TYPE_UINT64"}, {DataType::kInt8, "INT8", "TYPE_INT8"},
    {DataType::kInt16, "INT16", "TYPE_INT16"},    {DataType::kInt32, "INT32", "TYPE_INT32"},
    {DataType::kInt64, "INT64", "TYPE_INT64"},    {DataType::kFloat16, "FP16", "TYPE_FP16"},
    {DataType::kFloat32, "FP32", "TYPE_FP32"},    {DataType::kFloat64, "FP64", "TYPE_FP64"},
    {DataType::kBFloat16, "BF16", "TYPE_BF16"},   {DataType::kString, "BYTES", "TYPE_STRING"},
}};

}  // namespace

Result<DataType> FromV2Datatype(std::string_view name) {
  if (name == "BYTES")
    return Status(StatusCode::kUnsupported, "datatype BYTES (strings) is not supported: kiln engines take numbers");
  for (const TypeName& t : kTypes)
    if (name == t.v2) return t.type;
  return Status(StatusCode::kInvalidArgument,
                fmt::format("unknown datatype '{}' (KServe v2 names: BOOL, UINT8..UINT64, INT8..INT64, FP16, FP32, "
                            "FP64, BF16)", name));
}

std::string V2Datatype(DataType t) {
  for (const TypeName& n : kTypes)
    if (n.type == t) return n.v2;
  return "";
}

std::string TritonConfigType(DataType t) {
  for (const TypeName& n : kTypes)
    if (n.type == t) return n.triton;
  return "";
}

Result<DataType> FromTritonConfigType(std::string_view name) {
  for (const TypeName& n : kTypes)
    if (name == n.triton && n.type != DataType::kString) return n.type;
  return Status(StatusCode::kInvalidArgument, fmt::format("data_type {} is not one kiln serve takes", name));
}

int64_t TensorData::Volume() const {
  int64_t v = 1;
  for (int64_t d : shape) v *= d;
  return v;
}

Outcome Outcome::FromStatus(const Status& s) {
  if (s.ok()) return Ok();
  switch (s.code()) {
    case StatusCode::kNotFound: return NotFound(s.message());
    case StatusCode::kInvalidArgument:
    case StatusCode::kInvalidModel:
    case StatusCode::kUnsupported:
    case StatusCode::kOutOfRange: return BadRequest(s.message());
    default: return Internal(s.message());
  }
}

}  // namespace kiln::serve
