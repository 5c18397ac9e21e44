// QGemm on sm_90a: int8 output with GELU, no residual, every tile (qgemm_sm90_impl.cuh).
#include "qgemm_sm90_impl.cuh"

namespace kiln::cuda::cutlass_sm90 {
template struct QGemmImpl<true, 0, 128, 128, 1>;
template struct QGemmImpl<true, 0, 128, 64, 1>;
template struct QGemmImpl<true, 0, 256, 128, 1>;
}  // namespace kiln::cuda::cutlass_sm90
