// Kiln's quantized copy of an output (LayerNormalization's output 3; ops/quantized_ops.h: kQScale): the output as
// written, quantized per tensor as a widened QuantizeLinear of it quantizes it (the same bytes:
// backends/cpu/elementwise_cast.cpp).
#pragma once

#include "backends/cpu/common.h"
#include "backends/cpu/elementwise_internal.h"
#include "ops/quantized_ops.h"

namespace kiln::cpu {

// Writes output `index` of the node: `y` quantized by the node's kiln_q_* attributes.
inline Status WriteQuantizedCopy(KernelContext& ctx, size_t index, const Tensor& y) {
  const Node& n = ctx.node;
  KILN_ASSIGN_OR_RETURN(const quant_attrs::QuantizedCopy c, quant_attrs::ReadQuantizedCopy(n));
  elem::EnsureOutput(ctx, index, c.type, y.shape());
  Tensor& q = ctx.out(index);
  if (c.type == DataType::kFloat8E4M3FN) {  // zero point 0, saturated
    for (int64_t i = 0; i < y.numel(); ++i)
      q.data<uint8_t>()[i] = elem::FloatToFloat8(c.type, static_cast<float>(y.GetAsDouble(i)) / c.scale, true);
    return Status::Ok();
  }
  const bool u8 = c.type == DataType::kUInt8;
  const double lo = u8 ? 0 : -128, hi = u8 ? 255 : 127, zp = static_cast<double>(c.zero_point);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double v = QuantizeRounded(static_cast<float>(y.GetAsDouble(i)) / c.scale, zp, lo, hi);
    if (u8) q.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    else q.data<int8_t>()[i] = static_cast<int8_t>(v);
  }
  return Status::Ok();
}

}  // namespace kiln::cpu
