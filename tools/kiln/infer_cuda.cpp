#include "kiln/infer_cuda.h"  // tools/kiln/infer_cuda.h

#include <chrono>
#include <cstring>

#include "core/dims.h"
#include "core/dtype.h"
#include "core/error.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#endif

namespace kiln::cli {

#ifdef KILN_HAVE_CUDA

class CudaRun {
 public:
  cuda::Stream stream;
  struct Buffer {
    std::string name;
    cuda::DeviceBuffer device;
    cuda::PinnedBuffer host;
    size_t bytes = 0;
  };
  std::vector<Buffer> in, out;
  cudaEvent_t ev[4] = {nullptr, nullptr, nullptr, nullptr};
  ~CudaRun() {
    for (auto e : ev)
      if (e) cudaEventDestroy(e);
  }
};

Result<std::shared_ptr<CudaRun>> CudaSetup(ExecutionContext& ctx, const Engine& e,
                                           const std::map<std::string, std::vector<uint8_t>>& inputs,
                                           const std::vector<std::string>& outputs, bool use_cuda_graph) {
  auto r = std::make_shared<CudaRun>();
  KILN_ASSIGN_OR_RETURN(r->stream, cuda::Stream::Create());
  for (auto& ev : r->ev) KILN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&ev));
  for (const auto& [name, bytes] : inputs) {
    CudaRun::Buffer b;
    b.name = name;
    b.bytes = bytes.size();
    KILN_ASSIGN_OR_RETURN(b.device, cuda::DeviceBuffer::Allocate(std::max<size_t>(b.bytes, 1)));
    KILN_ASSIGN_OR_RETURN(b.host, cuda::PinnedBuffer::Allocate(std::max<size_t>(b.bytes, 1)));
    if (b.bytes) std::memcpy(b.host.get(), bytes.data(), b.bytes);
    KILN_RETURN_IF_ERROR(cuda::CopyToDevice(b.device.get(), b.host.get(), b.bytes, r->stream.get()));
    KILN_RETURN_IF_ERROR(ctx.setTensorAddress(name, b.device.get()));
    r->in.push_back(std::move(b));
  }
  for (const auto& name : outputs) {
    KILN_ASSIGN_OR_RETURN(Dims d, ctx.getTensorShape(name));
    int64_t n = 1;
    for (int64_t x : d) {
      if (x < 0)
        return Err(StatusCode::kUnsupported, "output '{}' has a data-dependent shape {}: not supported on cuda yet",
                   name, ShapeToString(d));
      n *= x;
    }
    CudaRun::Buffer b;
    b.name = name;
    b.bytes = static_cast<size_t>(n) * DataTypeSize(e.getTensorDataType(name));
    KILN_ASSIGN_OR_RETURN(b.device, cuda::DeviceBuffer::Allocate(std::max<size_t>(b.bytes, 1)));
    KILN_ASSIGN_OR_RETURN(b.host, cuda::PinnedBuffer::Allocate(std::max<size_t>(b.bytes, 1)));
    KILN_RETURN_IF_ERROR(ctx.setTensorAddress(name, b.device.get()));
    r->out.push_back(std::move(b));
  }
  KILN_RETURN_IF_ERROR(r->stream.Synchronize());
  ctx.setUseCudaGraph(use_cuda_graph);
  return r;
}

Status CudaRunOnce(CudaRun& r, ExecutionContext& ctx, bool transfers, RunTimes* t) {
  cudaStream_t s = r.stream.get();
  KILN_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.ev[0], s));
  if (transfers)
    for (auto& b : r.in) KILN_RETURN_IF_ERROR(cuda::CopyToDevice(b.device.get(), b.host.get(), b.bytes, s));
  KILN_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.ev[1], s));
  const auto a = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(ctx.enqueue(s));
  t->enqueue_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
  KILN_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.ev[2], s));
  if (transfers)
    for (auto& b : r.out) KILN_RETURN_IF_ERROR(cuda::CopyToHost(b.host.get(), b.device.get(), b.bytes, s));
  KILN_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.ev[3], s));
  KILN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(r.ev[3]));
  float ms[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) KILN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms[i], r.ev[i], r.ev[i + 1]));
  t->h2d_ms = ms[0];
  t->compute_ms = ms[1];
  t->d2h_ms = ms[2];
  t->latency_ms = ms[0] + ms[1] + ms[2];
  return Status::Ok();
}

Result<std::map<std::string, std::vector<uint8_t>>> CudaFetchOutputs(CudaRun& r, ExecutionContext& ctx) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (auto& b : r.out) {
    KILN_RETURN_IF_ERROR(cuda::CopyToHost(b.host.get(), b.device.get(), b.bytes, r.stream.get()));
    KILN_RETURN_IF_ERROR(r.stream.Synchronize());
    const auto* p = static_cast<const uint8_t*>(b.host.get());
    out[b.name].assign(p, p + b.bytes);
  }
  return out;
}

#else

class CudaRun {};
Result<std::shared_ptr<CudaRun>> CudaSetup(ExecutionContext&, const Engine&,
                                           const std::map<std::string, std::vector<uint8_t>>&,
                                           const std::vector<std::string>&, bool) {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA: cuda engines cannot run");
}
Status CudaRunOnce(CudaRun&, ExecutionContext&, bool, RunTimes*) {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA");
}
Result<std::map<std::string, std::vector<uint8_t>>> CudaFetchOutputs(CudaRun&, ExecutionContext&) {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA");
}

#endif

}  // namespace kiln::cli
