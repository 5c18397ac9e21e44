// INT8 in the builder: explicit quantization (a network with Q/DQ nodes: the optimizer's fuse-quantized pass makes
// INT8 layers of what they quantize) and implicit quantization (--int8 on a float network: ranges from the
// network's dynamic ranges, the calibrator's cache, or a calibration run; Q/DQ pairs placed from them).
#include "runtime/builder_int8.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "quant/insert_qdq.h"
#include "runtime/calibration_internal.h"
#include "runtime/network_graph.h"

namespace kiln {

namespace {

// The shape each input's calibration batches have: the calibration profile's opt shapes, else the first profile's,
// else the input's static shape.
Result<std::map<std::string, Dims>> CalibrationShapes(const Graph& g, const BuilderConfig& cfg) {
  const OptimizationProfile* prof = cfg.getCalibrationProfile();
  if (!prof && !cfg.profiles().empty()) prof = &cfg.profiles()[0];
  std::map<std::string, Dims> shapes;
  for (const Value* in : g.inputs) {
    Dims d;
    if (prof && prof->shapes().count(in->name)) {
      d = prof->shapes().at(in->name)[static_cast<int>(ProfileSelector::kOpt)];
    } else if (IsStatic(in->shape)) {
      d = ToStatic(in->shape);
    } else {
      return Err(StatusCode::kInvalidArgument,
                 "calibration: input '{}' {} has dynamic dims and no profile gives its calibration shape (set an "
                 "optimization profile or BuilderConfig::setCalibrationProfile)",
                 in->name, ShapeToString(in->shape));
    }
    shapes[in->name] = d;
  }
  return shapes;
}

// Calibrates with the calibrator's batches on `backend`; hands the cache back to the calibrator.
Result<CalibrationTable> RunCalibrator(const Graph& g, IInt8Calibrator& calib, const BuilderConfig& cfg,
                                       const Backend& backend, int* batches, ILogger& logger) {
  KILN_ASSIGN_OR_RETURN(const auto shapes, CalibrationShapes(g, cfg));
  std::vector<std::string> names;
  for (const Value* in : g.inputs) names.push_back(in->name);
  const DeviceApi* device = backend.Device();
  auto next = [&](std::map<std::string, Tensor>& batch) -> Result<bool> {
    std::vector<void*> bindings(names.size(), nullptr);
    std::vector<const char*> cnames;
    for (const auto& n : names) cnames.push_back(n.c_str());
    if (!calib.getBatch(bindings.data(), cnames.data(), static_cast<int32_t>(names.size()))) return false;
    for (size_t i = 0; i < names.size(); ++i) {
      const Value* in = g.inputs[i];
      if (!bindings[i])
        return Err(StatusCode::kInvalidArgument, "the calibrator's getBatch gave no address for input '{}'", names[i]);
      Tensor t(in->dtype, shapes.at(names[i]));
      if (t.nbytes() > 0) {
        if (device) {
          Status st = device->Copy(t.raw(), bindings[i], t.nbytes(), DeviceApi::Direction::kToHost, nullptr);
          if (!st.ok()) return st.WithContext(fmt::format("reading calibration input '{}' ({} bytes)", names[i], t.nbytes()));
        } else {
          std::memcpy(t.raw(), bindings[i], t.nbytes());
        }
      }
      batch[names[i]] = std::move(t);
    }
    return true;
  };
  CalibrationOptions o;
  o.algorithm = calib.getAlgorithm();
  o.percentile = calib.getPercentile();
  o.backend = std::string(backend.Name());
  o.on_batch = [&logger](int b) {
    logger.log(Severity::kVerbose, fmt::format("calibration: batch {} done", b + 1).c_str());
  };
  KILN_ASSIGN_OR_RETURN(CalibrationResult r, CalibrateGraph(g, o, next));
  *batches = r.batches;
  const std::string text = WriteCalibrationCache(r.table);
  calib.writeCalibrationCache(text.data(), text.size());
  return r.table;
}

}  // namespace

Result<Int8Plan> PlanInt8(const NetworkDefinition& network, Graph& g, const BuilderConfig& cfg, const Backend& backend,
                          BuildReport& rep, ILogger& logger) {
  Int8Plan plan;
  // --layerPrecisions: layers pinned to a float type stay out of INT8; a layer pinned to int8 needs INT8.
  for (const auto& [layer, t] : cfg.layerPrecisions()) {
    if (t != DataType::kInt8) {
      plan.keep_float.insert(layer);
      continue;
    }
    if (!cfg.getFlag(BuilderFlag::kINT8) && !quant::HasQdq(g))
      return Err(StatusCode::kInvalidArgument, "--layerPrecisions={}:int8 needs --int8 (and ranges) or a model with "
                                               "Q/DQ nodes", layer);
  }
  if (quant::HasQdq(g)) {
    // Explicit quantization: the network's Q/DQ nodes say what is INT8 or FP8; nothing to calibrate.
    if (cfg.getFlag(BuilderFlag::kINT8) || cfg.getFlag(BuilderFlag::kFP8))
      logger.log(Severity::kInfo, "int8: the network has Q/DQ nodes: building what they quantize (explicit "
                                  "quantization; dynamic ranges and calibrators are not used)");
    return plan;
  }
  const bool fp8 = cfg.getFlag(BuilderFlag::kFP8);
  if (fp8 && cfg.getFlag(BuilderFlag::kINT8))
    return Err(StatusCode::kInvalidArgument,
               "--int8 and --fp8 both ask to quantize this float network from its ranges: give one of them (a network "
               "with Q/DQ nodes may mix the two types)");
  if (!cfg.getFlag(BuilderFlag::kINT8) && !fp8) return plan;
  const char* flag = fp8 ? "--fp8" : "--int8";
  // The ranges arrive as int8 scales (range / 127: dynamic ranges, TensorRT's cache format); FP8 spreads the same
  // range over E4M3's largest value, 448.
  const float levels = fp8 ? 448.f : 127.f;

  std::map<std::string, float> scales;
  if (!network.dynamicRanges().empty()) {
    for (const auto& [name, r] : network.dynamicRanges()) {
      const float amax = std::max(std::fabs(r.first), std::fabs(r.second));
      if (amax > 0) scales[name] = amax / levels;
    }
    rep.calibration_source = "dynamic ranges";
  } else if (IInt8Calibrator* calib = cfg.getInt8Calibrator()) {
    size_t length = 0;
    const void* cache = calib->readCalibrationCache(length);
    CalibrationTable table;
    if (cache && length > 0) {
      KILN_ASSIGN_OR_RETURN(table, ParseCalibrationCache(cache, length, "the calibrator's cache"));
      rep.calibration_source = "calibration cache";
    } else {
      int batches = 0;
      KILN_ASSIGN_OR_RETURN(table, RunCalibrator(GraphOf(network), *calib, cfg, backend, &batches, logger));
      rep.calibration_source = fmt::format("calibrated {} batch(es) ({})", batches, CalibrationAlgoName(table.algorithm));
    }
    for (const auto& [name, s] : table.scales)
      if (s > 0) scales[name] = s * 127.f / levels;
  } else {
    return Err(StatusCode::kInvalidArgument,
               "{} needs the ranges of the network's activations: a calibration cache (--calib=FILE, written by "
               "kiln calibrate), a calibrator (BuilderConfig::setInt8Calibrator) or dynamic ranges "
               "(NetworkDefinition::setDynamicRange); or a model quantized with Q/DQ nodes", flag);
  }
  int unknown = 0;
  for (const auto& [name, s] : scales) unknown += g.FindValue(name) ? 0 : 1;
  if (unknown > 0)
    logger.log(Severity::kWarning, fmt::format("int8: {} of the {} ranges name tensors this network does not have "
                                               "(a cache from another model?): ignored",
                                               unknown, scales.size())
                                       .c_str());
  const quant::QdqReport q = quant::InsertActivationQdq(g, scales, plan.keep_float,
                                                      fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8);
  rep.int8_candidate_layers = q.layers;
  for (const auto& name : q.layers_pinned)
    logger.log(Severity::kInfo, fmt::format("int8: layer '{}' stays in float (--layerPrecisions)", name).c_str());
  // A layer pinned to int8 that cannot be: say so (with --precisionConstraints=obey, fail).
  for (const auto& [layer, t] : cfg.layerPrecisions()) {
    if (t != DataType::kInt8 || std::find(q.layers.begin(), q.layers.end(), layer) != q.layers.end()) continue;
    const std::string why = fmt::format("--layerPrecisions={}:int8: '{}' is not a convolution or matrix product with "
                                        "a constant weight and a calibrated input in this network", layer, layer);
    if (cfg.getFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS)) return Err(StatusCode::kInvalidArgument, "{}", why);
    logger.log(Severity::kWarning, (why + ": ignored").c_str());
  }
  rep.int8_tensors_calibrated = q.tensors_quantized;
  rep.int8_layers_without_range = q.layers_without_range;
  for (const auto& name : q.layers_without_range)
    logger.log(Severity::kWarning,
               fmt::format("int8: layer '{}' has no range for its input: it stays in float", name).c_str());
  if (q.layers_quantized == 0)
    return Err(StatusCode::kInvalidArgument,
               "{}: none of the network's convolutions and matrix products has a range for its input ({} "
               "range(s) given{}): check that the calibration cache was written for this model", flag,
               scales.size(), unknown > 0 ? fmt::format(", {} naming tensors the network lacks", unknown) : "");
  logger.log(Severity::kInfo, fmt::format("{}: {} layer input(s) quantized from {} ({} tensor(s))",
                                          fp8 ? "fp8" : "int8", q.layers_quantized, rep.calibration_source, q.tensors_quantized)
                                  .c_str());
  plan.quantize_float_weights = true;
  return plan;
}

}  // namespace kiln
