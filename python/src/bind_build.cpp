// Bindings of the build side: NetworkDefinition, OnnxParser, OptimizationProfile, BuilderConfig, Builder and the
// calibrator interface (include/kiln/network.h, builder.h, calibrator.h).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "bind_common.h"

namespace kiln::python {
namespace {

// The calibrator's C++ side. The Python package's calibrator base classes (kiln.IInt8EntropyCalibrator2, ...)
// implement the underscore methods on top of TensorRT's get_batch / read_calibration_cache /
// write_calibration_cache: _next_batch(names) returns the addresses of the next batch's inputs (in the build
// backend's memory), or None at the end.
class PyCalibrator : public IInt8Calibrator {
 public:
  NB_TRAMPOLINE(IInt8Calibrator);

  int32_t getBatchSize() const noexcept override {
    return GuardedCall("calibrator get_batch_size", 1,
                       [&] { return nb::cast<int32_t>(CallOverride(nb_trampoline, "_batch_size")); });
  }
  bool getBatch(void* bindings[], const char* names[], int32_t nb_bindings) noexcept override {
    return GuardedCall("calibrator get_batch", false, [&] {
      std::vector<std::string> ns(names, names + nb_bindings);
      nb::object r = CallOverride(nb_trampoline, "_next_batch", ns);
      if (r.is_none()) return false;
      auto ptrs = nb::cast<std::vector<uintptr_t>>(r);
      if (ptrs.size() != static_cast<size_t>(nb_bindings)) {
        PySys_WriteStderr("[kiln] calibrator get_batch returned %zu inputs, the network has %d\n", ptrs.size(),
                          nb_bindings);
        return false;
      }
      for (int32_t i = 0; i < nb_bindings; ++i) bindings[i] = reinterpret_cast<void*>(ptrs[i]);
      return true;
    });
  }
  const void* readCalibrationCache(std::size_t& length) noexcept override {
    return GuardedCall("calibrator read_calibration_cache", static_cast<const void*>(nullptr), [&]() -> const void* {
      nb::object r = CallOverride(nb_trampoline, "_read_cache");
      length = 0;
      if (r.is_none()) return nullptr;
      const nb::bytes b = nb::cast<nb::bytes>(r);
      cache_.assign(static_cast<const char*>(b.data()), b.size());
      length = cache_.size();
      return cache_.data();
    });
  }
  void writeCalibrationCache(const void* ptr, std::size_t length) noexcept override {
    GuardedCall("calibrator write_calibration_cache", 0, [&] {
      CallOverride(nb_trampoline, "_write_cache", nb::bytes(static_cast<const char*>(ptr), length));
      return 0;
    });
  }
  CalibrationAlgoType getAlgorithm() noexcept override {
    return GuardedCall("calibrator get_algorithm", CalibrationAlgoType::kENTROPY_CALIBRATION_2,
                       [&] { return nb::cast<CalibrationAlgoType>(CallOverride(nb_trampoline, "_algorithm")); });
  }
  double getPercentile() noexcept override {
    return GuardedCall("calibrator percentile", 99.99,
                       [&] { return nb::cast<double>(CallOverride(nb_trampoline, "_percentile")); });
  }

 private:
  std::string cache_;
};

std::string BytesOf(const nb::bytes& b) { return std::string(static_cast<const char*>(b.data()), b.size()); }

}  // namespace

void BindBuild(nb::module_& m) {
  nb::class_<NetworkTensor>(m, "NetworkTensor")
      .def_ro("name", &NetworkTensor::name)
      .def_ro("dtype", &NetworkTensor::dtype)
      .def_ro("shape", &NetworkTensor::dims)
      .def_ro("dim_names", &NetworkTensor::dim_names)
      .def_ro("type", &NetworkTensor::type);
  nb::class_<NetworkLayer>(m, "NetworkLayer")
      .def_ro("name", &NetworkLayer::name)
      .def_ro("op_type", &NetworkLayer::op_type)
      .def_ro("domain", &NetworkLayer::domain)
      .def_ro("inputs", &NetworkLayer::inputs)
      .def_ro("outputs", &NetworkLayer::outputs);

  nb::class_<NetworkDefinition>(m, "NetworkDefinition")
      .def(nb::init<>())
      .def(
          "add_input",
          [](NetworkDefinition& n, const std::string& name, DataType t, const Dims& dims,
             const std::vector<std::string>& dim_names) { Check(n.addInput(name, t, dims, dim_names)); },
          nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::arg("dim_names") = std::vector<std::string>{})
      .def(
          "add_constant",
          [](NetworkDefinition& n, const std::string& name, DataType t, const Dims& dims, const nb::bytes& data) {
            const size_t need = static_cast<size_t>(NumElements(dims)) * DataTypeSize(t);
            if (data.size() != need)
              throw KilnError(StatusCode::kInvalidArgument,
                              "add_constant '" + name + "': " + std::to_string(data.size()) + " bytes given, " +
                                  ShapeToString(dims) + " of " + DataTypeName(t) + " needs " + std::to_string(need));
            Check(n.addConstant(name, t, dims, data.data()));
          },
          nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::arg("data"))
      .def(
          "add_op",
          [](NetworkDefinition& n, const std::string& op, const std::string& name,
             const std::vector<std::string>& inputs, const std::vector<std::string>& outputs, const AttrMap& attrs) {
            Check(n.addOp(op, name, inputs, outputs, attrs));
          },
          nb::arg("op_type"), nb::arg("name"), nb::arg("inputs"), nb::arg("outputs"), nb::arg("attributes") = AttrMap{})
      .def("mark_output", [](NetworkDefinition& n, const std::string& name) { Check(n.markOutput(name)); })
      .def_prop_ro("num_inputs", &NetworkDefinition::getNbInputs)
      .def_prop_ro("num_outputs", &NetworkDefinition::getNbOutputs)
      .def_prop_ro("num_layers", &NetworkDefinition::getNbLayers)
      .def("get_input", &NetworkDefinition::getInput, nb::arg("index"))
      .def("get_output", &NetworkDefinition::getOutput, nb::arg("index"))
      .def("get_layer", &NetworkDefinition::getLayer, nb::arg("index"))
      .def_prop_ro("weight_bytes", &NetworkDefinition::getWeightBytes)
      .def("to_string", &NetworkDefinition::toString)
      .def_prop_rw("opset", &NetworkDefinition::getOpset, &NetworkDefinition::setOpset)
      .def(
          "set_dynamic_range",
          [](NetworkDefinition& n, const std::string& t, float lo, float hi) { Check(n.setDynamicRange(t, lo, hi)); },
          nb::arg("tensor"), nb::arg("min"), nb::arg("max"))
      .def("get_dynamic_range", &NetworkDefinition::getDynamicRange, nb::arg("tensor"));

  // parse / parse_from_file return "" or kiln's error message (the package splits a report of several unsupported
  // nodes into TensorRT-style parser errors).
  nb::class_<OnnxParser>(m, "OnnxParser")
      .def(nb::init<NetworkDefinition&, ILogger&>(), nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def("set_input_shapes", &OnnxParser::setInputShapes, nb::arg("shapes"))
      .def("set_external_data_dirs", &OnnxParser::setExternalDataDirs, nb::arg("dirs"))
      .def(
          "parse",
          [](OnnxParser& p, const nb::bytes& model, const std::string& base_dir) {
            const std::string data = BytesOf(model);
            Status s;
            {
              nb::gil_scoped_release release;
              s = p.parse(data.data(), data.size(), base_dir);
            }
            return s.ok() ? std::string() : s.message();
          },
          nb::arg("model"), nb::arg("base_dir") = ".")
      .def(
          "parse_from_file",
          [](OnnxParser& p, const std::string& path) {
            Status s;
            {
              nb::gil_scoped_release release;
              s = p.parseFromFile(path);
            }
            return s.ok() ? std::string() : s.message();
          },
          nb::arg("path"));

  nb::class_<OptimizationProfile>(m, "OptimizationProfile")
      .def(nb::init<>())
      .def(
          "set_shape",
          [](OptimizationProfile& p, const std::string& input, const Dims& mn, const Dims& opt, const Dims& mx) {
            Check(p.setDimensions(input, ProfileSelector::kMin, mn));
            Check(p.setDimensions(input, ProfileSelector::kOpt, opt));
            Check(p.setDimensions(input, ProfileSelector::kMax, mx));
          },
          nb::arg("input"), nb::arg("min"), nb::arg("opt"), nb::arg("max"))
      .def("get_shape",
           [](const OptimizationProfile& p, const std::string& input) {
             return std::vector<Dims>{p.getDimensions(input, ProfileSelector::kMin),
                                      p.getDimensions(input, ProfileSelector::kOpt),
                                      p.getDimensions(input, ProfileSelector::kMax)};
           })
      .def_prop_ro("shapes", &OptimizationProfile::shapes)
      .def("validate", [](const OptimizationProfile& p) { Check(p.validate()); });

  nb::enum_<BuilderFlag>(m, "BuilderFlag")
      .value("FP16", BuilderFlag::kFP16)
      .value("BF16", BuilderFlag::kBF16)
      .value("INT8", BuilderFlag::kINT8)
      .value("FP8", BuilderFlag::kFP8)
      .value("TF32", BuilderFlag::kTF32)
      .value("STRONGLY_TYPED", BuilderFlag::kSTRONGLY_TYPED)
      .value("OBEY_PRECISION_CONSTRAINTS", BuilderFlag::kOBEY_PRECISION_CONSTRAINTS)
      .value("NO_FALLBACK", BuilderFlag::kNO_FALLBACK);
  nb::enum_<ProfilingVerbosity>(m, "ProfilingVerbosity")
      .value("LAYER_NAMES_ONLY", ProfilingVerbosity::kLayerNamesOnly)
      .value("NONE", ProfilingVerbosity::kNone)
      .value("DETAILED", ProfilingVerbosity::kDetailed);
  nb::enum_<CalibrationAlgoType>(m, "CalibrationAlgoType")
      .value("LEGACY_CALIBRATION", CalibrationAlgoType::kLEGACY_CALIBRATION)
      .value("ENTROPY_CALIBRATION", CalibrationAlgoType::kENTROPY_CALIBRATION)
      .value("ENTROPY_CALIBRATION_2", CalibrationAlgoType::kENTROPY_CALIBRATION_2)
      .value("MINMAX_CALIBRATION", CalibrationAlgoType::kMINMAX_CALIBRATION)
      .value("PERCENTILE_CALIBRATION", CalibrationAlgoType::kPERCENTILE_CALIBRATION);

  nb::class_<IInt8Calibrator, PyCalibrator>(m, "_Calibrator",
                                            "The calibrator's C++ side; subclass kiln.IInt8EntropyCalibrator2 & co.")
      .def(nb::init<>());

  nb::class_<BuilderConfig>(m, "BuilderConfig")
      .def(nb::init<>())
      .def("set_flag", &BuilderConfig::setFlag, nb::arg("flag"))
      .def("clear_flag", &BuilderConfig::clearFlag, nb::arg("flag"))
      .def("get_flag", &BuilderConfig::getFlag, nb::arg("flag"))
      .def_prop_rw("flags", &BuilderConfig::flags, [](BuilderConfig& c, uint32_t f) {
        for (int i = 0; i < 32; ++i) {
          if ((f >> i) & 1u) c.setFlag(static_cast<BuilderFlag>(i));
          else c.clearFlag(static_cast<BuilderFlag>(i));
        }
      })
      .def("set_memory_pool_limit", &BuilderConfig::setMemoryPoolLimit, nb::arg("pool"), nb::arg("bytes"))
      .def("get_memory_pool_limit", &BuilderConfig::getMemoryPoolLimit, nb::arg("pool"))
      .def_prop_rw("max_tensor_elements", &BuilderConfig::maxTensorElements, &BuilderConfig::setMaxTensorElements)
      .def_prop_rw("int4_weight_block_size", &BuilderConfig::int4WeightBlockSize,
                   &BuilderConfig::setInt4WeightBlockSize)
      .def("add_optimization_profile",
           [](BuilderConfig& c, const OptimizationProfile& p) { return Take(c.addOptimizationProfile(p)); })
      .def_prop_ro("num_optimization_profiles", [](const BuilderConfig& c) { return c.profiles().size(); })
      .def_prop_rw("timing_cache_file", &BuilderConfig::timingCacheFile, &BuilderConfig::setTimingCacheFile)
      .def_prop_rw("builder_optimization_level", &BuilderConfig::builderOptimizationLevel,
                   &BuilderConfig::setBuilderOptimizationLevel)
      .def_prop_rw("disabled_passes", &BuilderConfig::disabledPasses, &BuilderConfig::setDisabledPasses)
      .def_prop_rw("profiling_verbosity", &BuilderConfig::profilingVerbosity, &BuilderConfig::setProfilingVerbosity)
      .def("set_layer_precision", &BuilderConfig::setLayerPrecision, nb::arg("layer"), nb::arg("dtype"))
      .def("set_layer_output_type", &BuilderConfig::setLayerOutputType, nb::arg("layer"), nb::arg("dtype"))
      .def_prop_ro("layer_precisions", &BuilderConfig::layerPrecisions)
      .def_prop_rw("backend", &BuilderConfig::backend, &BuilderConfig::setBackend)
      .def_prop_rw("avg_timing_iterations", &BuilderConfig::avgTimingIterations,
                   &BuilderConfig::setAvgTimingIterations)
      .def_prop_rw("max_aux_streams", &BuilderConfig::getMaxAuxStreams, &BuilderConfig::setMaxAuxStreams)
      .def("set_io_type", &BuilderConfig::setIOType, nb::arg("tensor"), nb::arg("dtype"))
      .def(
          "set_int8_calibrator",
          [](BuilderConfig& c, IInt8Calibrator* cal) { c.setInt8Calibrator(cal); }, nb::arg("calibrator").none(),
          nb::keep_alive<1, 2>())
      .def("set_calibration_profile",
           [](BuilderConfig& c, const OptimizationProfile& p) { Check(c.setCalibrationProfile(p)); });

  // Build config files (kiln/build_config_file.h): the same reader as `kiln build --config`.
  nb::class_<BuildConfigFile>(m, "BuildConfigFile")
      .def(nb::init<>())
      .def_rw("onnx", &BuildConfigFile::onnx, nb::arg().none())
      .def_rw("engine", &BuildConfigFile::engine, nb::arg().none())
      .def_rw("fp16", &BuildConfigFile::fp16, nb::arg().none())
      .def_rw("bf16", &BuildConfigFile::bf16, nb::arg().none())
      .def_rw("int8", &BuildConfigFile::int8, nb::arg().none())
      .def_rw("fp8", &BuildConfigFile::fp8, nb::arg().none())
      .def_rw("best", &BuildConfigFile::best, nb::arg().none())
      .def_rw("tf32", &BuildConfigFile::tf32, nb::arg().none())
      .def_rw("strongly_typed", &BuildConfigFile::strongly_typed, nb::arg().none())
      .def_rw("workspace_mb", &BuildConfigFile::workspace_mb, nb::arg().none())
      .def_rw("activations_mb", &BuildConfigFile::activations_mb, nb::arg().none())
      .def_rw("shapes", &BuildConfigFile::shapes)
      .def_rw("min_shapes", &BuildConfigFile::min_shapes)
      .def_rw("opt_shapes", &BuildConfigFile::opt_shapes)
      .def_rw("max_shapes", &BuildConfigFile::max_shapes)
      .def_rw("min_shape", &BuildConfigFile::min_shape, nb::arg().none())
      .def_rw("opt_shape", &BuildConfigFile::opt_shape, nb::arg().none())
      .def_rw("max_shape", &BuildConfigFile::max_shape, nb::arg().none())
      .def_rw("max_batch_size", &BuildConfigFile::max_batch_size, nb::arg().none())
      .def_rw("calibration_cache", &BuildConfigFile::calibration_cache, nb::arg().none())
      .def_rw("calibration_data", &BuildConfigFile::calibration_data, nb::arg().none())
      .def_rw("calibration_algorithm", &BuildConfigFile::calibration_algorithm, nb::arg().none())
      .def_rw("timing_cache", &BuildConfigFile::timing_cache, nb::arg().none())
      .def_rw("backend", &BuildConfigFile::backend, nb::arg().none())
      .def_rw("builder_optimization_level", &BuildConfigFile::builder_optimization_level, nb::arg().none())
      .def_rw("profiling_verbosity", &BuildConfigFile::profiling_verbosity, nb::arg().none())
      .def_rw("avg_timing", &BuildConfigFile::avg_timing, nb::arg().none())
      .def_rw("max_aux_streams", &BuildConfigFile::max_aux_streams, nb::arg().none())
      .def_rw("precision_constraints", &BuildConfigFile::precision_constraints, nb::arg().none())
      .def_rw("layer_precisions", &BuildConfigFile::layer_precisions)
      .def("resolve_shapes", [](const BuildConfigFile& c, const std::vector<std::string>& inputs) {
        std::map<std::string, Dims> mn, op, mx;
        Check(c.ResolveShapes(inputs, &mn, &op, &mx));
        return std::make_tuple(mn, op, mx);
      });
  m.def("parse_build_config", [](const std::string& text, const std::string& source) {
    return Take(ParseBuildConfig(text, source));
  }, nb::arg("text"), nb::arg("source") = "config");
  m.def("read_build_config", [](const std::string& path) { return Take(ReadBuildConfigFile(path)); }, nb::arg("path"));
  m.def("write_build_config", &WriteBuildConfig, nb::arg("config"));

  nb::class_<Builder>(m, "Builder")
      .def(nb::init<ILogger&>(), nb::keep_alive<1, 2>())
      .def(
          "build_serialized_network",
          [](const Builder& b, const NetworkDefinition& n, const BuilderConfig& c) {
            BuildReport report;
            std::optional<Result<std::vector<uint8_t>>> r;
            {
              nb::gil_scoped_release release;
              r.emplace(b.buildSerializedNetwork(n, c, &report));
            }
            std::vector<uint8_t> bytes = Take(std::move(*r));
            nb::bytes engine(reinterpret_cast<const char*>(bytes.data()), bytes.size());
            return std::make_pair(engine, report.ToJson("", "", c, false));
          },
          nb::arg("network"), nb::arg("config"),
          "The engine file's bytes and the build report (JSON), or KilnError");
}

}  // namespace kiln::python
