// The IR graph behind a NetworkDefinition (the public header declares these accessors as friends, nothing more).
#pragma once

#include "ir/graph.h"
#include "kiln/network.h"

namespace kiln {

Graph& GraphOf(NetworkDefinition& network);
const Graph& GraphOf(const NetworkDefinition& network);

}  // namespace kiln
