// The builder's planning steps that run where the backend takes part in them (backends/backend.h: BackendTraits):
// precision planning (reduced-precision layers, casts) and layout planning (channels-last convolutions).
#pragma once

#include <string_view>

#include "backends/backend.h"
#include "ir/graph.h"
#include "kiln/builder.h"

namespace kiln {

// Lowers float layers to FP16/BF16 per the config's flags, per-layer precisions and I/O types; inserts casts.
// Precision planning for `backend` (its kernels say which reduced types they take).
Status PlanPrecision(Graph& g, const BuilderConfig& cfg, const Backend& backend, BuildReport& rep, ILogger& logger);
// Channels-last layout for 2-D convolutions per the config's convolution layout and channel padding (the
// environment variables KILN_LAYOUT and KILN_LAYOUT_PAD override them, for experiments).
Status PlanLayout(Graph& g, const BuilderConfig& cfg, BuildReport& rep, ILogger& logger);
// After both: the Cast -> Transpose -> Pad chains they leave merged into kiln.Reformat nodes where the backend runs
// them (plan/fuse_reformats.h); the report's fusions count them as "reformats_merged". Returns how many were made.
Result<int> PlanReformats(Graph& g, const Backend& backend, BuildReport& rep, ILogger& logger);

}  // namespace kiln
