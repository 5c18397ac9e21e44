// After precision planning: the casts the planner put around an INT8 layer's float side folded into the layer. A
// QMatMul's float32 output whose every reader is a Cast to float16 is written as float16 by the layer itself
// (kiln_y_type float16: the same rounding), and then a float32 residual that is a Cast of a float16 value is read as
// float16 (exactly, as the Cast widened it). A QuantizeLinear whose X is such a Cast reads the 16-bit value, marked
// as standing for its float32 widening, and a per-tensor one of a LayerNormalization's Y then becomes the
// LayerNormalization's output 3 (the normalization writes each value quantized too), and one that alone reads a
// kiln.Attention's Y makes the attention write Y quantized (scaled by the float reciprocal: a code may move one step
// at a tie). Results are otherwise bit-identical; the casts' kernels and the float32 tensors' traffic go (BERT INT8
// on an H200: six casts per encoder layer, about a third of its time).
#pragma once

#include <functional>

#include "ir/graph.h"

namespace kiln {

struct QuantizedCastFolds {
  int outputs = 0;    // QMatMuls now writing float16
  int residuals = 0;  // residuals now read as float16
  int quantize_inputs = 0;  // QuantizeLinears now reading a 16-bit X (ops/quantized_ops.h: kXWidened)
  int norm_quantizes = 0;   // QuantizeLinears of a LayerNormalization's Y now its output 3 (kQScale)
  int attention_quantizes = 0;  // QuantizeLinears of a kiln.Attention's Y it now writes itself (kQScale on it)
  int casts_removed = 0;
};

// `takes_float16(node)`: whether the backend's layer for the node runs it with float16 output and residual (a
// QMatMul) or a 16-bit X (a QuantizeLinear).
QuantizedCastFolds FoldQuantizedCasts(Graph& g, const std::function<bool(const Node&)>& takes_float16);

}  // namespace kiln
