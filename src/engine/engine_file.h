// Engine files: what a built engine holds, and its on-disk form.
//
// Layout (little-endian):
//   [0, 256)        fixed header: magic "KILNENG1", format version, kiln version, backend name (cpu, cuda),
//                   device name and compute capability, CUDA/cuBLAS/cuDNN versions, build flags, payload and
//                   weights offsets/sizes, file size, and a 64-bit checksum over the whole file (the header
//                   with its checksum field zeroed, then everything after it);
//   [256, ...)      the FlatBuffers payload (src/engine/engine.fbs): the optimized graph, optimization
//                   profiles, memory plan, per-node tactics, build report JSON, the plugins the graph uses;
//   [W, W + size)   the weights section, W a multiple of 4096 so it can be memory-mapped; each tensor in it is
//                   64-byte aligned.
//
// Loading checks, in order: magic, format version, size against the header (truncated), header layout,
// checksum (corrupted), backend and GPU architecture against the loader's EngineCompat, the FlatBuffers
// verifier, the payload's own consistency (indices, sizes, memory plan), and the plugins its nodes need (each
// registered, at the version the engine was built with). Every failure is a Status whose
// message says which check failed and what to do; no input bytes can crash the loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "plan/memory_plan.h"

namespace kiln {

inline constexpr char kEngineMagic[9] = "KILNENG1";
// 2: the INT8 layers' float16 output and residual, QuantizeLinear's kiln_x_widened and LayerNormalization's quantized
// output 3 (ops/quantized_ops.h), which a version-1 reader would run as something else.
inline constexpr uint32_t kEngineFormatVersion = 2;
inline constexpr size_t kEngineHeaderSize = 256;
inline constexpr size_t kEngineWeightsAlignment = 4096;  // the weights section's offset in the file
inline constexpr size_t kEngineTensorAlignment = 64;     // each tensor inside the weights section

// The kiln version written into engine headers ("0.1.0").
const char* KilnVersion();

// Build flags (EngineTarget::build_flags): what the builder allowed.
enum EngineBuildFlag : uint64_t {
  kBuildFlagFP16 = 1u << 0,
  kBuildFlagBF16 = 1u << 1,
  kBuildFlagINT8 = 1u << 2,
  kBuildFlagFP8 = 1u << 3,
  kBuildFlagTF32 = 1u << 4,
  kBuildFlagOptimized = 1u << 5,  // the graph optimizer ran (fusions included)
  kBuildFlagCudaGraph = 1u << 6,
};

// What the engine was built for (written into the header).
struct EngineTarget {
  std::string backend;             // the backend's name: cpu, cuda (at most 15 characters)
  std::string device_name;         // "NVIDIA H100 80GB HBM3"; empty on cpu (at most 63 bytes are kept)
  int32_t compute_capability = 0;  // major*10 + minor: 90 for sm_90; 0 on cpu
  uint32_t cuda_version = 0;       // CUDA runtime version as CUDA encodes it (12040 = 12.4); 0 on cpu
  uint32_t cublas_version = 0;
  uint32_t cudnn_version = 0;
  uint64_t build_flags = 0;        // EngineBuildFlag bits
};

// What the loader runs on.
struct EngineCompat {
  std::string backend;             // the backend's name
  std::string device_name;         // for messages
  int32_t compute_capability = 0;  // checked when the engine names a GPU architecture (compute_capability != 0)
  uint32_t cuda_version = 0;       // the runtime's CUDA version; 0 skips the check
};

// One optimization profile: for each input with dynamic dims, its min/opt/max shapes.
struct ProfileInputDims {
  std::vector<int64_t> min, opt, max;
};
struct EngineProfile {
  std::map<std::string, ProfileInputDims> inputs;
};

// A plugin an engine needs (its nodes carry the plugin's fields as attributes).
struct EnginePluginRef {
  std::string domain, name, version;
  std::string library;  // file name of the plugin library; "" when the plugin was linked in
};

struct EngineContents {
  EngineTarget target;
  std::string kiln_version;  // filled in by DeserializeEngine (SerializeEngine writes KilnVersion())
  std::unique_ptr<Graph> graph;
  std::vector<EngineProfile> profiles;
  std::optional<MemoryPlan> plan;    // values named by the graph's value names
  std::vector<std::string> tactics;  // empty, or one per node in execution order
  std::string build_report_json;
  // The plugins the graph uses: SerializeEngine derives them from the registered plugins, DeserializeEngine reads
  // them and fails, naming the plugin and its library, when one is not registered or has another version.
  std::vector<EnginePluginRef> plugins;
  // The most elements one tensor may hold, at build and at run time (outputs whose size depends on data); 0 in
  // engines written before the field existed (the default applies).
  int64_t max_tensor_elements = 0;
  int32_t profiling_verbosity = 2;  // ProfilingVerbosity (kiln/builder.h): 0 layer names only, 1 none, 2 detailed
  // Auxiliary streams (plan/streams.h): per node, its stream (empty: all on the main one), and the streams used.
  std::vector<int32_t> node_streams;
  int32_t num_streams = 1;
  // Per-shape tactics (EngineDesc::tactic_points / tactic_variants): the points' input shapes, and per node (empty or
  // one list per node) its (point, tactic) pairs.
  std::vector<std::map<std::string, std::vector<int64_t>>> tactic_points;
  std::vector<std::vector<std::pair<int32_t, std::string>>> tactic_variants;
};

// The decoded fixed header.
struct EngineHeader {
  uint32_t format_version = 0;
  uint32_t header_size = 0;
  std::string kiln_version;
  EngineTarget target;
  uint64_t payload_offset = 0, payload_size = 0;
  uint64_t weights_offset = 0, weights_size = 0;
  uint64_t file_size = 0;
  uint64_t checksum = 0;
};

Result<std::vector<uint8_t>> SerializeEngine(const EngineContents& engine);
Result<EngineContents> DeserializeEngine(const uint8_t* data, size_t size, const EngineCompat& expected);

// Checks magic, format version, size and layout, and decodes the header (no checksum, no compatibility check):
// for `kiln inspect`-style tools.
Result<EngineHeader> ReadEngineHeader(const uint8_t* data, size_t size);
// Checks that an engine built for `built` can run on `expected`; the error says why not and what to do.
Status CheckEngineCompat(const EngineTarget& built, const EngineCompat& expected);

// Writes / reads an engine file; errors name the path.
Status SaveEngineFile(const std::string& path, const EngineContents& engine);
Result<EngineContents> LoadEngineFile(const std::string& path, const EngineCompat& expected);

// A 64-bit hash (four-lane multiply-rotate, xxHash64-style; kiln's own code).
uint64_t Hash64(const uint8_t* data, size_t size, uint64_t seed = 0);
// The checksum an engine file's header must hold: the header with its checksum field zeroed, then the rest.
// Requires size >= kEngineHeaderSize.
uint64_t EngineChecksum(const uint8_t* data, size_t size);
// Recomputes and stores the checksum of a serialized engine (for tools and tests that patch an engine).
void ResealEngine(std::vector<uint8_t>& file);

// "sm_90" for 90.
std::string ComputeCapabilityName(int32_t cc);

}  // namespace kiln
