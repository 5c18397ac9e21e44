#include "backends/cuda/handles.h"

#include <cublasLt.h>
#include <cudnn.h>

#include "core/error.h"

namespace kiln::cuda {

Handles::~Handles() {
  if (dnn_) cudnnDestroy(dnn_);
  if (lt_) cublasLtDestroy(lt_);
}

Status Handles::Init(cudaStream_t stream) {
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
  cudnnStatus_t s = cudnnSetStream(dnn_, stream);
  if (s != CUDNN_STATUS_SUCCESS)
    return Err(StatusCode::kCudaError, "cudnnSetStream failed: {}", cudnnGetErrorString(s));
  return Status::Ok();
}

int CublasLtVersion() { return static_cast<int>(cublasLtGetVersion()); }
int CudnnVersion() { return static_cast<int>(cudnnGetVersion()); }

}  // namespace kiln::cuda
