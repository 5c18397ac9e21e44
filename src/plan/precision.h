// Precision planning: which nodes compute in FP16/BF16, and the casts that keep the graph well typed.
//
// With --fp16 or --bf16 every node that computes on floating data runs in the reduced type: its float32 data
// inputs arrive converted (constants converted once at build time; activations through an inserted Cast) and its
// float32 outputs become the reduced type. Kernels still accumulate reductions, softmax and normalizations in
// float32. Nodes that stay float32: ops whose OpDef says so (keeps_fp32: shapes and indices — Shape, Range,
// ConstantOfShape... —, casts, NonMaxSuppression boxes, Quantize/Dequantize), nodes whose backend kernel takes
// no reduced type (PrecisionOptions::kernel_takes), and layers the user pins with --layerPrecisions=name:fp32.
// Graph inputs and outputs keep their types (I/O in float32) unless --inputIOFormats/--outputIOFormats ask for
// the reduced type.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct PrecisionOptions {
  DataType low = DataType::kFloat32;              // kFloat16 or kBFloat16; kFloat32 = nothing to do
  std::map<std::string, DataType> layer_precision;  // node name -> compute type (kFloat32 pins it)
  std::map<std::string, DataType> io_types;         // graph input/output name -> type at the engine boundary
  // Asks the backend whether its kernel for a node computes in a reduced type (kernels declare the types they
  // take); a node whose kernel does not stays float32 and the report says why. Unset: every kernel takes both.
  std::function<bool(const Node&, DataType)> kernel_takes;
  // --precisionConstraints=obey: a --layerPrecisions entry that cannot be honoured fails the build (naming the
  // layer and why) instead of leaving the layer in float32.
  bool obey_layer_precisions = false;
};

struct PrecisionReport {
  int lowered = 0;           // nodes computing in the reduced type
  int kept_fp32 = 0;         // float nodes kept in float32 (pinned or not lowerable)
  int casts_inserted = 0;
  int constants_converted = 0;
  int constants_clamped = 0;  // FP16 constants with values beyond +-65504, saturated
  std::vector<std::string> details;  // one line per pinned/kept node
};

// Rewrites `g` (shapes inferred) for the options; the caller re-infers shapes afterwards.
Result<PrecisionReport> AssignPrecision(Graph& g, const PrecisionOptions& opts);

}  // namespace kiln
