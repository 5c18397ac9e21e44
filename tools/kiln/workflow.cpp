#include "workflow.h"

#include <filesystem>

#include "kiln/error.h"

namespace kiln::cli {
namespace {

// Removes `--flag=value` or `--flag value` from args; returns the value (nullopt when absent).
Result<std::optional<std::string>> TakeFlag(std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == flag) {
      if (i + 1 >= args.size()) return Err(StatusCode::kInvalidArgument, "{} needs a value", flag);
      std::string v = args[i + 1];
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
      return std::optional<std::string>(v);
    }
    if (args[i].rfind(flag + "=", 0) == 0) {
      std::string v = args[i].substr(flag.size() + 1);
      args.erase(args.begin() + static_cast<long>(i));
      return std::optional<std::string>(v);
    }
  }
  return std::optional<std::string>();
}

bool HasFlag(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 2; i < args.size(); ++i)
    if (args[i] == flag || args[i].rfind(flag + "=", 0) == 0) return true;
  return false;
}

Result<std::string> Need(std::vector<std::string>& args, const std::string& cmd, const std::string& flag) {
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> v, TakeFlag(args, flag));
  if (!v || v->empty()) return Err(StatusCode::kInvalidArgument, "kiln {} needs {}", cmd, flag);
  return *v;
}

// `model` with its extension replaced by `suffix` ("m.onnx" -> "m.fp16.engine").
std::string Beside(const std::string& model, const std::string& suffix) {
  std::filesystem::path p(model);
  return (p.parent_path() / (p.stem().string() + suffix)).string();
}

}  // namespace

Result<std::optional<Workflow>> TranslateWorkflow(const std::vector<std::string>& argv) {
  if (argv.size() < 2) return std::optional<Workflow>();
  const std::string cmd = argv[1];
  std::vector<std::string> args = argv;
  Workflow w;
  w.name = cmd;
  if (cmd == "convert") {
    KILN_ASSIGN_OR_RETURN(std::string in, Need(args, cmd, "--input"));
    KILN_ASSIGN_OR_RETURN(std::string out, Need(args, cmd, "--output"));
    args[1] = "build";
    args.push_back("--onnx=" + in);
    args.push_back("--saveEngine=" + out);
  } else if (cmd == "optimize") {
    KILN_ASSIGN_OR_RETURN(std::string model, Need(args, cmd, "--model"));
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> precision, TakeFlag(args, "--precision"));
    const bool config = HasFlag(args, "--config");  // the file's precision and engine path stand unless given here
    const std::string p = precision.value_or(config ? "" : "fp16");
    if (!p.empty() && p != "fp32" && p != "fp16" && p != "bf16" && p != "int8" && p != "fp8" && p != "best")
      return Err(StatusCode::kInvalidArgument,
                 "kiln optimize --precision={}: give fp32, fp16, bf16, int8, fp8 or best", p);
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> out, TakeFlag(args, "--output"));
    args[1] = "build";
    args.push_back("--onnx=" + model);
    if (!p.empty() && p != "fp32") args.push_back("--" + p);
    if (out || !config) args.push_back("--saveEngine=" + out.value_or(Beside(model, "." + p + ".engine")));
  } else if (cmd == "calibrate" && HasFlag(args, "--model")) {
    KILN_ASSIGN_OR_RETURN(std::string model, Need(args, cmd, "--model"));
    args.push_back("--onnx=" + model);
    if (!HasFlag(args, "--calib") && !HasFlag(args, "--config")) args.push_back("--calib=" + Beside(model, ".cache"));
  } else if (cmd == "benchmark") {
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> engine, TakeFlag(args, "--engine"));
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> model, TakeFlag(args, "--model"));
    if (engine.has_value() == model.has_value())
      return Err(StatusCode::kInvalidArgument, "kiln benchmark needs --engine=E (or --model=M.onnx to build one first)");
    args[1] = "bench";
    args.push_back(engine ? "--loadEngine=" + *engine : "--onnx=" + *model);
  } else {
    return std::optional<Workflow>();
  }
  w.args = std::move(args);
  return std::optional<Workflow>(std::move(w));
}

}  // namespace kiln::cli
