// QConv on sm_90a: int8 output, every tile (qconv_sm90_impl.cuh).
#include "qconv_sm90_impl.cuh"

namespace kiln::cuda::cutlass_sm90 {
template struct QConvImpl<true, 0, 128, 128, 0>;
template struct QConvImpl<true, 0, 64, 128, 0>;
template struct QConvImpl<true, 0, 128, 64, 4>;
template struct QConvImpl<true, 0, 64, 64, 4>;
}  // namespace kiln::cuda::cutlass_sm90
