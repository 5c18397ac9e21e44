// Subcommands of the kiln command line.
#pragma once

#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "core/dims.h"
#include "kiln/status.h"

namespace kiln::cli {

struct RunArgs {
  std::string onnx;
  std::string load_inputs;   // name:file.npy,name2:file2.npy
  std::string shapes;        // name:1x3x224x224,name2:...
  std::string export_output; // out.json, or a folder for one .npy per output
  int iterations = 1;
  int64_t seed = 1;
  bool verbose = false;
  bool dump_graph = false;
  std::string json;          // write a report as JSON
};

void AddRunCommand(CLI::App& app, RunArgs& args);
int RunCommand(const RunArgs& args);

// "name:1x3x224x224,other:2x8" -> map; symbolic dims are not allowed here.
Result<std::map<std::string, Shape>> ParseShapes(const std::string& spec);
// "name:file,name2:file2" -> map (the name may itself contain ':'; the last ':' splits).
Result<std::map<std::string, std::string>> ParseNameFileList(const std::string& spec, const char* flag);

}  // namespace kiln::cli
