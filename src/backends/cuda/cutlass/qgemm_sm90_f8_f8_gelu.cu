// QGemm on sm_90a, FP8 (float8e4m3fn X and W, float32 sums):
// float8e4m3fn output with GELU, no residual, every tile (qgemm_sm90_impl.cuh).
#include "qgemm_sm90_impl.cuh"

namespace kiln::cuda::cutlass_sm90 {
template struct QGemmImpl<3, 0, 128, 128, 1, true>;
template struct QGemmImpl<3, 0, 128, 64, 1, true>;
template struct QGemmImpl<3, 0, 256, 128, 1, true>;
}  // namespace kiln::cuda::cutlass_sm90
