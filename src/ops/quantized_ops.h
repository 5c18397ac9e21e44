// The quantized layers the optimizer creates (domain "kiln"), read by their shape functions (ops/quantized.cpp),
// the pass that makes them (passes/fuse_quantized.cpp) and the backends' kernels:
//
//   QConv(X, W, [B], [R])     Conv's attributes (auto_pad, dilations, group, kernel_shape, pads, strides)
//   QMatMul(X, W, [B], [R])   X [..., K] times W [K, N]
//
// X is int8 or uint8 with one scale and zero point; W is int8, symmetric (zero point 0), with one scale or one per
// output channel (Conv's M, MatMul's N); B (float32, [M] / [N]) and R (the output's shape: a residual, float32 or
// float16 read exactly, or int8 with the scale kiln_r_scale and zero point 0, read as r_q * r_scale) are optional.
// The arithmetic, which every backend follows:
//   acc[m]  = sum over the window of (x_q - x_zero_point) * w_q          exact, in int32
//   y       = act(acc[m] * x_scale * w_scale[m] + B[m] + R)               float32 (activations as FusedConv's)
//   output  = y                                                           when kiln_y_type is float32
//           = y rounded to float16 (a Cast's rounding)                    when it is float16
//           = saturate(round_half_even(y * (1 / y_scale)) + y_zero_point) when it is int8 / uint8
// FP8 (QMatMul only): X and W are float8e4m3fn (zero points 0, no int8 residual); the sums are float32's, in any
// order (the CUDA tensor-core tactics: the tensor cores' own accumulation over all of K, which rounds more):
//   acc[m]  = sum over k of float(x_q) * float(w_q)    each product exact in float32, the sum rounded
//   output  = float8e4m3fn(y * (1 / y_scale)), rounded to nearest even and saturated to +-448   when kiln_y_type is it
// which is DequantizeLinear -> Conv/MatMul (+ bias, residual, activation) -> QuantizeLinear with the products summed
// exactly (the optimizer fuses only layers whose sums fit int32), except that the output is scaled by the float
// reciprocal of y_scale where QuantizeLinear divides: a division in the tensor-core epilogues costs 5x the GEMM
// (BERT-base's 768 -> 3072 GEMM on an H200), and the two round apart by at most one step, in rare ties. The CUDA layers compute the scale, bias, residual
// and requantization with the CPU's float operations in its order, so requantized outputs are equal for the
// piecewise-linear activations (None, Relu, LeakyRelu, Clip); the others (exp, tanh, erf, HardSigmoid's multiply-add)
// may round one step apart. Attributes (besides the base op's and kiln_activation/_alpha/_beta):
//   kiln_x_scale (float), kiln_x_zero_point (int), kiln_w_scales (floats), kiln_y_type (int: a DataType code: float32
//   (the default), float16, int8, uint8, float8e4m3fn), kiln_y_scale (float), kiln_y_zero_point (int), kiln_r_scale (float; an int8 residual's).
#pragma once

#include <cmath>
#include <vector>

#include "ir/graph.h"
#include "ops/fused_ops.h"

namespace kiln::quant_attrs {

inline constexpr const char* kXScale = "kiln_x_scale";
inline constexpr const char* kXZeroPoint = "kiln_x_zero_point";
inline constexpr const char* kWScales = "kiln_w_scales";
inline constexpr const char* kYType = "kiln_y_type";
inline constexpr const char* kYScale = "kiln_y_scale";
inline constexpr const char* kYZeroPoint = "kiln_y_zero_point";
inline constexpr const char* kRScale = "kiln_r_scale";
// On an ONNX QuantizeLinear (set by plan/fold_quantized_casts.cpp in place of a Cast to float32 in front of it): X,
// float16 or bfloat16, stands for its float32 widening, so x / scale is computed in float32 and not rounded to X's
// type as ONNX computes it for a 16-bit X.
inline constexpr const char* kXWidened = "kiln_x_widened";
// A LayerNormalization's output 3 (plan/fold_quantized_casts.cpp puts a following per-tensor QuantizeLinear there):
// Y as written, in X's type, quantized as a widened QuantizeLinear does it,
//   q = saturate(round_half_even(float(Y) / kiln_q_scale) + kiln_q_zero_point)   (NaN gives 0)
// to kiln_q_type int8 or uint8, or float8e4m3fn(float(Y) / kiln_q_scale) saturated (zero point 0).
// On a kiln.Attention the same attributes make output 0 itself quantized (plan/fold_quantized_casts.cpp folds the
// QuantizeLinear that alone read it), with float(Y) * (1 / kiln_q_scale) in place of the division, as QMatMul's
// epilogue scales its output.
inline constexpr const char* kQScale = "kiln_q_scale";
inline constexpr const char* kQZeroPoint = "kiln_q_zero_point";
inline constexpr const char* kQType = "kiln_q_type";

struct QuantizedCopy {
  DataType type = DataType::kUndefined;
  float scale = 1.f;
  int64_t zero_point = 0;
};
// Reads and checks the kiln_q_* attributes of a node with a quantized copy of its output (errors name the node).
Result<QuantizedCopy> ReadQuantizedCopy(const Node& n);

struct Params {
  float x_scale = 0;
  int64_t x_zero_point = 0;
  std::vector<float> w_scales;
  DataType y_type = DataType::kFloat32;
  float y_scale = 0;
  int64_t y_zero_point = 0;
  float r_scale = 0;  // an int8 residual's scale (0: the residual, if any, is float32)
  fused::Act activation = fused::Act::kNone;
  float act_alpha = 0, act_beta = 0;
  float w_scale(int64_t channel) const { return w_scales.size() == 1 ? w_scales[0] : w_scales[channel]; }
};

// The 8-bit types a quantized layer's X may have: int8 and uint8 (integer sums), float8e4m3fn (float sums).
inline bool IsQuantizedInput(DataType t) {
  return t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kFloat8E4M3FN;
}

// Reads and checks a QConv/QMatMul node's quantization attributes (errors name the node and the attribute).
Result<Params> Read(const Node& n);

}  // namespace kiln::quant_attrs

// ---- weight-only quantization ----
// kiln.WeightOnlyMatMul(X, Wp, S, [Z])   X [..., K] (float32 / float16 / bfloat16) times a [K, N] weight held as
// 4-bit integers, made by passes/fuse_weight_only.cpp from DequantizeLinear(int4/uint4 constant) -> MatMul:
//   Wp  uint8 [N, ceil(K / 2)]: row n holds column n of W along K, two values per byte, element k in byte k / 2,
//       the even k in the low nibble (ONNX's packing, transposed so that each output reads one contiguous row)
//   S   float32 / float16 / bfloat16 [N, G]: the scale of group g = k / kiln_group_size, G = ceil(K / group size)
//   Z   int8 [N, G], optional: the groups' zero points (in the weight type's range); absent: 0
// The arithmetic, which every backend follows:
//   w[k][n] = X's type( S's type( (q - z) * s ) )     the float32 product rounded as DequantizeLinear writes it
//                                                     (its output has the scale's type), then to X's type
//   y[r][n] = sum over k of x[r][k] * w[k][n]         summed in float32 (or float64 for float64 X: not supported)
//   output  = y rounded to X's type
// Attributes: kiln_k (int, K), kiln_group_size (int, 1 <= group size, a group never spans two rows), kiln_w_type (int:
// the DataType code of int4 or uint4).
namespace kiln::woq_attrs {

inline constexpr const char* kK = "kiln_k";
inline constexpr const char* kGroupSize = "kiln_group_size";
inline constexpr const char* kWType = "kiln_w_type";

struct Params {
  int64_t k = 0;
  int64_t group_size = 0;
  DataType w_type = DataType::kInt4;
  int64_t groups() const { return group_size > 0 ? (k + group_size - 1) / group_size : 0; }
  int64_t row_bytes() const { return (k + 1) / 2; }
};

// Reads and checks a WeightOnlyMatMul node's attributes (errors name the node and the attribute).
Result<Params> Read(const Node& n);

// The 4-bit value at element k of a packed row (sign-extended for int4).
inline int Unpack4(const uint8_t* row, int64_t k, bool is_signed) {
  const int v = (row[k / 2] >> ((k % 2) * 4)) & 0xf;
  return is_signed && v >= 8 ? v - 16 : v;
}

}  // namespace kiln::woq_attrs
