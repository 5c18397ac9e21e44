// ONNX control flow (If, Loop, Scan): their bodies are subgraphs held in graph attributes (Attribute::g).
//
// Import makes every body self-contained: a value of an enclosing graph that a body reads becomes an input of the
// body (after its formal inputs) and an input of the node (after its ONNX inputs); `captured_inputs` says how many.
// Bodies are typed by InferBodies while the enclosing graph is inferred, so the shape functions read their outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ir/graph.h"
#include "ops/infer.h"

namespace kiln {

// The node attribute holding how many of a control-flow node's last inputs are captured outer-scope values.
inline constexpr const char* kCapturedInputsAttr = "captured_inputs";

bool HasSubgraphs(const Node& n);
// The body in graph attribute `attr`, or nullptr.
const Graph* BodyOf(const Node& n, const char* attr);
// How many of the node's last inputs are captured values (0 when none).
size_t CapturedInputCount(const Node& n);

// Whether a Loop body gives back its condition unchanged (passed through, directly or by Identity nodes, or a
// constant true): then only the trip count ends the loop, as exporters write a for loop.
bool LoopBodyKeepsCondition(const Graph& body);

// Types the bodies of a control-flow node from its inputs' types (as the enclosing graph knows them), inferring and
// folding each body (Loop and Scan: state whose shape changes from one iteration to the next is widened to unknown
// dims). Replaces the node's graph attributes with the typed bodies.
Status InferBodies(Node& n, const InferOptions& opts);

// Replaces each If whose condition is a constant by the nodes of the branch it takes (the optimizer's constant-If
// folding); returns how many were inlined. The graph is sorted again; re-run shape inference when it returns > 0.
Result<size_t> InlineConstantIfs(Graph& g);

}  // namespace kiln
