// What the ONNX operator schemas say about the default domain's ops, from onnx 1.23.2 (the newest opset the importer
// takes; generated into onnx_attributes.inc by tools/gen/onnx_attributes.py): the attributes each op takes at an
// opset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// The attribute names of ONNX op `op` at `opset` (its newest schema version at or before it); nullopt for a name
// ONNX does not define or an opset before the op's first version.
std::optional<std::vector<std::string>> OnnxSchemaAttributes(std::string_view op, int64_t opset);

}  // namespace kiln
