// kiln serve — what the protocols (HTTP/REST and gRPC, KServe v2 / Open Inference Protocol) and the server core
// exchange: tensors with KServe v2 datatypes, inference requests and responses, model metadata, and the status codes
// each protocol maps to its own (HTTP 400/404/503/500/501, gRPC INVALID_ARGUMENT/NOT_FOUND/UNAVAILABLE/INTERNAL/
// UNIMPLEMENTED).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln::serve {

// KServe v2 datatype names ("FP32", "INT64", "BOOL", "BF16", ...) and kiln's types. "BYTES" (strings) has no kiln
// type: FromV2Datatype fails for it with a sentence.
Result<DataType> FromV2Datatype(std::string_view name);
std::string V2Datatype(DataType t);  // "" for a type KServe has no name for (float8, int4)
// Triton's config.pbtxt spelling ("TYPE_FP32"); "" for none.
std::string TritonConfigType(DataType t);
Result<DataType> FromTritonConfigType(std::string_view name);

// Triton's shared-memory parameters of a tensor (shared_memory_region, shared_memory_offset,
// shared_memory_byte_size): its bytes lie in a region registered with the system shared memory extension.
struct SharedMemoryRef {
  std::string region;
  uint64_t offset = 0, byte_size = 0;
};

struct TensorData {
  std::string name;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  std::string bytes;  // row-major elements, as kiln holds them (bool: one byte each)
  // An input in shared memory: the region named (no `bytes`); once the server has looked it up, `external` points at
  // its bytes, which `hold` keeps mapped while the request lives. An output written to shared memory: the region the
  // request named, and no `bytes`.
  std::optional<SharedMemoryRef> shm;
  const char* external = nullptr;
  size_t external_size = 0;
  std::shared_ptr<const void> hold;
  // The element bytes, wherever they are.
  const char* data() const { return external ? external : bytes.data(); }
  size_t size() const { return external ? external_size : bytes.size(); }
  int64_t Volume() const;
};

struct RequestedOutput {
  std::string name;
  // HTTP: return this output in the binary section (Triton's binary tensor data extension); unset: the request's
  // binary_data_output decides.
  std::optional<bool> binary;
  std::optional<SharedMemoryRef> shm;  // write it to this shared-memory region instead of the response
};

struct InferRequest {
  std::string model, version, id;
  std::vector<TensorData> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output
  bool binary_outputs = false;           // HTTP: request-level binary_data_output
  // When the request must be answered by (the server's --request-timeout, or the request's "timeout" parameter in
  // microseconds); past it the request is answered with kDeadlineExceeded, queued or not.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct InferResponse {
  std::string model, version, id;
  std::vector<TensorData> outputs;  // in the order requested (every output: the engine's order)
  std::vector<bool> binary;         // per output (HTTP)
};

struct TensorMetadata {
  std::string name;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;  // -1 for dynamic dims (the batch dim of a batching model included)
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;  // "kiln_engine" (a model.engine) or "onnxruntime_onnx" (a model.onnx kiln built)
  std::vector<TensorMetadata> inputs, outputs;
};

// How a call ends, as the protocols report it: an HTTP status (gRPC maps it to its codes) and a sentence. kiln's
// library errors (Status) map by code: not found 404, a bad input or model 400, the rest 500. The server's own
// conditions have theirs: 503 not ready / shutting down / queue full, 504 past the deadline, 413 too large, 501 a
// feature the server was started without (client shared memory).
struct Outcome {
  int http = 200;
  std::string message;
  bool ok() const { return http == 200; }
  static Outcome Ok() { return {}; }
  static Outcome FromStatus(const Status& s);
  static Outcome BadRequest(std::string m) { return {400, std::move(m)}; }
  static Outcome NotFound(std::string m) { return {404, std::move(m)}; }
  static Outcome Unavailable(std::string m) { return {503, std::move(m)}; }
  static Outcome Timeout(std::string m) { return {504, std::move(m)}; }
  static Outcome TooLarge(std::string m) { return {413, std::move(m)}; }
  static Outcome NotImplemented(std::string m) { return {501, std::move(m)}; }
  static Outcome Internal(std::string m) { return {500, std::move(m)}; }
};

}  // namespace kiln::serve
