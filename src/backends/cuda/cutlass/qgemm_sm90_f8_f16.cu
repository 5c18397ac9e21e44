// QGemm on sm_90a, FP8 (float8e4m3fn X and W, float32 sums):
// float16 output, no residual, every tile (qgemm_sm90_impl.cuh).
#include "qgemm_sm90_impl.cuh"

namespace kiln::cuda::cutlass_sm90 {
template struct QGemmImpl<2, 0, 128, 128, 0, true>;
template struct QGemmImpl<2, 0, 128, 64, 0, true>;
template struct QGemmImpl<2, 0, 256, 128, 0, true>;
}  // namespace kiln::cuda::cutlass_sm90
