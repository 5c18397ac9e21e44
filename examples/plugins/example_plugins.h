// kiln's example plugins (domain com.example):
//   ScaleShift  y = act(alpha * x + beta), elementwise, with float and string fields; float32 on the CPU, float32
//               and float16 on CUDA (so --fp16 engines run it in float16).
//   SelectAbove y = the elements of x greater than `threshold`, in order: a 1-D output whose length depends on the
//               data (at most x's element count).
// Built as a plugin library (library.cpp: libkiln_example_plugins.so, for --dynamicPlugins) and as linked-in
// objects (linked_in.cpp, for --staticPlugins=com.example.ScaleShift in the kiln command line).
#pragma once

#include <kiln/plugin.h>

namespace kiln_examples {

class ScaleShiftCreator : public kiln::IPluginCreator {
 public:
  const char* name() const override { return "ScaleShift"; }
  const char* domain() const override { return "com.example"; }
  const char* version() const override { return "1"; }
  std::vector<kiln::PluginFieldSpec> fieldSpecs() const override;
  std::vector<kiln::DataType> floatTypes(kiln::PluginBackend backend) const override;
  kiln::Result<std::unique_ptr<kiln::IPlugin>> create(const kiln::PluginFields& fields) const override;
};

class SelectAboveCreator : public kiln::IPluginCreator {
 public:
  const char* name() const override { return "SelectAbove"; }
  const char* domain() const override { return "com.example"; }
  const char* version() const override { return "1"; }
  std::vector<kiln::PluginFieldSpec> fieldSpecs() const override;
  kiln::Result<std::unique_ptr<kiln::IPlugin>> create(const kiln::PluginFields& fields) const override;
};

}  // namespace kiln_examples
