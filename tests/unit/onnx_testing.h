// Builders of ONNX protos shared by the unit tests that write a small model with the protobuf API and
// import it. Header-only.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "onnx.pb.h"

namespace kiln::testing {

// Starts `m` as an IR version 8 model of the default domain at opset 17; returns its graph, named `name`.
inline onnx::GraphProto* StartModel(onnx::ModelProto& m, const std::string& name) {
  m.set_ir_version(8);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name(name);
  return g;
}

// An initializer `name` of `type` and `dims`, its data left to the caller.
inline onnx::TensorProto* AddInitializer(onnx::GraphProto* g, const std::string& name, int type,
                                         const std::vector<int64_t>& dims) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

inline onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::string& name,
                                std::vector<std::string> ins, std::vector<std::string> outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

inline void IntAttr(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void IntsAttr(onnx::NodeProto* n, const std::string& k, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A float tensor's value info; a dim that starts with a digit is static, any other is symbolic.
inline void SetValueInfo(onnx::ValueInfoProto* vi, const std::string& name, std::vector<std::string> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (auto& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

}  // namespace kiln::testing
