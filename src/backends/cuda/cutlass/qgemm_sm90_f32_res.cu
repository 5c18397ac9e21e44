// QGemm on sm_90a: float32 output, with a residual, every tile (qgemm_sm90_impl.cuh).
#include "qgemm_sm90_impl.cuh"

namespace kiln::cuda::cutlass_sm90 {
template struct QGemmImpl<false, 1, 128, 128>;
template struct QGemmImpl<false, 1, 128, 64>;
template struct QGemmImpl<false, 1, 256, 128>;
}  // namespace kiln::cuda::cutlass_sm90
