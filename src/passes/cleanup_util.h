// Small helpers of the cleanup passes (eliminate-identity, fold-reshape-transpose-chains, fold-batchnorm,
// eliminate-cse): taking a no-op node out of the graph, comparing shapes, reading constant operands.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "passes/pass.h"

namespace kiln {

// Readers of `v`, leaving out nodes in `dead` (nodes a pass already made dead but has not removed yet).
std::vector<Node*> LiveConsumers(const Graph& g, const Value* v, const std::unordered_set<const Node*>& dead);

// True when both values have the same element type and a shape known to be equal (same constants or the same
// symbols in every dimension).
bool SameTypeAndShape(const Value* a, const Value* b);

// How a node computing `out` == `in` was taken out of the graph by BypassValue.
enum class Bypass {
  kRedirected,  // readers of `out` read `in`; the node is dead (left for dead-code elimination)
  kRenamed,     // `out` is a graph output: `in`'s producer now writes `out` and `in`'s readers read `out`;
                // the node now reads and writes `out` and MUST be removed by the caller before the pass ends
  kKept,        // impossible (`out` is a graph output and `in` cannot give up its name): nothing changed
};
Bypass BypassValue(Graph& g, Value* in, Value* out);

// The contents of a constant input as int64s (nullopt when not constant).
std::optional<std::vector<int64_t>> ConstInts(const Value* v);

// A constant Reshape target (allowzero = 0) that turns `x` into `out`'s inferred shape at every input shape: each
// dim its known value, 0 where it is the same symbol as x's dim at that position, and -1 for at most one other
// dim. Nothing when there are two such dims, a -1 beside a copied dim (0 at run time would make it undefined), a dim
// known to be 0, or either shape is unknown.
std::optional<std::vector<int64_t>> ReshapeTargetFor(const Value* x, const Value* out);

}  // namespace kiln
