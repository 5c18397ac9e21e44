// --staticPlugins/--dynamicPlugins, `kiln plugin new` and `kiln plugin list` (plugin_cmd.h).
#include "plugin_cmd.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <kiln/plugin.h>

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;

std::string Qualified(const PluginInfo& p) { return p.domain.empty() ? p.name : p.domain + "." + p.name; }

// A path ("./libx.so", "dir/libx.so", "libx.so", "libx.so.1"), not a plugin name such as "com.sony.Foo".
bool LooksLikeLibrary(const std::string& s) {
  if (s.find('/') != std::string::npos) return true;
  const size_t so = s.rfind(".so");
  if (so == std::string::npos) return false;
  for (size_t i = so + 3; i < s.size(); ++i)  // ".so" at the end, or followed by version numbers only
    if (!(std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) return false;
  return true;
}

void PrintRegistered(const std::string& from, const std::vector<PluginInfo>& infos) {
  std::string names;
  for (const PluginInfo& p : infos)
    names += (names.empty() ? "" : ", ") + Qualified(p) + " (version " + p.version + ")";
  std::printf("[kiln] plugins from %s: %s\n", from.c_str(), names.empty() ? "none" : names.c_str());
}

// "MyOp" -> "my_op", "SelectAbove" -> "select_above".
std::string SnakeCase(const std::string& name) {
  std::string r;
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (std::isupper(c) && i > 0) {
      const unsigned char prev = static_cast<unsigned char>(name[i - 1]);
      const bool next_lower = i + 1 < name.size() && std::islower(static_cast<unsigned char>(name[i + 1]));
      if ((std::islower(prev) || std::isdigit(prev)) || (std::isupper(prev) && next_lower)) r += '_';
    }
    r += static_cast<char>(std::tolower(c));
  }
  return r;
}

Status CheckNames(const std::string& name, const std::string& domain) {
  bool ident = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ident)
    return Status(StatusCode::kInvalidArgument,
                  "'" + name +
                      "' cannot name a plugin: the op name becomes a C++ class name, so it must be an "
                      "identifier (letters, digits, '_'; e.g. MyOp)");
  bool ok = !domain.empty() && domain != "kiln" && domain != "ai.onnx";
  for (char c : domain) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  if (!ok)
    return Status(StatusCode::kInvalidArgument,
                  "'" + domain +
                      "' cannot be a plugin's domain: give a name like com.example (letters, digits, '.', "
                      "'_', '-'; not 'kiln' or 'ai.onnx')");
  return Status::Ok();
}

Status NewProject(const std::string& name, const std::string& domain, std::string output) {
  if (Status st = CheckNames(name, domain); !st.ok()) return st;
  const std::string snake = SnakeCase(name);
  if (output.empty()) output = snake;
  std::error_code ec;
  if (fs::exists(output, ec) && !(fs::is_directory(output, ec) && fs::is_empty(output, ec)))
    return Status(StatusCode::kInvalidArgument,
                  "'" + output + "' exists and is not an empty folder: choose another --output");
  for (const auto& [path, text] : PluginProjectFiles(name, snake, domain)) {
    const fs::path p = fs::path(output) / path;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream f(p, std::ios::binary);
    f << text;
    if (!f) return Status(StatusCode::kIoError, "cannot write '" + p.string() + "'");
  }
  std::printf("[kiln] wrote plugin project '%s' for op %s.%s:\n", output.c_str(), domain.c_str(), name.c_str());
  std::printf("  %s/src/%s_plugin.cpp    the plugin (CPU implementation, CUDA call, fields, shapes)\n", output.c_str(),
              snake.c_str());
  std::printf("  %s/src/%s_kernels.cu    its CUDA kernel\n", output.c_str(), snake.c_str());
  std::printf("  %s/test/%s_test.cpp     CPU vs expected, engine round trip, CUDA vs CPU\n", output.c_str(),
              snake.c_str());
  std::printf("  %s/tools/make_model.cpp  a tiny ONNX model using the op\n", output.c_str());
  std::printf("next:\n  cmake -S %s -B %s/build -DCMAKE_PREFIX_PATH=<kiln install prefix>\n", output.c_str(),
              output.c_str());
  std::printf("  cmake --build %s/build && ctest --test-dir %s/build --output-on-failure\n", output.c_str(),
              output.c_str());
  return Status::Ok();
}

void PrintList(const char* title, const std::vector<PluginInfo>& infos) {
  std::printf("%s:%s\n", title, infos.empty() ? " none" : "");
  for (const PluginInfo& p : infos) {
    std::string fields;
    for (const PluginFieldSpec& f : p.fields)
      fields +=
          (fields.empty() ? "" : ", ") + f.name + ":" + fieldTypeName(f.type) + (f.default_value ? "" : " (required)");
    std::printf("  %-32s version %-4s %s%s%s\n", Qualified(p).c_str(), p.version.c_str(),
                p.library.empty() ? "linked in" : p.library.c_str(),
                fields.empty() ? "" : "  fields: ", fields.c_str());
  }
}

}  // namespace

Status LoadPlugins(const Options& o) {
  std::vector<std::string> names;
  std::vector<std::string> libraries;
  for (const std::string& s : o.static_plugins) (LooksLikeLibrary(s) ? libraries : names).push_back(s);
  if (!names.empty()) {
    if (Status st = registerLinkedInPlugins(names); !st.ok())
      return Status(st.code(), "--staticPlugins: " + st.message());
    std::vector<PluginInfo> registered;
    for (const PluginInfo& p : getRegisteredPlugins())
      if (p.library.empty()) registered.push_back(p);
    PrintRegistered("this program (linked in)", registered);
  }
  libraries.insert(libraries.end(), o.dynamic_plugins.begin(), o.dynamic_plugins.end());
  for (const std::string& lib : libraries) {
    auto infos = loadPluginLibrary(lib);
    if (!infos.ok()) return infos.status();
    PrintRegistered("'" + lib + "'", *infos);
  }
  return Status::Ok();
}

int PluginCommand(int argc, char** argv) {
  CLI::App app{"kiln plugin: write a plugin project to start from, or list plugins"};
  app.name("kiln plugin");
  app.require_subcommand(1);
  std::string name, domain = "com.example", output;
  CLI::App* create = app.add_subcommand(
      "new",
      "Write a buildable plugin project (CMake, find_package(kiln)): the plugin with a CPU and a CUDA "
      "implementation, a test of CUDA against CPU, a tiny ONNX model using the op, and a README");
  create->add_option("name", name, "The op's name, a C++ identifier (e.g. MyOp)")->required();
  create->add_option("--domain", domain, "The op's ONNX domain")->capture_default_str();
  create->add_option("--output", output, "The folder to write (default: the op's name in snake_case)");
  Options o;
  CLI::App* list = app.add_subcommand("list", "List the linked-in plugins and the plugins the given flags register");
  list->add_option("--staticPlugins", o.static_plugins, "Linked-in plugins to register (domain.Name or all)")
      ->delimiter(',');
  list->add_option("--dynamicPlugins", o.dynamic_plugins, "Plugin libraries to load")->delimiter(',');
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Status st;
  if (create->parsed()) {
    st = NewProject(name, domain, output);
  } else {
    st = LoadPlugins(o);
    if (st.ok()) {
      PrintList("linked in (register with --staticPlugins)", getLinkedInPlugins());
      PrintList("registered", getRegisteredPlugins());
    }
  }
  if (!st.ok()) {
    std::fprintf(stderr, "kiln: error: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kiln::cli
