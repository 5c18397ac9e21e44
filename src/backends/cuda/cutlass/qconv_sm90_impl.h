// The QConv kernels' instances (one per output type, residual and tile), declared for the dispatcher
// (qconv_sm90.cpp) and defined by qconv_sm90_impl.cuh in one translation unit per output type and residual.
#pragma once

#include "qconv_sm90.h"

namespace kiln::cuda::cutlass_sm90 {

// kStages 0: as many pipeline stages as shared memory holds (one CTA per SM); otherwise that many, so that
// several CTAs share an SM and one's epilogue overlaps another's main loop (the kernel is not persistent).
template <bool kInt8Out, int kResidual, int kTileN, int kTileK, int kStages>
struct QConvImpl {
  static const char* Unsupported(const QConvProblem& p);
  static size_t WorkspaceBytes(const QConvProblem& p);
  static const char* Run(const QConvProblem& p, const QConvOperands& o, void* workspace, cudaStream_t stream);
};

}  // namespace kiln::cuda::cutlass_sm90
