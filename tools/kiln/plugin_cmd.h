// The kiln command line's plugin side: --staticPlugins/--dynamicPlugins (every subcommand that imports a model or
// loads an engine), `kiln plugin new` (a plugin project to start from) and `kiln plugin list`. Public API only.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "options.h"

namespace kiln::cli {

// Registers the linked-in plugins --staticPlugins names ("com.example.ScaleShift", "all"; a path to a library is
// loaded, as trtexec does) and loads the --dynamicPlugins libraries; prints what each registered.
Status LoadPlugins(const Options& o);

// `kiln plugin new NAME [--domain D] [--output DIR]` and `kiln plugin list [--dynamicPlugins=lib.so]`; argv[1] is
// "plugin". Returns the exit code.
int PluginCommand(int argc, char** argv);

// The files of a new plugin project for op `name` (files and targets named `snake`) in `domain`: (path, contents).
std::vector<std::pair<std::string, std::string>> PluginProjectFiles(const std::string& name, const std::string& snake,
                                                                    const std::string& domain);

}  // namespace kiln::cli
