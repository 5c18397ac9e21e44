// `kiln serve`: the inference server command (serve_cmd.cpp; the server itself is tools/serve).
#pragma once

namespace kiln::cli {

// argv[1] is "serve"; returns the exit code.
int ServeCommand(int argc, char** argv);

}  // namespace kiln::cli
