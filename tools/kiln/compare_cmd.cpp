// `kiln compare`: an engine against the reference on the same inputs (see commands.h).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <unistd.h>

#include "commands.h"
#include "infer_device.h"
#include "kiln/debug.h"
#include "kiln/error.h"
#include "npy.h"

namespace kiln::cli {

namespace {

struct Diff {
  double max_abs = 0, max_rel = 0, rel_l2 = 0;
  int64_t bad = 0, worst_index = -1;
  bool shape_ok = true, nonfinite_mismatch = false;
};

// |e - r| <= atol + rtol |r| elementwise (NaN must meet NaN); max relative error over |r| > atol.
Diff Measure(const Tensor& engine, const Tensor& ref, double atol, double rtol) {
  Diff d;
  if (engine.shape() != ref.shape()) {
    d.shape_ok = false;
    return d;
  }
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double e = engine.GetAsDouble(i), r = ref.GetAsDouble(i);
    if (!std::isfinite(e) || !std::isfinite(r)) {
      const bool same = (std::isnan(e) && std::isnan(r)) || e == r;
      if (!same) {
        ++d.bad;
        d.nonfinite_mismatch = true;
      }
      continue;
    }
    const double ad = std::fabs(e - r);
    num += ad * ad;
    den += r * r;
    if (ad > d.max_abs) {
      d.max_abs = ad;
      d.worst_index = i;
    }
    if (std::fabs(r) > atol) d.max_rel = std::max(d.max_rel, ad / std::fabs(r));
    if (ad > atol + rtol * std::fabs(r)) ++d.bad;
  }
  d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

Result<std::map<std::string, Tensor>> RunEngine(const Engine& e, const std::map<std::string, Tensor>& inputs,
                                                int runs) {
  KILN_ASSIGN_OR_RETURN(auto ctx, e.createExecutionContext());
  std::vector<std::string> outputs;
  for (int i = 0; i < e.getNbIOTensors(); ++i)
    if (e.getTensorIOMode(e.getIOTensorName(i)) == TensorIOMode::kOutput) outputs.push_back(e.getIOTensorName(i));
  std::map<std::string, std::vector<uint8_t>> host_in;
  for (const auto& [n, t] : inputs) {
    KILN_RETURN_IF_ERROR(ctx->setInputShape(n, t.shape()));
    const auto* p = static_cast<const uint8_t*>(t.raw());
    host_in[n].assign(p, p + t.nbytes());
  }
  std::map<std::string, Tensor> out;
  KILN_ASSIGN_OR_RETURN(const BackendInfo backend, GetBackendInfo(e.getBackend()));
  if (backend.device_memory) {
    KILN_ASSIGN_OR_RETURN(auto run, DeviceSetup(*ctx, e, host_in, outputs, false));
    RunTimes rt;
    for (int r = 0; r < runs; ++r) KILN_RETURN_IF_ERROR(DeviceRunOnce(*run, *ctx, true, &rt));
    KILN_ASSIGN_OR_RETURN(auto bytes, DeviceFetchOutputs(*run, *ctx));
    for (const auto& n : outputs) {
      KILN_ASSIGN_OR_RETURN(Dims d, ctx->getTensorShape(n));
      Tensor t(e.getTensorDataType(n), d);
      std::memcpy(t.raw(), bytes.at(n).data(), t.nbytes());
      out[n] = t;
    }
    return out;
  }
  for (auto& [n, bytes] : host_in) KILN_RETURN_IF_ERROR(ctx->setTensorAddress(n, bytes.data()));
  for (int r = 0; r < runs; ++r) KILN_RETURN_IF_ERROR(ctx->enqueue(nullptr));
  for (const auto& n : outputs) {
    KILN_ASSIGN_OR_RETURN(const void* p, ctx->getOutputBuffer(n));
    KILN_ASSIGN_OR_RETURN(Dims d, ctx->getTensorShape(n));
    Tensor t(e.getTensorDataType(n), d);
    std::memcpy(t.raw(), p, t.nbytes());
    out[n] = t;
  }
  return out;
}

// onnxruntime (CPU) through python3: inputs and outputs travel as .npy files in a temporary folder.
Result<std::map<std::string, Tensor>> RunOnnxruntime(const std::string& model, const std::map<std::string, Tensor>& inputs) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("kiln-compare-{}", static_cast<long>(getpid()));
  std::filesystem::create_directories(dir);
  // Names are passed through a manifest to avoid quoting issues.
  std::string manifest;
  int k = 0;
  for (const auto& [n, t] : inputs) {
    const std::string f = (dir / ("in" + std::to_string(k++) + ".npy")).string();
    KILN_RETURN_IF_ERROR(WriteNpy(f, t));
    manifest += n + "\t" + f + "\n";
  }
  {
    std::ofstream m(dir / "inputs.tsv");
    m << manifest;
  }
  const std::string script =
      "import sys, numpy, onnxruntime as ort\n"
      "d = sys.argv[2]\n"
      "feeds = {}\n"
      "for line in open(d + '/inputs.tsv'):\n"
      "    n, f = line.rstrip('\\n').split('\\t')\n"
      "    feeds[n] = numpy.load(f)\n"
      "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
      "names = [o.name for o in s.get_outputs()]\n"
      "outs = s.run(names, feeds)\n"
      "with open(d + '/outputs.tsv', 'w') as m:\n"
      "    for i, (n, o) in enumerate(zip(names, outs)):\n"
      "        numpy.save(d + '/out%d.npy' % i, numpy.ascontiguousarray(o))\n"
      "        m.write(n + '\\t' + d + '/out%d.npy\\n' % i)\n";
  {
    std::ofstream f(dir / "run_ort.py");
    f << script;
  }
  const std::string cmd = fmt::format("python3 '{}' '{}' '{}'", (dir / "run_ort.py").string(), model, dir.string());
  if (std::system(cmd.c_str()) != 0)
    return Err(StatusCode::kUnsupported,
               "running onnxruntime failed ({}): is the onnxruntime Python package installed? (or use --reference={})",
               cmd, debug::ReferenceBackendName());
  std::map<std::string, Tensor> out;
  std::ifstream m(dir / "outputs.tsv");
  std::string line;
  while (std::getline(m, line)) {
    const size_t tab = line.find('\t');
    KILN_ASSIGN_OR_RETURN(out[line.substr(0, tab)], ReadNpy(line.substr(tab + 1)));
  }
  std::filesystem::remove_all(dir);
  return out;
}

Tensor AsFloat(const Tensor& t) {
  return IsFloatType(t.dtype()) && t.dtype() != DataType::kFloat32 ? CastTensor(t, DataType::kFloat32) : t;
}

}  // namespace

Status Compare(const Options& o, ILogger& logger, nlohmann::json* report) {
  if (o.onnx.empty())
    return Err(StatusCode::kInvalidArgument, "compare needs --onnx=model.onnx (the reference runs it; add "
                                             "--loadEngine=e to compare a built engine)");
  Runtime runtime(logger);
  std::unique_ptr<Engine> engine;
  if (!o.load_engine.empty()) {
    KILN_ASSIGN_OR_RETURN(engine, runtime.loadEngineFile(o.load_engine));
  } else {
    KILN_ASSIGN_OR_RETURN(BuildResult b, BuildFromOnnx(o, logger));
    PrintBuildSummary(b, o);
    KILN_ASSIGN_OR_RETURN(engine, runtime.deserializeEngine(b.engine.data(), b.engine.size()));
  }
  KILN_ASSIGN_OR_RETURN(auto inputs, MakeEngineInputs(*engine, o));
  KILN_ASSIGN_OR_RETURN(auto got, RunEngine(*engine, inputs, o.compare_run));

  // The reference: the model as imported, at the inputs' shapes.
  NetworkDefinition ref_net;
  StderrLogger quiet(Severity::kInternalError);  // a parse error comes back as the Status, printed once
  OnnxParser parser(ref_net, quiet);
  std::map<std::string, Dims> shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  parser.setInputShapes(shapes);
  parser.setExternalDataDirs(o.external_data_dirs);
  KILN_RETURN_IF_ERROR(parser.parseFromFile(o.onnx));
  // The reference takes the model's own input types (an engine built with --inputIOFormats=fp16 takes fp16).
  std::map<std::string, Tensor> ref_inputs;
  for (int k = 0; k < ref_net.getNbInputs(); ++k) {
    const NetworkTensor v = ref_net.getInput(k);
    auto it = inputs.find(v.name);
    if (it == inputs.end()) return Err(StatusCode::kNotFound, "the engine has no input '{}' of the model", v.name);
    ref_inputs[v.name] = it->second.dtype() == v.dtype ? it->second : CastTensor(it->second, v.dtype);
  }
  std::map<std::string, Tensor> ref;
  if (o.reference == "onnxruntime") {
    KILN_ASSIGN_OR_RETURN(ref, RunOnnxruntime(o.onnx, ref_inputs));
  } else {
    debug::NetworkRunOptions ro;
    ro.keep_all = o.mark_all;
    KILN_ASSIGN_OR_RETURN(ref, debug::RunNetwork(ref_net, ref_inputs, ro));
  }

  std::printf("[kiln] compare: %s engine vs %s reference, atol %g rtol %g\n", engine->getBackend().c_str(),
              o.reference.c_str(), o.atol, o.rtol);
  std::printf("%-32s %12s %12s %12s %10s  %s\n", "output", "max abs", "max rel", "rel L2", "mismatch", "result");
  bool all_ok = true;
  nlohmann::json outs = nlohmann::json::array();
  for (int k = 0; k < ref_net.getNbOutputs(); ++k) {
    const std::string name = ref_net.getOutputName(k);
    auto r = ref.find(name);
    auto g = got.find(name);
    if (r == ref.end() || g == got.end())
      return Err(StatusCode::kNotFound, "output '{}' is missing from the {}", name, r == ref.end() ? "reference" : "engine");
    const Diff d = Measure(AsFloat(g->second), AsFloat(r->second), o.atol, o.rtol);
    const bool ok = d.shape_ok && d.bad == 0;
    all_ok &= ok;
    if (!d.shape_ok)
      std::printf("%-32s shape %s vs reference %s  FAIL\n", name.c_str(), ShapeToString(g->second.shape()).c_str(),
                  ShapeToString(r->second.shape()).c_str());
    else
      std::printf("%-32s %12.4g %12.4g %12.4g %10lld  %s\n", name.c_str(), d.max_abs, d.max_rel, d.rel_l2,
                  static_cast<long long>(d.bad), ok ? "pass" : "FAIL");
    outs.push_back({{"name", name}, {"max_abs", d.max_abs}, {"max_rel", d.max_rel}, {"rel_l2", d.rel_l2},
                    {"mismatched", d.bad}, {"shape_ok", d.shape_ok}, {"pass", ok}});
  }
  nlohmann::json j = {{"operation", "compare"}, {"backend", engine->getBackend()}, {"reference", o.reference},
                      {"atol", o.atol}, {"rtol", o.rtol}, {"outputs", outs}, {"pass", all_ok}};

  if (o.mark_all) {
    if (o.reference != debug::ReferenceBackendName())
      return Err(StatusCode::kInvalidArgument, "--markAll compares against the {} reference (drop --reference)",
                 debug::ReferenceBackendName());
    // Every tensor the engine's graph keeps under the model's names (its layers run with the kernels it chose), in
    // the model's order.
    KILN_ASSIGN_OR_RETURN(const auto inter, debug::RunEngineLayers(*engine, inputs));
    nlohmann::json layers = nlohmann::json::array();
    std::string first;
    int compared = 0;
    for (int k = 0; k < ref_net.getNbLayers(); ++k) {
      const NetworkLayer n = ref_net.getLayer(k);
      for (const std::string& tensor : n.outputs) {
        if (tensor.empty()) continue;
        auto r = ref.find(tensor);
        auto g = inter.find(tensor);
        if (r == ref.end() || g == inter.end() || !IsFloatType(r->second.dtype())) continue;
        const Diff d = Measure(AsFloat(g->second), AsFloat(r->second), o.atol, o.rtol);
        if (!d.shape_ok) continue;
        ++compared;
        const bool ok = d.bad == 0;
        layers.push_back({{"layer", n.name}, {"op", n.op_type}, {"tensor", tensor}, {"max_abs", d.max_abs},
                          {"rel_l2", d.rel_l2}, {"pass", ok}});
        if (!ok && first.empty()) {
          first = n.name;
          std::printf("[kiln] first drift: layer '%s' (%s), tensor '%s': max abs %.4g, rel L2 %.4g, %lld element(s) "
                      "outside tolerance\n",
                      n.name.c_str(), n.op_type.c_str(), tensor.c_str(), d.max_abs, d.rel_l2,
                      static_cast<long long>(d.bad));
        }
      }
    }
    std::printf("[kiln] --markAll: %d intermediate tensor(s) compared (tensors fused away have no counterpart)%s\n",
                compared, first.empty() ? "; none drifts" : "");
    j["mark_all"] = {{"compared", compared}, {"first_drift", first}, {"layers", layers}};
  }
  if (report) *report = j;
  if (!all_ok)
    return Err(StatusCode::kOutOfRange, "the engine's outputs differ from the {} reference beyond atol {} / rtol {}",
               o.reference, o.atol, o.rtol);
  std::printf("[kiln] compare: PASS\n");
  return Status::Ok();
}

}  // namespace kiln::cli
