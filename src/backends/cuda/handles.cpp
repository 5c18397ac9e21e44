#include "backends/cuda/handles.h"

#include <cublasLt.h>
#include <cudnn.h>

#include "backends/cuda/capture_guard.h"
#include "core/error.h"

namespace kiln::cuda {

Handles::~Handles() {
  NoCaptureScope no_capture;  // creating and destroying handles may synchronize the device
  if (dnn_) cudnnDestroy(dnn_);
  if (lt_) cublasLtDestroy(lt_);
}

Status Handles::Init(cudaStream_t stream) {
  if (!lt_ || !dnn_) {
    NoCaptureScope no_capture;
    KILN_RETURN_IF_ERROR(Create());
  }
  cudnnStatus_t s = cudnnSetStream(dnn_, stream);
  if (s != CUDNN_STATUS_SUCCESS)
    return Err(StatusCode::kCudaError, "cudnnSetStream failed: {}", cudnnGetErrorString(s));
  return Status::Ok();
}

Status Handles::Create() {
  if (!lt_) {
    cublasStatus_t s = cublasLtCreate(&lt_);
    if (s != CUBLAS_STATUS_SUCCESS)
      return Err(StatusCode::kCudaError, "cublasLtCreate failed: {} ({})", cublasLtGetStatusString(s),
                 cublasLtGetStatusName(s));
  }
  if (!dnn_) {
    cudnnStatus_t s = cudnnCreate(&dnn_);
    if (s != CUDNN_STATUS_SUCCESS)
      return Err(StatusCode::kCudaError,
                 "cudnnCreate failed: {} (is cuDNN 9 on LD_LIBRARY_PATH? kiln was built with cuDNN {}.{})",
                 cudnnGetErrorString(s), CUDNN_MAJOR, CUDNN_MINOR);
  }
  return Status::Ok();
}

int CublasLtVersion() { return static_cast<int>(cublasLtGetVersion()); }
int CudnnVersion() { return static_cast<int>(cudnnGetVersion()); }

}  // namespace kiln::cuda
