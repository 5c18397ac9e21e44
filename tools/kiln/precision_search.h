// kiln calibrate --accuracyTarget: the INT8 layers to keep in float (precision_search.cpp has the method).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/kiln.h"
#include "options.h"

namespace kiln::cli {

// `net` carries the calibrated dynamic ranges; `batches` are the data the error is measured on. Prints the
// sensitivities and the choice, writes the --layerPrecisions value to <--calib>.layers, and adds "accuracy" to the
// report.
Status SearchLayerPrecisions(NetworkDefinition& net, const Options& o,
                             const std::vector<std::map<std::string, Tensor>>& batches, ILogger& logger,
                             nlohmann::json* report);

}  // namespace kiln::cli
