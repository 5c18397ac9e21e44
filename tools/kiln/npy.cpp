#include "npy.h"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <string_view>

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
Result<std::vector<int64_t>> ParseNpyShape(const std::string& path, std::string_view text) {
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
    if (shape.size() > 32) return bad("more than 32 dims");
    skip_space();
    if (i == text.size()) break;
    if (text[i] != ',') return bad("dims must be separated by commas");
    ++i;
    skip_space();
  }
  return shape;
}

// The header dict, a Python literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }. Parsed by hand
// (no regex: a 1 MiB header must not recurse), with exactly these three keys, as numpy requires.
class NpyDictParser {
 public:
  NpyDictParser(std::string_view text, const std::string& path) : t_(text), path_(path) {}

  Status Parse(std::string* descr, bool* fortran, std::string_view* shape) {
    int seen = 0;
    Space();
    if (!Eat('{')) return Bad("it does not start with '{'");
    for (;;) {
      Space();
      if (Eat('}')) break;
      std::string_view key;
      if (!Quoted(&key)) return Bad("a key is not a quoted string");
      Space();
      if (!Eat(':')) return Bad("a key is not followed by ':'");
      Space();
      if (key == "descr") {
        std::string_view v;
        if (!Quoted(&v)) return Bad("'descr' is not a quoted string (structured dtypes are not supported)");
        *descr = std::string(v);
        seen |= 1;
      } else if (key == "fortran_order") {
        if (Word("True")) *fortran = true;
        else if (Word("False")) *fortran = false;
        else return Bad("'fortran_order' is neither True nor False");
        seen |= 2;
      } else if (key == "shape") {
        if (!Eat('(')) return Bad("'shape' is not a tuple");
        const size_t start = i_;
        while (i_ < t_.size() && t_[i_] != ')') ++i_;
        if (i_ == t_.size()) return Bad("'shape' has no closing ')'");
        *shape = t_.substr(start, i_ - start);
        ++i_;
        seen |= 4;
      } else {
        return Bad(fmt::format("it has a key '{}' (a .npy header holds descr, fortran_order and shape only)", key));
      }
      Space();
      if (Eat(',')) continue;
      Space();
      if (Eat('}')) break;
      return Bad("entries are not separated by ','");
    }
    if (seen != 7) return Bad("it lacks one of descr, fortran_order and shape");
    return Status::Ok();
  }

 private:
  Status Bad(const std::string& why) const {
    return Err(StatusCode::kInvalidArgument, "'{}': the .npy header dict is malformed: {}", path_, why);
  }
  void Space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  bool Eat(char c) {
    if (i_ < t_.size() && t_[i_] == c) return ++i_, true;
    return false;
  }
  bool Word(std::string_view w) {
    if (t_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool Quoted(std::string_view* out) {
    if (i_ >= t_.size() || (t_[i_] != '\'' && t_[i_] != '"')) return false;
    const char q = t_[i_++];
    const size_t start = i_;
    while (i_ < t_.size() && t_[i_] != q) ++i_;
    if (i_ == t_.size()) return false;
    *out = t_.substr(start, i_ - start);
    ++i_;
    return true;
  }

  std::string_view t_;
  const std::string& path_;
  size_t i_ = 0;
};

// A bool array holds bytes 0 and 1 only (numpy writes nothing else; kernels read bool as a C++ bool).
Status CheckBools(const Tensor& t, const std::string& path) {
  if (t.dtype() != DataType::kBool) return Status::Ok();
  const auto* p = static_cast<const uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i)
    if (p[i] > 1)
      return Err(StatusCode::kInvalidArgument, "'{}': bool element {} is byte {} (a bool is 0 or 1)", path, i, p[i]);
  return Status::Ok();
}

uint32_t LittleEndian(std::string_view b) {
  uint32_t v = 0;
  for (size_t i = b.size(); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[i]);
  return v;
}
}  // namespace

Result<NpyHeader> ParseNpyHeader(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 8 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    return Err(StatusCode::kInvalidArgument, "'{}' is not a .npy file (bad magic)", path);
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3)
    return Err(StatusCode::kUnsupported, "'{}' is .npy format version {}.{}; kiln reads versions 1 to 3", path, major,
               static_cast<uint8_t>(bytes[7]));
  const size_t len_size = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_size) return Err(StatusCode::kInvalidArgument, "'{}' is truncated inside its .npy header", path);
  const uint32_t header_len = LittleEndian(bytes.substr(8, len_size));
  if (header_len > (1u << 20))
    return Err(StatusCode::kInvalidArgument, "'{}': the .npy header claims {} bytes (at most 1 MiB)", path, header_len);
  const size_t start = 8 + len_size;
  if (bytes.size() - start < header_len)
    return Err(StatusCode::kInvalidArgument, "'{}' is truncated inside its .npy header", path);
  const std::string_view dict = bytes.substr(start, header_len);

  std::string descr;
  bool fortran = false;
  std::string_view shape_text;
  KILN_RETURN_IF_ERROR(NpyDictParser(dict, path).Parse(&descr, &fortran, &shape_text));
  NpyHeader h;
  for (const auto& t : kTypes) {
    const std::string_view want(t.descr);
    const bool one_byte = want[0] == '|';
    if (descr == want || (descr.size() == 3 && descr.substr(1) == want.substr(1) &&
                          (descr[0] == '=' || (one_byte && descr[0] == '<'))))
      h.dtype = t.dtype;
  }
  if (h.dtype == DataType::kUndefined)
    return Err(StatusCode::kUnsupported, "'{}': numpy dtype '{}' is not supported (use little-endian numeric types)",
               path, descr);
  if (fortran)
    return Err(StatusCode::kUnsupported, "'{}': Fortran-ordered arrays are not supported (use np.ascontiguousarray)",
               path);
  KILN_ASSIGN_OR_RETURN(h.shape, ParseNpyShape(path, shape_text));
  int64_t count = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && count > kMaxNpyElements / d)
      return Err(StatusCode::kInvalidArgument, "'{}': .npy shape ({}) has more than 2^40 elements", path, shape_text);
    count *= d;
  }
  h.data_offset = start + header_len;
  h.data_bytes = static_cast<uint64_t>(count) * DataTypeSize(h.dtype);
  return h;
}

Result<Tensor> ParseNpy(std::string_view bytes, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(bytes, path));
  const uint64_t have = bytes.size() - h.data_offset;
  if (have < h.data_bytes)
    return Err(StatusCode::kInvalidArgument, "'{}' is truncated: its shape needs {} bytes of data, the file has {}",
               path, h.data_bytes, have);
  Tensor t(h.dtype, h.shape);
  if (h.data_bytes) std::memcpy(t.raw(), bytes.data() + h.data_offset, h.data_bytes);
  KILN_RETURN_IF_ERROR(CheckBools(t, path));
  return t;
}

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
  // The header is read first (at most 12 bytes + 1 MiB); the data goes straight into the tensor once its size is
  // checked against the file.
  std::string head(static_cast<size_t>(std::min<uintmax_t>(file_size, 12 + (1u << 20))), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (!in) return Err(StatusCode::kIoError, "reading '{}' failed", path);
  KILN_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(head, path));
  const uint64_t have = file_size - h.data_offset;
  if (have < h.data_bytes)
    return Err(StatusCode::kInvalidArgument, "'{}' is truncated: its shape needs {} bytes of data, the file has {}",
               path, h.data_bytes, have);
  Tensor t(h.dtype, h.shape);
  in.clear();
  in.seekg(static_cast<std::streamoff>(h.data_offset));
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(h.data_bytes));
  if (!in) return Err(StatusCode::kIoError, "'{}' is truncated: expected {} bytes of data", path, h.data_bytes);
  KILN_RETURN_IF_ERROR(CheckBools(t, path));
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
