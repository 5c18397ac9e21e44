// The backends this kiln has, found by name. This file and factory.cpp are the only places outside
// src/backends/cpu and src/backends/cuda that name a backend or ask whether CUDA was compiled in.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "ops/infer.h"

namespace kiln {

// The backend called `name`. Fails for a name kiln does not know (the error lists the names) and for a backend
// this build leaves out (the error says how to get it). It may still be unavailable on this machine
// (Backend::CheckAvailable).
Result<const Backend*> FindBackend(std::string_view name);
// What a build uses when none is named: cuda where a CUDA device is found, else cpu.
const Backend& DefaultBackend();
// The backend every result is checked against and constant folding runs on: cpu.
const Backend& ReferenceBackend();
// The backends built into this kiln that can run on this machine, preferred first.
std::vector<const Backend*> AvailableBackends();
// Evaluates a node on constant inputs for constant folding at import, build and run time (the reference
// backend's kernels).
ConstEvaluator ConstantFolder();
// Every backend name kiln knows, whether or not this build has it (for option checks and messages).
std::vector<std::string> BackendNames();

}  // namespace kiln
