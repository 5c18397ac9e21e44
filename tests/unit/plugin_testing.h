// Shared by the plugin unit tests: the example plugin library (examples/plugins), one-node and two-node models using
// its ops, and small test creators linked into the test binary. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/plugin.h"
#include "onnx_testing.h"

namespace kiln::plugintest {

// The example plugin library: $KILN_EXAMPLE_PLUGINS_LIB where set (a bundle on a GPU machine), else the build's.
inline std::string ExamplesPath() {
  const char* env = std::getenv("KILN_EXAMPLE_PLUGINS_LIB");
  return env && *env ? env : KILN_EXAMPLE_PLUGINS_LIB;
}

// Loads the example plugin library (idempotent; re-registers what a test deregistered).
inline void LoadExamples() {
  auto r = loadPluginLibrary(ExamplesPath());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

inline void FloatAttr(onnx::NodeProto* n, const std::string& k, float v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void StringAttr(onnx::NodeProto* n, const std::string& k, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// x[dims] -> com.example.ScaleShift(alpha, beta, activation) -> s -> com.example.SelectAbove(threshold) -> y;
// both s and y are graph outputs.
inline std::string ScaleSelectModel(const std::vector<std::string>& dims, float alpha, float beta,
                                    const std::string& activation, float threshold) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "plugins");
  auto* os = m.add_opset_import();
  os->set_domain("com.example");
  os->set_version(1);
  testing::SetValueInfo(g->add_input(), "x", dims);
  auto* s = testing::AddNode(g, "ScaleShift", "scale", {"x"}, {"s"});
  s->set_domain("com.example");
  FloatAttr(s, "alpha", alpha);
  FloatAttr(s, "beta", beta);
  StringAttr(s, "activation", activation);
  auto* sel = testing::AddNode(g, "SelectAbove", "select", {"s"}, {"y"});
  sel->set_domain("com.example");
  FloatAttr(sel, "threshold", threshold);
  auto* so = g->add_output();
  so->set_name("s");
  so->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* yo = g->add_output();
  yo->set_name("y");
  yo->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m.SerializeAsString();
}

// A one-node model x[2,3] -> domain.op -> y.
inline onnx::ModelProto OneNodeModel(const std::string& domain, const std::string& op) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "one");
  auto* os = m.add_opset_import();
  os->set_domain(domain);
  os->set_version(1);
  testing::SetValueInfo(g->add_input(), "x", {"2", "3"});
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  testing::AddNode(g, op, "the_node", {"x"}, {"y"})->set_domain(domain);
  return m;
}

// Reference semantics of the example ops, written again here.
inline std::vector<float> ScaleShiftRef(const std::vector<float>& x, float alpha, float beta, bool relu) {
  std::vector<float> y;
  for (float v : x) {
    const float r = alpha * v + beta;
    y.push_back(relu ? (r > 0.f ? r : 0.f) : r);
  }
  return y;
}
inline std::vector<float> SelectAboveRef(const std::vector<float>& x, float threshold) {
  std::vector<float> y;
  for (float v : x)
    if (v > threshold) y.push_back(v);
  return y;
}

inline StderrLogger& Logger() {
  static StderrLogger logger(Severity::kError);
  return logger;
}

// Parses ONNX bytes and builds an engine for the cpu backend.
inline Result<std::vector<uint8_t>> BuildCpu(const std::string& onnx_bytes,
                                             const OptimizationProfile* profile = nullptr) {
  Builder b(Logger());
  auto net = b.createNetwork();
  OnnxParser parser(*net, Logger());
  KILN_RETURN_IF_ERROR(parser.parse(onnx_bytes.data(), onnx_bytes.size()));
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cpu");
  if (profile) KILN_RETURN_IF_ERROR(cfg->addOptimizationProfile(*profile).status());
  return b.buildSerializedNetwork(*net, *cfg);
}

}  // namespace kiln::plugintest
