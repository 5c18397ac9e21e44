// The public backend API (include/kiln/backend.h): backend information and device memory, streams and events, all
// answered by the backends themselves (backends/backend.h) through the factory.
#include "kiln/backend.h"

#include <utility>

#include "backends/factory.h"
#include "core/error.h"

namespace kiln {

namespace {

// The device API of the backend called `name`, or an error saying it keeps tensors in host memory.
Result<const DeviceApi*> DeviceOf(const std::string& name) {
  KILN_ASSIGN_OR_RETURN(const Backend* b, FindBackend(name));
  if (const DeviceApi* api = b->Device()) return api;
  return Err(StatusCode::kInvalidArgument,
             "the {} backend keeps tensors in host memory: bind host pointers with setTensorAddress (it has no device "
             "memory, streams or events)",
             name);
}

}  // namespace

std::vector<std::string> GetBackendNames() { return BackendNames(); }

// ---- devices ----

Result<int> GetDeviceCount(const std::string& backend) {
  KILN_ASSIGN_OR_RETURN(const Backend* b, FindBackend(backend));
  const DeviceApi* api = b->Device();
  return api ? api->DeviceCount() : 1;
}

Result<int> GetDevice(const std::string& backend) {
  KILN_ASSIGN_OR_RETURN(const Backend* b, FindBackend(backend));
  const DeviceApi* api = b->Device();
  if (!api) return 0;
  return api->CurrentDevice();
}

Status SetDevice(const std::string& backend, int device) {
  KILN_ASSIGN_OR_RETURN(const Backend* b, FindBackend(backend));
  if (const DeviceApi* api = b->Device()) return api->SetCurrentDevice(device);
  if (device != 0)
    return Err(StatusCode::kInvalidArgument,
               "device {} does not exist on the {} backend: it runs on the host, which is its one device (0)", device,
               backend);
  return Status::Ok();
}

Result<BackendInfo> GetBackendInfo(const std::string& name) {
  KILN_ASSIGN_OR_RETURN(const Backend* b, FindBackend(name));
  BackendInfo info;
  info.name = std::string(b->Name());
  const Status available = b->CheckAvailable();
  info.available = available.ok();
  info.description = available.ok() ? b->Description() : available.message();
  info.device_memory = b->Device() != nullptr;
  const BackendTraits t = b->Traits();
  info.reduced_precision = t.reduced_precision;
  info.tunes_tactics = t.tunes_tactics;
  info.graph_capture = t.graph_capture;
  info.concurrent_streams = t.concurrent_streams;
  return info;
}

std::string GetDefaultBackendName() { return std::string(DefaultBackend().Name()); }

// ---- DeviceMemory ----

Result<DeviceMemory> DeviceMemory::allocate(const std::string& backend, size_t bytes, Kind kind) {
  KILN_ASSIGN_OR_RETURN(const DeviceApi* api, DeviceOf(backend));
  const auto memory = kind == Kind::kDevice ? DeviceApi::Memory::kDevice : DeviceApi::Memory::kPinnedHost;
  KILN_ASSIGN_OR_RETURN(const int device, api->CurrentDevice());
  KILN_ASSIGN_OR_RETURN(void* p, api->Allocate(bytes, memory));
  DeviceMemory m;
  m.api_ = api;
  m.p_ = p;
  m.bytes_ = bytes;
  m.kind_ = kind;
  m.device_ = device;
  return m;
}

DeviceMemory::DeviceMemory(DeviceMemory&& o) noexcept
    : api_(o.api_),
      p_(std::exchange(o.p_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      kind_(o.kind_),
      device_(o.device_) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& o) noexcept {
  if (this != &o) {
    DeviceMemory old(std::move(*this));  // frees what this one held
    api_ = o.api_;
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    kind_ = o.kind_;
    device_ = o.device_;
  }
  return *this;
}

DeviceMemory::~DeviceMemory() {
  if (p_) {
    ScopedDevice on(api_, device_);  // freed on its own device, whichever thread drops it
    api_->Free(p_, kind_ == Kind::kDevice ? DeviceApi::Memory::kDevice : DeviceApi::Memory::kPinnedHost);
  }
  p_ = nullptr;
}

// ---- DeviceStream ----

Result<DeviceStream> DeviceStream::create(const std::string& backend) {
  KILN_ASSIGN_OR_RETURN(const DeviceApi* api, DeviceOf(backend));
  DeviceStream s;
  s.api_ = api;
  KILN_ASSIGN_OR_RETURN(s.device_, api->CurrentDevice());
  KILN_ASSIGN_OR_RETURN(s.s_, api->CreateStream());
  return s;
}

DeviceStream::DeviceStream(DeviceStream&& o) noexcept
    : api_(o.api_), s_(std::exchange(o.s_, nullptr)), device_(o.device_) {}

DeviceStream& DeviceStream::operator=(DeviceStream&& o) noexcept {
  if (this != &o) {
    DeviceStream old(std::move(*this));  // frees what this one held
    api_ = o.api_;
    s_ = std::exchange(o.s_, nullptr);
    device_ = o.device_;
  }
  return *this;
}

DeviceStream::~DeviceStream() {
  if (s_) {
    ScopedDevice on(api_, device_);
    api_->DestroyStream(s_);
  }
  s_ = nullptr;
}

Status DeviceStream::synchronize() const {
  if (!api_) return Err(StatusCode::kInvalidArgument, "synchronize: the stream was not created (DeviceStream::create)");
  ScopedDevice on(api_, device_);
  KILN_RETURN_IF_ERROR(on.status());
  return api_->Synchronize(s_);
}

// ---- DeviceEvent ----

Result<DeviceEvent> DeviceEvent::create(const std::string& backend) {
  KILN_ASSIGN_OR_RETURN(const DeviceApi* api, DeviceOf(backend));
  DeviceEvent e;
  e.api_ = api;
  KILN_ASSIGN_OR_RETURN(e.device_, api->CurrentDevice());
  KILN_ASSIGN_OR_RETURN(e.e_, api->CreateEvent());
  return e;
}

DeviceEvent::DeviceEvent(DeviceEvent&& o) noexcept
    : api_(o.api_), e_(std::exchange(o.e_, nullptr)), device_(o.device_) {}

DeviceEvent& DeviceEvent::operator=(DeviceEvent&& o) noexcept {
  if (this != &o) {
    DeviceEvent old(std::move(*this));  // frees what this one held
    api_ = o.api_;
    e_ = std::exchange(o.e_, nullptr);
    device_ = o.device_;
  }
  return *this;
}

DeviceEvent::~DeviceEvent() {
  if (e_) {
    ScopedDevice on(api_, device_);
    api_->DestroyEvent(e_);
  }
  e_ = nullptr;
}

Status DeviceEvent::record(const DeviceStream& stream) {
  if (!e_ || !stream.api_)
    return Err(StatusCode::kInvalidArgument, "record: the event or the stream was not created (create() first)");
  if (stream.device_ != device_)
    return Err(StatusCode::kInvalidArgument,
               "record: the event was created on device {} and the stream on device {}: create the event with the "
               "stream's device current (SetDevice)",
               device_, stream.device_);
  ScopedDevice on(api_, device_);
  KILN_RETURN_IF_ERROR(on.status());
  return api_->RecordEvent(e_, stream.s_);
}

Result<float> DeviceEvent::elapsedMs(const DeviceEvent& start, const DeviceEvent& end) {
  if (!start.e_ || !end.e_)
    return Err(StatusCode::kInvalidArgument, "elapsedMs: an event was not created (DeviceEvent::create)");
  ScopedDevice on(start.api_, start.device_);
  KILN_RETURN_IF_ERROR(on.status());
  return start.api_->ElapsedMs(start.e_, end.e_);
}

// ---- copies ----
// On the stream's device, whichever device the calling thread has current.

Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes, const DeviceStream& stream) {
  if (!stream.api_) return Err(StatusCode::kInvalidArgument, "CopyToDevice: the stream was not created");
  ScopedDevice on(stream.api_, stream.device_);
  KILN_RETURN_IF_ERROR(on.status());
  return stream.api_->Copy(device_dst, host_src, bytes, DeviceApi::Direction::kToDevice, stream.s_);
}

Status CopyToHost(void* host_dst, const void* device_src, size_t bytes, const DeviceStream& stream) {
  if (!stream.api_) return Err(StatusCode::kInvalidArgument, "CopyToHost: the stream was not created");
  ScopedDevice on(stream.api_, stream.device_);
  KILN_RETURN_IF_ERROR(on.status());
  return stream.api_->Copy(host_dst, device_src, bytes, DeviceApi::Direction::kToHost, stream.s_);
}

// ---- page-locking host memory ----

Status RegisterHostMemory(const std::string& backend, void* p, size_t bytes) {
  KILN_ASSIGN_OR_RETURN(const Backend* b, FindBackend(backend));
  const DeviceApi* api = b->Device();
  if (!api) return Status::Ok();  // host memory is where the backend's tensors live already
  if (!p || bytes == 0)
    return Err(StatusCode::kInvalidArgument, "RegisterHostMemory: no memory given (pointer {}, {} bytes)", p, bytes);
  return api->RegisterHost(p, bytes);
}

Status UnregisterHostMemory(const std::string& backend, void* p) {
  KILN_ASSIGN_OR_RETURN(const Backend* b, FindBackend(backend));
  const DeviceApi* api = b->Device();
  if (!api || !p) return Status::Ok();
  return api->UnregisterHost(p);
}

}  // namespace kiln
