// The CPU reference backend behind the Backend interface (backends/backend.h): reference kernels on the host, the
// oracle for every GPU result and the default where no GPU is found. Found through backends/factory.h.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace kiln::cpu {

const Backend& CpuBackend();

// The engine executor (engine_exec.cpp): each context places activations in the memory plan's arena, runs the
// nodes in order on the calling thread and keeps the outputs.
std::shared_ptr<BackendEngine> MakeEngine(const EngineDesc& engine);

}  // namespace kiln::cpu
