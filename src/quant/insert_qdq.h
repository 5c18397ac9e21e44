// Implicit INT8: where calibration (or the user's dynamic ranges) gave an activation's range, the INT8 layers
// (OpTraits::int8_layer: Conv, MatMul, Gemm with a constant weight) read it through a QuantizeLinear ->
// DequantizeLinear pair (symmetric int8, scale = range / 127), which makes the network an explicitly quantized one;
// the optimizer's fuse-quantized pass then runs those layers as INT8 kernels (quantizing their weights per output
// channel), and the layers it cannot fuse compute in float on the quantize-dequantized values.
//   Before: x ─► Conv(W)                   After: x ─► Q(s) ─► DQ(s) ─► Conv(W)
// One pair per tensor, shared by its readers; placed before the first of them; both marked kiln_implicit = 1, so that
// the optimizer drops the pairs no INT8 layer took (passes/drop_implicit_qdq.cpp). Runs on the network as given (the
// names calibration saw), before the optimizer.
// Residual adds too, as TensorRT's implicit INT8 does: an Add of an INT8 layer's output and another activation of
// the same shape reads that other one (the shortcut) quantize-dequantized, so that fuse-quantized can give the layer
// an int8 residual and the tensors between the blocks of a ResNet stay int8.
//   Before: y ─► Conv ─► Add(·, y)         After: y ─► Q ─► DQ ─► Conv ─► Add(·, DQ(Q(y)))
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::quant {

struct QdqReport {
  int tensors_quantized = 0;               // Q/DQ pairs inserted
  int layers_quantized = 0;                // INT8 layers whose input got one
  int residuals_quantized = 0;             // residual adds whose shortcut input got one
  std::vector<std::string> layers;         // their names
  std::vector<std::string> layers_pinned;  // INT8 layers kept in float by `keep_float`
  std::vector<std::string> layers_without_range;  // INT8 layers whose input has no range (they stay float)
};

// `scales`: tensor name -> scale (dynamic range / 127 for int8, / 448 for float8e4m3fn; > 0). Shapes of the new
// values are set; the caller's later inference keeps them.
// `keep_float`: names of INT8 layers to leave in float (--layerPrecisions=name:fp32).
// `type`: int8, or float8e4m3fn (implicit FP8: zero points are float8 zeros; no residual adds, which have no FP8
// kernel).
QdqReport InsertActivationQdq(Graph& g, const std::map<std::string, float>& scales,
                              const std::set<std::string>& keep_float = {}, DataType type = DataType::kInt8);

// The graph holds QuantizeLinear or DequantizeLinear nodes (an explicitly quantized network).
bool HasQdq(const Graph& g);

}  // namespace kiln::quant
