// Bindings of the run side: Runtime, Engine and ExecutionContext (include/kiln/runtime.h). Tensor addresses are
// integers (host pointers on the cpu backend, device pointers on cuda), as TensorRT's Python API takes them.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "bind_common.h"

namespace kiln::python {

void BindRuntime(nb::module_& m) {
  nb::class_<ExecutionContext>(m, "ExecutionContext")
      .def("set_optimization_profile", [](ExecutionContext& c, int i) { Check(c.setOptimizationProfile(i)); })
      .def_prop_ro("active_optimization_profile", &ExecutionContext::getOptimizationProfile)
      .def(
          "set_input_shape",
          [](ExecutionContext& c, const std::string& name, const Dims& d) { Check(c.setInputShape(name, d)); },
          nb::arg("name"), nb::arg("shape"))
      .def(
          "get_tensor_shape", [](const ExecutionContext& c, const std::string& name) { return Take(c.getTensorShape(name)); },
          nb::arg("name"))
      .def(
          "set_tensor_address",
          [](ExecutionContext& c, const std::string& name, uintptr_t p) {
            Check(c.setTensorAddress(name, reinterpret_cast<void*>(p)));
          },
          nb::arg("name"), nb::arg("address"))
      .def(
          "enqueue",
          [](ExecutionContext& c, uintptr_t stream) {
            Status s;
            {
              nb::gil_scoped_release release;  // the cpu backend computes here; profilers take the GIL back
              s = c.enqueue(reinterpret_cast<void*>(stream));
            }
            Check(s);
          },
          nb::arg("stream") = 0)
      .def(
          "get_output_buffer",
          [](const ExecutionContext& c, const std::string& name) {
            return reinterpret_cast<uintptr_t>(Take(c.getOutputBuffer(name)));
          },
          nb::arg("name"))
      .def("set_profiler", &ExecutionContext::setProfiler, nb::arg("profiler").none(), nb::keep_alive<1, 2>())
      .def("set_use_cuda_graph", &ExecutionContext::setUseCudaGraph, nb::arg("on"))
      .def(
          "set_aux_streams",
          [](ExecutionContext& c, const std::vector<uintptr_t>& streams) {
            std::vector<void*> s;
            for (uintptr_t p : streams) s.push_back(reinterpret_cast<void*>(p));
            Check(c.setAuxStreams(s.data(), static_cast<int>(s.size())));
          },
          nb::arg("streams"));

  nb::class_<Engine>(m, "Engine")
      .def_prop_ro("num_io_tensors", &Engine::getNbIOTensors)
      .def("get_tensor_name", &Engine::getIOTensorName, nb::arg("index"))
      .def("get_tensor_mode", &Engine::getTensorIOMode, nb::arg("name"))
      .def("get_tensor_dtype", &Engine::getTensorDataType, nb::arg("name"))
      .def("get_tensor_shape", &Engine::getTensorShape, nb::arg("name"))
      .def_prop_ro("num_optimization_profiles", &Engine::getNbOptimizationProfiles)
      .def(
          "get_tensor_profile_shape",
          [](const Engine& e, const std::string& name, int profile) {
            return std::vector<Dims>{e.getProfileShape(name, profile, ProfileSelector::kMin),
                                     e.getProfileShape(name, profile, ProfileSelector::kOpt),
                                     e.getProfileShape(name, profile, ProfileSelector::kMax)};
          },
          nb::arg("name"), nb::arg("profile_index"))
      .def_prop_ro("device_memory_size", &Engine::getDeviceMemorySize)
      .def_prop_ro("num_layers", &Engine::getNbLayers)
      .def_prop_ro("num_aux_streams", &Engine::getNbAuxStreams)
      .def_prop_ro("backend", &Engine::getBackend)
      .def("get_layer_information_json", &Engine::getLayerInformationJson)
      .def("get_build_report_json", &Engine::getBuildReportJson)
      .def(
          "create_execution_context", [](const Engine& e) { return Take(e.createExecutionContext()); },
          nb::keep_alive<0, 1>());

  nb::class_<EngineFileInfo>(m, "EngineFileInfo")
      .def_ro("format_version", &EngineFileInfo::format_version)
      .def_ro("kiln_version", &EngineFileInfo::kiln_version)
      .def_ro("backend", &EngineFileInfo::backend)
      .def_ro("device_name", &EngineFileInfo::device_name)
      .def_ro("compute_capability", &EngineFileInfo::compute_capability)
      .def_ro("size_bytes", &EngineFileInfo::size_bytes);
  m.def(
      "read_engine_file_info",
      [](const nb::bytes& data) { return Take(ReadEngineFileInfo(data.data(), data.size())); }, nb::arg("data"));

  nb::class_<Runtime>(m, "Runtime")
      .def(nb::init<ILogger&>(), nb::keep_alive<1, 2>())
      .def(
          "deserialize_engine",
          [](const Runtime& r, const nb::bytes& data) {
            std::optional<Result<std::unique_ptr<Engine>>> e;
            {
              nb::gil_scoped_release release;
              e.emplace(r.deserializeEngine(data.data(), data.size()));
            }
            return Take(std::move(*e));
          },
          nb::arg("data"))
      .def(
          "load_engine_file",
          [](const Runtime& r, const std::string& path) {
            std::optional<Result<std::unique_ptr<Engine>>> e;
            {
              nb::gil_scoped_release release;
              e.emplace(r.loadEngineFile(path));
            }
            return Take(std::move(*e));
          },
          nb::arg("path"));
}

}  // namespace kiln::python
