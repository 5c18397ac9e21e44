// `kiln run --onnx=...`: the reference run — import a model and run its graph as imported (no optimizer) on the
// CPU reference backend; the oracle that engines are compared with. `kiln run --loadEngine=...` runs an engine.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "backends/cpu/executor.h"
#include "core/error.h"
#include "kiln/commands.h"
#include "kiln/npy.h"
#include "onnx/importer.h"

namespace kiln::cli {

namespace {
using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
}  // namespace

Status RunReference(const Options& a, nlohmann::json* report) {
  KILN_ASSIGN_OR_RETURN(auto shapes, ParseShapeList(a.shapes, "--shapes"));
  ImportOptions opts;
  opts.infer.evaluator = cpu::MakeConstEvaluator();
  for (const auto& [name, d] : shapes) opts.input_shapes[name] = FromStatic(d);
  auto t0 = Clock::now();
  KILN_ASSIGN_OR_RETURN(auto graph, ImportOnnxFile(a.onnx, opts));
  const double import_ms = MsSince(t0);
  const Graph& g = *graph;
  auto missing = cpu::MissingKernels(g);
  if (!missing.empty()) {
    std::string msg = "the CPU backend has no kernel for:";
    for (const auto& m : missing) msg += "\n  - " + m;
    return Status(StatusCode::kUnsupported, msg);
  }
  std::printf("[kiln] model %s: %zu inputs, %zu outputs, %zu nodes after import (%.1f ms)\n", a.onnx.c_str(),
              g.inputs.size(), g.outputs.size(), g.nodes().size(), import_ms);
  if (a.verbose) std::printf("%s", PrintGraph(g).c_str());

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
  for (const Value* v : g.inputs) {
    if (inputs.count(v->name)) continue;
    std::vector<int64_t> shape;
    for (const Dim& d : v->shape) {
      if (!d.known())
        std::printf("[kiln] input '%s' dim '%s' is not fixed: using 1 (set it with --shapes)\n", v->name.c_str(),
                    d.ToString().c_str());
      shape.push_back(d.known() ? d.value : 1);
    }
    Tensor t(v->dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.SetFromDouble(i, IsFloatType(v->dtype) ? real(rng) : static_cast<double>(rng() % 2));
    inputs[v->name] = t;
    std::printf("[kiln] input '%s': random %s\n", v->name.c_str(), t.Describe().c_str());
  }

  std::map<std::string, Tensor> outs;
  std::vector<double> times;
  for (int it = 0; it < a.iterations; ++it) {
    auto t1 = Clock::now();
    KILN_ASSIGN_OR_RETURN(outs, cpu::RunGraph(g, inputs));
    times.push_back(MsSince(t1));
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf("[kiln] reference inference (cpu backend, unoptimized graph): median %.2f ms over %d run%s\n", median,
              a.iterations, a.iterations == 1 ? "" : "s");
  std::vector<NamedTensor> named;
  for (const Value* o : g.outputs) {
    const Tensor& t = outs.at(o->name);
    double sum = 0, asum = 0;
    bool finite = true;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = t.GetAsDouble(i);
      sum += x;
      asum += std::fabs(x);
      finite = finite && std::isfinite(x);
    }
    std::printf("[kiln] output '%s': %s  mean %.6g  mean|x| %.6g%s\n", o->name.c_str(), t.Describe().c_str(),
                t.numel() ? sum / t.numel() : 0.0, t.numel() ? asum / t.numel() : 0.0, finite ? "" : "  (non-finite values)");
    named.push_back({o->name, t.dtype(), t.shape(), t.raw()});
  }
  if (!a.export_output.empty()) {
    KILN_RETURN_IF_ERROR(ExportOutputs(a.export_output, named));
    std::printf("[kiln] outputs written to %s\n", a.export_output.c_str());
  }
  if (report)
    *report = {{"operation", "run"}, {"status", "success"}, {"input_model", a.onnx}, {"backend", "cpu"},
               {"optimized", false}, {"nodes", g.nodes().size()}, {"import_ms", import_ms},
               {"latency_ms", {{"median", median}, {"min", times.front()}, {"max", times.back()}}},
               {"iterations", a.iterations}};
  return Status::Ok();
}

}  // namespace kiln::cli
