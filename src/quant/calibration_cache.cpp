// The calibration cache (include/kiln/calibrator.h has the format).
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include "core/error.h"
#include "kiln/calibrator.h"

namespace kiln {

namespace {

struct AlgoName {
  CalibrationAlgoType type;
  const char* name;
};
constexpr AlgoName kAlgoNames[] = {
    {CalibrationAlgoType::kENTROPY_CALIBRATION_2, "EntropyCalibration2"},
    {CalibrationAlgoType::kENTROPY_CALIBRATION, "EntropyCalibration"},
    {CalibrationAlgoType::kMINMAX_CALIBRATION, "MinMaxCalibration"},
    {CalibrationAlgoType::kLEGACY_CALIBRATION, "LegacyCalibration"},
    {CalibrationAlgoType::kPERCENTILE_CALIBRATION, "PercentileCalibration"},
};

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// "3c010a14" -> the float with those bits; nullopt when not 1..8 hex digits.
std::optional<float> ParseHexFloat(std::string_view s) {
  if (s.empty() || s.size() > 8) return std::nullopt;
  uint32_t bits = 0;
  for (char c : s) {
    if (!IsHex(c)) return std::nullopt;
    bits = bits << 4 | static_cast<uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

const char* CalibrationAlgoName(CalibrationAlgoType a) {
  for (const auto& n : kAlgoNames)
    if (n.type == a) return n.name;
  return "UnknownCalibration";
}

Result<CalibrationTable> ParseCalibrationCache(const void* data, std::size_t size, const std::string& source) {
  const std::string_view text(static_cast<const char*>(data), size);
  CalibrationTable t;
  std::set<std::string, std::less<>> seen;
  size_t pos = 0;
  int line_no = 0;
  bool header = false;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != std::string_view::npos)
      return Err(StatusCode::kInvalidModel, "{}:{}: a NUL byte: this is not a calibration cache (a text file)", source,
                 line_no);
    if (!header) {
      // "TRT-8601-EntropyCalibration2"
      const size_t d1 = line.find('-'), d2 = d1 == std::string_view::npos ? d1 : line.find('-', d1 + 1);
      if (line.substr(0, 4) != "TRT-" || d2 == std::string_view::npos || d2 == 4)
        return Err(StatusCode::kInvalidModel,
                   "{}:1: the header '{}' is not 'TRT-<version>-<algorithm>': not a calibration cache", source,
                   std::string(line.substr(0, 80)));
      t.version = std::string(line.substr(4, d2 - 4));
      for (char c : t.version)
        if (c < '0' || c > '9')
          return Err(StatusCode::kInvalidModel, "{}:1: the header's version '{}' is not a number", source, t.version);
      const std::string_view algo = line.substr(d2 + 1);
      bool known = false;
      for (const auto& n : kAlgoNames)
        if (algo == n.name) t.algorithm = n.type, known = true;
      if (!known)
        return Err(StatusCode::kInvalidModel,
                   "{}:1: unknown calibration algorithm '{}' (kiln reads EntropyCalibration2, EntropyCalibration, "
                   "MinMaxCalibration, LegacyCalibration and PercentileCalibration caches)",
                   source, std::string(algo.substr(0, 80)));
      header = true;
      continue;
    }
    if (line.empty()) continue;
    // The name may itself hold ": " (TensorFlow-style "x:0"): the scale follows the last one.
    const size_t colon = line.rfind(": ");
    if (colon == std::string_view::npos || colon == 0)
      return Err(StatusCode::kInvalidModel, "{}:{}: '{}' is not '<tensor name>: <scale as 8 hex digits>'", source,
                 line_no, std::string(line.substr(0, 120)));
    const std::string name(line.substr(0, colon));
    const auto scale = ParseHexFloat(line.substr(colon + 2));
    if (!scale)
      return Err(StatusCode::kInvalidModel, "{}:{}: tensor '{}': the scale '{}' is not 1 to 8 hex digits", source,
                 line_no, name, std::string(line.substr(colon + 2, 40)));
    if (!std::isfinite(*scale) || *scale < 0)
      return Err(StatusCode::kInvalidModel, "{}:{}: tensor '{}': the scale {} is not a finite non-negative number",
                 source, line_no, name, *scale);
    if (!seen.insert(name).second)
      return Err(StatusCode::kInvalidModel, "{}:{}: tensor '{}' is listed a second time", source, line_no, name);
    t.scales.emplace_back(name, *scale);
  }
  if (!header) return Err(StatusCode::kInvalidModel, "{}: the calibration cache is empty", source);
  return t;
}

Result<CalibrationTable> ReadCalibrationCacheFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Err(StatusCode::kNotFound, "calibration cache '{}' does not exist", path);
  if (!S_ISREG(st.st_mode))
    return Err(StatusCode::kInvalidArgument, "calibration cache '{}' is not a regular file", path);
  constexpr off_t kMaxBytes = off_t{1} << 30;
  if (st.st_size > kMaxBytes)
    return Err(StatusCode::kInvalidArgument, "calibration cache '{}' is {} bytes: over the 1 GiB a cache may hold",
               path, static_cast<long long>(st.st_size));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Err(StatusCode::kIoError, "cannot open calibration cache '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  return ParseCalibrationCache(bytes.data(), bytes.size(), path);
}

std::string WriteCalibrationCache(const CalibrationTable& table) {
  std::string out = "TRT-" + table.version + "-" + CalibrationAlgoName(table.algorithm) + "\n";
  for (const auto& [name, scale] : table.scales) {
    // A line per tensor: a name the format cannot hold (empty, or with a line feed) is left out.
    if (name.empty() || name.find('\n') != std::string::npos) continue;
    uint32_t bits;
    std::memcpy(&bits, &scale, 4);
    out += fmt::format("{}: {:08x}\n", name, bits);
  }
  return out;
}

}  // namespace kiln
