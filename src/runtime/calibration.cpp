// Calibration as a function (include/kiln/calibrator.h): the float network runs node by node on the chosen
// backend, batch after batch, and every float value it computes feeds that tensor's range (quant/tensor_range.h);
// the algorithm then picks each tensor's threshold (quant/calibration_algos.h).
#include <unordered_map>

#include "backends/factory.h"
#include "core/error.h"
#include "kiln/calibrator.h"
#include "quant/calibration_algos.h"
#include "quant/tensor_range.h"
#include "runtime/calibration_internal.h"
#include "runtime/network_graph.h"

namespace kiln {

Result<quant::Algorithm> QuantAlgorithm(CalibrationAlgoType a, double percentile) {
  switch (a) {
    case CalibrationAlgoType::kENTROPY_CALIBRATION_2: return quant::Algorithm::kEntropy;
    case CalibrationAlgoType::kMINMAX_CALIBRATION: return quant::Algorithm::kMinMax;
    case CalibrationAlgoType::kPERCENTILE_CALIBRATION:
      if (!(percentile > 0 && percentile <= 100))
        return Err(StatusCode::kInvalidArgument, "the calibration percentile must lie in (0, 100], not {}",
                   percentile);
      return quant::Algorithm::kPercentile;
    default:
      return Err(StatusCode::kUnsupported,
                 "calibration algorithm {} is read from caches only: calibrate with entropy (EntropyCalibration2), "
                 "minmax or percentile",
                 CalibrationAlgoName(a));
  }
}

Result<CalibrationResult> CalibrateGraph(const Graph& g, const CalibrationOptions& options,
                                         const std::function<Result<bool>(std::map<std::string, Tensor>&)>& next) {
  KILN_ASSIGN_OR_RETURN(const quant::Algorithm algo, QuantAlgorithm(options.algorithm, options.percentile));
  const Backend* backend = &DefaultBackend();
  if (!options.backend.empty()) {
    KILN_ASSIGN_OR_RETURN(backend, FindBackend(options.backend));
  }
  KILN_RETURN_IF_ERROR(backend->CheckAvailable());

  std::unordered_map<std::string, quant::TensorRange> ranges;
  GraphRunOptions ro;
  ro.allow_tf32 = false;  // the float network in full float32, as the CPU runs it
  ro.observe_float = [&ranges](const std::string& name, const Tensor& t) -> Status {
    ranges[name].Add(t);
    return Status::Ok();
  };
  CalibrationResult result;
  std::map<std::string, Tensor> batch;
  while (options.max_batches <= 0 || result.batches < options.max_batches) {
    batch.clear();
    KILN_ASSIGN_OR_RETURN(const bool more, next(batch));
    if (!more) break;
    auto outs = backend->RunGraph(g, batch, ro);
    if (!outs.ok()) return outs.status().WithContext(fmt::format("calibration batch {}", result.batches));
    if (options.on_batch) options.on_batch(result.batches);
    ++result.batches;
  }
  if (result.batches == 0)
    return Err(StatusCode::kInvalidArgument, "calibration got no batch: give at least one batch of inputs");

  // Network order: inputs, then each node's outputs.
  std::vector<const Value*> order(g.inputs.begin(), g.inputs.end());
  for (const auto& n : g.nodes())
    for (const Value* o : n->outputs)
      if (o) order.push_back(o);
  result.table.algorithm = options.algorithm;
  for (const Value* v : order) {
    auto it = ranges.find(v->name);
    if (it == ranges.end()) continue;
    const quant::TensorRange& r = it->second;
    // A name the cache's line format cannot hold (a line feed in it) is left out.
    if (v->name.find('\n') != std::string::npos || v->name.empty()) continue;
    TensorCalibration tc;
    tc.name = v->name;
    tc.min = r.min();
    tc.max = r.max();
    tc.amax = r.amax();
    tc.count = r.count();
    tc.threshold = quant::Threshold(r, algo, options.percentile);
    tc.scale = static_cast<float>(tc.threshold / 127.0);
    result.table.scales.emplace_back(tc.name, tc.scale);
    result.tensors.push_back(std::move(tc));
  }
  return result;
}

Result<CalibrationResult> CalibrateNetwork(const NetworkDefinition& network, const CalibrationOptions& options,
                                           const std::function<Result<bool>(std::map<std::string, Tensor>&)>& next) {
  return CalibrateGraph(GraphOf(network), options, next);
}

}  // namespace kiln
