// EngineImpl <-> engine file bytes (through src/engine's format: header, FlatBuffers payload, weights).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/engine_impl.h"

namespace kiln {

Result<std::vector<uint8_t>> SerializeEngineImpl(const EngineImpl& e);
// Checks the engine against what this process can run (backend, GPU architecture, format version).
Result<std::unique_ptr<EngineImpl>> DeserializeEngineImpl(const uint8_t* data, size_t size);

}  // namespace kiln
