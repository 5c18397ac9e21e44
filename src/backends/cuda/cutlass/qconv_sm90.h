// INT8 tensor-core convolution for Hopper (sm_90a): CUTLASS's implicit-GEMM fprop (TMA + GMMA, warp-specialized)
// with kiln's QConv epilogue fused as an epilogue visitor tree. Plain C++ here, so the CUDA backend's layers see no
// CUTLASS type; the kernels are compiled apart (src/CMakeLists.txt: sm_90a, no fused multiply-add).
//
// Tensors are NHWC (X [n,h,w,c] int8, Y and the residual [n,p,q,k]), the filter KRSC int8. The arithmetic is QConv's
// (ops/quantized_ops.h) for symmetric int8 input (zero point 0) and, when requantizing, a symmetric int8 output:
//   acc = sum x_q * w_q (int32);  v = acc * scale[k] + bias[k];  v += residual;  v = clamp(v, lo, hi)
//   y   = v                                   (float32 output)
//       = saturate(round_half_even(v * (1 / y_scale)))   (int8 output; ops/quantized_ops.h says why not v / y_scale)
// every step a separately rounded float operation in that order, as the CPU reference computes it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>

namespace kiln::cuda::cutlass_sm90 {

struct QConvProblem {
  int n = 0, h = 0, w = 0, c = 0;  // input
  int k = 0, r = 0, s = 0;         // filter
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  bool int8_output = false;
  bool residual = false;
  bool residual_int8 = false;  // the residual is int8 (times r_scale), not float32
};

struct QConvOperands {
  const int8_t* x = nullptr;
  const int8_t* w = nullptr;         // KRSC
  const float* scale = nullptr;      // [k]: x_scale * w_scale[k]
  const float* bias = nullptr;       // [k] or null (0)
  const void* residual = nullptr;   // the output's shape, float32 or int8 (residual_int8), when there is one
  float r_scale = 1.f;              // an int8 residual's scale
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();  // the activation as a clamp (None, Relu, Clip)
  float y_scale = 1.f;               // int8 output
  void* y = nullptr;                 // float32 or int8, [n,p,q,k]
};

// Tile shapes (tactics): output positions x output channels x reduction per CTA; the 64-deep tiles keep 4 pipeline
// stages so that several CTAs share an SM (the 128-deep ones fill shared memory).
enum class Tile { k128x128x128, k128x64x128, k128x128x64, k128x64x64 };
constexpr int kNumTiles = 4;

// Why a problem cannot run here, or null: alignment (C and K multiples of 16 / 4), sizes, the kernel's own check.
const char* Unsupported(const QConvProblem& p, Tile t);
size_t WorkspaceBytes(const QConvProblem& p, Tile t);
// Launches on `stream`; the workspace holds WorkspaceBytes. Returns a message on failure, null on success.
const char* Run(const QConvProblem& p, Tile t, const QConvOperands& o, void* workspace, cudaStream_t stream);

}  // namespace kiln::cuda::cutlass_sm90
