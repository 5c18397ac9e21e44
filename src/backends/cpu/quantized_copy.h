// Kiln's quantized copy of an output (LayerNormalization's output 3; ops/quantized_ops.h: kQScale): the output as
// written, quantized per tensor as a widened QuantizeLinear of it quantizes it (the same bytes:
// backends/cpu/elementwise_cast.cpp).
#pragma once

#include "backends/cpu/common.h"
#include "backends/cpu/elementwise_internal.h"
#include "ops/quantized_ops.h"

namespace kiln::cpu {

// Writes output `index` of the node: `y` quantized by the node's kiln_q_* attributes; `by_reciprocal`: y times the
// float reciprocal of the scale instead of y / scale (kiln.Attention's quantized output, as its CUDA kernel computes
// it; the two differ by one step only where y / scale lies within a rounding of a tie).
inline Status WriteQuantizedCopy(KernelContext& ctx, size_t index, const Tensor& y, bool by_reciprocal = false) {
  const Node& n = ctx.node;
  KILN_ASSIGN_OR_RETURN(const quant_attrs::QuantizedCopy c, quant_attrs::ReadQuantizedCopy(n));
  elem::EnsureOutput(ctx, index, c.type, y.shape());
  Tensor& q = ctx.out(index);
  const float inv = 1.f / c.scale;
  auto scaled = [&](float v) { return by_reciprocal ? v * inv : v / c.scale; };
  if (c.type == DataType::kFloat8E4M3FN) {  // zero point 0, saturated
    for (int64_t i = 0; i < y.numel(); ++i)
      q.data<uint8_t>()[i] = elem::FloatToFloat8(c.type, scaled(static_cast<float>(y.GetAsDouble(i))), true);
    return Status::Ok();
  }
  const bool u8 = c.type == DataType::kUInt8;
  const double lo = u8 ? 0 : -128, hi = u8 ? 255 : 127, zp = static_cast<double>(c.zero_point);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double v = QuantizeRounded(scaled(static_cast<float>(y.GetAsDouble(i))), zp, lo, hi);
    if (u8) q.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    else q.data<int8_t>()[i] = static_cast<int8_t>(v);
  }
  return Status::Ok();
}

}  // namespace kiln::cpu
