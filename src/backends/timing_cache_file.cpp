#include "backends/timing_cache_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln {

namespace {
constexpr uintmax_t kMaxTimingCacheBytes = uintmax_t{1} << 30;
}

Result<TimingCacheContents> ParseTimingCache(std::string_view text, const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return Err(StatusCode::kInvalidArgument, "timing cache '{}' is not valid JSON", source);
  auto not_cache = [&](const char* why) {
    return Err(StatusCode::kInvalidArgument, "'{}' is not a kiln timing cache (version 1): {}", source, why);
  };
  if (!j.is_object()) return not_cache("it is not a JSON object");
  auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get_ref<const std::string&>() != "kiln-timing-cache")
    return not_cache("\"format\" is not \"kiln-timing-cache\"");
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1)
    return not_cache("\"version\" is not 1");
  TimingCacheContents out;
  auto device = j.find("device");
  if (device == j.end() || !device->is_string()) return not_cache("\"device\" is not a string");
  out.device = device->get<std::string>();
  auto entries = j.find("entries");
  if (entries == j.end() || !entries->is_object()) return not_cache("\"entries\" is not an object");
  for (const auto& item : entries->items()) {
    const std::string& sig = item.key();
    const nlohmann::json& e = item.value();
    auto bad = [&](const char* why) {
      return Err(StatusCode::kInvalidArgument, "timing cache '{}' has a malformed entry '{}': {}", source, sig, why);
    };
    if (!e.is_object()) return bad("it is not an object");
    auto tactic = e.find("tactic");
    if (tactic == e.end() || !tactic->is_string()) return bad("\"tactic\" is not a string");
    TimingEntry te;
    te.tactic = tactic->get<std::string>();
    if (auto ms = e.find("ms"); ms != e.end()) {
      if (!ms->is_number()) return bad("\"ms\" is not a number");
      te.ms = ms->get<double>();
    }
    if (auto c = e.find("candidates"); c != e.end()) {
      if (!c->is_number_integer() || c->get<int64_t>() < 0 || c->get<int64_t>() > (int64_t{1} << 30))
        return bad("\"candidates\" is not a count");
      te.candidates = static_cast<int>(c->get<int64_t>());
    }
    out.entries[sig] = std::move(te);
  }
  return out;
}

std::string SerializeTimingCache(const TimingCacheContents& cache) {
  nlohmann::json j;
  j["format"] = "kiln-timing-cache";
  j["version"] = 1;
  j["device"] = cache.device;
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [sig, e] : cache.entries)
    entries[sig] = {{"tactic", e.tactic}, {"ms", e.ms}, {"candidates", e.candidates}};
  j["entries"] = entries;
  // Signatures and tactics are kiln's own ASCII, but a cache read from elsewhere may hold any bytes: replace
  // invalid UTF-8 rather than throw.
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Result<TimingCacheContents> ReadTimingCacheFile(const std::string& path, bool* found) {
  *found = false;
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return TimingCacheContents{};
  *found = true;
  if (!std::filesystem::is_regular_file(st))
    return Err(StatusCode::kInvalidArgument, "timing cache '{}' is not a regular file (a FIFO, device or folder?)",
               path);
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxTimingCacheBytes)
    return Err(StatusCode::kInvalidArgument, "timing cache '{}' is larger than 1 GiB", path);
  std::ifstream f(path, std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  if (!f) return Err(StatusCode::kIoError, "cannot read timing cache '{}'", path);
  return ParseTimingCache(text.str(), path);
}

Status WriteTimingCacheFile(const std::string& path, const TimingCacheContents& cache) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return Err(StatusCode::kIoError, "cannot write timing cache '{}'", tmp);
    f << SerializeTimingCache(cache);
    if (!f) return Err(StatusCode::kIoError, "writing timing cache '{}' failed (disk full?)", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Err(StatusCode::kIoError, "cannot move '{}' to '{}': {}", tmp, path, ec.message());
  return Status::Ok();
}

}  // namespace kiln
