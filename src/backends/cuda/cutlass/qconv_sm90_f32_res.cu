// QConv on sm_90a: float32 output, with a residual, every tile (qconv_sm90_impl.cuh).
#include "qconv_sm90_impl.cuh"

namespace kiln::cuda::cutlass_sm90 {
template struct QConvImpl<false, 1, 128, 128, 0>;
template struct QConvImpl<false, 1, 64, 128, 0>;
template struct QConvImpl<false, 1, 128, 64, 4>;
template struct QConvImpl<false, 1, 64, 64, 4>;
}  // namespace kiln::cuda::cutlass_sm90
