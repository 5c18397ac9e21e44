// A plugin library that claims another plugin ABI version (as one built against a newer kiln would): the loader
// must refuse it with a sentence, and never call into it.
#include <kiln/plugin.h>

extern "C" KILN_PLUGIN_EXPORT const KilnPluginLibrary* kilnGetPluginLibrary(void) {
  static const KilnPluginLibrary lib = {kKilnPluginMagic, KILN_PLUGIN_ABI_VERSION + 1, kiln::pluginCxxAbi(), 0,
                                        nullptr};
  return &lib;
}
