// NetworkDefinition (op by op) and OnnxParser (from a model file) both produce the IR graph the builder takes.
#include "kiln/network.h"

#include <cmath>
#include <cstring>

#include "backends/factory.h"
#include "core/dtype.h"
#include "core/error.h"
#include "ir/graph.h"
#include "ops/op_def.h"
#include "onnx/importer.h"
#include "ops/infer.h"
#include "runtime/network_graph.h"

namespace kiln {

NetworkDefinition::NetworkDefinition() : graph_(std::make_unique<Graph>()) { graph_->opsets[""] = opset_; }
NetworkDefinition::~NetworkDefinition() = default;

Graph& GraphOf(NetworkDefinition& network) { return *network.graph_; }
const Graph& GraphOf(const NetworkDefinition& network) { return *network.graph_; }
int64_t NetworkDefinition::getOpset() const { return opset_; }
void NetworkDefinition::setOpset(int64_t opset) {
  opset_ = opset;
  graph_->opsets[""] = opset;
}

Status NetworkDefinition::addInput(const std::string& name, DataType type, const Dims& dims,
                                   const std::vector<std::string>& dim_names) {
  if (name.empty()) return Err(StatusCode::kInvalidArgument, "an input needs a name");
  if (graph_->FindValue(name)) return Err(StatusCode::kInvalidArgument, "a tensor named '{}' exists already", name);
  if (!IsSupportedType(type))
    return Err(StatusCode::kUnsupported, "input '{}': element type {} is not supported", name, DataTypeName(type));
  if (!dim_names.empty() && dim_names.size() != dims.size())
    return Err(StatusCode::kInvalidArgument, "input '{}': {} dim names for {} dims", name, dim_names.size(), dims.size());
  Value* v = graph_->GetOrAddValue(name);
  v->dtype = type;
  v->has_shape = true;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0) v->shape.emplace_back(dims[i]);
    else if (!dim_names.empty() && !dim_names[i].empty()) v->shape.push_back(Dim::Symbol(dim_names[i]));
    else v->shape.push_back(Dim::Symbol(name + "_dim" + std::to_string(i)));
  }
  v->is_graph_input = true;
  graph_->inputs.push_back(v);
  return Status::Ok();
}

Status NetworkDefinition::addConstant(const std::string& name, DataType type, const Dims& dims, const void* data) {
  if (graph_->FindValue(name)) return Err(StatusCode::kInvalidArgument, "a tensor named '{}' exists already", name);
  for (int64_t d : dims)
    if (d < 0) return Err(StatusCode::kInvalidArgument, "constant '{}': dims must be fixed, got {}", name, ShapeToString(dims));
  if (!IsSupportedType(type))
    return Err(StatusCode::kUnsupported, "constant '{}': element type {} is not supported", name, DataTypeName(type));
  Tensor t(type, dims);
  if (t.nbytes()) std::memcpy(t.raw(), data, t.nbytes());
  if (const int64_t i = FirstOutOf4BitRange(t); i >= 0) {  // one value per byte, sign-extended for int4 and int2
    if (type == DataType::kFloat4E2M1)
      return Err(StatusCode::kInvalidArgument, "constant '{}': element {} is the byte {}, not a float4e2m1 code (kiln "
                 "holds one 4-bit code per byte, 0 to 15)", name, i, static_cast<int>(t.data<uint8_t>()[i]));
    const auto [lo, hi] = IntegerRange(type);
    return Err(StatusCode::kInvalidArgument, "constant '{}': element {} is {}, outside {} ([{}, {}]; kiln holds one "
               "value per byte, sign-extended for int4 and int2)", name, i, t.GetAsInt(i), DataTypeName(type), lo, hi);
  }
  Value* v = graph_->GetOrAddValue(name);
  v->dtype = type;
  v->shape = FromStatic(dims);
  v->has_shape = true;
  v->const_value = std::move(t);
  return Status::Ok();
}

namespace {
Attribute ToAttribute(const AttrValue& a) {
  if (auto* i = std::get_if<int64_t>(&a)) return Attribute::Int(*i);
  if (auto* f = std::get_if<float>(&a)) return Attribute::Float(*f);
  if (auto* s = std::get_if<std::string>(&a)) return Attribute::String(*s);
  if (auto* is = std::get_if<std::vector<int64_t>>(&a)) return Attribute::Ints(*is);
  return Attribute::Floats(std::get<std::vector<float>>(a));
}
}  // namespace

Status NetworkDefinition::addOp(const std::string& op_type, const std::string& name,
                                const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                                const AttrMap& attributes) {
  const std::string where = "node '" + name + "' (" + op_type + ")";
  const OpDef* def = FindOp(kOnnxDomain, op_type, opset_);
  if (!def) return Err(StatusCode::kUnsupported, "{}: kiln does not implement op type {} at opset {}", where, op_type, opset_);
  for (const auto& o : outputs)
    if (o.empty() || graph_->FindValue(o))
      return Err(StatusCode::kInvalidArgument, "{}: output name '{}' is empty or used already", where, o);
  Node* n = graph_->AddNode(op_type, name.empty() ? op_type + "_" + std::to_string(graph_->nodes().size()) : name);
  n->opset = opset_;
  for (const auto& i : inputs) {
    if (i.empty()) {
      n->inputs.push_back(nullptr);
      continue;
    }
    Value* v = graph_->FindValue(i);
    if (!v) {
      graph_->mutable_nodes().pop_back();
      return Err(StatusCode::kNotFound, "{}: input '{}' is not a tensor of the network", where, i);
    }
    n->inputs.push_back(v);
  }
  for (const auto& o : outputs) {
    Value* v = graph_->GetOrAddValue(o);
    v->producer = n;
    n->outputs.push_back(v);
  }
  for (const auto& [k, a] : attributes) n->attrs[k] = ToAttribute(a);
  auto undo = [&] {
    for (Value* v : n->outputs) v->producer = nullptr;
    graph_->mutable_nodes().pop_back();
  };
  if (def->convert) {
    ConvertContext ctx{*graph_, *n, opset_};
    Status st = def->convert(ctx);
    if (!st.ok()) {
      undo();
      return st;
    }
  }
  // Infer this node's outputs now, so that errors point at the call that caused them.
  InferContext ctx = ContextFromGraph(*n);
  Status st = InferNode(ctx);
  if (!st.ok()) {
    undo();
    return st;
  }
  for (size_t i = 0; i < n->outputs.size(); ++i) {
    n->outputs[i]->dtype = ctx.outputs[i].dtype;
    n->outputs[i]->shape = ctx.outputs[i].shape;
    n->outputs[i]->has_shape = ctx.outputs[i].has_shape;
    n->outputs[i]->sym_value = ctx.outputs[i].sym_value;
    n->outputs[i]->kind = ctx.outputs[i].kind;  // SequenceConstruct, SplitToSequence... make sequences
  }
  return Status::Ok();
}

Status NetworkDefinition::markOutput(const std::string& name) {
  Value* v = graph_->FindValue(name);
  if (!v) return Err(StatusCode::kNotFound, "markOutput: the network has no tensor named '{}'", name);
  if (v->is_graph_output) return Status::Ok();
  v->is_graph_output = true;
  graph_->outputs.push_back(v);
  return Status::Ok();
}

int NetworkDefinition::getNbInputs() const { return static_cast<int>(graph_->inputs.size()); }
int NetworkDefinition::getNbOutputs() const { return static_cast<int>(graph_->outputs.size()); }
std::string NetworkDefinition::getInputName(int i) const {
  return i >= 0 && i < getNbInputs() ? graph_->inputs[i]->name : "";
}
std::string NetworkDefinition::getOutputName(int i) const {
  return i >= 0 && i < getNbOutputs() ? graph_->outputs[i]->name : "";
}
int NetworkDefinition::getNbLayers() const { return static_cast<int>(graph_->nodes().size()); }

namespace {
NetworkTensor Describe(const Value* v) {
  NetworkTensor t;
  if (!v) return t;
  t.name = v->name;
  t.dtype = v->dtype;
  for (const Dim& d : v->shape) {
    t.dims.push_back(d.known() ? d.value : -1);
    t.dim_names.push_back(d.ToString());
  }
  t.type = v->TypeString();
  return t;
}
}  // namespace

NetworkTensor NetworkDefinition::getInput(int i) const {
  return Describe(i >= 0 && i < getNbInputs() ? graph_->inputs[i] : nullptr);
}
NetworkTensor NetworkDefinition::getOutput(int i) const {
  return Describe(i >= 0 && i < getNbOutputs() ? graph_->outputs[i] : nullptr);
}

NetworkLayer NetworkDefinition::getLayer(int i) const {
  NetworkLayer l;
  if (i < 0 || i >= getNbLayers()) return l;
  const Node& n = *graph_->nodes()[i];
  l.name = n.name;
  l.op_type = n.op_type;
  l.domain = n.domain;
  for (const Value* v : n.inputs) l.inputs.push_back(v ? v->name : "");
  for (const Value* v : n.outputs) l.outputs.push_back(v ? v->name : "");
  return l;
}

size_t NetworkDefinition::getWeightBytes() const {
  size_t bytes = 0;
  for (const Value* v : graph_->values())
    if (v->is_const()) bytes += v->const_value->nbytes();
  return bytes;
}

std::string NetworkDefinition::toString() const { return PrintGraph(*graph_); }

namespace {

ImportOptions ParseOptions(const std::map<std::string, Dims>& input_shapes, const std::vector<std::string>& data_dirs) {
  ImportOptions opts;
  opts.infer.evaluator = ConstantFolder();
  for (const auto& [name, d] : input_shapes) opts.input_shapes[name] = FromStatic(d);
  opts.external_data_dirs = data_dirs;
  return opts;
}

// The parsed graph becomes the network's (its opset too); a failure is logged and returned.
Status Adopt(Result<std::unique_ptr<Graph>> g, NetworkDefinition& network, ILogger& logger) {
  if (!g.ok()) {
    logger.log(Severity::kError, g.status().ToString().c_str());
    return g.status();
  }
  GraphOf(network) = std::move(**g);
  if (auto it = GraphOf(network).opsets.find(""); it != GraphOf(network).opsets.end()) network.setOpset(it->second);
  return Status::Ok();
}

}  // namespace

Status OnnxParser::parseFromFile(const std::string& path) {
  return Adopt(ImportOnnxFile(path, ParseOptions(input_shapes_, data_dirs_)), network_, logger_);
}

Status OnnxParser::parse(const void* data, size_t size, const std::string& base_dir) {
  return Adopt(ImportOnnxBytes(std::string_view(static_cast<const char*>(data), size), base_dir, "<memory>",
                               ParseOptions(input_shapes_, data_dirs_)),
               network_, logger_);
}

Status NetworkDefinition::setDynamicRange(const std::string& tensor, float min, float max) {
  const Value* v = graph_->FindValue(tensor);
  if (!v) return Err(StatusCode::kNotFound, "setDynamicRange: the network has no tensor named '{}'", tensor);
  if (!std::isfinite(min) || !std::isfinite(max) || min > max)
    return Err(StatusCode::kInvalidArgument, "setDynamicRange('{}'): [{}, {}] is not a finite range with min <= max",
               tensor, min, max);
  dynamic_ranges_[tensor] = {min, max};
  return Status::Ok();
}

float NetworkDefinition::getDynamicRange(const std::string& tensor) const {
  auto it = dynamic_ranges_.find(tensor);
  return it == dynamic_ranges_.end() ? -1.f : std::max(std::fabs(it->second.first), std::fabs(it->second.second));
}

}  // namespace kiln
