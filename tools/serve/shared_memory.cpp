// Triton's system shared memory extension (shared_memory.h).
#include "shared_memory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kiln/backend.h"
#include "parallel_copy.h"

namespace kiln::serve {

const char* const kClientShmDisabled =
    "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";

// A mapped region: `map_len` bytes from `map` (page-aligned, at the page boundary at or below the offset); the region's
// bytes start at `data`. Unmapped (and unpinned) when the last holder lets go.
struct SharedMemoryManager::Region {
  std::string name, key;
  uint64_t offset = 0, byte_size = 0;
  void* map = nullptr;
  size_t map_len = 0;
  char* data = nullptr;
  std::vector<std::string> pinned;  // backends it is page-locked for
  ILogger* logger = nullptr;

  ~Region() {
    for (const std::string& b : pinned)
      if (Status s = UnregisterHostMemory(b, map); !s.ok())
        logger->log(Severity::kWarning, fmt::format("shared memory region '{}': {}", name, s.message()).c_str());
    if (map) munmap(map, map_len);
  }
};

namespace {

std::string Errno() { return std::strerror(errno); }

}  // namespace

SharedMemoryManager::SharedMemoryManager(bool allow, ILogger& logger) : allow_(allow), logger_(logger) {
  if (!allow_) return;
  for (const std::string& name : GetBackendNames()) {
    auto info = GetBackendInfo(name);
    if (info.ok() && info->available && info->device_memory) pin_backends_.push_back(name);
  }
}

SharedMemoryManager::~SharedMemoryManager() { UnregisterAll(); }

Outcome SharedMemoryManager::Register(const std::string& name, const std::string& key, uint64_t offset,
                                      uint64_t byte_size) {
  if (!allow_) return Outcome::NotImplemented(kClientShmDisabled);
  if (name.empty()) return Outcome::BadRequest("'region name' is necessary to register system shared memory region");
  const std::string who = fmt::format("failed to register shared memory region '{}'", name);
  if (key.empty()) return Outcome::BadRequest(who + ": the key (the shared-memory object's name) is empty");
  if (byte_size == 0) return Outcome::BadRequest(who + ": byte_size must be greater than 0");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (regions_.count(name))
      return Outcome::BadRequest(fmt::format("shared memory region '{}' already in manager", name));
  }
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0)
    return Outcome::BadRequest(fmt::format("{}: unable to open shared memory object '{}': {}", who, key, Errno()));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < 0) {
    const std::string why = Errno();
    close(fd);
    return Outcome::BadRequest(fmt::format("{}: unable to read the size of '{}': {}", who, key, why));
  }
  const uint64_t object_size = static_cast<uint64_t>(st.st_size);
  if (offset > object_size || byte_size > object_size - offset) {
    close(fd);
    return Outcome::BadRequest(fmt::format("{}: offset {} + byte_size {} run past the end of '{}' ({} bytes)", who,
                                           offset, byte_size, key, object_size));
  }
  // mmap takes page-aligned offsets: map from the page the region starts in.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t aligned = offset / page * page;
  auto region = std::make_shared<Region>();
  region->name = name;
  region->key = key;
  region->offset = offset;
  region->byte_size = byte_size;
  region->logger = &logger_;
  region->map_len = static_cast<size_t>(offset - aligned + byte_size);
  void* map = mmap(nullptr, region->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(aligned));
  const std::string map_error = map == MAP_FAILED ? Errno() : "";
  close(fd);
  if (map == MAP_FAILED) return Outcome::BadRequest(fmt::format("{}: unable to map '{}': {}", who, key, map_error));
  region->map = map;
  region->data = static_cast<char*>(map) + (offset - aligned);
  // Page-locked, copies to the device read it by DMA; without, they still work (through the driver's staging).
  for (const std::string& b : pin_backends_) {
    if (Status s = RegisterHostMemory(b, region->map, region->map_len); s.ok())
      region->pinned.push_back(b);
    else
      logger_.log(Severity::kWarning, fmt::format("shared memory region '{}' is not page-locked for the {} backend "
                                                  "(its copies to the device are slower): {}",
                                                  name, b, s.message())
                                          .c_str());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!regions_.emplace(name, std::move(region)).second)  // registered meanwhile by another call
    return Outcome::BadRequest(fmt::format("shared memory region '{}' already in manager", name));
  logger_.log(Severity::kInfo, fmt::format("registered system shared memory region '{}': '{}' offset {}, {} bytes",
                                           name, key, offset, byte_size)
                                   .c_str());
  return Outcome::Ok();
}

Outcome SharedMemoryManager::Unregister(const std::string& name) {
  if (!allow_) return Outcome::NotImplemented(kClientShmDisabled);
  std::vector<std::shared_ptr<Region>> gone;  // unmapped outside the lock (unless requests still hold them)
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    for (auto& [n, r] : regions_) gone.push_back(std::move(r));
    regions_.clear();
  } else if (auto it = regions_.find(name); it != regions_.end()) {
    gone.push_back(std::move(it->second));
    regions_.erase(it);
  }
  return Outcome::Ok();
}

void SharedMemoryManager::UnregisterAll() {
  std::map<std::string, std::shared_ptr<Region>> gone;
  std::lock_guard<std::mutex> lock(mu_);
  gone.swap(regions_);
}

Outcome SharedMemoryManager::GetStatus(const std::string& name, std::vector<SharedMemoryRegionStatus>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [n, r] : regions_)
    if (name.empty() || n == name) out->push_back({r->name, r->key, r->offset, r->byte_size});
  if (!name.empty() && out->empty())
    return Outcome::NotFound(fmt::format("Unable to find system shared memory region: '{}'", name));
  return Outcome::Ok();
}

Outcome SharedMemoryManager::Find(const std::string& who, const SharedMemoryRef& ref, char** address,
                                  std::shared_ptr<const void>* hold) const {
  std::shared_ptr<Region> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(ref.region);
    if (it != regions_.end()) r = it->second;
  }
  if (!r)
    return Outcome::NotFound(
        fmt::format("{}: Unable to find shared memory region: '{}' (register it first: POST "
                    "/v2/systemsharedmemory/region/{}/register)",
                    who, ref.region, ref.region));
  if (ref.offset >= r->byte_size)
    return Outcome::BadRequest(
        fmt::format("{}: Invalid offset for shared memory region: '{}' (offset {}; the region "
                    "holds {} bytes)",
                    who, ref.region, ref.offset, r->byte_size));
  if (ref.byte_size > r->byte_size - ref.offset)
    return Outcome::BadRequest(
        fmt::format("{}: Invalid offset + byte size for shared memory region: '{}' (offset {} + "
                    "byte size {} run past its {} bytes)",
                    who, ref.region, ref.offset, ref.byte_size, r->byte_size));
  *address = r->data + ref.offset;
  *hold = std::move(r);
  return Outcome::Ok();
}

Outcome SharedMemoryManager::Resolve(InferRequest* request, std::vector<SharedMemoryOutput>* outputs) const {
  for (TensorData& t : request->inputs) {
    if (!t.shm) continue;
    const std::string who = fmt::format("input '{}'", t.name);
    char* address = nullptr;
    if (Outcome o = Find(who, *t.shm, &address, &t.hold); !o.ok()) return o;
    uint64_t want = 0;
    if (t.Volume() < 0 || __builtin_mul_overflow(static_cast<uint64_t>(t.Volume()), DataTypeSize(t.dtype), &want))
      return Outcome::BadRequest(fmt::format("{}: shape {} of {} is too large", who, ShapeToString(t.shape),
                                             V2Datatype(t.dtype)));
    if (t.shm->byte_size != want)
      return Outcome::BadRequest(fmt::format(
          "{}: shared_memory_byte_size {} (region '{}', offset {}) does not match "
          "its shape {} of {}, which takes {} bytes",
          who, t.shm->byte_size, t.shm->region, t.shm->offset, ShapeToString(t.shape), V2Datatype(t.dtype), want));
    t.external = address;
    t.external_size = static_cast<size_t>(t.shm->byte_size);
  }
  for (const RequestedOutput& r : request->outputs) {
    if (!r.shm) continue;
    SharedMemoryOutput out{r.name, *r.shm, nullptr, nullptr};
    if (Outcome o = Find(fmt::format("output '{}'", r.name), *r.shm, &out.address, &out.hold); !o.ok()) return o;
    outputs->push_back(std::move(out));
  }
  return Outcome::Ok();
}

Outcome SharedMemoryManager::WriteOutputs(const std::vector<SharedMemoryOutput>& outputs, InferResponse* response) {
  if (outputs.empty()) return Outcome::Ok();
  std::vector<CopyPiece> copies;
  for (TensorData& t : response->outputs) {
    auto it =
        std::find_if(outputs.begin(), outputs.end(), [&](const SharedMemoryOutput& o) { return o.name == t.name; });
    if (it == outputs.end()) continue;
    if (t.bytes.size() > it->ref.byte_size)
      return Outcome::BadRequest(
          fmt::format("output '{}': shared memory size specified with the request ({} bytes in "
                      "region '{}') should be at least {} bytes to hold the results (shape {})",
                      t.name, it->ref.byte_size, it->ref.region, t.bytes.size(), ShapeToString(t.shape)));
    copies.push_back({it->address, t.bytes.data(), t.bytes.size()});
  }
  // One output after another (each split over threads): two outputs may name overlapping bytes, of one region or of
  // two names for the same object, and ParallelCopy's pieces must not overlap. The later output wins, as in order.
  for (const CopyPiece& c : copies) ParallelCopy({c});
  for (TensorData& t : response->outputs) {
    auto it =
        std::find_if(outputs.begin(), outputs.end(), [&](const SharedMemoryOutput& o) { return o.name == t.name; });
    if (it == outputs.end()) continue;
    t.shm = it->ref;
    t.bytes = std::string();
  }
  return Outcome::Ok();
}

}  // namespace kiln::serve
