// QGemm on sm_90a: int8 output, with an int8 residual, every tile (qgemm_sm90_impl.cuh).
#include "qgemm_sm90_impl.cuh"

namespace kiln::cuda::cutlass_sm90 {
template struct QGemmImpl<true, 2, 128, 128>;
template struct QGemmImpl<true, 2, 128, 64>;
template struct QGemmImpl<true, 2, 256, 128>;
}  // namespace kiln::cuda::cutlass_sm90
