// Device kernels of the matmul family that cuBLASLt does not cover (launchers only; no IR here):
//   - the GEMM post-op: y = act(y + bias[j]) over a row-major [rows, n] output (activations cuBLASLt's epilogues
//     cannot do exactly, and the K = 0 case);
//   - the broadcast fill: y[i, j] = beta * C[broadcast i, j] (Gemm's C materialized into the output);
//   - a generic strided contraction: out[o] = sum over the summed labels of the product of every operand, for
//     Einsum and for the dtypes cuBLASLt does not run (integers, float64).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

// The activations of FusedGemm / FusedMatMul (same meaning and parameters as fused::Act in shape/fused_ops.h).
enum class GemmAct : int { kNone, kRelu, kLeakyRelu, kSigmoid, kTanh, kClip, kHardSigmoid, kSiLU, kGelu, kGeluTanh };

struct GemmPostOp {
  GemmAct act = GemmAct::kNone;
  float alpha = 0.f, beta = 0.f;  // LeakyRelu alpha; Clip min/max; HardSigmoid alpha/beta
};

// y[r, j] = act(y[r, j] + bias[j]) for a row-major y of `numel` elements whose last axis has n elements; bias may
// be null (then only the activation). dtype: kF32, kF16, kBF16, kF64. No launch when numel == 0.
cudaError_t LaunchGemmPostOp(int dtype, void* y, int64_t numel, int64_t n, const void* bias, GemmPostOp op,
                             cudaStream_t stream);

// y[i, j] = beta * c[(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j)] for a row-major [m, n] y.
// c_rows is 1 or m, c_cols is 1 or n. dtype: kF32, kF16, kBF16, kF64.
cudaError_t LaunchBroadcastFill(int dtype, void* y, int64_t m, int64_t n, const void* c, int64_t c_rows,
                                int64_t c_cols, float beta, cudaStream_t stream);

// A contraction over labels: the first num_out labels index the (row-major, contiguous) output, the others are
// summed. Operand k's element for a label assignment is at sum over labels l of index[l] * strides[k][l].
// Floating types accumulate in double, integers in 64-bit wrapping arithmetic (the result is then reduced to the
// storage type, as the CPU's wrapping accumulation in that type gives). When `c` is set (Gemm), the result is
// alpha * acc + beta * c[sum over output labels of index[l] * c_strides[l]] (integers: T(beta*c) + T(alpha*T(acc))
// like the CPU reference); otherwise alpha * acc.
constexpr int kMaxContractionOperands = 6;
constexpr int kMaxContractionLabels = 20;
struct ContractionParams {
  int num_operands = 0;
  int num_labels = 0;
  int num_out = 0;
  int64_t sizes[kMaxContractionLabels] = {};
  int64_t strides[kMaxContractionOperands][kMaxContractionLabels] = {};
  const void* operands[kMaxContractionOperands] = {};
  void* out = nullptr;
  double alpha = 1.0, beta = 1.0;
  const void* c = nullptr;
  int64_t c_strides[kMaxContractionLabels] = {};
};

// dtype: every float (kF32, kF16, kBF16, kF64) and integer (kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64) code.
// Returns cudaErrorInvalidValue for other codes or malformed params. No launch when the output is empty.
cudaError_t LaunchContraction(int dtype, const ContractionParams& p, cudaStream_t stream);

}  // namespace kiln::cuda
