// INT8 tensor-core GEMM for Hopper (sm_90a) with the quantized layers' epilogue fused: CUTLASS's persistent
// warp-specialized GEMM (TMA + GMMA; the tile scheduler keeps each SM's next tile's loads going under the current
// tile's epilogue) and the epilogue visitor tree of qepilogue_sm90.cuh. It runs kiln.QMatMul and the 1x1, stride-1,
// unpadded NHWC kiln.QConv (a GEMM over the N*H*W positions). Plain C++ here, like qconv_sm90.h.
//   Y[m][n] = epilogue(sum over k of X[m][k] * W[n][k]),   X [m, k] int8 row-major, W [n, k] int8 (a row per
//   output column) — or both float8e4m3fn (FP8: the tensor cores' own float32 sums, a float8 output possible) —,
//   Y and the residual [m, n] row-major, float32, float16 or int8 (a float16 residual with a float16
//   output only); the arithmetic of qconv_sm90.h, the
//   activation a clamp (none, Relu, Clip) or, for an int8 output without residual, GELU (BERT's FFN).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>

namespace kiln::cuda::cutlass_sm90 {

struct QGemmProblem {
  int64_t m = 0;
  int n = 0, k = 0;
  bool int8_output = false;
  bool residual = false;
  bool residual_int8 = false;  // the residual is int8 (times r_scale), not float32
  bool half_output = false;    // float16 output (int8_output false)
  bool residual_half = false;  // the residual is float16: with a float16 output only
  bool gelu = false;           // GELU (erf form) in place of the clamp: 8-bit output and no residual only
  bool fp8 = false;            // X and W float8e4m3fn, float32 sums: float32, float16 or float8 output; no int8
                               // residual, and a float8 output takes none
  bool fp8_output = false;     // float8e4m3fn output (with fp8 only)
};

struct QGemmOperands {
  const void* x = nullptr;          // int8 or float8e4m3fn
  const void* w = nullptr;          // [n, k], X's type
  const float* scale = nullptr;     // [n]
  const float* bias = nullptr;      // [n] or null
  const void* residual = nullptr;   // the output's shape, float32, float16 or int8 (residual_*), when there is one
  float r_scale = 1.f;              // an int8 residual's scale
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  float y_scale = 1.f;
  void* y = nullptr;
};

// Tiles (tactics): M x N x K per work unit; ping-pong schedules for the 128-row tiles (two consumer warpgroups on
// alternate tiles), cooperative for the 256-row one (both on one tile).
enum class GemmTile { k128x128x128, k128x64x128, k256x128x128 };
constexpr int kNumGemmTiles = 3;

const char* Unsupported(const QGemmProblem& p, GemmTile t);
size_t WorkspaceBytes(const QGemmProblem& p, GemmTile t);
const char* Run(const QGemmProblem& p, GemmTile t, const QGemmOperands& o, void* workspace, cudaStream_t stream);

}  // namespace kiln::cuda::cutlass_sm90
