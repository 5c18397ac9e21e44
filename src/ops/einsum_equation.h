// Einsum equations: parsing ("ij,jk->ik", "...ii->...i", implicit "ij,jk") into per-operand label lists
// with the ellipsis expanded, and computing label sizes / the output shape. Shared by the shape function and
// the CPU kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dims.h"
#include "ir/graph.h"

namespace kiln {

struct EinsumSpec {
  // Labels are ints: letters keep their char code, ellipsis dims get kEllipsisBase + j (j = 0 is the
  // outermost of the broadcast ellipsis dims).
  static constexpr int kEllipsisBase = 1000;
  std::vector<std::vector<int>> inputs;  // one label per dim of each operand
  std::vector<int> output;               // labels of the output dims
  std::vector<int> all_labels;           // every distinct label: output labels first, then summed ones
};

// Parses `eq` for operands of the given ranks; errors name the node.
Result<EinsumSpec> ParseEinsum(const Node& n, const std::string& eq, const std::vector<int64_t>& ranks);

// Size of every label in spec.all_labels (same order), from the operand shapes; a label's dims must agree
// (1 broadcasts). Unknown dims give Dim::Unknown() unless another operand knows them.
Result<std::vector<Dim>> EinsumLabelSizes(const Node& n, const EinsumSpec& spec, const std::vector<Shape>& shapes);

}  // namespace kiln
