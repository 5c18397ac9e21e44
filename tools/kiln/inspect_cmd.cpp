// `kiln inspect`: what a model or an engine holds — inputs and outputs, layers, precisions, tactics, memory.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "kiln/error.h"

namespace kiln::cli {

namespace {

std::string DimsString(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + (d[i] < 0 ? std::string("?") : std::to_string(d[i]));
  return s + "]";
}

Status InspectModel(const Options& o, nlohmann::json* report) {
  NetworkDefinition g;
  StderrLogger quiet(Severity::kInternalError);  // a parse error comes back as the Status, printed once
  OnnxParser parser(g, quiet);
  parser.setExternalDataDirs(o.external_data_dirs);
  KILN_RETURN_IF_ERROR(parser.parseFromFile(o.onnx));
  std::map<std::string, int> ops;
  for (int k = 0; k < g.getNbLayers(); ++k) ops[g.getLayer(k).op_type]++;
  const size_t weights = g.getWeightBytes();
  std::printf("[kiln] model %s (opset %lld): %d layers, %.2f MiB of weights\n", o.onnx.c_str(),
              static_cast<long long>(g.getOpset()), g.getNbLayers(), weights / 1048576.0);
  nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
  for (int k = 0; k < g.getNbInputs(); ++k) {
    const NetworkTensor v = g.getInput(k);
    std::printf("[kiln]   input  %s: %s\n", v.name.c_str(), v.type.c_str());
    ins.push_back({{"name", v.name}, {"type", v.type}});
  }
  for (int k = 0; k < g.getNbOutputs(); ++k) {
    const NetworkTensor v = g.getOutput(k);
    std::printf("[kiln]   output %s: %s\n", v.name.c_str(), v.type.c_str());
    outs.push_back({{"name", v.name}, {"type", v.type}});
  }
  std::string oplist;
  for (const auto& [op, n] : ops) oplist += fmt::format("{}{} x{}", oplist.empty() ? "" : ", ", op, n);
  std::printf("[kiln]   layers by op: %s\n", oplist.c_str());
  if (o.dump_layer_info) std::printf("%s", g.toString().c_str());
  if (report)
    *report = {{"operation", "inspect"}, {"status", "success"}, {"kind", "onnx"}, {"input_model", o.onnx},
               {"inputs", ins}, {"outputs", outs}, {"layers", g.getNbLayers()}, {"ops", ops},
               {"weights_bytes", weights}};
  return Status::Ok();
}

Status InspectEngine(const Options& o, ILogger& logger, nlohmann::json* report) {
  std::ifstream in(o.load_engine, std::ios::binary);
  if (!in) return Err(StatusCode::kNotFound, "cannot open engine file '{}'", o.load_engine);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  auto header = ReadEngineFileInfo(bytes.data(), bytes.size());
  if (!header.ok()) return header.status().WithContext("engine file '" + o.load_engine + "'");
  Runtime runtime(logger);
  KILN_ASSIGN_OR_RETURN(auto engine, runtime.deserializeEngine(bytes.data(), bytes.size()));
  std::printf("[kiln] engine %s: format %u, built by kiln %s for backend %s%s, %.2f MiB\n", o.load_engine.c_str(),
              header->format_version, header->kiln_version.c_str(), header->backend.c_str(),
              header->device_name.empty() ? "" : (" on " + header->device_name).c_str(), bytes.size() / 1048576.0);
  nlohmann::json io = nlohmann::json::array();
  for (int i = 0; i < engine->getNbIOTensors(); ++i) {
    const std::string n = engine->getIOTensorName(i);
    const bool is_in = engine->getTensorIOMode(n) == TensorIOMode::kInput;
    std::printf("[kiln]   %s %s: %s%s\n", is_in ? "input " : "output", n.c_str(), DataTypeName(engine->getTensorDataType(n)),
                DimsString(engine->getTensorShape(n)).c_str());
    nlohmann::json t = {{"name", n}, {"mode", is_in ? "input" : "output"},
                        {"dtype", DataTypeName(engine->getTensorDataType(n))}, {"shape", engine->getTensorShape(n)}};
    if (is_in) {
      nlohmann::json profiles = nlohmann::json::array();
      for (int p = 0; p < engine->getNbOptimizationProfiles(); ++p) {
        Dims mn = engine->getProfileShape(n, p, ProfileSelector::kMin), op = engine->getProfileShape(n, p, ProfileSelector::kOpt),
             mx = engine->getProfileShape(n, p, ProfileSelector::kMax);
        if (mn != mx) std::printf("[kiln]     profile %d: min %s opt %s max %s\n", p, DimsString(mn).c_str(), DimsString(op).c_str(), DimsString(mx).c_str());
        profiles.push_back({{"min", mn}, {"opt", op}, {"max", mx}});
      }
      t["profiles"] = profiles;
    }
    io.push_back(t);
  }
  const auto layers = nlohmann::json::parse(engine->getLayerInformationJson());
  std::printf("[kiln]   %d layers; activation memory %.2f MiB\n", engine->getNbLayers(), engine->getDeviceMemorySize() / 1048576.0);
  if (o.dump_layer_info)
    for (const auto& l : layers["layers"]) {
      std::printf("[kiln]     %-40s %-24s %-9s %s\n", l.value("name", "").c_str(), l.value("op_type", "").c_str(),
                  l.value("precision", "").c_str(), l.value("tactic", "").c_str());
      if (l.contains("quantization")) {  // INT8 layers and Q/DQ: their scales; weight-only layers: their weights
        const auto& q = l["quantization"];
        std::string line;
        if (q.contains("weight_type"))  // INT4 weight-only: the packed weight's type and its scale groups
          line += fmt::format("{} weights, {} group(s) of {} along K, {} scales{}",
                              q["weight_type"].get<std::string>(), q["groups"].get<int64_t>(),
                              q["group_size"].get<int64_t>(), q["scale_type"].get<std::string>(),
                              q["zero_points"].get<bool>() ? ", zero points" : "");
        else if (q.contains("x_scale"))
          line += fmt::format("in scale {:.6g} zero point {}; weight scales: {} ", q["x_scale"].get<double>(),
                              q["x_zero_point"].get<int64_t>(), q["w_scales"].size());
        else
          line += fmt::format("scale {:.6g} zero point {} ", q["scale"].get<double>(), q["zero_point"].get<int64_t>());
        if (q.contains("y_scale") && q.contains("x_scale"))
          line += fmt::format("-> out int8 scale {:.6g} zero point {}", q["y_scale"].get<double>(),
                              q["y_zero_point"].get<int64_t>());
        std::printf("[kiln]       %s\n", line.c_str());
      }
    }
  if (o.dump_layer_info && layers.value("profiling_verbosity", "") != "detailed")
    std::printf("[kiln]     (built with --profilingVerbosity=%s: rebuild with =detailed for precisions and tactics)\n",
                layers.value("profiling_verbosity", "").c_str());
  if (report) {
    *report = {{"operation", "inspect"}, {"status", "success"}, {"kind", "engine"}, {"engine", o.load_engine},
               {"format_version", header->format_version}, {"kiln_version", header->kiln_version},
               {"backend", header->backend}, {"device", header->device_name},
               {"size_bytes", bytes.size()}, {"io_tensors", io}, {"layers", layers["layers"]},
               {"memory", layers["memory"]}};
    const std::string build = engine->getBuildReportJson();
    if (!build.empty()) (*report)["build_report"] = nlohmann::json::parse(build, nullptr, false);
  }
  return Status::Ok();
}

}  // namespace

Status Inspect(const Options& o, ILogger& logger, nlohmann::json* report) {
  if (!o.load_engine.empty()) return InspectEngine(o, logger, report);
  if (!o.onnx.empty()) return InspectModel(o, report);
  return Err(StatusCode::kInvalidArgument, "inspect needs --onnx=model.onnx or --loadEngine=engine");
}

}  // namespace kiln::cli
