// After precision and layout planning: the reformats those steps leave at a network's input merged into one
// kiln.Reformat node (ops/fused_ops.h). Every CNN engine in FP16 starts with three kernels on its input: the
// precision planner's Cast float32 -> float16, the layout planner's Transpose to NHWC (perm [0,2,3,1]) and its Pad
// of the channels from 3 to 4 or 8 (DenseNet-121 FP16 at batch 64 on an H200: 0.15 ms together, against about
// 0.025 ms of memory traffic for one pass at the card's bandwidth). The rewrite takes
//   Cast -> Transpose -> Pad,  Cast -> Transpose,  Transpose -> Pad
// where the Pad pads only the end of the last axis, in mode constant, with zeros (an absent value, or +0), each
// value between the merged nodes has exactly one reader and is not a graph output, and the types are float32,
// float16, bfloat16 or float64. Nothing else changes: the node reads the chain's input and writes its output value.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct ReformatFusions {
  int merged = 0;         // kiln.Reformat nodes made
  int nodes_removed = 0;  // Cast / Transpose / Pad nodes they replace
  std::vector<std::string> details;  // one line per node made
};

// `prefers(candidate)`: whether the backend runs the kiln.Reformat node (Backend::Prefers); none is made otherwise.
// Shapes must have been inferred; the caller re-infers them afterwards.
ReformatFusions FuseReformats(Graph& g, const std::function<bool(const Node&)>& prefers);

}  // namespace kiln
