// Small CUDA kernels around the cuDNN convolutions (conv_kernels.cu): an N-D window copy (explicit zero padding
// of a conv input, cropping of a transposed-conv result) and the bias + activation epilogue where cuDNN does
// not fuse it. Plain launchers: no IR, dtype codes as in kernel_util.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

// out[n, c, o...] = in[n, c, (o + offset)...] where every coordinate lies inside `in`, else 0.
// Dims are [N, C, spatial...] (rank 3..8); offsets of dims 0 and 1 must be 0 and their sizes equal.
struct WindowCopyParams {
  int rank = 0;
  int64_t out_dims[8] = {};
  int64_t in_dims[8] = {};
  int64_t offset[8] = {};  // may be negative
};
// elem_bytes: 2 or 4 (the copy is dtype-agnostic).
cudaError_t LaunchWindowCopy(const void* in, void* out, int elem_bytes, const WindowCopyParams& p,
                             cudaStream_t stream);

// Activations of the conv epilogue (the same set as kiln.FusedConv's kiln_activation).
enum class ConvAct : int { kNone, kRelu, kLeakyRelu, kSigmoid, kTanh, kClip, kHardSigmoid, kSiLU, kGelu, kGeluTanh };

struct ConvEpilogueParams {
  int64_t numel = 0;     // elements of y [N, M, spatial...]
  int64_t channels = 0;  // M
  int64_t inner = 1;     // product of the spatial dims
  ConvAct act = ConvAct::kNone;
  float alpha = 0.f, beta = 0.f;
};
// In place: y = act(y + bias[channel] + residual) (bias and residual may be null; the residual has y's shape and
// layout), computed in float32. dtype: kF32, kF16 or kBF16.
// A depthwise 2-D convolution (groups = channels, one filter each) in channels-last layout: x [n, h, w, c], w packed
// [kh, kw, c], y [n, oh, ow, c]; y = act(conv + bias[c] + residual) in float32 (bias and residual may be null; the
// residual has y's shape). Pads are the leading ones (the trailing ones follow from oh/ow). dtype: kF32, kF16, kBF16.
struct DepthwiseConvParams {
  int64_t n = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
  int kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  ConvAct act = ConvAct::kNone;
  float alpha = 0.f, beta = 0.f;
};
cudaError_t LaunchDepthwiseConv(int dtype, const void* x, const void* w, const void* bias, const void* residual,
                                void* y, const DepthwiseConvParams& p, cudaStream_t stream);

// An empty kernel: the next kernel on the stream starts only after it, hence after everything before it (a kernel
// launched for programmatic dependent launch cannot overlap the kernel before this one).
cudaError_t LaunchStreamBarrier(cudaStream_t stream);

cudaError_t LaunchConvEpilogue(void* y, const void* bias, const void* residual, int dtype,
                               const ConvEpilogueParams& p, cudaStream_t stream);

}  // namespace kiln::cuda
