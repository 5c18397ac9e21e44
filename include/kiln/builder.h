// kiln — the builder: optimizes a network for a backend and writes a serialized engine.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/calibrator.h"
#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

enum class BuilderFlag : int {
  kFP16 = 0,                    // allow float16 kernels
  kBF16 = 1,                    // allow bfloat16 kernels
  kINT8 = 2,                    // allow int8 kernels (needs calibration or Q/DQ)
  kFP8 = 3,                     // allow FP8 E4M3 kernels (Hopper)
  kTF32 = 4,                    // allow TF32 for float32 math (on by default)
  kSTRONGLY_TYPED = 5,          // keep the network's types exactly; no precision choice
  kOBEY_PRECISION_CONSTRAINTS = 6,  // per-layer precisions are requirements, not preferences
  // Nodes a GPU backend has no kernel for fail the build (one error listing them all) instead of running on the CPU
  // inside the engine (`--noFallback`).
  kNO_FALLBACK = 7,
};

enum class ProfilingVerbosity { kLayerNamesOnly = 0, kNone = 1, kDetailed = 2 };

// Channels-last (NHWC) layout for 2-D convolutions, on backends that plan layouts (cuda; builds at optimization
// level 0 plan none). The environment variable KILN_LAYOUT, when set, overrides it for experiments: nchw, nhwc-fp32,
// nhwc-fp16 or nhwc-c8 (the modes below; the build fails on any other value).
enum class ConvolutionLayout : int {
  kAuto = 0,             // NHWC for reduced-precision convolutions, and for float32 ones where TF32 is allowed
  kNCHW = 1,             // float convolutions stay NCHW (KILN_LAYOUT=nchw); int8 ones still go NHWC, the layout
                         // the int8 tensor-core kernels read
  kNHWCFloat32 = 2,      // float32 convolutions go NHWC even without TF32 (KILN_LAYOUT=nhwc-fp32)
  kNHWCReducedOnly = 3,  // only reduced-precision convolutions go NHWC (KILN_LAYOUT=nhwc-fp16)
  kNHWCChannels8 = 4,    // as kAuto, but convolutions whose input channels are not a multiple of 8 (an RGB stem)
                         // stay NCHW (KILN_LAYOUT=nhwc-c8)
};

// min/opt/max shapes for the dynamic inputs of a network. An engine holds one or more profiles; a context
// runs at any shape inside the one it selected.
class OptimizationProfile {
 public:
  Status setDimensions(const std::string& input, ProfileSelector which, const Dims& dims);
  Dims getDimensions(const std::string& input, ProfileSelector which) const;
  const std::map<std::string, std::vector<Dims>>& shapes() const { return shapes_; }  // input -> {min,opt,max}
  // Checks min <= opt <= max per dimension, equal ranks; names the input on error.
  Status validate() const;

 private:
  std::map<std::string, std::vector<Dims>> shapes_;
};

class BuilderConfig {
 public:
  BuilderConfig();
  void setFlag(BuilderFlag f) { flags_ |= 1u << static_cast<int>(f); }
  void clearFlag(BuilderFlag f) { flags_ &= ~(1u << static_cast<int>(f)); }
  bool getFlag(BuilderFlag f) const { return (flags_ >> static_cast<int>(f)) & 1u; }
  uint32_t flags() const { return flags_; }

  // Memory pools (bytes; 0 = the default). "activations": the most activation memory (the arena) one execution
  // context may need at the profiles' largest shapes; default: the backend's memory (the GPU's, or the host's
  // physical memory). A build that needs more fails naming the largest tensors and the limit. Other pools are
  // not read yet ("workspace": kernels take fixed scratch memory; kiln build refuses --memPoolSize=workspace).
  void setMemoryPoolLimit(const std::string& pool, size_t bytes) { pools_[pool] = bytes; }
  size_t getMemoryPoolLimit(const std::string& pool) const;
  // The most elements any one tensor may hold at the profiles' largest shapes (default 2^35; 0: no limit); a build
  // with a larger tensor fails naming it, its shape and this limit.
  void setMaxTensorElements(int64_t n) { max_tensor_elements_ = n; }
  int64_t maxTensorElements() const { return max_tensor_elements_; }

  // INT4 weight-only from a float model (kiln build --int4Weights): every MatMul whose weight is a float [K, N]
  // constant gets it quantized at build time — symmetric, round to nearest, one scale (max |w| / 7, in the weight's
  // type, or float16 / bfloat16 for a float32 weight in an FP16 / BF16 build) per block of this many K along each column — and runs as a weight-only layer reading 4-bit weights. 0 (the
  // default): off. Layers pinned by setLayerPrecision keep their float weights. Explicitly quantized 4-bit weights
  // (DequantizeLinear of int4/uint4) become weight-only layers either way.
  void setInt4WeightBlockSize(int64_t block) { int4_weight_block_ = block; }
  int64_t int4WeightBlockSize() const { return int4_weight_block_; }

  // Auxiliary streams (trtexec --maxAuxStreams, TensorRT's setMaxAuxStreams): the most streams besides the
  // caller's that an engine may run independent branches of the graph on at the same time (Inception-style blocks,
  // detector heads, parallel projections). 0 (the default): every layer on the caller's stream. Each auxiliary
  // stream an engine uses costs its contexts a layer scratch buffer of its own, and memory the branches can no
  // longer share. Backends that run one layer at a time (cpu) ignore it. At most 64.
  void setMaxAuxStreams(int n) { max_aux_streams_ = n; }
  int getMaxAuxStreams() const { return max_aux_streams_; }

  // Returns the profile's index, or an error naming the bad input.
  Result<int> addOptimizationProfile(const OptimizationProfile& profile);
  const std::vector<OptimizationProfile>& profiles() const { return profiles_; }

  void setTimingCacheFile(const std::string& path) { timing_cache_ = path; }
  const std::string& timingCacheFile() const { return timing_cache_; }
  // 0..5 (default 3): how hard the builder searches; 0 skips fusion.
  void setBuilderOptimizationLevel(int level) { opt_level_ = level; }
  int builderOptimizationLevel() const { return opt_level_; }
  // Optimizer passes to skip, by name (kiln build --disablePasses; for A/B measurements). Unknown names fail the
  // build with the list of pass names.
  void setDisabledPasses(std::vector<std::string> names) { disabled_passes_ = std::move(names); }
  const std::vector<std::string>& disabledPasses() const { return disabled_passes_; }
  void setProfilingVerbosity(ProfilingVerbosity v) { profiling_ = v; }
  ProfilingVerbosity profilingVerbosity() const { return profiling_; }
  // Per-layer precision and output type (layer = node name).
  void setLayerPrecision(const std::string& layer, DataType t) { layer_precision_[layer] = t; }
  void setLayerOutputType(const std::string& layer, DataType t) { layer_output_type_[layer] = t; }
  const std::map<std::string, DataType>& layerPrecisions() const { return layer_precision_; }
  const std::map<std::string, DataType>& layerOutputTypes() const { return layer_output_type_; }
  // The backend to build for, by name: "cpu" (the reference backend) or "cuda"; default: cuda when a GPU is found,
  // else cpu.
  void setBackend(const std::string& backend) { backend_ = backend; }
  const std::string& backend() const { return backend_; }
  // Timed runs per tactic candidate (trtexec --avgTiming; default 8); the median decides.
  void setAvgTimingIterations(int n) { avg_timing_ = n; }
  int avgTimingIterations() const { return avg_timing_; }
  // Types of the engine's inputs/outputs at its boundary, by I/O name (default: the network's own types).
  void setIOType(const std::string& tensor, DataType t) { io_types_[tensor] = t; }
  const std::map<std::string, DataType>& ioTypes() const { return io_types_; }
  // Layout of 2-D convolutions (default kAuto; KILN_LAYOUT overrides it, see ConvolutionLayout).
  void setConvolutionLayout(ConvolutionLayout layout) { conv_layout_ = layout; }
  ConvolutionLayout convolutionLayout() const { return conv_layout_; }
  // NHWC convolutions with fewer input channels than this read them zero-padded to it: 0 (off), 4 (default), 8 or
  // 16; the build fails on other values. KILN_LAYOUT_PAD=N, when set, overrides it for experiments.
  void setLayoutChannelPadding(int channels) { layout_pad_ = channels; }
  int layoutChannelPadding() const { return layout_pad_; }
  // INT8 calibration (kINT8 on a network without Q/DQ nodes and without dynamic ranges): the builder reads the
  // calibrator's cache, or calibrates with its batches and hands it the cache (kiln/calibrator.h). Not owned; must
  // outlive the build. nullptr: none.
  void setInt8Calibrator(IInt8Calibrator* calibrator) { calibrator_ = calibrator; }
  IInt8Calibrator* getInt8Calibrator() const { return calibrator_; }
  // The input shapes calibration batches have (TensorRT's setCalibrationProfile): its opt shapes. Default: the
  // first optimization profile's opt shapes (static inputs keep their shapes).
  Status setCalibrationProfile(const OptimizationProfile& profile) {
    KILN_RETURN_IF_ERROR(profile.validate());
    calibration_profile_ = profile;
    has_calibration_profile_ = true;
    return Status::Ok();
  }
  const OptimizationProfile* getCalibrationProfile() const {
    return has_calibration_profile_ ? &calibration_profile_ : nullptr;
  }

 private:
  uint32_t flags_ = 0;
  std::map<std::string, size_t> pools_;
  int64_t max_tensor_elements_ = int64_t{1} << 35;
  int64_t int4_weight_block_ = 0;
  int max_aux_streams_ = 0;
  std::vector<OptimizationProfile> profiles_;
  std::string timing_cache_;
  int opt_level_ = 3;
  std::vector<std::string> disabled_passes_;
  ProfilingVerbosity profiling_ = ProfilingVerbosity::kLayerNamesOnly;
  std::map<std::string, DataType> layer_precision_, layer_output_type_;
  std::string backend_;
  int avg_timing_ = 8;
  std::map<std::string, DataType> io_types_;
  ConvolutionLayout conv_layout_ = ConvolutionLayout::kAuto;
  int layout_pad_ = 4;
  IInt8Calibrator* calibrator_ = nullptr;
  OptimizationProfile calibration_profile_;
  bool has_calibration_profile_ = false;
};

// What a build did, for the build summary and `--json`.
struct BuildReport {
  std::vector<std::pair<std::string, int>> passes;  // pass name, rewrites (in order)
  std::vector<std::string> pass_details;            // one line per rewrite (verbose log)
  size_t layers_before = 0, layers_after = 0;
  std::map<std::string, int> fusions;               // "batchnorm_folded", "bias_activation", "gelu", ...
  std::map<std::string, int> op_counts;             // layers of the built engine by op type
  int reformats_eliminated = 0;  // layout planning: per-layer reformats avoided
  int reformats_inserted = 0;    // layout planning: NCHW <-> NHWC Transposes in the engine
  int tactics_selected = 0;
  // cuda: tactic selection and precision planning.
  int layers_timed = 0, timing_cache_hits = 0, candidates_timed = 0;
  int tactic_repeats = 0;  // layers given the tactic of an identical layer timed earlier in the build
  // Dynamic profiles: layers also timed at other shapes of the first profile (min, max, midpoints), and of them those
  // whose tactic is not the fastest at the opt shape (a faster one there is much slower elsewhere).
  int tactics_across_profile = 0, tactics_profile_changed = 0;
  // Per-shape tactics: layers also created at another profile point with the tactic fastest there (their count).
  int tactic_variants = 0;
  double tuning_time_s = 0;
  double tactic_create_s = 0, tactic_timing_s = 0;  // of tuning_time_s: creating candidates (plans), timing them
  int layers_reduced_precision = 0, layers_fp32 = 0, casts_inserted = 0;
  // INT8: layers running as INT8 kernels, Q/DQ pairs placed from calibrated ranges (implicit INT8), and the INT8
  // layers left in float for want of a range (their names).
  int layers_int8 = 0, int8_tensors_calibrated = 0;
  std::vector<std::string> int8_layers_without_range;
  std::vector<std::string> int8_candidate_layers;  // implicit INT8: the layers whose input was quantized (names)
  // INT8 layers that stayed in float, and why (no range, --layerPrecisions, or not made an INT8 layer: the backend
  // has no INT8 kernel it prefers for it, or its int32 sums could overflow).
  std::vector<std::pair<std::string, std::string>> int8_fallbacks;
  // INT4 weight-only: layers reading a packed 4-bit weight, and the readers of 4-bit weights that run in float (why).
  int layers_int4_weight_only = 0;
  std::vector<std::pair<std::string, std::string>> weight_only_fallbacks;
  // Nodes of a GPU engine that run on the CPU (CPU fallback): why, and the bytes copied between device and host per
  // inference at the tuning shapes (inputs down, outputs up).
  struct CpuFallback {
    std::string layer, op, reason;
    int64_t bytes_per_inference = 0;
  };
  std::vector<CpuFallback> cpu_fallbacks;
  // Auxiliary streams: the most allowed, the streams used besides the main one, the cross-stream waits per run, and
  // per auxiliary stream the layers it runs (in order) beside the main stream's.
  int aux_streams_max = 0, aux_streams_used = 0, cross_stream_waits = 0;
  std::vector<std::vector<std::string>> aux_stream_layers;
  std::string calibration_source;  // "dynamic ranges", "calibration cache", "calibrated N batches", or empty
  std::string device;
  size_t engine_bytes = 0;
  size_t arena_bytes = 0, naive_activation_bytes = 0;
  double build_time_s = 0;
  // Wall seconds of each build phase in order ("optimize", "precision", "tactics", ...): where a build's time goes.
  std::vector<std::pair<std::string, double>> phases_s;
  double estimated_latency_ms = 0;
  std::string backend;
  std::string ToJson(const std::string& input_model, const std::string& output_engine, const BuilderConfig& config,
                     bool dynamic_shapes) const;
};

class Builder {
 public:
  explicit Builder(ILogger& logger) : logger_(logger) {}
  std::unique_ptr<NetworkDefinition> createNetwork() const { return std::make_unique<NetworkDefinition>(); }
  std::unique_ptr<BuilderConfig> createBuilderConfig() const { return std::make_unique<BuilderConfig>(); }
  std::unique_ptr<OptimizationProfile> createOptimizationProfile() const {
    return std::make_unique<OptimizationProfile>();
  }
  // Optimizes the network for the config's backend and returns the engine file's bytes. The network is left
  // as it was. A network with dynamic inputs needs an optimization profile covering every dynamic dim.
  Result<std::vector<uint8_t>> buildSerializedNetwork(const NetworkDefinition& network, const BuilderConfig& config,
                                                      BuildReport* report = nullptr) const;

 private:
  ILogger& logger_;
};

}  // namespace kiln
