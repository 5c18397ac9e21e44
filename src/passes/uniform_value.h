// Values whose every element is one known number although the value is not a constant: a dynamic-shape graph's
// masks. transformers' exporters build an attention mask the model never uses from the sequence length
// (Where(Expand(GreaterOrEqual(Range(0, S, 1), 0), ...), 0, -inf)): a static build folds it into a constant of zeros,
// a build with symbolic S keeps the chain, and the attention then reads a [B, 1, S, S] mask per score.
#pragma once

#include <optional>

#include "ir/graph.h"

namespace kiln {

// The number every element of v equals (bools as 0/1), when the producers up to a few levels deep prove it:
// constants with one repeated element, ConstantOfShape, shape-only ops (Identity, Expand, Reshape, Unsqueeze,
// Squeeze, Flatten, Tile, Transpose) of such a value, exact Casts, Where with a uniform condition (or equal uniform
// branches), Not/And/Or and comparisons of uniform operands, and comparisons of a Range with a positive constant step
// against a uniform bound its start already decides. nullopt when not proven (never a guess).
std::optional<double> UniformValue(const Value* v);

}  // namespace kiln
