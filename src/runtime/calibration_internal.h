// Calibration inside the library: on a graph (the builder calibrates its copy of the network) and the mapping from
// the public algorithm type to the quant stage's.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ir/graph.h"
#include "kiln/calibrator.h"
#include "quant/calibration_algos.h"

namespace kiln {

// The quant stage's algorithm for a public one; the read-only ones (legacy, entropy v1) and a percentile outside
// (0, 100] are errors.
Result<quant::Algorithm> QuantAlgorithm(CalibrationAlgoType a, double percentile);

Result<CalibrationResult> CalibrateGraph(const Graph& g, const CalibrationOptions& options,
                                         const std::function<Result<bool>(std::map<std::string, Tensor>&)>& next);

}  // namespace kiln
