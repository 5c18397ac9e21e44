// kiln — the debug API: runs that check engines rather than serve them. The reference run (a network as defined,
// no optimizer, node by node on the reference backend) is the oracle every engine is compared with; an engine's
// layers run node by node give every intermediate tensor (`kiln compare --markAll`); node-by-node runs on another
// backend test its kernels one op at a time (`kiln-conformance --backend`).
#pragma once

#include <map>
#include <string>

#include "kiln/network.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::debug {

// The name of the backend every result is checked against: kiln's CPU reference backend.
std::string ReferenceBackendName();

struct NetworkRunOptions {
  std::string backend;    // by name; empty: the reference backend
  bool keep_all = false;  // return every intermediate tensor too, by name
  bool allow_tf32 = true;  // float32 matmul/conv may use TF32 tensor cores (false: strict float32, as ONNX specifies)
};

// Runs the network as defined (no optimizer, no engine) node by node on a backend. `inputs` are host tensors named
// like the network's inputs (their types and ranks must match); returns host copies of the outputs. A network with
// nodes the backend has no kernel for fails with one report listing them.
Result<std::map<std::string, Tensor>> RunNetwork(const NetworkDefinition& network,
                                                 const std::map<std::string, Tensor>& inputs,
                                                 const NetworkRunOptions& options = {});

// Runs the engine's optimized graph node by node on the engine's backend with the kernels the builder chose, and
// returns every tensor it computes by name (those the optimizer kept under the model's names can be compared with
// the reference run's).
Result<std::map<std::string, Tensor>> RunEngineLayers(const Engine& engine,
                                                      const std::map<std::string, Tensor>& inputs);

// Reads one serialized onnx.TensorProto file (the ONNX node tests' input_*.pb / output_*.pb); `name` receives the
// tensor's name when given.
Result<Tensor> ReadOnnxTensorFile(const std::string& path, std::string* name = nullptr);

}  // namespace kiln::debug
