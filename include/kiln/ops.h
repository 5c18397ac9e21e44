// Which ops kiln imports: the built-in ONNX ops and the ops registered plugins define.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct OpInfo {
  std::string domain;         // "" for ONNX's default domain, else the plugin's domain
  std::string name;           // op type
  int64_t since_version = 1;  // first opset version of `domain` kiln imports it at
  int64_t until_version = 0;  // last one (INT64_MAX: every later opset)
  bool plugin = false;        // defined by a registered plugin
};

// Every op a model may use, sorted by domain then name (kiln's internal ops are not listed: models cannot
// use them). Plugins appear once registered.
std::vector<OpInfo> getSupportedOps();

}  // namespace kiln
