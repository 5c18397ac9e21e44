// `kiln calibrate`: INT8 calibration of an ONNX model over a folder of batches, written as a calibration cache that
// `kiln build --int8 --calib=cache` (and TensorRT) reads.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/error.h"
#include "calib_data.h"
#include "precision_search.h"

namespace kiln::cli {

Status Calibrate(const Options& o, ILogger& logger, nlohmann::json* report) {
  if (o.onnx.empty()) return Err(StatusCode::kInvalidArgument, "kiln calibrate needs --onnx=model.onnx");
  NetworkDefinition net;
  OnnxParser parser(net, logger);
  parser.setExternalDataDirs(o.external_data_dirs);
  KILN_RETURN_IF_ERROR(parser.parseFromFile(o.onnx));
  std::vector<InputSpec> inputs;
  for (int i = 0; i < net.getNbInputs(); ++i) {
    const NetworkTensor t = net.getInput(i);
    inputs.push_back({t.name, t.dtype, t.dims});
  }
  KILN_ASSIGN_OR_RETURN(const std::vector<std::string> files, ListBatchFiles(o.data));

  CalibrationOptions co;
  co.algorithm = o.algo == "minmax"       ? CalibrationAlgoType::kMINMAX_CALIBRATION
                 : o.algo == "percentile" ? CalibrationAlgoType::kPERCENTILE_CALIBRATION
                                          : CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  co.percentile = o.calib_percentile;
  co.backend = o.backend;
  co.max_batches = o.calib_batches;
  const std::string backend = o.backend.empty() ? GetDefaultBackendName() : o.backend;
  std::printf("[kiln] calibrating %s on %zu file(s) from %s (%s, %s backend)\n", o.onnx.c_str(), files.size(),
              o.data.c_str(), o.algo.c_str(), backend.c_str());
  size_t next_file = 0;
  std::deque<std::pair<std::string, std::map<std::string, Tensor>>> pending;
  std::string current;
  auto next = [&](std::map<std::string, Tensor>& batch) -> Result<bool> {
    while (pending.empty()) {
      if (next_file == files.size()) return false;
      const std::string& f = files[next_file++];
      KILN_ASSIGN_OR_RETURN(auto bs, LoadBatches(f, inputs));
      for (auto& b : bs) pending.emplace_back(f, std::move(b));
    }
    current = pending.front().first;
    batch = std::move(pending.front().second);
    pending.pop_front();
    return true;
  };
  co.on_batch = [&](int b) {
    std::printf("[kiln] calibrate: batch %d (%s)\n", b + 1, std::filesystem::path(current).filename().c_str());
    std::fflush(stdout);
  };
  KILN_ASSIGN_OR_RETURN(const CalibrationResult r, CalibrateNetwork(net, co, next));
  const std::string text = WriteCalibrationCache(r.table);
  {
    FILE* f = std::fopen(o.calib.c_str(), "wb");
    if (!f) return Err(StatusCode::kIoError, "cannot write the calibration cache '{}'", o.calib);
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) return Err(StatusCode::kIoError, "writing the calibration cache '{}' failed", o.calib);
  }
  std::printf("[kiln] calibrated %zu tensor(s) over %d batch(es) (%s); cache written to %s\n", r.tensors.size(),
              r.batches, CalibrationAlgoName(r.table.algorithm), o.calib.c_str());
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : r.tensors)
    tensors.push_back({{"name", t.name}, {"min", t.min}, {"max", t.max}, {"amax", t.amax}, {"threshold", t.threshold},
                       {"scale", t.scale}, {"values", t.count}});
  nlohmann::json accuracy;
  if (o.accuracy_target > 0) {
    // The INT8 engines are built for the backend that runs INT8 (--backend, default cpu) from these ranges.
    for (const auto& [tensor, scale] : r.table.scales)
      KILN_RETURN_IF_ERROR(net.setDynamicRange(tensor, -scale * 127.f, scale * 127.f));
    std::vector<std::map<std::string, Tensor>> eval;
    for (size_t f = 0; f < files.size() && static_cast<int>(eval.size()) < o.accuracy_batches; ++f) {
      KILN_ASSIGN_OR_RETURN(auto bs, LoadBatches(files[f], inputs));
      for (auto& b : bs)
        if (static_cast<int>(eval.size()) < o.accuracy_batches) eval.push_back(std::move(b));
    }
    KILN_RETURN_IF_ERROR(SearchLayerPrecisions(net, o, eval, logger, &accuracy));
  }
  *report = {{"operation", "calibrate"}, {"status", "success"},        {"input_model", o.onnx},
             {"data", o.data},            {"algorithm", o.algo},        {"cache_format", CalibrationAlgoName(r.table.algorithm)},
             {"percentile", o.algo == "percentile" ? nlohmann::json(o.calib_percentile) : nlohmann::json()},
             {"backend", backend},        {"batches", r.batches},       {"cache", o.calib},
             {"tensors", tensors}};
  if (!accuracy.is_null()) (*report)["accuracy"] = accuracy["accuracy"];
  return Status::Ok();
}

}  // namespace kiln::cli
