// Bindings of kiln's enums, loggers, profilers, backends and device memory (include/kiln/types.h, logger.h,
// profiler.h, backend.h).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <mutex>

#include "bind_common.h"

namespace kiln::python {
namespace {

// Python subclasses of ILogger override log(severity, message). Calls may come from the threads kiln builds on;
// the trampoline takes the GIL. An exception the Python method raises is printed, not propagated (log is noexcept).
struct PyILogger : ILogger {
  NB_TRAMPOLINE(ILogger);
  void log(Severity severity, const char* message) noexcept override {
    GuardedCall("ILogger.log", 0, [&] {
      CallOverride(nb_trampoline, "log", severity, message);
      return 0;
    });
  }
};

// The concrete logger (TensorRT's trt.Logger): messages at min_severity or more severe, to stderr.
class PrintLogger : public ILogger {
 public:
  explicit PrintLogger(Severity min) : min_(min) {}
  void log(Severity severity, const char* message) noexcept override {
    if (static_cast<int>(severity) > static_cast<int>(min_)) return;
    std::lock_guard<std::mutex> lock(mu_);
    std::fprintf(stderr, "[kiln] [%s] %s\n", SeverityName(severity), message);
  }
  Severity min_;

 private:
  std::mutex mu_;
};

struct PyIProfiler : IProfiler {
  NB_TRAMPOLINE(IProfiler);
  void reportLayerTime(const char* layer_name, float ms) noexcept override {
    GuardedCall("IProfiler.report_layer_time", 0, [&] {
      CallOverride(nb_trampoline, "report_layer_time", layer_name, ms);
      return 0;
    });
  }
};

}  // namespace

void BindTypes(nb::module_& m) {
  nb::enum_<DataType>(m, "DataType", "Element types (the values are ONNX's TensorProto codes)")
      .value("UNDEFINED", DataType::kUndefined)
      .value("FLOAT", DataType::kFloat32)
      .value("UINT8", DataType::kUInt8)
      .value("INT8", DataType::kInt8)
      .value("UINT16", DataType::kUInt16)
      .value("INT16", DataType::kInt16)
      .value("INT32", DataType::kInt32)
      .value("INT64", DataType::kInt64)
      .value("BOOL", DataType::kBool)
      .value("HALF", DataType::kFloat16)
      .value("DOUBLE", DataType::kFloat64)
      .value("UINT32", DataType::kUInt32)
      .value("UINT64", DataType::kUInt64)
      .value("BF16", DataType::kBFloat16)
      .value("FP8", DataType::kFloat8E4M3FN)
      .value("FP8_E4M3FNUZ", DataType::kFloat8E4M3FNUZ)
      .value("FP8_E5M2", DataType::kFloat8E5M2)
      .value("FP8_E5M2FNUZ", DataType::kFloat8E5M2FNUZ)
      .value("UINT4", DataType::kUInt4)
      .value("INT4", DataType::kInt4)
      .value("FP4", DataType::kFloat4E2M1)
      .value("E8M0", DataType::kFloat8E8M0)
      .value("UINT2", DataType::kUInt2)
      .value("INT2", DataType::kInt2);
  m.def("data_type_size", [](DataType t) { return DataTypeSize(t); }, "Bytes per element as kiln holds it");
  m.def("data_type_name", [](DataType t) { return std::string(DataTypeName(t)); }, "numpy's spelling of the type");

  nb::enum_<Severity>(m, "Severity")
      .value("INTERNAL_ERROR", Severity::kInternalError)
      .value("ERROR", Severity::kError)
      .value("WARNING", Severity::kWarning)
      .value("INFO", Severity::kInfo)
      .value("VERBOSE", Severity::kVerbose);
  nb::enum_<TensorIOMode>(m, "TensorIOMode")
      .value("NONE", TensorIOMode::kNone)
      .value("INPUT", TensorIOMode::kInput)
      .value("OUTPUT", TensorIOMode::kOutput);
  nb::enum_<ProfileSelector>(m, "ProfileSelector")
      .value("MIN", ProfileSelector::kMin)
      .value("OPT", ProfileSelector::kOpt)
      .value("MAX", ProfileSelector::kMax);

  nb::class_<ILogger, PyILogger>(m, "ILogger", "Subclass and implement log(severity, message)")
      .def(nb::init<>())
      .def("log", &ILogger::log, nb::arg("severity"), nb::arg("message"));
  nb::class_<PrintLogger, ILogger>(m, "Logger", "Prints messages at min_severity or more severe to stderr")
      .def(nb::init<Severity>(), nb::arg("min_severity") = Severity::kWarning)
      .def_rw("min_severity", &PrintLogger::min_);

  nb::class_<IProfiler, PyIProfiler>(m, "IProfiler", "Subclass and implement report_layer_time(layer_name, ms)")
      .def(nb::init<>())
      .def("report_layer_time", &IProfiler::reportLayerTime, nb::arg("layer_name"), nb::arg("ms"));

  nb::class_<BackendInfo>(m, "BackendInfo")
      .def_ro("name", &BackendInfo::name)
      .def_ro("available", &BackendInfo::available)
      .def_ro("description", &BackendInfo::description)
      .def_ro("device_memory", &BackendInfo::device_memory)
      .def_ro("reduced_precision", &BackendInfo::reduced_precision)
      .def_ro("tunes_tactics", &BackendInfo::tunes_tactics)
      .def_ro("graph_capture", &BackendInfo::graph_capture);
  m.def("backend_names", &GetBackendNames);
  m.def("backend_info", [](const std::string& name) { return Take(GetBackendInfo(name)); }, nb::arg("name"));
  m.def("default_backend", &GetDefaultBackendName);

  nb::class_<DeviceMemory>(m, "DeviceMemory", "Memory of a backend with device memory, freed with the object")
      .def_static(
          "allocate",
          [](const std::string& backend, size_t bytes, bool pinned_host) {
            return Take(DeviceMemory::allocate(backend, bytes,
                                               pinned_host ? DeviceMemory::Kind::kPinnedHost : DeviceMemory::Kind::kDevice));
          },
          nb::arg("backend"), nb::arg("bytes"), nb::arg("pinned_host") = false)
      .def_prop_ro("ptr", [](const DeviceMemory& d) { return reinterpret_cast<uintptr_t>(d.data()); })
      .def_prop_ro("size", &DeviceMemory::size);
  nb::class_<DeviceStream>(m, "DeviceStream", "A stream of a backend with device memory (a cudaStream_t on cuda)")
      .def_static("create", [](const std::string& backend) { return Take(DeviceStream::create(backend)); },
                  nb::arg("backend"))
      .def_prop_ro("handle", [](const DeviceStream& s) { return reinterpret_cast<uintptr_t>(s.get()); })
      .def("synchronize", [](const DeviceStream& s) {
        nb::gil_scoped_release release;
        Check(s.synchronize());
      });
  m.def(
      "copy_to_device",
      [](uintptr_t dst, uintptr_t src, size_t bytes, const DeviceStream& stream) {
        Check(CopyToDevice(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, stream));
      },
      nb::arg("dst"), nb::arg("src"), nb::arg("bytes"), nb::arg("stream"));
  m.def(
      "copy_to_host",
      [](uintptr_t dst, uintptr_t src, size_t bytes, const DeviceStream& stream) {
        Check(CopyToHost(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, stream));
      },
      nb::arg("dst"), nb::arg("src"), nb::arg("bytes"), nb::arg("stream"));
}

}  // namespace kiln::python
