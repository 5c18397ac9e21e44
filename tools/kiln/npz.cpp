#include "npz.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string_view>

#include <zip.h>

#include "kiln/error.h"
#include "npy.h"

namespace kiln {

namespace {

using Arrays = std::vector<std::pair<std::string, Tensor>>;

Status ZipError(const std::string& source, int code) {
  zip_error_t ze;
  zip_error_init_with_code(&ze, code);
  std::string why = zip_error_strerror(&ze);
  zip_error_fini(&ze);
  return Err(StatusCode::kInvalidArgument, "'{}' is not a readable .npz (zip) archive: {}", source, why);
}

// Every member of an open archive, parsed as .npy.
Result<Arrays> ReadMembers(zip_t* z, const std::string& path, uint64_t max_member_bytes) {
  const zip_int64_t n = zip_get_num_entries(z, 0);
  Arrays out;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t s;
    zip_stat_init(&s);
    if (zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &s) != 0 || !(s.valid & ZIP_STAT_NAME) ||
        !(s.valid & ZIP_STAT_SIZE))
      return Err(StatusCode::kInvalidArgument, "'{}': member {} cannot be read: {}", path, i, zip_strerror(z));
    std::string name = s.name;
    if (!name.empty() && name.back() == '/') continue;  // a folder entry
    const std::string where = fmt::format("'{}' member '{}'", path, name);
    if (s.size > max_member_bytes)
      return Err(StatusCode::kInvalidArgument, "{} expands to {} bytes: over the {} a member may hold", where, s.size,
                 max_member_bytes);
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(z, static_cast<zip_uint64_t>(i), 0),
                                                        zip_fclose);
    if (!f) return Err(StatusCode::kInvalidArgument, "{} cannot be opened: {}", where, zip_strerror(z));
    // Grown as the bytes arrive, not sized from the header: an archive of a few bytes that declares gigabytes fails
    // at its real end instead of allocating them first.
    std::string bytes;
    zip_uint64_t got = 0;
    constexpr zip_uint64_t kChunk = zip_uint64_t{1} << 20;
    while (got < s.size) {
      const zip_uint64_t want = std::min(kChunk, s.size - got);
      bytes.resize(static_cast<size_t>(got + want));
      const zip_int64_t r = zip_fread(f.get(), bytes.data() + got, want);
      if (r < 0) return Err(StatusCode::kInvalidArgument, "{} is corrupt: {}", where, zip_file_strerror(f.get()));
      if (r == 0) break;
      got += static_cast<zip_uint64_t>(r);
    }
    bytes.resize(static_cast<size_t>(got));
    if (got != s.size)
      return Err(StatusCode::kInvalidArgument, "{} is truncated: {} of {} bytes", where, got, s.size);
    KILN_ASSIGN_OR_RETURN(Tensor t, ParseNpy(bytes, where));
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    out.emplace_back(std::move(name), std::move(t));
  }
  if (out.empty()) return Err(StatusCode::kInvalidArgument, "'{}' holds no arrays", path);
  return out;
}

}  // namespace

Result<Arrays> ReadNpz(const std::string& path, uint64_t max_member_bytes) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return Err(StatusCode::kNotFound, "cannot open '{}'", path);
  if (!std::filesystem::is_regular_file(st))
    return Err(StatusCode::kInvalidArgument, "'{}' is not a regular file (a FIFO, device or folder?)", path);
  int err = 0;
  std::unique_ptr<zip_t, int (*)(zip_t*)> z(zip_open(path.c_str(), ZIP_RDONLY, &err), zip_close);
  if (!z) return ZipError(path, err);
  return ReadMembers(z.get(), path, max_member_bytes);
}

Result<Arrays> ParseNpz(std::string_view bytes, const std::string& source, uint64_t max_member_bytes) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &ze);
  if (!src) {
    zip_error_fini(&ze);
    return Err(StatusCode::kInternal, "'{}': cannot wrap the bytes for libzip", source);
  }
  zip_t* raw = zip_open_from_source(src, ZIP_RDONLY, &ze);
  if (!raw) {
    const int code = zip_error_code_zip(&ze);
    zip_source_free(src);
    zip_error_fini(&ze);
    return ZipError(source, code);
  }
  zip_error_fini(&ze);
  std::unique_ptr<zip_t, int (*)(zip_t*)> z(raw, zip_close);  // owns src now
  return ReadMembers(z.get(), source, max_member_bytes);
}

}  // namespace kiln
