// Loading plugin libraries (kiln::loadPluginLibrary): dlopen, the one C entry point, the ABI checks, registration.
//
// A library is never unloaded once one of its creators was called: plugins it made may live in engines and
// caches. A library refused before that (not a kiln plugin, another ABI) is closed again.
#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "core/error.h"
#include "plugins/plugin_registry.h"

namespace kiln {

namespace {

struct Loaded {
  std::mutex mu;
  std::map<std::string, const KilnPluginLibrary*> libraries;  // canonical path -> its plugin table
};
Loaded& TheLoaded() {
  static Loaded l;
  return l;
}

// Registers a library's creators (skipping those registered already); all or none.
Result<std::vector<PluginInfo>> RegisterAll(const KilnPluginLibrary& lib, const std::string& file,
                                            const std::string& path) {
  std::vector<PluginInfo> infos;
  std::vector<std::pair<std::string, std::string>> added;
  for (int32_t i = 0; i < lib.num_creators; ++i) {
    IPluginCreator* c = lib.creators[i];
    Status s = c ? Status::Ok() : Err(StatusCode::kInvalidArgument, "creator {} is null", i);
    auto existing = c ? plugins::FindPlugin(c->domain() ? c->domain() : "", c->name() ? c->name() : "") : nullptr;
    if (s.ok() && !(existing && existing->creator.get() == c)) {
      s = plugins::Register(std::shared_ptr<IPluginCreator>(c, [](IPluginCreator*) {}), file);
      if (s.ok()) added.emplace_back(c->domain() ? c->domain() : "", c->name());
    }
    if (!s.ok()) {
      for (const auto& [domain, name] : added) (void)deregisterPlugin(domain, name);
      return Status(s.code(), fmt::format("plugin library '{}': {}", path, s.message()));
    }
    infos.push_back(plugins::FindPlugin(c->domain() ? c->domain() : "", c->name())->Info());
  }
  return infos;
}

std::string DlError() {
  const char* e = dlerror();
  return e ? std::string(e) : std::string("unknown error");
}

}  // namespace

Result<std::vector<PluginInfo>> loadPluginLibrary(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return Err(StatusCode::kInvalidArgument, "no plugin library path given");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    return Err(StatusCode::kNotFound, "plugin library '{}' does not exist (check the path given to --dynamicPlugins)",
               path);
  if (!fs::is_regular_file(st)) return Err(StatusCode::kInvalidArgument, "plugin library '{}' is not a file", path);
  const std::string canonical = fs::canonical(path, ec).string();
  const std::string file = ec ? path : canonical;

  Loaded& loaded = TheLoaded();
  std::lock_guard lock(loaded.mu);
  if (auto it = loaded.libraries.find(file); it != loaded.libraries.end()) return RegisterAll(*it->second, file, path);

  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string why = DlError();
    const bool undefined = why.find("undefined symbol") != std::string::npos;
    return Err(StatusCode::kInvalidArgument, "cannot load plugin library '{}': {}{}", path, why,
               undefined ? " (a plugin library may use only what <kiln/plugin.h> defines inline; it does not link "
                           "kiln, so it cannot call kiln's library functions)"
                         : "");
  }
  auto close = [&](Status s) {
    dlclose(handle);
    return s;
  };
  dlerror();
  void* sym = dlsym(handle, KILN_PLUGIN_ENTRY_POINT);
  if (!sym)
    return close(Err(StatusCode::kInvalidArgument,
                     "'{}' is not a kiln plugin library: it exports no {}() (a plugin library defines it with "
                     "KILN_PLUGIN_LIBRARY(...) from <kiln/plugin.h>; `kiln plugin new NAME` writes one)",
                     path, KILN_PLUGIN_ENTRY_POINT));
  using EntryFn = const KilnPluginLibrary* (*)();
  const KilnPluginLibrary* lib = reinterpret_cast<EntryFn>(sym)();
  if (!lib || lib->magic != kKilnPluginMagic)
    return close(Err(StatusCode::kInvalidArgument, "'{}': {}() returned {}, not a kiln plugin table", path,
                     KILN_PLUGIN_ENTRY_POINT, lib ? "something else" : "nothing"));
  if (lib->abi_version != KILN_PLUGIN_ABI_VERSION)
    return close(Err(StatusCode::kUnsupported,
                     "'{}' was built against kiln plugin ABI version {}, but this kiln speaks plugin ABI version {}: "
                     "rebuild the plugin against this kiln's headers (include/kiln/plugin.h)",
                     path, lib->abi_version, KILN_PLUGIN_ABI_VERSION));
  if (lib->cxx_abi != pluginCxxAbi())
    return close(
        Err(StatusCode::kUnsupported,
            "'{}' was built with another C++ standard library ABI (layout fingerprint {:#x}; kiln's is {:#x}): "
            "build the plugin with the compiler and standard library kiln was built with",
            path, lib->cxx_abi, pluginCxxAbi()));
  if (lib->num_creators < 0 || (lib->num_creators > 0 && !lib->creators))
    return close(Err(StatusCode::kInvalidArgument, "'{}': the plugin table lists {} creators but holds no list", path,
                     lib->num_creators));

  auto infos = RegisterAll(*lib, file, path);
  if (infos.ok()) loaded.libraries[file] = lib;  // kept loaded: its creators may have been called
  return infos;
}

}  // namespace kiln
