// Models below opset 7: the operator versions from opsets 1 to 6 that differ from their opset-7 form only in ways the
// importer can rewrite (a legacy attribute dropped or translated), rewritten; the rest refused with the version and
// what changed (legacy_opsets.cpp).
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::onnx_import {

// For a default-domain node at opset < 7: rewrites it to the opset-7 form of its op, or returns why it cannot ("Tile-6:
// its inputs changed from version 1 ..."); "" when the node is fine as it is or was rewritten.
std::string RewriteLegacyNode(Node& n);

}  // namespace kiln::onnx_import
