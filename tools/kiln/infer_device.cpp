#include "infer_device.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kiln/error.h"

namespace kiln::cli {

class DeviceRun {
 public:
  DeviceStream stream;
  struct Buffer {
    std::string name;
    DeviceMemory device, host;  // host: pinned
    size_t bytes = 0;
  };
  std::vector<Buffer> in, out;
  DeviceEvent ev[4];
};

namespace {

Result<DeviceRun::Buffer> MakeBuffer(const std::string& backend, const std::string& name, size_t bytes) {
  DeviceRun::Buffer b;
  b.name = name;
  b.bytes = bytes;
  KILN_ASSIGN_OR_RETURN(b.device, DeviceMemory::allocate(backend, bytes));
  KILN_ASSIGN_OR_RETURN(b.host, DeviceMemory::allocate(backend, bytes, DeviceMemory::Kind::kPinnedHost));
  return b;
}

}  // namespace

Result<std::shared_ptr<DeviceRun>> DeviceSetup(ExecutionContext& ctx, const Engine& e,
                                               const std::map<std::string, std::vector<uint8_t>>& inputs,
                                               const std::vector<std::string>& outputs, bool use_cuda_graph) {
  const std::string backend = e.getBackend();
  auto r = std::make_shared<DeviceRun>();
  KILN_ASSIGN_OR_RETURN(r->stream, DeviceStream::create(backend));
  for (auto& ev : r->ev) {
    KILN_ASSIGN_OR_RETURN(ev, DeviceEvent::create(backend));
  }
  for (const auto& [name, bytes] : inputs) {
    KILN_ASSIGN_OR_RETURN(DeviceRun::Buffer b, MakeBuffer(backend, name, bytes.size()));
    if (b.bytes) std::memcpy(b.host.data(), bytes.data(), b.bytes);
    KILN_RETURN_IF_ERROR(CopyToDevice(b.device.data(), b.host.data(), b.bytes, r->stream));
    KILN_RETURN_IF_ERROR(ctx.setTensorAddress(name, b.device.data()));
    r->in.push_back(std::move(b));
  }
  for (const auto& name : outputs) {
    KILN_ASSIGN_OR_RETURN(Dims d, ctx.getTensorShape(name));
    int64_t n = 1;
    for (int64_t x : d) {
      if (x < 0)
        return Err(StatusCode::kUnsupported, "output '{}' has a data-dependent shape {}: not supported on {} yet", name,
                   ShapeToString(d), backend);
      n *= x;
    }
    const size_t bytes = static_cast<size_t>(n) * DataTypeSize(e.getTensorDataType(name));
    KILN_ASSIGN_OR_RETURN(DeviceRun::Buffer b, MakeBuffer(backend, name, bytes));
    KILN_RETURN_IF_ERROR(ctx.setTensorAddress(name, b.device.data()));
    r->out.push_back(std::move(b));
  }
  KILN_RETURN_IF_ERROR(r->stream.synchronize());
  ctx.setUseCudaGraph(use_cuda_graph);
  return r;
}

Status DeviceRunOnce(DeviceRun& r, ExecutionContext& ctx, bool transfers, RunTimes* t) {
  KILN_RETURN_IF_ERROR(r.ev[0].record(r.stream));
  if (transfers)
    for (auto& b : r.in) KILN_RETURN_IF_ERROR(CopyToDevice(b.device.data(), b.host.data(), b.bytes, r.stream));
  KILN_RETURN_IF_ERROR(r.ev[1].record(r.stream));
  const auto a = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(ctx.enqueue(r.stream.get()));
  t->enqueue_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
  KILN_RETURN_IF_ERROR(r.ev[2].record(r.stream));
  if (transfers)
    for (auto& b : r.out) KILN_RETURN_IF_ERROR(CopyToHost(b.host.data(), b.device.data(), b.bytes, r.stream));
  KILN_RETURN_IF_ERROR(r.ev[3].record(r.stream));
  float ms[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(ms[i], DeviceEvent::elapsedMs(r.ev[i], r.ev[i + 1]));
  }
  t->h2d_ms = ms[0];
  t->compute_ms = ms[1];
  t->d2h_ms = ms[2];
  t->latency_ms = ms[0] + ms[1] + ms[2];
  return Status::Ok();
}

Result<std::map<std::string, std::vector<uint8_t>>> DeviceFetchOutputs(DeviceRun& r, ExecutionContext& ctx) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (auto& b : r.out) {
    KILN_RETURN_IF_ERROR(CopyToHost(b.host.data(), b.device.data(), b.bytes, r.stream));
    KILN_RETURN_IF_ERROR(r.stream.synchronize());
    const auto* p = static_cast<const uint8_t*>(b.host.data());
    out[b.name].assign(p, p + b.bytes);
  }
  return out;
}

}  // namespace kiln::cli
