// Engine file header: encoding and decoding of the fixed 256-byte header, the checksum, the compatibility
// checks (backend, GPU architecture, CUDA version), and reading/writing engine files.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "engine/engine_file.h"
#include "engine/engine_internal.h"

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "0.0.0"
#endif

namespace kiln {

const char* KilnVersion() { return KILN_VERSION_STRING; }

std::string ComputeCapabilityName(int32_t cc) { return fmt::format("sm_{}", cc); }

// ---- hash ----
namespace {
constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull,
                   kP4 = 0x85EBCA77C2B2AE63ull, kP5 = 0x27D4EB2F165667C5ull;
inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, aarch64)
}
inline uint64_t Round(uint64_t acc, uint64_t in) { return Rotl(acc + in * kP2, 31) * kP1; }
inline uint64_t Merge(uint64_t h, uint64_t v) { return (h ^ Round(0, v)) * kP1 + kP4; }
}  // namespace

uint64_t Hash64(const uint8_t* p, size_t n, uint64_t seed) {
  const uint8_t* end = p + n;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    for (; p + 32 <= end; p += 32) {
      v1 = Round(v1, Load64(p));
      v2 = Round(v2, Load64(p + 8));
      v3 = Round(v3, Load64(p + 16));
      v4 = Round(v4, Load64(p + 24));
    }
    h = Rotl(v1, 1) + Rotl(v2, 7) + Rotl(v3, 12) + Rotl(v4, 18);
    h = Merge(Merge(Merge(Merge(h, v1), v2), v3), v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(n);
  for (; p + 8 <= end; p += 8) h = Rotl(h ^ Round(0, Load64(p)), 27) * kP1 + kP4;
  for (; p < end; ++p) h = Rotl(h ^ (static_cast<uint64_t>(*p) * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t EngineChecksum(const uint8_t* data, size_t size) {
  uint8_t header[kEngineHeaderSize];
  std::memcpy(header, data, kEngineHeaderSize);
  std::memset(header + engine_layout::kChecksum, 0, 8);
  const uint64_t h = Hash64(header, kEngineHeaderSize, 0x6B696C6E);  // "kiln"
  return Hash64(data + kEngineHeaderSize, size - kEngineHeaderSize, h);
}

void ResealEngine(std::vector<uint8_t>& file) {
  if (file.size() < kEngineHeaderSize) return;
  engine_layout::Put64(file.data() + engine_layout::kChecksum, EngineChecksum(file.data(), file.size()));
}

// ---- header ----
namespace engine_layout {

void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

namespace {
void PutString(uint8_t* p, size_t field, const std::string& s) {
  std::memset(p, 0, field);
  std::memcpy(p, s.data(), std::min(s.size(), field - 1));
}
// A NUL-padded printable string field; false when it holds other bytes.
bool GetString(const uint8_t* p, size_t field, std::string* out) {
  size_t n = 0;
  while (n < field && p[n] != 0) {
    if (p[n] < 0x20 || p[n] > 0x7E) return false;
    ++n;
  }
  if (n == field) return false;
  for (size_t i = n; i < field; ++i)
    if (p[i] != 0) return false;
  out->assign(reinterpret_cast<const char*>(p), n);
  return true;
}
}  // namespace

void EncodeHeader(const EngineHeader& h, uint8_t* p) {
  std::memset(p, 0, kEngineHeaderSize);
  std::memcpy(p + kMagic, kEngineMagic, 8);
  Put32(p + kFormatVersion, h.format_version);
  Put32(p + kHeaderSize, static_cast<uint32_t>(kEngineHeaderSize));
  PutString(p + kKilnVersion, kKilnVersionLen, h.kiln_version);
  PutString(p + kBackend, kBackendLen, h.target.backend);
  // Keep the device name printable ASCII so the decoder's check holds.
  std::string dev = h.target.device_name;
  for (char& c : dev)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7E) c = '?';
  PutString(p + kDeviceName, kDeviceNameLen, dev);
  Put32(p + kComputeCapability, static_cast<uint32_t>(h.target.compute_capability));
  Put32(p + kCudaVersion, h.target.cuda_version);
  Put32(p + kCublasVersion, h.target.cublas_version);
  Put32(p + kCudnnVersion, h.target.cudnn_version);
  Put64(p + kBuildFlags, h.target.build_flags);
  Put64(p + kPayloadOffset, h.payload_offset);
  Put64(p + kPayloadSize, h.payload_size);
  Put64(p + kWeightsOffset, h.weights_offset);
  Put64(p + kWeightsSize, h.weights_size);
  Put64(p + kFileSize, h.file_size);
  Put64(p + kChecksum, h.checksum);
}

}  // namespace engine_layout

namespace {
Status Corrupted(const std::string& what) {
  return Err(StatusCode::kInvalidModel, "the engine header is inconsistent ({}): the engine file is corrupted; copy "
             "it again or rebuild it",
             what);
}
}  // namespace

Result<EngineHeader> ReadEngineHeader(const uint8_t* data, size_t size) {
  using namespace engine_layout;
  if (data == nullptr || size < 8)
    return Err(StatusCode::kInvalidModel,
               "the file is {} bytes, too short to be a kiln engine (its header alone is {} bytes): the file is "
               "truncated or not an engine; copy it again or pass an engine saved by kiln",
               size, kEngineHeaderSize);
  if (std::memcmp(data, kEngineMagic, 8) != 0) {
    std::string start;
    for (size_t i = 0; i < 8; ++i) start += (data[i] >= 0x20 && data[i] < 0x7F) ? static_cast<char>(data[i]) : '.';
    return Err(StatusCode::kInvalidModel,
               "not a kiln engine: the file starts with '{}' instead of the magic 'KILNENG1'; pass an engine "
               "saved by `kiln build --saveEngine` (an .onnx model is loaded as a model, not as an engine)",
               start);
  }
  if (size < kFormatVersion + 4)
    return Err(StatusCode::kInvalidModel,
               "the file is {} bytes, the header says at least {}: the file is truncated; copy it again", size,
               kEngineHeaderSize);
  EngineHeader h;
  h.format_version = Get32(data + kFormatVersion);
  if (h.format_version != kEngineFormatVersion)
    return Err(StatusCode::kUnsupported,
               "the engine has format version {}, this kiln ({}) reads format version {}: it was built by {} "
               "kiln; rebuild the engine with this kiln",
               h.format_version, KilnVersion(), kEngineFormatVersion,
               h.format_version > kEngineFormatVersion ? "a newer" : "an older");
  if (size < kEngineHeaderSize)
    return Err(StatusCode::kInvalidModel,
               "the file is {} bytes, the header says at least {}: the file is truncated; copy it again", size,
               kEngineHeaderSize);
  h.header_size = Get32(data + kHeaderSize);
  h.file_size = Get64(data + kFileSize);
  if (h.file_size > size)
    return Err(StatusCode::kInvalidModel,
               "the file is {} bytes, the header says {}: the file is truncated; copy it again", size, h.file_size);
  if (h.file_size < size)
    return Err(StatusCode::kInvalidModel,
               "the file is {} bytes, the header says {}: the file has extra bytes and is corrupted; copy it again",
               size, h.file_size);
  h.target.compute_capability = static_cast<int32_t>(Get32(data + kComputeCapability));
  h.target.cuda_version = Get32(data + kCudaVersion);
  h.target.cublas_version = Get32(data + kCublasVersion);
  h.target.cudnn_version = Get32(data + kCudnnVersion);
  h.target.build_flags = Get64(data + kBuildFlags);
  h.payload_offset = Get64(data + kPayloadOffset);
  h.payload_size = Get64(data + kPayloadSize);
  h.weights_offset = Get64(data + kWeightsOffset);
  h.weights_size = Get64(data + kWeightsSize);
  h.checksum = Get64(data + kChecksum);
  if (h.header_size != kEngineHeaderSize) return Corrupted(fmt::format("header size {}", h.header_size));
  if (!GetString(data + kKilnVersion, kKilnVersionLen, &h.kiln_version) ||
      !GetString(data + kBackend, kBackendLen, &h.target.backend) ||
      !GetString(data + kDeviceName, kDeviceNameLen, &h.target.device_name))
    return Corrupted("a text field holds unprintable bytes");
  if (h.payload_offset != kEngineHeaderSize) return Corrupted(fmt::format("payload at {}", h.payload_offset));
  if (h.payload_size > size - kEngineHeaderSize || h.payload_size < 8)
    return Corrupted(fmt::format("payload of {} bytes", h.payload_size));
  if (h.weights_offset % kEngineWeightsAlignment != 0 || h.weights_offset < h.payload_offset + h.payload_size ||
      h.weights_offset > size || h.weights_size != size - h.weights_offset)
    return Corrupted(fmt::format("weights at {} of {} bytes", h.weights_offset, h.weights_size));
  for (size_t i = kChecksum + 8; i < kEngineHeaderSize; ++i)
    if (data[i] != 0) return Corrupted("reserved bytes are not zero");
  return h;
}

Status CheckEngineCompat(const EngineTarget& built, const EngineCompat& expected) {
  if (built.backend != expected.backend)
    return Err(StatusCode::kUnsupported,
               "the engine was built for {}, this runtime runs {}: rebuild the engine for {} (kiln build --backend="
               "{} --saveEngine=...), or load it where the {} backend runs",
               built.backend, expected.backend, expected.backend, expected.backend, built.backend);
  if (built.compute_capability != 0) {  // an engine for one GPU architecture (and CUDA runtime)
    if (built.compute_capability != expected.compute_capability) {
      auto dev = [](int32_t cc, const std::string& name) {
        return name.empty() ? ComputeCapabilityName(cc) : fmt::format("{} ({})", ComputeCapabilityName(cc), name);
      };
      return Err(StatusCode::kUnsupported,
                 "the engine was built for {}, this GPU is {}: its kernels are for another GPU architecture; "
                 "rebuild the engine on this GPU",
                 dev(built.compute_capability, built.device_name),
                 dev(expected.compute_capability, expected.device_name));
    }
    if (expected.cuda_version != 0 && built.cuda_version > expected.cuda_version)
      return Err(StatusCode::kUnsupported,
                 "the engine was built with CUDA {}.{}, this runtime has CUDA {}.{}: rebuild the engine with this "
                 "runtime's CUDA, or upgrade the CUDA runtime",
                 built.cuda_version / 1000, built.cuda_version % 1000 / 10, expected.cuda_version / 1000,
                 expected.cuda_version % 1000 / 10);
  }
  return Status::Ok();
}

// ---- files ----
Status SaveEngineFile(const std::string& path, const EngineContents& engine) {
  auto bytes = SerializeEngine(engine);
  if (!bytes.ok()) return bytes.status().WithContext(fmt::format("saving engine '{}'", path));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Err(StatusCode::kIoError, "cannot write engine file '{}': {}", tmp, std::strerror(errno));
    f.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
    f.flush();
    if (!f) return Err(StatusCode::kIoError, "writing engine file '{}' failed (disk full?)", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Err(StatusCode::kIoError, "cannot move '{}' to '{}': {}", tmp, path, std::strerror(errno));
  return Status::Ok();
}

Result<EngineContents> LoadEngineFile(const std::string& path, const EngineCompat& expected) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Err(StatusCode::kIoError, "cannot open engine file '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Err(StatusCode::kIoError, "engine file '{}' is not a regular file", path);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  void* map = MAP_FAILED;
  if (size > 0) {
    map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return Err(StatusCode::kIoError, "cannot map engine file '{}': {}", path, std::strerror(e));
    }
    data = static_cast<const uint8_t*>(map);
  }
  ::close(fd);
  static const uint8_t kEmpty[1] = {0};
  auto r = DeserializeEngine(data ? data : kEmpty, size, expected);
  if (map != MAP_FAILED) ::munmap(map, size);
  if (!r.ok()) return r.status().WithContext(fmt::format("engine file '{}'", path));
  return r;
}

}  // namespace kiln
