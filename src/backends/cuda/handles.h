// Library handles for one stream's work: a cuBLASLt handle and a cuDNN handle (created lazily, owned).
#pragma once

#include "backends/cuda/layer.h"

namespace kiln::cuda {

class Handles {
 public:
  Handles() = default;
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  ~Handles();
  // Creates the handles (cuDNN bound to `stream`).
  Status Init(cudaStream_t stream);
  cublasLtContext* cublaslt() const { return lt_; }
  cudnnContext* cudnn() const { return dnn_; }

 private:
  Status Create();  // the handles not created yet
  cublasLtContext* lt_ = nullptr;
  cudnnContext* dnn_ = nullptr;
};

// cuBLASLt/cuDNN library versions (for engine headers and the timing cache key).
int CublasLtVersion();
int CudnnVersion();

}  // namespace kiln::cuda
