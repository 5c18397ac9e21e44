// Checks a CUDA runtime call and turns a failure into a Status that carries the statement text.
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

#define KILN_CUDA_STATUS(expr)                                                                            \
  ([&]() -> ::kiln::Status {                                                                              \
    cudaError_t _e = (expr);                                                                              \
    if (_e == cudaSuccess) return ::kiln::Status::Ok();                                                   \
    return ::kiln::Err(::kiln::StatusCode::kCudaError, "{} failed: {} ({}) at {}:{}", #expr,             \
                       cudaGetErrorString(_e), cudaGetErrorName(_e), __FILE__, __LINE__);                 \
  }())

#define KILN_CUDA_RETURN_IF_ERROR(expr) KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(expr))
