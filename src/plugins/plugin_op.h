// A registered plugin as an OpDef: the converter checks a node's attributes against the plugin's fields and
// rewrites them to the plugin's serialized fields; the shape function is the plugin's.
#pragma once

#include <memory>

#include "ops/op_def.h"
#include "plugins/plugin_registry.h"

namespace kiln::plugins {

OpDef MakePluginOpDef(std::shared_ptr<const RegisteredPlugin> p);

}  // namespace kiln::plugins
