// ONNX QuantizeLinear's and DequantizeLinear's types, as every backend computes them (opsets 10 to 23).
#pragma once

#include "ir/graph.h"
#include "ops/quantized_ops.h"

namespace kiln::quant_attrs {

// The type QuantizeLinear rounds x / scale to before rounding it to the output: its `precision` (opset 23) when
// given; float32 for a widened X; else X's type when X and the scale share a 16-bit float type (opsets up to 21,
// where they always share one), else float32 (numpy's promotion, as ONNX's reference computes it).
inline DataType QuantizeDivisionType(const Node& n, DataType x, DataType scale) {
  if (n.geti(kXWidened, 0) != 0) return DataType::kFloat32;
  if (const int64_t p = n.geti("precision", 0); p != 0) return static_cast<DataType>(p);
  return x == scale && (x == DataType::kFloat16 || x == DataType::kBFloat16) ? x : DataType::kFloat32;
}

// DequantizeLinear's output type: its `output_dtype` (opset 23) when given, else the scale's type.
inline DataType DequantizeOutputType(const Node& n, DataType scale) {
  const int64_t t = n.geti("output_dtype", 0);
  return t != 0 ? static_cast<DataType>(t) : scale;
}

}  // namespace kiln::quant_attrs
