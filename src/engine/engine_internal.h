// Engine file internals shared by the header code, the writer and the reader: byte offsets of the header
// fields and little-endian helpers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/engine_file.h"

namespace kiln::engine_layout {

// Header field offsets (bytes); the rest of the 256 bytes is reserved and zero.
inline constexpr size_t kMagic = 0;                // char[8] "KILNENG1"
inline constexpr size_t kFormatVersion = 8;        // u32
inline constexpr size_t kHeaderSize = 12;          // u32 (256)
inline constexpr size_t kKilnVersion = 16;         // char[32], NUL-padded
inline constexpr size_t kKilnVersionLen = 32;
inline constexpr size_t kBackend = 48;             // char[16]
inline constexpr size_t kBackendLen = 16;
inline constexpr size_t kDeviceName = 64;          // char[64]
inline constexpr size_t kDeviceNameLen = 64;
inline constexpr size_t kComputeCapability = 128;  // i32
inline constexpr size_t kCudaVersion = 132;        // u32
inline constexpr size_t kCublasVersion = 136;      // u32
inline constexpr size_t kCudnnVersion = 140;       // u32
inline constexpr size_t kBuildFlags = 144;         // u64
inline constexpr size_t kPayloadOffset = 152;      // u64
inline constexpr size_t kPayloadSize = 160;        // u64
inline constexpr size_t kWeightsOffset = 168;      // u64
inline constexpr size_t kWeightsSize = 176;        // u64
inline constexpr size_t kFileSize = 184;           // u64
inline constexpr size_t kChecksum = 192;           // u64
static_assert(kChecksum + 8 <= kEngineHeaderSize);

void Put32(uint8_t* p, uint32_t v);
void Put64(uint8_t* p, uint64_t v);
uint32_t Get32(const uint8_t* p);
uint64_t Get64(const uint8_t* p);
// Writes all 256 header bytes (checksum as given).
void EncodeHeader(const EngineHeader& h, uint8_t* p);

}  // namespace kiln::engine_layout

namespace kiln {

// The plugins a graph's nodes use, from the plugin registry (engine_plugins.cpp).
std::vector<EnginePluginRef> PluginsOfGraph(const Graph& g);
// Every plugin an engine needs is registered at the engine's version; the error names the plugin, a node using it
// and the library to load.
Status CheckEnginePlugins(const Graph& g, const std::vector<EnginePluginRef>& refs);

}  // namespace kiln
