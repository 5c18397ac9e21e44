// Launchers of the pointwise CUDA kernels (pointwise_unary.cu, pointwise_binary.cu, pointwise_cast.cu,
// fused_pointwise.cu). Plain C++ (no IR): tensors are device pointers plus DTypeCode ints (kernel_util.cuh
// numbers = ONNX codes), sizes are int64, per-launch parameters are small POD structs passed by value.
// Every launcher enqueues on `stream` without synchronizing, launches nothing for 0 elements, and returns
// cudaErrorInvalidValue for a dtype it does not handle (the layers check dtypes before, so that is a bug).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/pointwise_op.h"

namespace kiln::cuda {

constexpr int kPwMaxOperands = 8;  // operands of one broadcasting launch
constexpr int kPwMaxRank = 8;      // dims after coalescing

// How the operands of an elementwise launch map onto its (row-major, contiguous) output. Built on the host
// (MakePwBroadcast in pointwise_layers_util.h): dims of extent 1 dropped, adjacent dims merged where every
// operand allows. When `general` is false every operand is either shaped like the output (step 1) or a single
// element (step 0) and the kernels index operand k at i * step[k]; otherwise operand k's element offset of
// output element i is sum_d coord_d(i) * strides[k][d] over `dims` (outermost first).
struct PwBroadcast {
  int rank = 0;
  int num_operands = 0;
  bool general = false;
  int64_t numel = 0;  // output elements
  int64_t dims[kPwMaxRank] = {};
  int64_t strides[kPwMaxOperands][kPwMaxRank] = {};
  int64_t step[kPwMaxOperands] = {};
};

// ---- unary formulas (ops/pointwise_formulas.h), computed in float32 (float64: in double) ----
// y = op(x; a, b) elementwise for float32/float16/bfloat16/float64 x and y (same dtype): one templated kernel per
// formula and compute type.
cudaError_t LaunchPwUnary(PwOp op, float a, float b, int dtype, const void* x, void* y, int64_t n,
                          cudaStream_t stream);

// Integer unary ops (Abs, Neg, Sign, Relu, Erf of the numeric CPU reference; BitwiseNot; Shrink with a = lambd and
// b = bias, computed in double, truncated and saturated to the type) on signed/unsigned ints.
enum PwIntUnaryOp : int { kPwIntAbs, kPwIntNeg, kPwIntSign, kPwIntRelu, kPwIntErf, kPwIntBitNot, kPwIntShrink };
cudaError_t LaunchIntUnary(int op, int dtype, const void* x, void* y, int64_t n, cudaStream_t stream, float a = 0.f,
                           float b = 0.f);

// Clip for every numeric dtype: lo/hi point to one element of x's dtype in device memory (nullptr: no bound).
cudaError_t LaunchClip(int dtype, const void* x, const void* lo, const void* hi, void* y, int64_t n,
                       cudaStream_t stream);

// bool y = IsNaN(x) / IsInf(x) (with the detect_* flags) for float32/float16/bfloat16/float64 x.
cudaError_t LaunchIsNaN(int dtype, const void* x, void* y, int64_t n, cudaStream_t stream);
cudaError_t LaunchIsInf(int dtype, bool detect_negative, bool detect_positive, const void* x, void* y, int64_t n,
                        cudaStream_t stream);
// bool y = !x.
cudaError_t LaunchNot(const void* x, void* y, int64_t n, cudaStream_t stream);

// ---- broadcasting binary ops (pointwise_binary.cu) ----
// Same-dtype arithmetic, result of the inputs' dtype: Add Sub Mul Div Max Min PRelu (integer ops wrap; integer
// Div truncates, x/0 = 0). dtypes: every int, float32/16, bfloat16, float64.
enum PwArithOp : int { kPwArAdd, kPwArSub, kPwArMul, kPwArDiv, kPwArMax, kPwArMin, kPwArPRelu };
cudaError_t LaunchArith(int op, int dtype, const void* a, const void* b, void* y, const PwBroadcast& bc,
                        cudaStream_t stream);
// Comparisons and logic with a bool result. Equal: any dtype; orders: numeric; And/Or/Xor: bool.
enum PwCompareOp : int { kPwEqual, kPwLess, kPwLessOrEqual, kPwGreater, kPwGreaterOrEqual, kPwAnd, kPwOr, kPwXor };
cudaError_t LaunchCompare(int op, int dtype, const void* a, const void* b, void* y, const PwBroadcast& bc,
                          cudaStream_t stream);
// Mod, result of the inputs' dtype, as the CPU reference. Integers (every int dtype): `truncated` (ONNX fmod=1)
// gives C's remainder (sign of the dividend), else the floored one (sign of the divisor, Python's %); x mod 0
// and x mod -1 give 0. Floats (float32/16, bfloat16, float64; the layer allows them only with fmod=1): fmod,
// computed in float32 for the 16-bit types (exact in every format); x mod 0 is NaN.
cudaError_t LaunchMod(int dtype, bool truncated, const void* a, const void* b, void* y, const PwBroadcast& bc,
                      cudaStream_t stream);
// BitwiseAnd/Or/Xor and BitShift on same-dtype integers (every int dtype), result of that dtype. Shifts follow
// ONNX 28 as the CPU reference does: a right shift of a signed value is arithmetic; a shift by a negative amount or
// by the width or more gives what the sign alone gives (-1 for a right shift of a negative value, else 0).
enum PwBitwiseOp : int { kPwBitAnd, kPwBitOr, kPwBitXor, kPwShiftLeft, kPwShiftRight };
cudaError_t LaunchBitwise(int op, int dtype, const void* a, const void* b, void* y, const PwBroadcast& bc,
                          cudaStream_t stream);
// Pow: base dtype float32/16, bfloat16, float64, int32, int64 (result of that dtype); exponent any numeric dtype.
// `simple_exponents`: the CPU reference's fast path (a float base shaped like the output and one float exponent):
// exponents 1, 2, 3 and 0.5 give x, x*x, x*x*x and sqrt(x) instead of pow.
cudaError_t LaunchPow(int base_dtype, int exp_dtype, bool simple_exponents, const void* a, const void* b, void* y,
                      const PwBroadcast& bc, cudaStream_t stream);
// Where(cond, x, y): operands 0..2 of bc; any dtype of `elem_bytes` 1, 2, 4 or 8.
cudaError_t LaunchWhere(int elem_bytes, const void* cond, const void* x, const void* y, void* out,
                        const PwBroadcast& bc, cudaStream_t stream);
// Variadic Sum / Mean / Max / Min over bc.num_operands inputs (at most kPwMaxOperands); the result is divided
// by `divisor` when it is not 1 (Mean). Sum/Mean: float dtypes; Max/Min: numeric.
enum PwVariadicOp : int { kPwVarSum, kPwVarMax, kPwVarMin };
cudaError_t LaunchVariadic(int op, int dtype, const void* const* inputs, void* y, float divisor,
                           const PwBroadcast& bc, cudaStream_t stream);

// ---- casts and quantization (pointwise_cast.cu) ----
// y = Cast(x) with the CPU reference's rules (float -> int truncates and clamps, NaN -> 0; -> bool is != 0;
// float8 E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ (codes 17..20) round to nearest even, `saturate` as ONNX; to int4/uint4 and
// int2/uint2 (codes 21, 22, 25, 26) integers wrap and floats truncate toward zero, then wrap; float4e2m1 (23) rounds
// half to even and saturates; float8e8m0 (24) rounds by round_mode: kCastRoundUp, kCastRoundDown, kCastRoundNearest).
enum CastRoundMode : int { kCastRoundUp = 0, kCastRoundDown = 1, kCastRoundNearest = 2 };
cudaError_t LaunchCast(int from, int to, bool saturate, int round_mode, const void* x, void* y, int64_t n,
                       cudaStream_t stream);

// Where a scale / zero point element sits for element i of x, seen as [outer, dim, inner] around the axis:
// r = i / inner, j = i % inner, o = r / dim, a = r % dim, index = o*outer_step + (a/block)*axis_step + j*inner_step.
struct QuantLayout {
  int64_t dim = 1, inner = 1, block = 1;
  int64_t outer_step = 0, axis_step = 0, inner_step = 0;
};
// QuantizeLinear: x float32/16, bfloat16, float64 or int32; scale float32/16 or bfloat16; zero point (may be
// nullptr) of the output dtype; output uint8/int8/uint16/int16/int32, uint4/int4, uint2/int2, float4e2m1 or a float8
// code. div_dtype: the type x / scale
// is rounded to first (float32: none; float16, bfloat16; ops/quantize_linear.h: QuantizeDivisionType).
cudaError_t LaunchQuantize(int x_dtype, int scale_dtype, int out_dtype, bool saturate, const void* x,
                           const void* scale, const QuantLayout& scale_layout, const void* zero_point,
                           const QuantLayout& zp_layout, void* y, int64_t n, cudaStream_t stream, int div_dtype);
// DequantizeLinear: x any integer dtype (int2/uint2 and int4/uint4 included), float4e2m1 or a float8 code (zero point ignored for float8); the product in float32,
// written as out_dtype (float32/16, bfloat16; ops/quantize_linear.h: DequantizeOutputType).
cudaError_t LaunchDequantize(int x_dtype, int scale_dtype, int out_dtype, const void* x, const void* scale,
                             const QuantLayout& scale_layout, const void* zero_point, const QuantLayout& zp_layout,
                             void* y, int64_t n, cudaStream_t stream);

// ---- kiln.FusedPointwise (fused_pointwise.cu) ----
constexpr int kPwMaxSteps = 48;
// Step s computes slot kPwMaxOperands + s from slots arg0[s] (and arg1[s] for binary ops); slots 0..7 hold the
// inputs (operands of the broadcast), slot kPwMaxOperands + j the result of step j (j < s).
struct PwProgramArgs {
  int num_steps = 0;
  uint8_t op[kPwMaxSteps] = {};  // PwOp
  uint8_t arg0[kPwMaxSteps] = {};
  uint8_t arg1[kPwMaxSteps] = {};
  float alpha[kPwMaxSteps] = {};
  float beta[kPwMaxSteps] = {};
};
// y = the program's last step over the bc.num_operands inputs, all of dtype float32/float16/bfloat16.
cudaError_t LaunchFusedPointwise(int dtype, const PwProgramArgs& prog, const void* const* inputs, void* y,
                                 const PwBroadcast& bc, cudaStream_t stream);

}  // namespace kiln::cuda
