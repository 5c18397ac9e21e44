// The backend factory (see factory.h).
#include "backends/factory.h"

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/executor.h"
#include "core/error.h"
#ifdef KILN_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace kiln {

namespace {

constexpr std::string_view kCpu = "cpu";
constexpr std::string_view kCuda = "cuda";

}  // namespace

Result<const Backend*> FindBackend(std::string_view name) {
  if (name == kCpu) return &cpu::CpuBackend();
#ifdef KILN_HAVE_CUDA
  if (name == kCuda) return &cuda::CudaBackend();
#else
  if (name == kCuda)
    return Err(StatusCode::kUnsupported,
               "this kiln was built without CUDA, so it has no cuda backend: rebuild kiln where nvcc is found, or use "
               "the cpu reference backend (--backend=cpu)");
#endif
  return Err(StatusCode::kInvalidArgument, "unknown backend '{}': kiln has '{}' and '{}'", name, kCpu, kCuda);
}

const Backend& DefaultBackend() {
#ifdef KILN_HAVE_CUDA
  if (cuda::CudaBackend().CheckAvailable().ok()) return cuda::CudaBackend();
#endif
  return cpu::CpuBackend();
}

const Backend& ReferenceBackend() { return cpu::CpuBackend(); }

std::vector<const Backend*> AvailableBackends() {
  std::vector<const Backend*> r;
#ifdef KILN_HAVE_CUDA
  if (cuda::CudaBackend().CheckAvailable().ok()) r.push_back(&cuda::CudaBackend());
#endif
  r.push_back(&cpu::CpuBackend());
  return r;
}

ConstEvaluator ConstantFolder() { return cpu::MakeConstEvaluator(); }

std::vector<std::string> BackendNames() { return {std::string(kCpu), std::string(kCuda)}; }

}  // namespace kiln
