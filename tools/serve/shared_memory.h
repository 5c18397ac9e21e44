// kiln serve — Triton's system shared memory extension: regions a client creates (shm_open) and registers by name,
// which inputs are read from and outputs written to instead of travelling in the request and the response. A region
// is mapped (shm_open + mmap) when it is registered and page-locked for the backends with device memory, so that an
// input's bytes are copied from it to the device by DMA. Requests hold the regions they use: a region unregistered
// while requests are in flight stays mapped until the last of them is answered.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "infer_types.h"
#include "kiln/logger.h"

namespace kiln::serve {

struct SharedMemoryRegionStatus {
  std::string name, key;
  uint64_t offset = 0, byte_size = 0;
};

// An output the request asked to have written to shared memory: where, and the region held mapped until then.
struct SharedMemoryOutput {
  std::string name;
  SharedMemoryRef ref;
  char* address = nullptr;
  std::shared_ptr<const void> hold;
};

class SharedMemoryManager {
 public:
  // `allow`: clients may register regions (tritonserver's --allow-client-shm); otherwise register and unregister
  // answer 501 and no request can name a region.
  SharedMemoryManager(bool allow, ILogger& logger);
  ~SharedMemoryManager();
  SharedMemoryManager(const SharedMemoryManager&) = delete;
  SharedMemoryManager& operator=(const SharedMemoryManager&) = delete;

  bool allowed() const { return allow_; }
  // Maps `byte_size` bytes of the shared-memory object `key` (shm_open's name, "/my_region") from `offset` and
  // registers them as region `name`.
  Outcome Register(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // name "": every region. A name not registered is no error (as Triton answers).
  Outcome Unregister(const std::string& name);
  void UnregisterAll();
  // name "": every region; a name not registered: 404.
  Outcome GetStatus(const std::string& name, std::vector<SharedMemoryRegionStatus>* out) const;

  // Looks up the regions a request's inputs and outputs name: each input's bytes (checked against its region's
  // bounds and its shape) are then read from the region; the outputs to write to shared memory are returned.
  Outcome Resolve(InferRequest* request, std::vector<SharedMemoryOutput>* outputs) const;
  // Writes those outputs of the response into their regions; they then carry the region and no bytes.
  static Outcome WriteOutputs(const std::vector<SharedMemoryOutput>& outputs, InferResponse* response);

  struct Region;

 private:
  // The region's bytes at [offset, offset + byte_size) for `who` ("input 'x'"), checked against its bounds.
  Outcome Find(const std::string& who, const SharedMemoryRef& ref, char** address,
               std::shared_ptr<const void>* hold) const;

  const bool allow_;
  ILogger& logger_;
  std::vector<std::string> pin_backends_;  // available backends with device memory: regions are page-locked for them
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Region>> regions_;
};

// Triton's wording for a server started without client shared memory.
extern const char* const kClientShmDisabled;

}  // namespace kiln::serve
