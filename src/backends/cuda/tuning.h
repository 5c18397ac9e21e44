// Tactic selection: for every node with more than one candidate kernel, time each candidate on the device at
// the tuning shapes (warm-up, then the median of N runs measured with CUDA events) and keep the fastest; the
// timing cache answers for layers it has seen on this device.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "backends/cuda/timing_cache.h"

namespace kiln::cuda {

struct TuneOptions {
  int avg_timing = 8;        // timed runs per candidate (--avgTiming); the median is kept
  bool allow_tf32 = true;
  TimingCache* cache = nullptr;
  // The WORKSPACE memory pool (bytes; 0: no limit): a candidate whose scratch memory at the tuning shapes exceeds it
  // is not chosen, and a node none of whose candidates fits fails the build naming what each needs.
  size_t workspace_limit = 0;
  std::function<void(const std::string&)> log;  // verbose lines (one per timed layer)
};

struct TuneReport {
  int layers = 0;          // layers given a tactic
  int timed = 0;           // layers whose candidates were timed
  int cache_hits = 0;      // layers answered by the timing cache
  int repeats = 0;         // layers that took the choice of an identical earlier layer of this build (same signature)
  int candidates = 0;      // candidates timed in all
  double seconds = 0;      // time spent selecting tactics, all of it
  double create_seconds = 0;  // of which creating candidate layers (cuDNN plans and their kernel compilation, uploads)
  double timing_seconds = 0;  // of which running and timing them
  std::vector<std::string> failures;  // the node's name and the candidate's error, for candidates that failed
  int over_workspace = 0;  // candidates left out for needing more scratch memory than TuneOptions::workspace_limit
  int range_timed = 0;     // layers also timed at other shapes of the profile (SelectTactics' also_at)
  int range_changed = 0;   // of which the choice differs from the fastest at the tuning shapes
  int variants = 0;        // (layer, point) pairs given a per-shape tactic
};

// Per node, its per-shape tactics: (index into also_at, tactic).
using TacticVariants = std::vector<std::vector<std::pair<int32_t, std::string>>>;

// A node that runs on the CPU inside the engine, and why it cannot run on the GPU.
struct FallbackNode {
  size_t index = 0;
  std::string reason;
};

// The candidate tactics of every node of `g` at the tuning shapes (`tuned` is g inferred at those shapes, node
// for node). A node without a GPU layer for its op, types or attributes gets the one tactic kCpuFallbackTactic when
// `fallbacks` is given and the CPU backend can run it (each is listed there); otherwise the error lists every node
// that cannot run (one report).
Result<std::vector<std::vector<std::string>>> CheckSupport(const Graph& g, const Graph& tuned, bool allow_tf32,
                                                           std::vector<FallbackNode>* fallbacks = nullptr);

// One tactic per node of `g`, chosen among `candidates` (CheckSupport's lists). `also_at`: g inferred at other
// shapes of the profile (node for node); a node whose shapes differ there has its candidates timed there too, and
// the tactic chosen is the one whose worst slowdown against the fastest at any of those shapes is least (ties, within
// 2%, to the fastest at the tuning shapes), so an engine with a min/opt/max profile does not run the opt shape's
// choice where it is slow. With `variants` (and `point_candidates`: per also_at graph, every node's candidates there),
// such a node also gets, per point, the fastest of its candidates created at that point's shapes where it beats the
// chosen tactic (created at the tuning shapes and run there) by more than 5%: a per-shape tactic.
Result<std::vector<std::string>> SelectTactics(const Graph& g, const Graph& tuned,
                                               const std::vector<std::vector<std::string>>& candidates,
                                               const TuneOptions& opts, TuneReport* report,
                                               const std::vector<const Graph*>& also_at = {},
                                               const std::vector<std::vector<std::vector<std::string>>>* point_candidates = nullptr,
                                               TacticVariants* variants = nullptr);

}  // namespace kiln::cuda
