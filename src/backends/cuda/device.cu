#include "backends/cuda/capture_guard.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"

namespace kiln::cuda {

std::string DeviceInfo::ToString() const {
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", name, cc_major, cc_minor, sm_count,
                     static_cast<double>(total_memory) / (1024.0 * 1024.0 * 1024.0));
}

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

Result<DeviceInfo> GetDeviceInfo(int index) {
  cudaDeviceProp p{};
  KILN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&p, index));
  DeviceInfo d;
  d.index = index;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.total_memory = p.totalGlobalMem;
  d.sm_count = p.multiProcessorCount;
  KILN_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&d.runtime_version));
  KILN_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&d.driver_version));
  return d;
}

Result<int> CurrentDevice() {
  int device = 0;
  const cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Err(StatusCode::kCudaError, "cudaGetDevice failed: {} (is a CUDA device available?)", cudaGetErrorString(e));
  }
  return device;
}

Status SetDevice(int index) {
  const int n = DeviceCount();
  if (index < 0 || index >= n)
    return Err(StatusCode::kInvalidArgument,
               "CUDA device {} does not exist: this process sees {} CUDA device{}{} (CUDA_VISIBLE_DEVICES chooses "
               "which GPUs are visible, and numbers them from 0)",
               index, n, n == 1 ? "" : "s", n > 1 ? fmt::format(", 0 to {}", n - 1) : std::string());
  return KILN_CUDA_STATUS(cudaSetDevice(index));
}

Result<Stream> Stream::Create() {
  Stream s;
  KILN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.s_, cudaStreamNonBlocking));
  return std::move(s);
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (s_) cudaStreamDestroy(s_);
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}

Status Stream::Synchronize() const { return KILN_CUDA_STATUS(cudaStreamSynchronize(s_)); }

namespace {

// cudaFree / cudaFreeHost synchronize the device: never while another thread captures (capture_guard.h).
void FreeDevice(void* p) {
  NoCaptureScope no_capture;
  cudaFree(p);
}
void FreeHost(void* p) {
  NoCaptureScope no_capture;
  cudaFreeHost(p);
}

}  // namespace

Result<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return std::move(b);
  NoCaptureScope no_capture;
  Status st = KILN_CUDA_STATUS(cudaMalloc(&b.p_, bytes));
  if (!st.ok()) {
    cudaGetLastError();
    return st.WithContext(fmt::format("allocating {} bytes of device memory", bytes));
  }
  b.bytes_ = bytes;
  return std::move(b);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) FreeDevice(p_);
    p_ = o.p_;
    bytes_ = o.bytes_;
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (p_) FreeDevice(p_);
}

Result<DeviceBuffer> UploadToDevice(const void* host, size_t bytes, const std::string& name) {
  Result<DeviceBuffer> b = DeviceBuffer::Allocate(std::max<size_t>(bytes, 1));
  const Status st = !b.ok() || bytes == 0 ? b.status()
                                          : KILN_CUDA_STATUS(cudaMemcpy(b->get(), host, bytes, cudaMemcpyHostToDevice));
  if (!st.ok()) return st.WithContext(fmt::format("uploading '{}' ({} bytes)", name, bytes));
  return b;
}

Result<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer b;
  if (bytes == 0) return std::move(b);
  NoCaptureScope no_capture;
  Status st = KILN_CUDA_STATUS(cudaMallocHost(&b.p_, bytes));
  if (!st.ok()) {
    cudaGetLastError();
    return st.WithContext(fmt::format("allocating {} bytes of pinned host memory", bytes));
  }
  b.bytes_ = bytes;
  return std::move(b);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) FreeHost(p_);
    p_ = o.p_;
    bytes_ = o.bytes_;
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (p_) FreeHost(p_);
}

Status CopyToDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  return KILN_CUDA_STATUS(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

Status CopyToHost(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  return KILN_CUDA_STATUS(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
}

namespace {
__global__ void AxpyKernel(float alpha, const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = alpha * x[i] + y[i];
}
}  // namespace

Status Axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  AxpyKernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(alpha, x, y, n);
  return KILN_CUDA_STATUS(cudaGetLastError());
}

}  // namespace kiln::cuda
