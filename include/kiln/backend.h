// kiln — backends: which ones this kiln has and what each takes, and the memory, streams and events of a backend
// whose tensors live in device memory (for binding an ExecutionContext's inputs and outputs).
//
//   auto info = kiln::GetBackendInfo(engine->getBackend());
//   if (info->device_memory) {          // bind device buffers, copy on a stream
//     auto stream = kiln::DeviceStream::create(info->name);
//     auto in = kiln::DeviceMemory::allocate(info->name, bytes);
//     kiln::CopyToDevice(in->data(), host, bytes, *stream);
//     context->setTensorAddress("x", in->data());
//     context->enqueue(stream->get());
//   } else {                            // host memory: bind host pointers, enqueue(nullptr) computes in place
//   }
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln {

class DeviceApi;  // the backend's side (internal)

struct BackendInfo {
  std::string name;         // what --backend, BuilderConfig::setBackend and Engine::getBackend call it
  bool available = false;   // it can run on this machine
  std::string description;  // the device it runs on; where unavailable, why and what to do
  // Tensors live in device memory: bind DeviceMemory addresses, copy with CopyToDevice/CopyToHost, and enqueue
  // runs asynchronously on a DeviceStream. Otherwise they live in host memory: bind host pointers; enqueue(nullptr)
  // computes on the calling thread, and getOutputBuffer holds every output (data-dependent sizes included).
  bool device_memory = false;
  bool reduced_precision = false;  // FP16/BF16 layers, per-layer precisions, I/O types other than the network's
  bool tunes_tactics = false;      // kernel auto-tuning: the timing cache and the timed runs per candidate
  bool graph_capture = false;      // ExecutionContext::setUseCudaGraph captures and replays the launches
  bool concurrent_streams = false; // BuilderConfig::setMaxAuxStreams: layers run on auxiliary streams too
};

// Every backend name kiln knows, this build's or not ("cpu", "cuda").
std::vector<std::string> GetBackendNames();
// What the backend called `name` takes. Fails for a name kiln does not know, and for a backend this build leaves
// out (the error says how to get it).
Result<BackendInfo> GetBackendInfo(const std::string& name);
// The backend a build uses when the config names none: cuda where a GPU is found, else cpu.
std::string GetDefaultBackendName();

// ---- devices ----
// Like CUDA and TensorRT, kiln works on the calling thread's current device (a thread starts on device 0): a build
// times its kernels there, Runtime::deserializeEngine loads the engine there (the engine keeps it: see runtime.h),
// and DeviceMemory, DeviceStream and DeviceEvent are created there. A host backend has one device, 0.
//
//   int n = *kiln::GetDeviceCount("cuda");
//   for (int d = 0; d < n; ++d) {                  // data parallel: one engine per GPU, from the same bytes
//     if (auto st = kiln::SetDevice("cuda", d); !st.ok()) return st;
//     auto engine = runtime.deserializeEngine(bytes.data(), bytes.size());   // engine->getDevice() == d
//     if (!engine.ok()) return engine.status();
//     engines.push_back(std::move(*engine));
//   }
//
// How many devices the backend has: the CUDA devices this process sees on cuda (0 where there is none;
// CUDA_VISIBLE_DEVICES chooses them and numbers them from 0), 1 on a host backend. Fails for a backend name kiln
// does not know, and for one this build leaves out.
Result<int> GetDeviceCount(const std::string& backend);
// The calling thread's current device (cudaGetDevice on cuda); 0 on a host backend.
Result<int> GetDevice(const std::string& backend);
// Makes `device` the calling thread's current device (cudaSetDevice on cuda). Fails, naming the device and the
// count, for a device that does not exist (a host backend has device 0 only).
Status SetDevice(const std::string& backend, int device);

// Memory for a backend's tensors: device memory, or page-locked host memory for asynchronous copies, of the calling
// thread's current device. Owned by one object; freed with it (on that device, from any thread).
class DeviceMemory {
 public:
  enum class Kind { kDevice, kPinnedHost };
  // At least one byte, so data() is never null. Fails on a backend without device memory.
  static Result<DeviceMemory> allocate(const std::string& backend, size_t bytes, Kind kind = Kind::kDevice);
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&& o) noexcept;
  DeviceMemory& operator=(DeviceMemory&& o) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();
  void* data() const { return p_; }
  size_t size() const { return bytes_; }

 private:
  const DeviceApi* api_ = nullptr;
  void* p_ = nullptr;
  size_t bytes_ = 0;
  Kind kind_ = Kind::kDevice;
  int device_ = 0;  // current when it was allocated
};

// A stream of a backend with device memory (a cudaStream_t on cuda; get() is what ExecutionContext::enqueue takes),
// on the calling thread's current device. Its calls (and the copies on it) switch to that device for their
// duration, so any thread may use it.
class DeviceStream {
 public:
  static Result<DeviceStream> create(const std::string& backend);
  DeviceStream() = default;
  DeviceStream(DeviceStream&& o) noexcept;
  DeviceStream& operator=(DeviceStream&& o) noexcept;
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  ~DeviceStream();
  void* get() const { return s_; }
  Status synchronize() const;  // waits until the stream's work is done

 private:
  friend class DeviceEvent;
  friend Status CopyToDevice(void*, const void*, size_t, const DeviceStream&);
  friend Status CopyToHost(void*, const void*, size_t, const DeviceStream&);
  const DeviceApi* api_ = nullptr;
  void* s_ = nullptr;
  int device_ = 0;  // current when it was created
};

// A point in a stream's work, for timing it on the device (the calling thread's current one; record it on a stream
// of the same device).
class DeviceEvent {
 public:
  static Result<DeviceEvent> create(const std::string& backend);
  DeviceEvent() = default;
  DeviceEvent(DeviceEvent&& o) noexcept;
  DeviceEvent& operator=(DeviceEvent&& o) noexcept;
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  ~DeviceEvent();
  Status record(const DeviceStream& stream);
  // Waits for `end`, then the milliseconds between the two recorded events.
  static Result<float> elapsedMs(const DeviceEvent& start, const DeviceEvent& end);

 private:
  const DeviceApi* api_ = nullptr;
  void* e_ = nullptr;
  int device_ = 0;  // current when it was created
};

// Asynchronous copies on `stream` between host memory (pinned for true asynchrony) and device memory.
Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes, const DeviceStream& stream);
Status CopyToHost(void* host_dst, const void* device_src, size_t bytes, const DeviceStream& stream);

// Page-locks host memory the caller allocated (a shared-memory mapping, a large buffer) for the backend called
// `backend`, so that CopyToDevice / CopyToHost from and to it are asynchronous DMA, as with Kind::kPinnedHost
// (cudaHostRegister on cuda, for every GPU). Call UnregisterHostMemory with the same pointer before the memory is
// freed or unmapped. A backend whose tensors live in host memory has nothing to do: both return Ok.
Status RegisterHostMemory(const std::string& backend, void* p, size_t bytes);
Status UnregisterHostMemory(const std::string& backend, void* p);

}  // namespace kiln
