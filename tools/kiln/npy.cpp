#include "npy.h"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "kiln/error.h"

namespace kiln {

namespace {
constexpr int64_t kMaxNpyElements = int64_t{1} << 40;  // no input is larger; bigger dims are a corrupt header
struct NpyType {
  const char* descr;
  DataType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DataType::kFloat32}, {"<f8", DataType::kFloat64}, {"<f2", DataType::kFloat16}, {"|i1", DataType::kInt8},
    {"|u1", DataType::kUInt8},   {"<i2", DataType::kInt16},   {"<u2", DataType::kUInt16},  {"<i4", DataType::kInt32},
    {"<u4", DataType::kUInt32},  {"<i8", DataType::kInt64},   {"<u8", DataType::kUInt64},  {"|b1", DataType::kBool},
};
}  // namespace

namespace {
// The dims of a .npy shape tuple ("4, 32", "7,", ""): non-negative decimal integers separated by commas, with an
// optional trailing comma; anything else is an error naming the file and the text.
Result<std::vector<int64_t>> ParseNpyShape(const std::string& path, const std::string& text) {
  std::vector<int64_t> shape;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  };
  auto bad = [&](const char* why) {
    return Err(StatusCode::kInvalidArgument, "'{}': .npy header shape ({}) is not a tuple of dims: {}", path, text,
               why);
  };
  skip_space();
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return bad("a dim is not a non-negative integer");
    int64_t d = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (d > (kMaxNpyElements - (text[i] - '0')) / 10) return bad("a dim is larger than 2^40");
      d = d * 10 + (text[i] - '0');
    }
    shape.push_back(d);
    skip_space();
    if (i == text.size()) break;
    if (text[i] != ',') return bad("dims must be separated by commas");
    ++i;
    skip_space();
  }
  if (shape.size() > 32) return bad("more than 32 dims");
  return shape;
}
}  // namespace

Result<Tensor> ReadNpy(const std::string& path) {
  // Only regular files: a FIFO or device would block the read or never end.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return Err(StatusCode::kNotFound, "cannot open input file '{}'", path);
  if (!std::filesystem::is_regular_file(st))
    return Err(StatusCode::kInvalidArgument, "input file '{}' is not a regular file (a FIFO, device or folder?)",
               path);
  const uintmax_t file_size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (!in || ec) return Err(StatusCode::kNotFound, "cannot open input file '{}'", path);
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return Err(StatusCode::kInvalidArgument, "'{}' is not a .npy file (bad magic)", path);
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t l = 0;
    in.read(reinterpret_cast<char*>(&l), 2);
    header_len = l;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  if (!in || header_len > (1u << 20)) return Err(StatusCode::kInvalidArgument, "'{}': bad .npy header", path);
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) return Err(StatusCode::kInvalidArgument, "'{}' is truncated inside its .npy header", path);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']+)'")))
    return Err(StatusCode::kInvalidArgument, "'{}': .npy header has no descr", path);
  const std::string descr = m[1];
  DataType dtype = DataType::kUndefined;
  for (const auto& t : kTypes)
    if (descr == t.descr || (descr[0] == '=' && descr.substr(1) == std::string(t.descr).substr(1))) dtype = t.dtype;
  if (dtype == DataType::kUndefined)
    return Err(StatusCode::kUnsupported, "'{}': numpy dtype '{}' is not supported (use little-endian numeric types)",
               path, descr);
  if (std::regex_search(header, m, std::regex("'fortran_order':\\s*True")))
    return Err(StatusCode::kUnsupported, "'{}': Fortran-ordered arrays are not supported (use np.ascontiguousarray)", path);
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    return Err(StatusCode::kInvalidArgument, "'{}': .npy header has no shape", path);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ParseNpyShape(path, m[1]));
  // The element count and bytes, checked against the data the file holds before anything is allocated.
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d != 0 && count > kMaxNpyElements / d)
      return Err(StatusCode::kInvalidArgument, "'{}': .npy shape ({}) has more than 2^40 elements", path,
                 std::string(m[1]));
    count *= d;
  }
  const uint64_t want = static_cast<uint64_t>(count) * DataTypeSize(dtype);
  const uint64_t data_offset = static_cast<uint64_t>(in.tellg());
  const uint64_t have = file_size > data_offset ? file_size - data_offset : 0;
  if (have < want)
    return Err(StatusCode::kInvalidArgument, "'{}' is truncated: its shape ({}) needs {} bytes of data, the file has {}",
               path, std::string(m[1]), want, have);
  Tensor t(dtype, shape);
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  if (!in) return Err(StatusCode::kInvalidArgument, "'{}' is truncated: expected {} bytes of data", path, t.nbytes());
  return t;
}

Status WriteNpy(const std::string& path, const Tensor& t) {
  const char* descr = nullptr;
  for (const auto& e : kTypes)
    if (e.dtype == t.dtype()) descr = e.descr;
  Tensor data = t;
  if (!descr) {  // bfloat16 and fp8 are written as float32
    data = CastTensor(t, DataType::kFloat32);
    descr = "<f4";
  }
  std::string shape;
  for (int64_t d : data.shape()) shape += std::to_string(d) + ",";
  if (data.rank() > 1) shape.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  const size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::ofstream out(path, std::ios::binary);
  if (!out) return Err(StatusCode::kIoError, "cannot write '{}'", path);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t hl = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&hl), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data.raw()), static_cast<std::streamsize>(data.nbytes()));
  if (!out) return Err(StatusCode::kIoError, "writing '{}' failed", path);
  return Status::Ok();
}

}  // namespace kiln
