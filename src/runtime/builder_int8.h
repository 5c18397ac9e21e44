// INT8 planning in the builder (builder_int8.cpp): explicit (Q/DQ networks) and implicit (--int8 with ranges).
#pragma once

#include <set>
#include <string>

#include "backends/backend.h"
#include "ir/graph.h"
#include "kiln/builder.h"

namespace kiln {

struct Int8Plan {
  bool quantize_float_weights = false;  // implicit INT8: the optimizer quantizes the INT8 layers' float weights
  std::set<std::string> keep_float;     // layers --layerPrecisions pins to a float type
};

// Runs before the optimizer on the builder's copy `g` of `network`: for implicit INT8 finds the activation ranges
// (the network's dynamic ranges, else the config's calibrator: its cache, else a calibration run on `backend`)
// and places Q/DQ pairs from them. Explicitly quantized networks and builds without kINT8 are left as they are.
Result<Int8Plan> PlanInt8(const NetworkDefinition& network, Graph& g, const BuilderConfig& cfg, const Backend& backend,
                          BuildReport& rep, ILogger& logger);

}  // namespace kiln
