// kiln — a network definition: built from ONNX by OnnxParser, or op by op in code.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
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

// A tensor of a network, as the network describes it.
struct NetworkTensor {
  std::string name;
  DataType dtype = DataType::kUndefined;
  Dims dims;                           // -1 where the dimension is not fixed
  std::vector<std::string> dim_names;  // per dimension: its value, its symbol ("batch", "seq+1"), or "?"
  std::string type;                    // "float32[batch,3,224,224]"
};

// A layer (node) of a network.
struct NetworkLayer {
  std::string name, op_type;
  std::string domain;                        // "" for ONNX's default domain
  std::vector<std::string> inputs, outputs;  // tensor names ("" for an omitted optional input)
};

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
  NetworkTensor getInput(int index) const;   // an empty name where index is out of range
  NetworkTensor getOutput(int index) const;
  NetworkLayer getLayer(int index) const;    // layers in execution order
  size_t getWeightBytes() const;             // bytes of every constant (weights)
  // The network as text: one line per layer with its inputs' and outputs' types (`kiln run --verbose`).
  std::string toString() const;
  int64_t getOpset() const;
  void setOpset(int64_t opset);

  // INT8 (BuilderFlag::kINT8 on a network without Q/DQ nodes): the range a tensor's values take, as calibration
  // would find it (TensorRT's ITensor::setDynamicRange). Quantization is symmetric: the scale is
  // max(|min|, |max|) / 127. Fails for a tensor the network does not have or a range that is not finite with
  // min <= max.
  Status setDynamicRange(const std::string& tensor, float min, float max);
  // max(|min|, |max|) of the tensor's range, or a negative number where none was set.
  float getDynamicRange(const std::string& tensor) const;
  const std::map<std::string, std::pair<float, float>>& dynamicRanges() const { return dynamic_ranges_; }

 private:
  friend Graph& GraphOf(NetworkDefinition& network);  // the builder's and the parser's access (internal)
  friend const Graph& GraphOf(const NetworkDefinition& network);
  std::unique_ptr<Graph> graph_;
  int64_t opset_ = 17;
  std::map<std::string, std::pair<float, float>> dynamic_ranges_;
};

// Fills a NetworkDefinition from an ONNX model. An unsupported model fails with ONE report listing every
// unsupported node; a malformed file with an error naming the file and node.
class OnnxParser {
 public:
  OnnxParser(NetworkDefinition& network, ILogger& logger) : network_(network), logger_(logger) {}
  // Fixes the named inputs' shapes for the parse: shape inference and constant folding run at these shapes (a
  // reference run at one shape, `kiln run --shapes`). Inputs not named keep the model's shapes.
  void setInputShapes(std::map<std::string, Dims> shapes) { input_shapes_ = std::move(shapes); }
  // External data is read from the model's folder only (links resolved; nothing outside it); these folders are
  // searched after it, each with the same containment (kiln --externalDataDir).
  void setExternalDataDirs(std::vector<std::string> dirs) { data_dirs_ = std::move(dirs); }
  Status parseFromFile(const std::string& path);
  // `base_dir` is where external-data files are looked up.
  Status parse(const void* data, size_t size, const std::string& base_dir = ".");

 private:
  NetworkDefinition& network_;
  ILogger& logger_;
  std::map<std::string, Dims> input_shapes_;
  std::vector<std::string> data_dirs_;
};

}  // namespace kiln
