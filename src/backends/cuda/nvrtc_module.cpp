// NVRTC compilation and the module cache (nvrtc_module.h).
#include "backends/cuda/nvrtc_module.h"

#include <cuda_runtime.h>
#include <nvrtc.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/error.h"

namespace kiln::cuda {
namespace {

struct ModuleCache {
  std::mutex mu;
  std::map<std::pair<int, std::string>, cudaLibrary_t> modules;  // (device, source) -> library (never unloaded)
};
ModuleCache& Cache() {
  static ModuleCache* c = new ModuleCache;  // lives for the process: modules outlive every layer
  return *c;
}

std::string RuntimeError(cudaError_t r) {
  return fmt::format("{} ({})", cudaGetErrorString(r), cudaGetErrorName(r));
}

// The newest real architecture NVRTC can build for `sm`, or 0 when only PTX of an older one will do.
int NvrtcArchFor(int sm, int* ptx_arch) {
  int n = 0;
  *ptx_arch = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return sm;
  std::vector<int> archs(static_cast<size_t>(n));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return sm;
  int best_below = 0;
  for (int a : archs) {
    if (a == sm) return sm;
    if (a < sm && a > best_below) best_below = a;
  }
  *ptx_arch = best_below;  // a newer device than this NVRTC knows: PTX for the newest it knows, JIT by the driver
  return 0;
}

struct Output {
  nvrtcResult result = NVRTC_SUCCESS;
  const char* step = "";
  std::string log, image;
};

Output RunNvrtc(const std::string& source, const std::vector<const char*>& opts, bool cubin) {
  Output o;
  nvrtcProgram prog;
  o.step = "nvrtcCreateProgram";
  o.result = nvrtcCreateProgram(&prog, source.c_str(), "kiln_fused.cu", 0, nullptr, nullptr);
  if (o.result != NVRTC_SUCCESS) return o;
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  o.step = "nvrtcCompileProgram";
  o.result = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    o.log.resize(log_size);
    nvrtcGetProgramLog(prog, o.log.data());
    while (!o.log.empty() && (o.log.back() == '\0' || o.log.back() == '\n')) o.log.pop_back();
  }
  if (o.result != NVRTC_SUCCESS) return o;
  o.step = "reading NVRTC's output";
  size_t size = 0;
  o.result = cubin ? nvrtcGetCUBINSize(prog, &size) : nvrtcGetPTXSize(prog, &size);
  if (o.result != NVRTC_SUCCESS) return o;
  o.image.resize(size);
  o.result = cubin ? nvrtcGetCUBIN(prog, o.image.data()) : nvrtcGetPTX(prog, o.image.data());
  return o;
}

}  // namespace

Result<std::string> CompileNvrtcImage(const std::string& where, const std::string& source, int sm) {
  int ptx_arch = 0;
  const int real = NvrtcArchFor(sm, &ptx_arch);
  const std::string arch = real ? fmt::format("--gpu-architecture=sm_{}", real)
                                : fmt::format("--gpu-architecture=compute_{}", ptx_arch);
  // --minimal (NVRTC 12.4+) skips implicit runtime headers the generated code does not use (~15% faster).
  std::vector<const char*> opts = {arch.c_str(), "--std=c++17", "--minimal"};
  Output o = RunNvrtc(source, opts, real != 0);
  if (o.result == NVRTC_ERROR_INVALID_OPTION) {
    opts.pop_back();
    o = RunNvrtc(source, opts, real != 0);
  }
  if (o.result == NVRTC_SUCCESS) return std::move(o.image);
  return Err(StatusCode::kInternal, "{}: NVRTC could not compile the generated kernel ({}: {}, {}): {}\n--- source ---\n{}",
             where, o.step, nvrtcGetErrorString(o.result), arch, o.log, source);
}

Result<int> CurrentDeviceSm() {
  int dev = 0, major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaFree(nullptr);  // creates the primary context and makes it current
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e != cudaSuccess)
    return Err(StatusCode::kCudaError, "querying the CUDA device failed: {} ({})", cudaGetErrorString(e),
               cudaGetErrorName(e));
  return major * 10 + minor;
}

Result<NvrtcKernel> CompileNvrtcKernel(const std::string& where, const std::string& source, const std::string& kernel) {
  NvrtcKernel out;
  KILN_ASSIGN_OR_RETURN(out.sm, CurrentDeviceSm());
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return Err(StatusCode::kCudaError, "{}: cudaGetDevice failed", where);
  ModuleCache& cache = Cache();
  const auto key = std::make_pair(dev, source);
  cudaLibrary_t mod = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.modules.find(key);
    if (it != cache.modules.end()) {
      mod = it->second;
      out.cached = true;
    }
  }
  if (!mod) {
    const auto t0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(std::string image, CompileNvrtcImage(where, source, out.sm));
    // The runtime API's library loading: kiln never links the driver library, so it starts where there is none.
    cudaError_t r = cudaLibraryLoadData(&mod, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (r != cudaSuccess)
      return Err(StatusCode::kCudaError, "{}: loading the compiled kernel failed: {}", where, RuntimeError(r));
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(cache.mu);
    auto [it, inserted] = cache.modules.emplace(key, mod);
    if (!inserted) {  // another thread compiled the same source meanwhile: keep one
      cudaLibraryUnload(mod);
      mod = it->second;
    }
  }
  cudaKernel_t fn = nullptr;
  cudaError_t r = cudaLibraryGetKernel(&fn, mod, kernel.c_str());
  if (r != cudaSuccess)
    return Err(StatusCode::kInternal, "{}: the compiled module has no kernel '{}': {}", where, kernel, RuntimeError(r));
  out.fn = reinterpret_cast<const void*>(fn);
  return out;
}

Status LaunchNvrtcKernel(const void* fn, unsigned grid, unsigned block, cudaStream_t stream, void** args) {
  const cudaError_t r = cudaLaunchKernel(fn, dim3(grid), dim3(block), args, 0, stream);
  if (r == cudaSuccess) return Status::Ok();
  return Err(StatusCode::kCudaError, "cudaLaunchKernel of a generated kernel failed: {}", RuntimeError(r));
}

}  // namespace kiln::cuda
