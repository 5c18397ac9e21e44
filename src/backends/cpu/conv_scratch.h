// How much scratch memory the CPU convolution kernels use for their im2col / col2im matrices (elements). The
// kernels process input channels (Conv) or output channels (ConvTranspose) in chunks that fit. Tests lower them to
// reach the chunked paths with small shapes.
#pragma once

#include <atomic>
#include <cstdint>

namespace kiln::cpu {

struct ConvScratchLimits {
  std::atomic<int64_t> conv_col{int64_t{1} << 26};
  std::atomic<int64_t> transpose_col{int64_t{1} << 28};
};
ConvScratchLimits& ConvScratch();

}  // namespace kiln::cpu
