// kiln — INT8 calibration: the calibrator interface a builder reads batches through (TensorRT's IInt8Calibrator
// shape), the calibration cache (TensorRT's text format), and calibration as a function of its own (what
// `kiln calibrate` runs).
//
// Implicit INT8 (BuilderFlag::kINT8 on a network without Q/DQ nodes) needs a scale for the activations it
// quantizes. They come from, in order: the network's dynamic ranges (NetworkDefinition::setDynamicRange, e.g. read
// from a cache with ParseCalibrationCache), the calibrator's cache (readCalibrationCache), or a calibration run
// over the calibrator's batches (the float network, node by node on the build's backend: the GPU where the build is
// for one, the CPU otherwise), whose result the builder hands back through writeCalibrationCache.
//
// The cache file: a header line "TRT-<version>-<algorithm>" (EntropyCalibration2, MinMaxCalibration, and kiln's
// PercentileCalibration; TensorRT's EntropyCalibration and LegacyCalibration load too), then one line per tensor,
// "<tensor name>: <scale>", the scale a float32 written as the 8 hex digits of its bits (3c010a14 = 0.00787). A
// tensor's dynamic range is +-(scale * 127).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/network.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

enum class CalibrationAlgoType : int32_t {
  kLEGACY_CALIBRATION = 0,     // read from caches only
  kENTROPY_CALIBRATION = 1,    // read from caches only
  kENTROPY_CALIBRATION_2 = 2,  // minimal KL divergence of the 128-level histogram (TensorRT's recommended one)
  kMINMAX_CALIBRATION = 3,     // the largest |x| seen
  kPERCENTILE_CALIBRATION = 64,  // kiln's: the |x| below which a percentile of the values lie
};

// "EntropyCalibration2", "MinMaxCalibration", ... (the cache header's spelling).
const char* CalibrationAlgoName(CalibrationAlgoType a);

// Batches in, cache out. Implement getBatch (and the cache functions to keep the result); derive from one of the
// typed calibrators below, which fix getAlgorithm. Calls come from the thread that builds.
class IInt8Calibrator {
 public:
  virtual ~IInt8Calibrator() = default;
  // Informational (the batch is part of each input's shape); kept for TensorRT code.
  virtual int32_t getBatchSize() const noexcept = 0;
  // Fills bindings[i] with the address of the next batch of input names[i] (nbBindings of them: every network
  // input), each at the calibration shape (BuilderConfig::setCalibrationProfile; default: the first profile's opt
  // shapes, or the input's own static shape), in the build backend's memory (device memory on backends with
  // BackendInfo::device_memory, host memory otherwise). Returns false when there are no more batches. The
  // memory must stay valid until the next call.
  virtual bool getBatch(void* bindings[], const char* names[], int32_t nbBindings) noexcept = 0;
  // A cache from an earlier run (length > 0) skips calibration; nullptr or length 0: calibrate.
  virtual const void* readCalibrationCache(std::size_t& length) noexcept = 0;
  // Receives the cache a calibration run wrote.
  virtual void writeCalibrationCache(const void* ptr, std::size_t length) noexcept = 0;
  virtual CalibrationAlgoType getAlgorithm() noexcept = 0;
  // The percentile the percentile calibrator keeps (0..100].
  virtual double getPercentile() noexcept { return 99.99; }
};

class IInt8EntropyCalibrator2 : public IInt8Calibrator {
 public:
  CalibrationAlgoType getAlgorithm() noexcept override { return CalibrationAlgoType::kENTROPY_CALIBRATION_2; }
};
class IInt8MinMaxCalibrator : public IInt8Calibrator {
 public:
  CalibrationAlgoType getAlgorithm() noexcept override { return CalibrationAlgoType::kMINMAX_CALIBRATION; }
};
class IInt8PercentileCalibrator : public IInt8Calibrator {
 public:
  CalibrationAlgoType getAlgorithm() noexcept override { return CalibrationAlgoType::kPERCENTILE_CALIBRATION; }
};

// A calibration cache's contents.
struct CalibrationTable {
  CalibrationAlgoType algorithm = CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  std::string version = "8601";                        // the header's TensorRT version field
  std::vector<std::pair<std::string, float>> scales;  // tensor name -> scale (dynamic range / 127), in file order
};

// Reads a cache (`source` names it in errors: a malformed line is an error naming the line and what is wrong).
Result<CalibrationTable> ParseCalibrationCache(const void* data, std::size_t size, const std::string& source);
Result<CalibrationTable> ReadCalibrationCacheFile(const std::string& path);
// The cache's text; the same table always gives the same bytes. Tensors whose name is empty or holds a line feed
// (which the line format cannot hold) are left out.
std::string WriteCalibrationCache(const CalibrationTable& table);

// ---- calibration as a function (kiln calibrate) ----

// What calibration saw of one tensor.
struct TensorCalibration {
  std::string name;
  float min = 0, max = 0, amax = 0;  // of the finite values seen
  double threshold = 0;              // the clipping |x| the algorithm chose
  float scale = 0;                   // threshold / 127
  int64_t count = 0;                 // values seen
};

struct CalibrationOptions {
  CalibrationAlgoType algorithm = CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  double percentile = 99.99;  // kPERCENTILE_CALIBRATION only
  std::string backend;        // which backend runs the float network; empty: cuda where a GPU is found, else cpu
  int max_batches = 0;        // stop after this many batches (0: all)
  // Called after each batch (batch index from 0), e.g. for a progress line.
  std::function<void(int)> on_batch;
};

struct CalibrationResult {
  CalibrationTable table;                  // every float tensor of the network that a batch computed
  std::vector<TensorCalibration> tensors;  // the same, with what was seen, in network order
  int batches = 0;
};

// Runs the network as defined (float, node by node) on each batch `next` gives (host tensors named like the
// network's inputs; `next` returns false when there are no more) and picks every float tensor's threshold.
Result<CalibrationResult> CalibrateNetwork(const NetworkDefinition& network, const CalibrationOptions& options,
                                           const std::function<Result<bool>(std::map<std::string, Tensor>&)>& next);

}  // namespace kiln
