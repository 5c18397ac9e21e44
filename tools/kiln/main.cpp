// kiln — the command line. `kiln run` imports an ONNX model and runs it on the CPU reference backend.
#include <cstdio>

#include "kiln/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: an ONNX inference optimizer and runtime"};
  app.require_subcommand(1);
  kiln::cli::RunArgs run;
  kiln::cli::AddRunCommand(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.got_subcommand("run")) return kiln::cli::RunCommand(run);
  return 1;
}
