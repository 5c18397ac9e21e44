// Shape inference of control flow that engines rely on: a Loop's scan outputs get an exact leading dim where the trip
// count is a constant and no condition can end the loop early (no condition input, or a constant one the body gives
// back unchanged, as exporters write a for loop), and stay open where a condition can; bodies fold captured constants
// while they are typed, so a Scan whose body unsqueezes by a captured axes constant has shaped outputs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx_testing.h"

namespace kiln {
namespace {

using testing::AddInitializer;
using testing::AddNode;
using testing::SetValueInfo;

void TypedInfo(onnx::ValueInfoProto* vi, const std::string& name, int elem, std::vector<std::string> dims) {
  SetValueInfo(vi, name, std::move(dims));
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
}

onnx::GraphProto* GraphAttr(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  return a->mutable_g();
}

// h0[2,3] -> Loop(trip count 4, condition `cond`) whose body doubles h and scans it -> h_final[2,3], hs[?,2,3].
// cond: "" (none), "true"/"false" (a constant), "input" (a graph input), "computed" (the body computes its own).
std::string LoopModel(const std::string& cond) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "loop");
  SetValueInfo(g->add_input(), "h0", {"2", "3"});
  if (cond == "input") TypedInfo(g->add_input(), "go", onnx::TensorProto::BOOL, {});
  SetValueInfo(g->add_output(), "h_final", {"2", "3"});
  SetValueInfo(g->add_output(), "hs", {"steps", "2", "3"});
  AddInitializer(g, "trips", onnx::TensorProto::INT64, {})->add_int64_data(4);
  if (cond == "true" || cond == "false")
    AddInitializer(g, "go", onnx::TensorProto::BOOL, {})->add_int32_data(cond == "true" ? 1 : 0);
  const bool has_cond = !cond.empty() && cond != "computed";
  auto* loop = AddNode(g, "Loop", "loop", {"trips", has_cond || cond == "computed" ? "go_or_true" : "", "h0"},
                       {"h_final", "hs"});
  if (has_cond) loop->set_input(1, "go");
  if (cond == "computed") AddInitializer(g, "go_or_true", onnx::TensorProto::BOOL, {})->add_int32_data(1);
  auto* body = GraphAttr(loop, "body");
  body->set_name("step");
  TypedInfo(body->add_input(), "i", onnx::TensorProto::INT64, {});
  TypedInfo(body->add_input(), "c", onnx::TensorProto::BOOL, {});
  SetValueInfo(body->add_input(), "h", {"2", "3"});
  TypedInfo(body->add_output(), "c_out", onnx::TensorProto::BOOL, {});
  SetValueInfo(body->add_output(), "h_out", {"2", "3"});
  SetValueInfo(body->add_output(), "h_scan", {"2", "3"});
  AddNode(body, "Add", "double", {"h", "h"}, {"h_out"});
  AddNode(body, "Identity", "scan", {"h_out"}, {"h_scan"});
  if (cond == "computed") {
    AddInitializer(body, "two", onnx::TensorProto::INT64, {})->add_int64_data(2);
    AddNode(body, "Less", "early", {"i", "two"}, {"c_out"});
  } else {
    AddNode(body, "Identity", "keep", {"c"}, {"c_out"});
  }
  return m.SerializeAsString();
}

Result<std::unique_ptr<Graph>> Import(const std::string& bytes) {
  ImportOptions o;
  o.infer.evaluator = cpu::MakeConstEvaluator();
  return ImportOnnxBytes(bytes, ".", "model.onnx", o);
}

std::string ShapeOf(const Graph& g, const std::string& name) { return ShapeToString(g.FindValue(name)->shape); }

TEST(ControlFlowShapes, ALoopThatOnlyItsTripCountEndsHasExactScanOutputs) {
  for (const std::string cond : {"", "true"}) {
    auto g = Import(LoopModel(cond));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(ShapeOf(**g, "hs"), "[4,2,3]") << "condition '" << cond << "'";
  }
  auto g = Import(LoopModel("false"));  // a constant false condition: no iteration
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(ShapeOf(**g, "hs"), "[0,2,3]");
}

TEST(ControlFlowShapes, ALoopWhoseConditionCanEndItEarlyKeepsItsScanDimOpen) {
  for (const std::string cond : {"input", "computed"}) {
    auto g = Import(LoopModel(cond));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const Value* hs = (*g)->FindValue("hs");
    ASSERT_TRUE(hs->has_shape && hs->shape.size() == 3) << cond;
    EXPECT_FALSE(hs->shape[0].known()) << "condition '" << cond << "': " << ShapeToString(hs->shape);
  }
  // And the run agrees: the computed condition stops after 3 iterations (i = 0, 1, 2 < 2 fails at i = 2).
  auto g = Import(LoopModel("computed"));
  ASSERT_TRUE(g.ok());
  Tensor h0(DataType::kFloat32, {2, 3});
  for (int64_t i = 0; i < 6; ++i) h0.data<float>()[i] = static_cast<float>(i);
  auto out = cpu::RunGraph(**g, {{"h0", h0}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("hs").shape(), (std::vector<int64_t>{3, 2, 3}));
  EXPECT_EQ(out->at("h_final").data<float>()[5], 5.f * 8);
}

// x[2,5,3] -> Scan over axis 1 whose body unsqueezes each [2,3] slice by a captured axes constant (an initializer of
// the outer graph) and sums the state -> s[2,1,3], ys[5,2,1,3].
TEST(ControlFlowShapes, BodiesFoldCapturedConstants) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "scan");
  SetValueInfo(g->add_input(), "s0", {"2", "1", "3"});
  SetValueInfo(g->add_input(), "x", {"2", "5", "3"});
  SetValueInfo(g->add_output(), "s", {"a", "b", "c"});
  SetValueInfo(g->add_output(), "ys", {"d", "e", "f", "g"});
  AddInitializer(g, "axes", onnx::TensorProto::INT64, {1})->add_int64_data(1);
  auto* scan = AddNode(g, "Scan", "scan", {"s0", "x"}, {"s", "ys"});
  testing::IntAttr(scan, "num_scan_inputs", 1);
  testing::IntsAttr(scan, "scan_input_axes", {1});
  auto* body = GraphAttr(scan, "body");
  body->set_name("cell");
  SetValueInfo(body->add_input(), "s_in", {"2", "1", "3"});
  auto* xt = body->add_input();  // no shape declared: inference alone gives it
  xt->set_name("x_t");
  xt->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* so = body->add_output();
  so->set_name("s_out");
  so->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* yo = body->add_output();
  yo->set_name("y_t");
  yo->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  AddNode(body, "Unsqueeze", "unsq", {"x_t", "axes"}, {"x_u"});  // axes: read from the outer graph
  AddNode(body, "Add", "acc", {"s_in", "x_u"}, {"s_out"});
  AddNode(body, "Identity", "out", {"s_out"}, {"y_t"});
  auto imported = Import(m.SerializeAsString());
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(ShapeOf(**imported, "s"), "[2,1,3]");
  EXPECT_EQ(ShapeOf(**imported, "ys"), "[5,2,1,3]");
}

}  // namespace
}  // namespace kiln
