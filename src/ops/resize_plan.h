// Resize geometry shared by Resize's shape function and its kernels: from the input shape and the (roi,
// scales, sizes) inputs plus the axes / keep_aspect_ratio_policy attributes, the per-axis output size,
// scale factor and region of interest, following the ONNX Resize-19 definition.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace kiln {

struct ResizePlan {
  std::vector<int64_t> out_shape;  // full rank
  std::vector<double> scales;      // full rank; 1 on axes that are not resized
  std::vector<double> roi_start;   // full rank; 0 by default (tf_crop_and_resize only)
  std::vector<double> roi_end;     // full rank; 1 by default
};

// A Resize operand counts as present when it is given and not empty (opset 11 passes empty scales).
inline bool ResizeOperandPresent(const Tensor* t) { return t != nullptr && t->numel() > 0; }

// The axes attribute normalized against `rank` (all axes when absent); error names the node.
Result<std::vector<int64_t>> ResizeAxes(const Node& n, int64_t rank);

// Computes the plan for a concrete input shape. `roi`, `scales`, `sizes` may be null or empty.
Result<ResizePlan> PlanResize(const Node& n, const std::vector<int64_t>& in_shape, const Tensor* roi,
                              const Tensor* scales, const Tensor* sizes);

}  // namespace kiln
