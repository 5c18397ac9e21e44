// Layout planning: channels-last (NHWC) tensors for 2-D convolution networks on the cuda backend.
//
// cuDNN's fast tensor-core convolutions read and write channels-last tensors. This step rewrites every eligible
// 2-D Conv / kiln.FusedConv (float16/bfloat16 input, float32 too when asked; constant W; symmetric or VALID
// pads) to take and produce NHWC: the node gets the attribute kiln_layout = "NHWC", meaning X is [N,H,W,C] and
// Y is [N,H',W',K] in the IR shapes and in memory (W stays [K,C/g,kh,kw]; the GPU layer repacks it once); a
// FusedConv's residual (input 3) is read in Y's layout, NHWC too.
// NHWC then flows through the layout-agnostic consumers, so that reformats appear only at the borders:
//   - elementwise ops and kiln.FusedPointwise whose activation inputs are all NHWC of the node's output shape
//     (constants are permuted: a per-channel [C,1,1] or [1,C,1,1] becomes [1,1,1,C]; scalars stay);
//   - MaxPool / AveragePool (kiln_layout = "NHWC"; not when MaxPool's Indices are used);
//   - GlobalAveragePool / GlobalMaxPool become ReduceMean / ReduceMax over axes [1,2] (keepdims): [N,1,1,C]
//     has the memory order of [N,C,1,1], so the NCHW value is a free Reshape of it;
//   - Concat along the channel axis (axis 1 -> 3);
//   - the model's own Transposes: one of a value that has an NHWC twin reads the twin with the composed
//     permutation, and goes when that is the identity (ConvNeXt's permute to channels-last after a depthwise
//     convolution); a Transpose([0,3,1,2]) of a channels-last tensor goes, that tensor becoming the NHWC twin of
//     its result (ConvNeXt's permute back before the residual Add, which then runs in NHWC).
// So ConvNeXt-style blocks (NHWC conv, permute, LayerNorm over C, MLP, permute back, residual) run with no
// reformat at all.
// An ungrouped NHWC convolution with fewer input channels than `pad_channels` (an RGB stem: C = 3) reads its input
// zero-padded to that many channels (a Pad after the reformat; W gains zero input channels): cuDNN's FP16 NHWC
// kernels for C = 3 are slow (ResNet-50's stem at batch 64 on an H100: 383 µs with C = 3, 216 µs with C = 4,
// 313 µs with C = 8).
// A consumer that needs NCHW gets Transpose([0,3,1,2]) of the NHWC value (a Reshape when H = W = 1), emitted
// once, right before its first such consumer; a convolution whose input is NCHW gets Transpose([0,2,3,1]).
//
//   x -> Conv -> Relu -> Conv -> Add(x') -> GlobalAveragePool -> Flatten -> Gemm
//   ==>
//   x -> Transpose -> Conv[NHWC] -> Relu -> Conv[NHWC] -> Add -> ReduceMean[1,2] -> Reshape -> Flatten -> Gemm
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct LayoutOptions {
  bool float32 = false;  // convolutions on float32 inputs go channels-last too (the builder sets it for TF32 engines)
  int64_t channel_multiple = 1;  // convolutions whose input channels are not a multiple of this stay NCHW
  int64_t pad_channels = 4;      // NHWC convolutions with fewer input channels read them zero-padded to this (0: off)
  bool float_convs = true;       // false: only int8 QConvs go NHWC (ConvolutionLayout::kNCHW keeps float ones NCHW)
};

struct LayoutReport {
  int convs_nhwc = 0;            // convolutions rewritten to NHWC
  int nodes_nhwc = 0;            // other nodes that now run on NHWC tensors
  int reformats_inserted = 0;    // Transposes inserted between the layouts
  int views_inserted = 0;        // free Reshapes between [N,1,1,C] and [N,C,1,1]
  int channels_padded = 0;       // convolutions whose input channels were zero-padded (pad_channels)
  int reformats_eliminated = 0;  // 2 per NHWC convolution (converting each alone), minus those inserted
  int transposes_absorbed = 0;   // the model's own NCHW <-> NHWC Transposes that the layouts made unnecessary
  std::vector<std::string> details;
};

// Rewrites `g` (shapes inferred); the caller re-infers shapes afterwards.
Result<LayoutReport> AssignLayout(Graph& g, const LayoutOptions& opts);

// `t` with its axes permuted: out.shape[i] = t.shape[perm[i]].
Tensor PermuteTensor(const Tensor& t, const std::vector<int64_t>& perm);

// The NHWC shape of an NCHW shape and back (rank 4).
std::vector<int64_t> NchwToNhwc(const std::vector<int64_t>& s);
std::vector<int64_t> NhwcToNchw(const std::vector<int64_t>& s);

}  // namespace kiln
