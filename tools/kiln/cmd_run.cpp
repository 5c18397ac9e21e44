// `kiln run --onnx=...`: the reference run — import a model and run its graph as imported (no optimizer) on the
// CPU reference backend; the oracle that engines are compared with. `kiln run --loadEngine=...` runs an engine.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "commands.h"
#include "kiln/debug.h"
#include "kiln/error.h"
#include "npy.h"

namespace kiln::cli {

namespace {
using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
}  // namespace

Status RunReference(const Options& a, nlohmann::json* report) {
  KILN_ASSIGN_OR_RETURN(auto shapes, ParseShapeList(a.shapes, "--shapes"));
  NetworkDefinition g;
  StderrLogger quiet(Severity::kInternalError);  // a parse error comes back as the Status, printed once
  OnnxParser parser(g, quiet);
  parser.setInputShapes(shapes);
  auto t0 = Clock::now();
  parser.setExternalDataDirs(a.external_data_dirs);
  KILN_RETURN_IF_ERROR(parser.parseFromFile(a.onnx));
  const double import_ms = MsSince(t0);
  std::printf("[kiln] model %s: %d inputs, %d outputs, %d nodes after import (%.1f ms)\n", a.onnx.c_str(),
              g.getNbInputs(), g.getNbOutputs(), g.getNbLayers(), import_ms);
  if (a.verbose) std::printf("%s", g.toString().c_str());

  std::map<std::string, Tensor> inputs;
  if (!a.load_inputs.empty()) {
    KILN_ASSIGN_OR_RETURN(auto files, ParseNameValueList(a.load_inputs, "--loadInputs"));
    for (const auto& [name, file] : files) {
      auto t = ReadNpy(file);
      if (!t.ok()) return t.status().WithContext("--loadInputs '" + name + "'");
      inputs[name] = *t;
    }
  }
  std::mt19937_64 rng(static_cast<uint64_t>(a.seed));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  for (int k = 0; k < g.getNbInputs(); ++k) {
    const NetworkTensor v = g.getInput(k);
    if (inputs.count(v.name)) continue;
    std::vector<int64_t> shape;
    for (size_t i = 0; i < v.dims.size(); ++i) {
      if (v.dims[i] < 0)
        std::printf("[kiln] input '%s' dim '%s' is not fixed: using 1 (set it with --shapes)\n", v.name.c_str(),
                    v.dim_names[i].c_str());
      shape.push_back(v.dims[i] >= 0 ? v.dims[i] : 1);
    }
    Tensor t(v.dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.SetFromDouble(i, IsFloatType(v.dtype) ? real(rng) : static_cast<double>(rng() % 2));
    inputs[v.name] = t;
    std::printf("[kiln] input '%s': random %s\n", v.name.c_str(), t.Describe().c_str());
  }

  std::map<std::string, Tensor> outs;
  std::vector<double> times;
  for (int it = 0; it < a.iterations; ++it) {
    auto t1 = Clock::now();
    KILN_ASSIGN_OR_RETURN(outs, debug::RunNetwork(g, inputs));
    times.push_back(MsSince(t1));
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const std::string backend = debug::ReferenceBackendName();
  std::printf("[kiln] reference inference (%s backend, unoptimized graph): median %.2f ms over %d run%s\n",
              backend.c_str(), median, a.iterations, a.iterations == 1 ? "" : "s");
  std::vector<NamedTensor> named;
  for (int k = 0; k < g.getNbOutputs(); ++k) {
    const std::string name = g.getOutputName(k);
    const Tensor& t = outs.at(name);
    double sum = 0, asum = 0;
    bool finite = true;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = t.GetAsDouble(i);
      sum += x;
      asum += std::fabs(x);
      finite = finite && std::isfinite(x);
    }
    std::printf("[kiln] output '%s': %s  mean %.6g  mean|x| %.6g%s\n", name.c_str(), t.Describe().c_str(),
                t.numel() ? sum / t.numel() : 0.0, t.numel() ? asum / t.numel() : 0.0, finite ? "" : "  (non-finite values)");
    named.push_back({name, t.dtype(), t.shape(), t.raw()});
  }
  if (!a.export_output.empty()) {
    KILN_RETURN_IF_ERROR(ExportOutputs(a.export_output, named));
    std::printf("[kiln] outputs written to %s\n", a.export_output.c_str());
  }
  if (report)
    *report = {{"operation", "run"}, {"status", "success"}, {"input_model", a.onnx}, {"backend", backend},
               {"optimized", false}, {"nodes", g.getNbLayers()}, {"import_ms", import_ms},
               {"latency_ms", {{"median", median}, {"min", times.front()}, {"max", times.back()}}},
               {"iterations", a.iterations}};
  return Status::Ok();
}

}  // namespace kiln::cli
