// Graph optimizer passes: free functions over the Graph, one file each, run from the one ordered list in
// passes.cpp. Each pass returns how many rewrites it made and a line per rewrite for the verbose build log
// ("fused conv1 + relu1 -> conv1"). The IR verifier runs after every pass in debug builds (and when
// PassOptions::verify is set), so a broken rewrite is caught at the pass that made it.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/infer.h"

namespace kiln {

struct PassOptions {
  ConstEvaluator evaluator;  // for folding constants (normally the CPU reference backend)
  bool verify = true;        // run VerifyGraph after each pass
  bool fuse = true;          // run the fusion passes (off: only cleanup passes, for A/B comparisons)
  std::set<std::string> disabled;  // passes skipped by name (A/B comparisons of one pass); unknown names fail
  // Whether the build's backend runs a node a pass is about to create (its op, attributes, inputs); unset: every
  // node. Passes that create an op only some backends run, or run well, ask first.
  std::function<bool(const Node& candidate)> supports;
  // Implicit INT8 (--int8 with calibrated ranges): an INT8 layer whose input arrives quantized but whose weight is
  // a float constant gets the weight quantized per output channel (symmetric, max |w| / 127).
  bool quantize_float_weights = false;
  // Layers (node names) fuse-quantized leaves alone: --layerPrecisions pins them to a float type.
  std::set<std::string> keep_float_layers;
  // INT4 weight-only from float weights (BuilderConfig::setInt4WeightBlockSize): fuse-weight-only also quantizes
  // MatMuls' float [K, N] constant weights, this many K per scale (symmetric, round to nearest). 0: off.
  int64_t int4_weight_block = 0;
  // The type of those scales when the weight is float32: the build's reduced type (--fp16: float16, which the CUDA
  // GEMV reads on its half2 path), or undefined for the weight's own type.
  DataType int4_scale_type = DataType::kUndefined;
};

struct PassReport {
  std::string name;                 // the pass's name
  int rewrites = 0;                 // how many rewrites it made
  std::vector<std::string> details; // one line per rewrite (for --verbose)
};

// What the whole optimizer did: one report per pass, in order, plus counts that the build report's JSON keeps.
struct OptimizeReport {
  std::vector<PassReport> passes;
  size_t nodes_before = 0, nodes_after = 0;
  int Count(const std::string& pass_name) const;
};

using PassFn = std::function<Result<PassReport>(Graph&, const PassOptions&)>;

struct Pass {
  const char* name;
  PassFn run;
  bool is_fusion;  // skipped when PassOptions::fuse is false
};

// The ordered list (passes.cpp).
const std::vector<Pass>& AllPasses();

// Runs every pass in order. The graph must have been imported (types and shapes inferred).
Result<OptimizeReport> OptimizeGraph(Graph& g, const PassOptions& opts);

// ---- helpers for passes (pass_util.cpp) ----
// Every node that reads `v`.
std::vector<Node*> Consumers(const Graph& g, const Value* v);
// Makes every reader of `from` read `to` instead. A graph output keeps its name: when `from` is a graph output
// the caller must not eliminate it (use CanReplace to check).
void ReplaceAllUses(Graph& g, Value* from, Value* to);
bool IsGraphOutput(const Graph& g, const Value* v);
// Removes the nodes for which `dead` returns true (their outputs must no longer be used).
void RemoveNodes(Graph& g, const std::function<bool(const Node*)>& dead);

}  // namespace kiln
