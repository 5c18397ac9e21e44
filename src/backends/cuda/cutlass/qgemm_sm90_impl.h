// The QGemm kernels' instances (output type x residual x tile), declared for the dispatcher (qgemm_sm90.cu) and
// defined by qgemm_sm90_impl.cuh in one translation unit per output type and residual.
#pragma once

#include "qgemm_sm90.h"

namespace kiln::cuda::cutlass_sm90 {

// kOut, kResidual, kAct: qepilogue_sm90.cuh's (kOut 0 float32, 1 int8, 2 float16, 3 float8e4m3fn). kTileM 256: the
// cooperative schedule (both consumer warpgroups on one tile); 128: ping-pong. kFp8: X and W float8e4m3fn, summed by
// the tensor cores into their float32 accumulator (fast accumulation), else int8 with int32 sums.
template <int kOut, int kResidual, int kTileM, int kTileN, int kAct = 0, bool kFp8 = false>
struct QGemmImpl {
  static const char* Unsupported(const QGemmProblem& p);
  static size_t WorkspaceBytes(const QGemmProblem& p);
  static const char* Run(const QGemmProblem& p, const QGemmOperands& o, void* workspace, cudaStream_t stream);
};

}  // namespace kiln::cuda::cutlass_sm90
