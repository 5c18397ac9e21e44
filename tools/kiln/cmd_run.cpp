// `kiln run`: import a model, run it on the CPU reference backend, report and export the outputs.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "backends/cpu/executor.h"
#include "core/error.h"
#include "kiln/commands.h"
#include "kiln/npy.h"
#include "onnx/importer.h"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

Tensor RandomInput(const Value* v, const std::vector<int64_t>& shape, std::mt19937_64& rng) {
  Tensor t(v->dtype, shape);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> bit(0, 1);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.SetFromDouble(i, IsFloatType(v->dtype) ? real(rng) : static_cast<double>(bit(rng)));
  return t;
}

std::string SafeName(std::string s) {
  for (char& c : s)
    if (c == '/' || c == ':' || c == '\\') c = '_';
  return s;
}

Status ExportOutputs(const std::string& path, const std::map<std::string, Tensor>& outs, const Graph& g) {
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
    nlohmann::json j = nlohmann::json::array();
    for (const Value* o : g.outputs) {
      const Tensor& t = outs.at(o->name);
      std::vector<double> vals(static_cast<size_t>(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i) vals[i] = t.GetAsDouble(i);
      j.push_back({{"name", o->name}, {"dtype", DataTypeName(t.dtype())}, {"dimensions", t.shape()}, {"values", vals}});
    }
    std::ofstream f(path);
    if (!f) return Err(StatusCode::kIoError, "cannot write '{}'", path);
    f << j.dump() << "\n";
    return Status::Ok();
  }
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Err(StatusCode::kIoError, "cannot create output folder '{}': {}", path, ec.message());
  for (const Value* o : g.outputs)
    KILN_RETURN_IF_ERROR(WriteNpy((std::filesystem::path(path) / (SafeName(o->name) + ".npy")).string(), outs.at(o->name)));
  return Status::Ok();
}

int Fail(const Status& st) {
  std::fprintf(stderr, "kiln: error: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

Result<std::map<std::string, Shape>> ParseShapes(const std::string& spec) {
  std::map<std::string, Shape> r;
  if (spec.empty()) return r;
  KILN_ASSIGN_OR_RETURN(auto pairs, ParseNameFileList(spec, "--shapes"));
  for (const auto& [name, dims] : pairs) {
    Shape s;
    size_t pos = 0;
    while (pos <= dims.size()) {
      size_t x = dims.find('x', pos);
      std::string d = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      char* end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0)
        return Err(StatusCode::kInvalidArgument, "--shapes: '{}' for input '{}' is not a shape like 1x3x224x224", dims, name);
      s.emplace_back(v);
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    r[name] = s;
  }
  return r;
}

Result<std::map<std::string, std::string>> ParseNameFileList(const std::string& spec, const char* flag) {
  std::map<std::string, std::string> r;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      return Err(StatusCode::kInvalidArgument, "{}: '{}' is not of the form name:value", flag, item);
    r[item.substr(0, colon)] = item.substr(colon + 1);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return r;
}

void AddRunCommand(CLI::App& app, RunArgs& a) {
  CLI::App* cmd = app.add_subcommand("run", "Run an ONNX model on the CPU reference backend");
  cmd->add_option("--onnx", a.onnx, "ONNX model file")->required();
  cmd->add_option("--loadInputs", a.load_inputs, "Inputs as name:file.npy[,name:file.npy...] (random where absent)");
  cmd->add_option("--shapes", a.shapes, "Shapes of inputs with symbolic dims: name:1x3x224x224[,...]");
  cmd->add_option("--exportOutput", a.export_output, "Write outputs: a .json file, or a folder for one .npy each");
  cmd->add_option("--iterations", a.iterations, "Timed runs (default 1)")->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", a.seed, "Seed of the random inputs");
  cmd->add_option("--json", a.json, "Write a JSON report of the run");
  cmd->add_flag("--verbose", a.verbose, "Print the imported graph's summary");
  cmd->add_flag("--dumpGraph", a.dump_graph, "Print the imported graph");
}

int RunCommand(const RunArgs& a) {
  auto shapes = ParseShapes(a.shapes);
  if (!shapes.ok()) return Fail(shapes.status());
  ImportOptions opts;
  opts.infer.evaluator = cpu::MakeConstEvaluator();
  opts.input_shapes = *shapes;
  auto t0 = Clock::now();
  auto graph = ImportOnnxFile(a.onnx, opts);
  if (!graph.ok()) return Fail(graph.status());
  const double import_ms = MsSince(t0);
  const Graph& g = **graph;
  auto missing = cpu::MissingKernels(g);
  if (!missing.empty()) {
    std::string msg = "the CPU backend has no kernel for:";
    for (const auto& m : missing) msg += "\n  - " + m;
    return Fail(Status(StatusCode::kUnsupported, msg));
  }
  std::printf("[kiln] model %s: %zu inputs, %zu outputs, %zu nodes after import (%.1f ms)\n", a.onnx.c_str(),
              g.inputs.size(), g.outputs.size(), g.nodes().size(), import_ms);
  if (a.dump_graph) std::printf("%s", PrintGraph(g).c_str());

  std::map<std::string, std::string> files;
  if (!a.load_inputs.empty()) {
    auto f = ParseNameFileList(a.load_inputs, "--loadInputs");
    if (!f.ok()) return Fail(f.status());
    files = *f;
  }
  std::map<std::string, Tensor> inputs;
  std::mt19937_64 rng(static_cast<uint64_t>(a.seed));
  for (const auto& [name, file] : files) {
    auto t = ReadNpy(file);
    if (!t.ok()) return Fail(t.status().WithContext("--loadInputs '" + name + "'"));
    inputs[name] = *t;
  }
  for (const Value* v : g.inputs) {
    if (inputs.count(v->name)) continue;
    std::vector<int64_t> shape;
    for (const Dim& d : v->shape) {
      if (!d.known())
        std::printf("[kiln] input '%s' dim '%s' is not fixed: using 1 (set it with --shapes)\n", v->name.c_str(),
                    d.ToString().c_str());
      shape.push_back(d.known() ? d.value : 1);
    }
    inputs[v->name] = RandomInput(v, shape, rng);
    std::printf("[kiln] input '%s': random %s\n", v->name.c_str(), inputs[v->name].Describe().c_str());
  }

  std::map<std::string, Tensor> outs;
  std::vector<double> times;
  for (int it = 0; it < a.iterations; ++it) {
    auto t1 = Clock::now();
    auto r = cpu::RunGraph(g, inputs);
    if (!r.ok()) return Fail(r.status());
    times.push_back(MsSince(t1));
    outs = std::move(*r);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf("[kiln] inference on the CPU reference backend: median %.2f ms over %d run%s (min %.2f, max %.2f)\n",
              median, a.iterations, a.iterations == 1 ? "" : "s", times.front(), times.back());
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
  }
  if (!a.export_output.empty()) {
    Status st = ExportOutputs(a.export_output, outs, g);
    if (!st.ok()) return Fail(st);
    std::printf("[kiln] outputs written to %s\n", a.export_output.c_str());
  }
  if (!a.json.empty()) {
    nlohmann::json j = {{"operation", "run"}, {"status", "success"}, {"input_model", a.onnx},
                        {"backend", "cpu"}, {"nodes", g.nodes().size()}, {"import_ms", import_ms},
                        {"latency_ms", {{"median", median}, {"min", times.front()}, {"max", times.back()}}},
                        {"iterations", a.iterations}};
    std::ofstream f(a.json);
    f << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
