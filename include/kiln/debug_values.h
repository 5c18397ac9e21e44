// kiln — the debug API for networks whose inputs or outputs are ONNX sequences or optionals (the node tests of the
// sequence ops: SequenceInsert, SplitToSequence, Optional...). Engines take and give tensors; these networks run
// node by node on the reference backend. Sequences and optionals inside a network with tensor inputs and outputs (a
// Loop that collects a sequence, then ConcatFromSequence) need none of this: engines and RunNetwork run them.
#pragma once

#include <map>
#include <string>

#include "kiln/debug.h"
#include "kiln/network.h"
#include "kiln/onnx_value.h"
#include "kiln/status.h"

namespace kiln::debug {

// What a network input or output holds, as ONNX types it.
enum class OnnxType { kTensor, kSequence, kOptionalTensor, kOptionalSequence };

// The type of the network's input or output `name` (kTensor for a name it does not have).
OnnxType NetworkValueType(const NetworkDefinition& network, const std::string& name);

// RunNetwork with every input and output as an OnnxValue (an input of an optional type takes an empty optional, or
// the tensor or sequence it holds).
Result<std::map<std::string, OnnxValue>> RunNetworkValues(const NetworkDefinition& network,
                                                          const std::map<std::string, OnnxValue>& inputs,
                                                          const NetworkRunOptions& options = {});

// Reads one serialized value of type `type`: an onnx.TensorProto, a SequenceProto of tensors, or an OptionalProto (the
// node tests' input_*.pb / output_*.pb files); `name` receives the value's name when given.
Result<OnnxValue> ReadOnnxValueFile(const std::string& path, OnnxType type, std::string* name = nullptr);

}  // namespace kiln::debug
