// kiln — a network definition: built from ONNX by OnnxParser, or op by op in code.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kiln/logger.h"
#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

class Graph;

// An attribute value for NetworkDefinition::addOp.
using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>>;
using AttrMap = std::map<std::string, AttrValue>;

class NetworkDefinition {
 public:
  NetworkDefinition();
  ~NetworkDefinition();
  NetworkDefinition(const NetworkDefinition&) = delete;
  NetworkDefinition& operator=(const NetworkDefinition&) = delete;

  // Declares an input. Dims of -1 are dynamic: name them with `dim_names` (same length; "" for unnamed) so that
  // an optimization profile can give their ranges, e.g. {"batch", "", "", ""}.
  Status addInput(const std::string& name, DataType type, const Dims& dims,
                  const std::vector<std::string>& dim_names = {});
  // A constant tensor (weights); `data` holds the elements in row-major order and is copied.
  Status addConstant(const std::string& name, DataType type, const Dims& dims, const void* data);
  // An ONNX op (default domain, opset of the network) reading the named tensors ("" for an omitted optional
  // input) and writing `outputs`. Checked at once: the op must exist and its shapes must infer.
  Status addOp(const std::string& op_type, const std::string& name, const std::vector<std::string>& inputs,
               const std::vector<std::string>& outputs, const AttrMap& attributes = {});
  Status markOutput(const std::string& name);

  int getNbInputs() const;
  int getNbOutputs() const;
  std::string getInputName(int index) const;
  std::string getOutputName(int index) const;
  int getNbLayers() const;
  int64_t getOpset() const;
  void setOpset(int64_t opset);

  // Internal: the IR graph (used by the builder and the parser).
  Graph& graph();
  const Graph& graph() const;

 private:
  std::unique_ptr<Graph> graph_;
  int64_t opset_ = 17;
};

// Fills a NetworkDefinition from an ONNX model. An unsupported model fails with ONE report listing every
// unsupported node; a malformed file with an error naming the file and node.
class OnnxParser {
 public:
  OnnxParser(NetworkDefinition& network, ILogger& logger) : network_(network), logger_(logger) {}
  Status parseFromFile(const std::string& path);
  // `base_dir` is where external-data files are looked up.
  Status parse(const void* data, size_t size, const std::string& base_dir = ".");

 private:
  NetworkDefinition& network_;
  ILogger& logger_;
};

}  // namespace kiln
