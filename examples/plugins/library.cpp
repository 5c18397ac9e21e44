// The plugin library's one entry point: kilnGetPluginLibrary() lists the creators.
#include "example_plugins.h"

KILN_PLUGIN_LIBRARY(kiln_examples::ScaleShiftCreator, kiln_examples::SelectAboveCreator)
