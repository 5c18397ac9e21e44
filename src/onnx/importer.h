// ONNX model file -> kiln IR. Reads the protobuf (with external-data files next to the model), converts each
// node through the converter table, collects every unsupported node into one report, sorts the graph, and
// runs shape inference with constant folding.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "kiln/onnx_value.h"
#include "ops/infer.h"

namespace kiln {

struct ImportOptions {
  InferOptions infer;                    // evaluator for constant folding (normally the CPU backend)
  std::map<std::string, Shape> input_shapes;  // overrides of graph input shapes (--shapes)
  // Folders besides the model's own that external data may be read from (--externalDataDir), searched in order.
  std::vector<std::string> external_data_dirs;
};

Result<std::unique_ptr<Graph>> ImportOnnxFile(const std::string& path, const ImportOptions& opts);
// `base_dir` is where external-data files are looked up; `source` names the model in messages. The bytes are only
// read during the call (the caller may unmap them afterwards).
Result<std::unique_ptr<Graph>> ImportOnnxBytes(std::string_view bytes, const std::string& base_dir,
                                               const std::string& source, const ImportOptions& opts);

// Reads one serialized onnx.TensorProto (the conformance suite's input_*.pb / output_*.pb files).
Result<Tensor> ReadTensorProtoFile(const std::string& path, std::string* name = nullptr);
// Reads one serialized value of a graph input or output of kind `kind`: an onnx.TensorProto, a SequenceProto (of
// tensors) or an OptionalProto (of a tensor or a sequence of tensors); value_proto.cpp.
Result<OnnxValue> ReadValueProtoFile(const std::string& path, ValueKind kind, std::string* name = nullptr);

// The opset range kiln accepts for the default domain: the newest onnx's (1.23, opset 28). kiln's ops follow their
// versions up to kImplementedOpset; past it, a node whose op has a version there that changes more than its types
// (onnx_version_changes.inc) is refused with the version and what changed.
inline constexpr int64_t kMinOpset = 1;  // below 7: legacy_opsets.h rewrites or refuses each node
inline constexpr int64_t kMaxOpset = 28;
inline constexpr int64_t kImplementedOpset = 21;

}  // namespace kiln
