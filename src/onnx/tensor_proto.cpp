#include "onnx/tensor_proto.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace kiln {

namespace {

// Checks the external data (location inside the model's folder, a regular file, its length and size against the
// `need` bytes the shape takes) before anything is allocated, then reads it.
Result<Tensor> ReadExternal(const onnx::TensorProto& p, const DataDirs& data_dirs, const std::string& what,
                            DataType dtype, const std::vector<int64_t>& shape, int64_t need) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::strtoll(kv.value().c_str(), nullptr, 10);
    else if (kv.key() == "length") length = std::strtoll(kv.value().c_str(), nullptr, 10);
  }
  if (location.empty())
    return Err(StatusCode::kInvalidModel, "{} is stored externally but names no 'location'", what);
  std::filesystem::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos)
    return Err(StatusCode::kInvalidModel, "{}: external data location '{}' must be a relative path inside the model's folder",
               what, location);
  // The file's real path (symbolic links resolved) must lie inside the real folder it is found in, and be a regular
  // file: a link inside the folder must not reach a file outside it, and a FIFO must not block the import.
  namespace fs = std::filesystem;
  fs::path file, folder;
  std::string searched;
  for (const std::string& dir : data_dirs) {
    std::error_code ec;
    const fs::path f = fs::weakly_canonical(fs::absolute(dir.empty() ? "." : dir), ec);
    const fs::path candidate = fs::weakly_canonical(f / rel, ec);
    searched += (searched.empty() ? "" : ", ") + (f / rel).string();
    if (ec || !fs::exists(candidate, ec)) continue;
    folder = f;
    file = candidate;
    break;
  }
  if (file.empty())
    return Err(StatusCode::kNotFound,
               "{}: external data file '{}' cannot be opened (looked for {}); keep it next to the model or name its "
               "folder with --externalDataDir", what, location, searched);
  const auto [end, _] = std::mismatch(folder.begin(), folder.end(), file.begin(), file.end());
  if (end != folder.end())
    return Err(StatusCode::kInvalidModel,
               "{}: external data location '{}' resolves to '{}', outside the folder '{}' (a symbolic link?)",
               what, location, file.string(), folder.string());
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    return Err(StatusCode::kInvalidModel, "{}: external data location '{}' is not a regular file", what, location);
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return Err(StatusCode::kNotFound, "{}: external data file '{}' cannot be opened (keep it next to the model)", what,
               file.string());
  in.seekg(0, std::ios::end);
  const int64_t file_size = static_cast<int64_t>(in.tellg());
  if (length >= 0 && length != need)
    return Err(StatusCode::kInvalidModel, "{}: external data length {} does not match its shape and type ({} bytes)",
               what, length, need);
  if (offset < 0 || offset > file_size || need > file_size - offset)
    return Err(StatusCode::kInvalidModel, "{}: external data file '{}' is too short ({} bytes, needs {} at offset {})",
               what, file.string(), file_size, need, offset);
  Tensor t = Tensor::Uninitialized(dtype, shape);
  if (need > 0 && !t.raw()) return Err(StatusCode::kOutOfRange, "{}: out of memory allocating {} bytes", what, need);
  in.seekg(offset);
  in.read(static_cast<char*>(t.raw()), need);
  if (!in) return Err(StatusCode::kIoError, "{}: reading '{}' failed", what, file.string());
  return t;
}

template <typename Field>
Status CheckCount(const Field& f, int64_t n, const std::string& what, const char* field) {
  if (static_cast<int64_t>(f.size()) != n)
    return Err(StatusCode::kInvalidModel, "{}: has {} values in {} but its shape holds {}", what, f.size(), field, n);
  return Status::Ok();
}

// Data packed below a byte (raw, external, or one packed byte per int32_data entry), unpacked to one value per byte:
// int4/uint4 and float4e2m1 two per byte, int2/uint2 four per byte, the first element in the lowest bits. int4 and
// int2 are sign-extended; float4e2m1 keeps its 4-bit code.
Result<Tensor> UnpackSubByte(const onnx::TensorProto& p, const DataDirs& data_dirs, const std::string& what,
                             DataType dtype, const std::vector<int64_t>& shape, int64_t n) {
  const int bits = Is2BitType(dtype) ? 2 : 4;
  const int per_byte = 8 / bits;
  const int64_t packed = (n + per_byte - 1) / per_byte;
  Tensor bytes;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    KILN_ASSIGN_OR_RETURN(bytes, ReadExternal(p, data_dirs, what, DataType::kUInt8, {packed}, packed));
  } else if (p.has_raw_data()) {
    if (p.raw_data().size() != static_cast<size_t>(packed))
      return Err(StatusCode::kInvalidModel, "{}: raw_data has {} bytes but shape {} of {} needs {} ({} values per "
                 "byte)", what, p.raw_data().size(), ShapeToString(shape), DataTypeName(dtype), packed,
                 per_byte == 2 ? "two" : "four");
    bytes = Tensor::Uninitialized(DataType::kUInt8, {packed});
    if (packed && !bytes.raw()) return Err(StatusCode::kOutOfRange, "{}: out of memory allocating {} bytes", what, n);
    if (packed) std::memcpy(bytes.raw(), p.raw_data().data(), static_cast<size_t>(packed));
  } else {
    KILN_RETURN_IF_ERROR(CheckCount(p.int32_data(), packed, what, "int32_data (one packed byte per entry)"));
    bytes = Tensor::Uninitialized(DataType::kUInt8, {packed});
    if (packed && !bytes.raw()) return Err(StatusCode::kOutOfRange, "{}: out of memory allocating {} bytes", what, n);
    for (int64_t i = 0; i < packed; ++i) bytes.data<uint8_t>()[i] = static_cast<uint8_t>(p.int32_data(i) & 0xff);
  }
  Tensor t = Tensor::Uninitialized(dtype, shape);
  if (n > 0 && !t.raw()) return Err(StatusCode::kOutOfRange, "{}: out of memory allocating {} bytes", what, n);
  const uint8_t* b = bytes.data<uint8_t>();
  const bool is_signed = dtype == DataType::kInt4 || dtype == DataType::kInt2;
  const int mask = (1 << bits) - 1, half = 1 << (bits - 1);
  for (int64_t i = 0; i < n; ++i) {
    const int v = (b[i / per_byte] >> ((i % per_byte) * bits)) & mask;
    t.data<uint8_t>()[i] = static_cast<uint8_t>(is_signed && v >= half ? v - (1 << bits) : v);
  }
  return t;
}

}  // namespace

Result<Tensor> TensorFromProto(const onnx::TensorProto& p, const DataDirs& data_dirs, const std::string& what) {
  const auto dtype = static_cast<DataType>(p.data_type());
  if (!IsSupportedType(dtype))
    return Err(StatusCode::kUnsupported, "{}: element type {} ({}) is not supported", what, p.data_type(),
               DataTypeName(dtype));
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) return Err(StatusCode::kInvalidModel, "{}: has a negative dimension {}", what, d);
    if (d > 0 && n > std::numeric_limits<int64_t>::max() / 8 / d)
      return Err(StatusCode::kInvalidModel, "{}: its shape is too large", what);
    n *= d;
    shape.push_back(d);
  }
  // The data's length is checked against the shape before anything is allocated: an initializer declaring 2^40
  // elements with 16 bytes of data is a length mismatch, not an out-of-memory.
  const size_t esize = DataTypeSize(dtype);
  // int4/uint4/float4e2m1 are stored two per byte (the first element in the low nibble), int2/uint2 four per byte;
  // kiln holds one per byte.
  if (IsSubByteIntegerType(dtype) || dtype == DataType::kFloat4E2M1)
    return UnpackSubByte(p, data_dirs, what, dtype, shape, n);
  const int64_t need = n * static_cast<int64_t>(esize);  // n <= INT64_MAX / 8 (checked above)
  if (p.data_location() == onnx::TensorProto::EXTERNAL) return ReadExternal(p, data_dirs, what, dtype, shape, need);
  if (p.has_raw_data()) {
    if (p.raw_data().size() != static_cast<size_t>(need))
      return Err(StatusCode::kInvalidModel, "{}: raw_data has {} bytes but shape {} of {} needs {}", what,
                 p.raw_data().size(), ShapeToString(shape), DataTypeName(dtype), need);
    Tensor t = Tensor::Uninitialized(dtype, shape);  // raw_data fills every byte: no need to zero it first
    if (n > 0 && !t.raw()) return Err(StatusCode::kOutOfRange, "{}: out of memory allocating {} bytes", what, need);
    if (n) std::memcpy(t.raw(), p.raw_data().data(), p.raw_data().size());
    return t;
  }
  // Typed fields: each holds one entry per element.
  int64_t entries = 0;
  switch (dtype) {
    case DataType::kFloat32: entries = p.float_data_size(); break;
    case DataType::kFloat64: entries = p.double_data_size(); break;
    case DataType::kInt64: entries = p.int64_data_size(); break;
    case DataType::kUInt64: case DataType::kUInt32: entries = p.uint64_data_size(); break;
    default: entries = p.int32_data_size(); break;
  }
  if (entries != n)
    return Err(StatusCode::kInvalidModel, "{}: has {} values but its shape {} holds {}", what, entries,
               ShapeToString(shape), n);
  Tensor t(dtype, shape);
  if (n > 0 && !t.raw()) return Err(StatusCode::kOutOfRange, "{}: out of memory allocating {} bytes", what, need);
  switch (dtype) {
    case DataType::kFloat32:
      KILN_RETURN_IF_ERROR(CheckCount(p.float_data(), n, what, "float_data"));
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = p.float_data(i);
      break;
    case DataType::kFloat64:
      KILN_RETURN_IF_ERROR(CheckCount(p.double_data(), n, what, "double_data"));
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = p.double_data(i);
      break;
    case DataType::kInt64:
      KILN_RETURN_IF_ERROR(CheckCount(p.int64_data(), n, what, "int64_data"));
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = p.int64_data(i);
      break;
    case DataType::kUInt64: case DataType::kUInt32:
      KILN_RETURN_IF_ERROR(CheckCount(p.uint64_data(), n, what, "uint64_data"));
      for (int64_t i = 0; i < n; ++i) {
        if (dtype == DataType::kUInt64) t.data<uint64_t>()[i] = p.uint64_data(i);
        else t.data<uint32_t>()[i] = static_cast<uint32_t>(p.uint64_data(i));
      }
      break;
    default: {
      // int32_data holds int32, int16, int8, uint16, uint8, bool, and the bits of float16/bfloat16/fp8/float8e8m0.
      KILN_RETURN_IF_ERROR(CheckCount(p.int32_data(), n, what, "int32_data"));
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = p.int32_data(i);
        switch (dtype) {
          case DataType::kInt32: t.data<int32_t>()[i] = v; break;
          case DataType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(v); break;
          case DataType::kUInt16: case DataType::kFloat16: case DataType::kBFloat16:
            t.data<uint16_t>()[i] = static_cast<uint16_t>(v);
            break;
          case DataType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
          default: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
        }
      }
    }
  }
  return t;
}

}  // namespace kiln
