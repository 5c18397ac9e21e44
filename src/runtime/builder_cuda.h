// The builder's CUDA steps (builder_cuda.cpp); every function fails cleanly in a build without CUDA.
#pragma once

#include <string>
#include <vector>

#include "kiln/builder.h"
#include "runtime/engine_impl.h"

namespace kiln {

bool CudaDeviceAvailable();
// Lowers float layers to FP16/BF16 per the config's flags and per-layer precisions; inserts casts.
Status PlanPrecision(Graph& g, const BuilderConfig& cfg, BuildReport& rep, ILogger& logger);
// Checks every node has a GPU layer (one report), then picks each node's tactic by timing (or the timing cache).
Result<std::vector<std::string>> ChooseCudaTactics(const Graph& g, const Graph& tuned, const BuilderConfig& cfg,
                                                   BuildReport& rep, ILogger& logger);
// Runs the engine once at the first profile's opt shapes on the GPU; returns milliseconds.
Result<double> TimeOnceCuda(const EngineImpl& e);

}  // namespace kiln
