// ExecutionContext on the CUDA backend: the engine's layers and weights are created on the device with the first
// context; each context owns its arena and launch plans (backends/cuda/engine_exec.h).
#include "core/error.h"
#include "runtime/engine_impl.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/capture_guard.h"
#include "backends/cuda/device.h"
#include "backends/cuda/engine_exec.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_CUDA

Result<const cuda::GpuEngine*> EngineImpl::Gpu() const {
  std::lock_guard<std::mutex> lock(gpu_mu);
  if (gpu) return gpu.get();
  if (cuda::DeviceCount() == 0)
    return Err(StatusCode::kUnsupported, "this engine was built for the cuda backend but no CUDA device is available");
  // Layers are created for the shapes they were tuned at: the first profile's opt shapes.
  std::map<std::string, Dims> opt;
  for (const auto& [name, v] : profiles[0]) opt[name] = v[1];
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> tuned, InferAtShapes(*graph, opt));
  // Uploads, cuDNN plans and a device synchronize: not while another context captures (capture_guard.h).
  cuda::NoCaptureScope no_capture;
  auto g = cuda::GpuEngine::Create(*graph, *tuned, tactics, allow_tf32);
  if (!g.ok()) return g.status();
  gpu = std::move(*g);
  return gpu.get();
}

Status InitCudaContext(ExecutionContextImpl& c) {
  KILN_ASSIGN_OR_RETURN(const cuda::GpuEngine* g, c.engine.Gpu());
  c.gpu = std::make_shared<cuda::GpuContext>(*g, c.engine.plan);
  return Status::Ok();
}

Status EnqueueCuda(ExecutionContextImpl& c, void* stream) {
  if (!c.gpu) KILN_RETURN_IF_ERROR(InitCudaContext(c));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> shaped, c.ShapedGraph());  // checks every input has a shape
  c.gpu->set_use_cuda_graph(c.use_cuda_graph);
  return c.gpu->Enqueue(static_cast<cudaStream_t>(stream), shaped, c.shape_key(), c.addresses, c.profiler);
}

#else

Result<const cuda::GpuEngine*> EngineImpl::Gpu() const {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA: the engine's cuda backend is unavailable");
}
Status InitCudaContext(ExecutionContextImpl&) {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA: the engine's cuda backend is unavailable");
}
Status EnqueueCuda(ExecutionContextImpl&, void*) {
  return Err(StatusCode::kUnsupported, "this kiln was built without CUDA: the engine's cuda backend is unavailable");
}

#endif

void ExecutionContext::setUseCudaGraph(bool on) { impl_->use_cuda_graph = on; }

}  // namespace kiln
