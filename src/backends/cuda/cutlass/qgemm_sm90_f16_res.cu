// QGemm on sm_90a: float16 output with a float16 residual, every tile (qgemm_sm90_impl.cuh).
#include "qgemm_sm90_impl.cuh"

namespace kiln::cuda::cutlass_sm90 {
template struct QGemmImpl<2, 3, 128, 128>;
template struct QGemmImpl<2, 3, 128, 64>;
template struct QGemmImpl<2, 3, 256, 128>;
}  // namespace kiln::cuda::cutlass_sm90
