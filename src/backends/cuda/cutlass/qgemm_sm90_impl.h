// The QGemm kernels' instances (output type x residual x tile), declared for the dispatcher (qgemm_sm90.cu) and
// defined by qgemm_sm90_impl.cuh in one translation unit per output type and residual.
#pragma once

#include "qgemm_sm90.h"

namespace kiln::cuda::cutlass_sm90 {

// kTileM 256: the cooperative schedule (both consumer warpgroups on one tile); 128: ping-pong. kAct: 0 the clamp,
// 1 GELU (qepilogue_sm90.cuh).
template <bool kInt8Out, int kResidual, int kTileM, int kTileN, int kAct = 0>
struct QGemmImpl {
  static const char* Unsupported(const QGemmProblem& p);
  static size_t WorkspaceBytes(const QGemmProblem& p);
  static const char* Run(const QGemmProblem& p, const QGemmOperands& o, void* workspace, cudaStream_t stream);
};

}  // namespace kiln::cuda::cutlass_sm90
