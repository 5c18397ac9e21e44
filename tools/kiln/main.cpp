// kiln — the command line.
//   kiln --onnx=model.onnx [--saveEngine=e] [trtexec flags]      build, then time inference (like trtexec)
//   kiln --loadEngine=e [trtexec flags]                           time inference of an engine
//   kiln build|run|bench|inspect [flags] [--json=report.json]     the same jobs as subcommands
//   kiln plugin new NAME [--domain D] | kiln plugin list             plugin projects and registered plugins
//   kiln convert|optimize|benchmark ..., kiln calibrate --model ...    the documents' workflow commands (workflow.h)
//   kiln analyze --onnx=m.onnx [build flags]                          what fused, and why the rest did not
//   kiln serve --model-repository=DIR [tritonserver flags]            the KServe v2 / Triton-protocol server
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "commands.h"
#include "kiln/error.h"
#include "plugin_cmd.h"
#include "serve_cmd.h"
#include "workflow.h"

namespace kiln::cli {
namespace {

int Fail(const Status& st) {
  std::fprintf(stderr, "kiln: error: %s\n", st.ToString().c_str());
  return 1;
}

Status SaveBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return Err(StatusCode::kIoError, "cannot write engine file '{}'", path);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return Err(StatusCode::kIoError, "writing engine file '{}' failed", path);
  return Status::Ok();
}

// Builds from --onnx (saving to --saveEngine) or loads --loadEngine; fills the build part of the report.
Result<std::unique_ptr<Engine>> GetEngine(const Options& o, ILogger& logger, nlohmann::json* report) {
  Runtime runtime(logger);
  if (!o.load_engine.empty()) {
    if (!o.onnx.empty()) return Err(StatusCode::kInvalidArgument, "give --onnx or --loadEngine, not both");
    std::printf("[kiln] loading engine %s\n", o.load_engine.c_str());
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> e, runtime.loadEngineFile(o.load_engine));
    if (!o.save_engine.empty()) {  // as trtexec: the loaded (and checked) engine is written out again
      std::ifstream in(o.load_engine, std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof())
        return Err(StatusCode::kIoError, "--saveEngine: reading '{}' again failed", o.load_engine);
      KILN_RETURN_IF_ERROR(SaveBytes(o.save_engine, bytes));
      std::printf("[kiln] engine written to %s\n", o.save_engine.c_str());
    }
    return e;
  }
  KILN_ASSIGN_OR_RETURN(BuildResult b, BuildFromOnnx(o, logger));
  PrintBuildSummary(b, o);
  if (!o.save_engine.empty()) {
    KILN_RETURN_IF_ERROR(SaveBytes(o.save_engine, b.engine));
    std::printf("[kiln] engine written to %s\n", o.save_engine.c_str());
  }
  if (report) (*report)["build"] = nlohmann::json::parse(b.report_json);
  return runtime.deserializeEngine(b.engine.data(), b.engine.size());
}

// Runs `python -m kiln benchmark ARGS` (the interpreter from KILN_PYTHON, else python3) in place of this process.
int RunPythonCompare(int argc, char** argv) {
  const char* env = std::getenv("KILN_PYTHON");
  const std::string python = env && *env ? env : "python3";
  std::vector<std::string> args = {python, "-m", "kiln", "benchmark"};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(stdout);
  execvp(cargs[0], cargs.data());
  return Fail(Err(StatusCode::kUnsupported,
                  "kiln benchmark --compare runs '{} -m kiln benchmark', which could not start ({}): install the "
                  "kiln Python package (pip install . in the kiln repository, which scripts/setup does) or set "
                  "KILN_PYTHON to an interpreter that has it",
                  python, std::strerror(errno)));
}

int Main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "plugin") == 0) return PluginCommand(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "serve") == 0) return ServeCommand(argc, argv);
  // `kiln benchmark --compare=onnxruntime`: kiln and onnxruntime in one Python process (python/kiln/_compare.py).
  if (argc > 1 && std::strcmp(argv[1], "benchmark") == 0) {
    for (int i = 2; i < argc; ++i)
      if (std::strncmp(argv[i], "--compare", 9) == 0) return RunPythonCompare(argc, argv);
  }
  // The workflow commands (workflow.h) run as the kiln command they stand for, then print the report.
  auto wf = TranslateWorkflow(std::vector<std::string>(argv, argv + argc));
  if (!wf.ok()) return Fail(wf.status());
  std::vector<std::string> wf_args;
  std::vector<char*> wf_argv;
  if (*wf) {
    wf_args = (*wf)->args;
    for (auto& a : wf_args) wf_argv.push_back(a.data());
    argc = static_cast<int>(wf_argv.size());
    argv = wf_argv.data();
  }
  Mode mode = Mode::kTrtexec;
  int first = 1;
  if (argc > 1) {
    const std::string sub = argv[1];
    if (sub == "build") mode = Mode::kBuild;
    else if (sub == "run") mode = Mode::kRun;
    else if (sub == "bench") mode = Mode::kBench;
    else if (sub == "inspect") mode = Mode::kInspect;
    else if (sub == "compare") mode = Mode::kCompare;
    else if (sub == "calibrate") mode = Mode::kCalibrate;
    else if (sub == "analyze") mode = Mode::kAnalyze;
    if (mode != Mode::kTrtexec) first = 2;
  }
  Options o;
  if (mode == Mode::kRun) {  // one inference by default
    o.iterations = 1;
    o.warm_up_ms = 0;
    o.duration_s = 0;
    o.avg_runs = 1;
  }
  CLI::App app{mode == Mode::kTrtexec
                   ? "kiln: an ONNX inference optimizer and runtime.\n  kiln --onnx=model.onnx [--saveEngine=e] [flags]\n"
                     "  kiln --loadEngine=e [flags]\n  kiln build|run|bench|inspect|compare|calibrate|analyze|plugin|serve --help\n"
                     "  kiln convert --input M --output E | optimize --model M --precision P | benchmark --engine E"
                   : std::string("kiln ") + argv[1]};
  app.name(mode == Mode::kTrtexec ? "kiln" : std::string("kiln ") + argv[1]);
  AddOptions(app, o, mode);
  try {
    app.parse(argc - first + 1, argv + first - 1);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Status st = o.config.empty() ? Status::Ok() : ApplyConfigFile(o, app, mode == Mode::kCalibrate);
  if (st.ok() && mode == Mode::kCalibrate && (o.data.empty() || o.calib.empty()))
    st = Err(StatusCode::kInvalidArgument, "kiln calibrate needs {} (as a flag or in --config)",
             o.data.empty() ? "--data=DIR (calibration_data)" : "--calib=CACHE (calibration_cache)");
  if (st.ok()) st = CheckUnbuiltFlags(o, app);
  if (st.ok()) st = SelectDevice(o, app);
  if (st.ok()) st = LoadPlugins(o);  // before any model is imported or engine loaded
  if (!st.ok()) return Fail(st);
  StderrLogger logger(o.verbose ? Severity::kVerbose : Severity::kWarning);
  nlohmann::json report = {{"status", "success"}};

  switch (mode) {
    case Mode::kCalibrate:
      st = Calibrate(o, logger, &report);
      break;
    case Mode::kAnalyze:
      st = Analyze(o, logger, &report);
      break;
    case Mode::kCompare:
      st = Compare(o, logger, &report);
      break;
    case Mode::kInspect:
      st = Inspect(o, logger, &report);
      break;
    case Mode::kBuild: {
      report["operation"] = "build";
      auto b = BuildFromOnnx(o, logger);
      if (!b.ok()) return Fail(b.status());
      PrintBuildSummary(*b, o);
      if (o.save_engine.empty()) std::printf("[kiln] note: no --saveEngine given, the engine was not written\n");
      else st = SaveBytes(o.save_engine, b->engine);
      if (st.ok() && !o.save_engine.empty()) std::printf("[kiln] engine written to %s\n", o.save_engine.c_str());
      report = nlohmann::json::parse(b->report_json);
      break;
    }
    case Mode::kRun:
      if (o.load_engine.empty()) {
        if (o.onnx.empty()) return Fail(Err(StatusCode::kInvalidArgument, "run needs --onnx=model.onnx or --loadEngine=engine"));
        // The reference run executes the graph as imported, once, on the reference backend: it builds no engine
        // and times nothing, so the engine and timing flags would do nothing; refuse them instead.
        for (const char* flag : {"--dumpProfile", "--exportProfile", "--exportTimes", "--infStreams", "--useCudaGraph",
                                 "--separateProfileRun", "--saveEngine", "--exportLayerInfo", "--dumpLayerInfo"})
          if (Given(app, flag))
            return Fail(Err(StatusCode::kInvalidArgument,
                            "kiln run --onnx is the reference run (the graph as imported, run once, not timed): {} "
                            "applies to engines; build one (kiln build --onnx=... --saveEngine=e) and give "
                            "kiln run --loadEngine=e {}",
                            flag, flag));
        st = RunReference(o, &report);
        break;
      }
      [[fallthrough]];
    case Mode::kBench:
    case Mode::kTrtexec: {
      report["operation"] = mode == Mode::kRun ? "run" : "bench";
      if (o.onnx.empty() && o.load_engine.empty())
        return Fail(Err(StatusCode::kInvalidArgument, "no model: give --onnx=model.onnx or --loadEngine=engine (see --help)"));
      auto engine = GetEngine(o, logger, &report);
      if (!engine.ok()) return Fail(engine.status());
      if (o.dump_layer_info) std::printf("%s\n", (*engine)->getLayerInformationJson().c_str());
      if (!o.export_layer_info.empty()) {
        st = WriteJsonFile(o.export_layer_info, nlohmann::json::parse((*engine)->getLayerInformationJson()));
        if (!st.ok()) return Fail(st);
      }
      if (!o.skip_inference) st = RunInference(**engine, o, &report);
      break;
    }
  }
  if (!st.ok()) return Fail(st);
  if (*wf) {
    report["operation"] = (*wf)->name;
    std::printf("%s\n", report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  if (!o.json.empty()) {
    st = WriteJsonFile(o.json, report);
    if (!st.ok()) return Fail(st);
  }
  return 0;
}

}  // namespace
}  // namespace kiln::cli

int main(int argc, char** argv) { return kiln::cli::Main(argc, argv); }
