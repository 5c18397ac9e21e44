// Sequences and optionals: the sequence ops on the CPU reference (values checked by hand), a Loop that collects a
// sequence imported from ONNX and run, optional inputs through RunGraphValues, and the refusals (a tensor op given a
// sequence, an empty optional read).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx_testing.h"
#include "ops/sequence.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::AddNode;

Tensor Iota(std::vector<int64_t> shape, float from = 0) {
  Tensor t(DataType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = from + static_cast<float>(i);
  return t;
}

TEST(Sequences, SplitInsertEraseConcatAndAt) {
  testing::TestGraph t;
  Value* x = t.Input("x", {2, 6});
  Value* y = t.Input("y", {2, 3});
  t.feeds["x"] = Iota({2, 6});
  t.feeds["y"] = Iota({2, 3}, 100);
  // x -> [x[:, 0:2], x[:, 2:6]]; y goes first; the last element is erased again.
  Value* s = t.Op("SplitToSequence", "split", {x, t.Ints("split", {2, 4})}, {{"axis", Attribute::Int(1)}});
  Value* s2 = t.Op("SequenceInsert", "insert", {s, y, t.g.AddConstant("zero", Tensor::Scalar(DataType::kInt64, 0))});
  Value* len = t.Op("SequenceLength", "len", {s2});
  Value* cat = t.Op("ConcatFromSequence", "cat", {s2}, {{"axis", Attribute::Int(1)}});
  Value* last = t.Op("SequenceAt", "at", {s2, t.g.AddConstant("minus_one", Tensor::Scalar(DataType::kInt64, -1))});
  Value* s3 = t.Op("SequenceErase", "erase", {s2});
  Value* stacked = t.Op("ConcatFromSequence", "stack", {t.Op("SplitToSequence", "split1", {x}, {{"axis", Attribute::Int(1)}, {"keepdims", Attribute::Int(0)}})},
                        {{"axis", Attribute::Int(-1)}, {"new_axis", Attribute::Int(1)}});
  Value* cat3 = t.Op("ConcatFromSequence", "cat3", {s3}, {{"axis", Attribute::Int(1)}});
  for (Value* v : {len, cat, last, stacked, cat3}) t.Output(v);
  t.Finish();
  EXPECT_EQ(s->kind, ValueKind::kSequence);
  EXPECT_EQ(s2->kind, ValueKind::kSequence);
  EXPECT_EQ(last->kind, ValueKind::kTensor);
  EXPECT_EQ(s->TypeString(), "seq(float32[2,?])");
  auto out = t.Run();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.at(len->name).GetAsInt(0), 3);
  const Tensor& c = out.at(cat->name);  // [y | x]
  ASSERT_EQ(c.shape(), (std::vector<int64_t>{2, 9}));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t k = 0; k < 9; ++k)
      EXPECT_EQ(c.data<float>()[r * 9 + k], k < 3 ? 100 + r * 3 + k : r * 6 + (k - 3)) << r << "," << k;
  testing::ExpectEqualTensor(out.at(last->name), [] {
    Tensor w(DataType::kFloat32, {2, 4});
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t k = 0; k < 4; ++k) w.data<float>()[r * 4 + k] = static_cast<float>(r * 6 + 2 + k);
    return w;
  }());
  testing::ExpectEqualTensor(out.at(stacked->name), t.feeds["x"]);  // split into columns, stacked back as columns
  ASSERT_EQ(out.at(cat3->name).shape(), (std::vector<int64_t>{2, 5}));  // y and x[:, 0:2]
}

TEST(Sequences, TensorOpsRefuseSequencesNamingTheNode) {
  testing::TestGraph t;
  Value* x = t.Input("x", {2, 6});
  Value* s = t.Op("SplitToSequence", "split", {x});
  t.Output(t.Op("Relu", "relu_of_a_sequence", {s}));
  ASSERT_TRUE(t.g.TopoSort().ok());
  InferOptions io;
  Status st = InferGraph(t.g, io);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("relu_of_a_sequence"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("is a sequence"), std::string::npos) << st.message();
}

// A graph input `name` of kind `kind` holding float32 tensors.
Value* KindInput(Graph& g, const std::string& name, ValueKind kind) {
  Value* v = g.GetOrAddValue(name);
  v->dtype = DataType::kFloat32;
  v->kind = kind;
  v->is_graph_input = true;
  g.inputs.push_back(v);
  return v;
}

TEST(Sequences, OptionalsThroughRunGraphValues) {
  testing::TestGraph t;
  t.opset = 18;
  Value* o = KindInput(t.g, "maybe", ValueKind::kOptionalTensor);
  t.Output(t.Op("OptionalHasElement", "has", {o}));
  t.Output(t.Op("Identity", "same", {o}));
  t.Finish();
  EXPECT_EQ(t.g.outputs[1]->kind, ValueKind::kOptionalTensor);
  auto none = cpu::RunGraphValues(t.g, {{"maybe", OnnxValue::None()}});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->at("has_out").tensor.GetAsInt(0), 0);
  EXPECT_TRUE(none->at("same_out").is_none());
  auto some = cpu::RunGraphValues(t.g, {{"maybe", OnnxValue::FromTensor(Iota({3}))}});
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  EXPECT_EQ(some->at("has_out").tensor.GetAsInt(0), 1);
  testing::ExpectEqualTensor(some->at("same_out").tensor, Iota({3}));
  // A sequence where an optional tensor is declared is refused, naming the input.
  auto wrong = cpu::RunGraphValues(t.g, {{"maybe", OnnxValue::FromSequence({Iota({3})})}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("maybe"), std::string::npos);
}

TEST(Sequences, ReadingAnEmptyOptionalIsAnError) {
  testing::TestGraph t;
  t.opset = 18;
  Value* o = KindInput(t.g, "maybe", ValueKind::kOptionalTensor);
  t.Output(t.Op("OptionalGetElement", "get", {o}));
  t.Finish();
  auto r = cpu::RunGraphValues(t.g, {{"maybe", OnnxValue::None()}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'get'"), std::string::npos) << r.status().ToString();
}

void SetSequenceType(onnx::ValueInfoProto* vi, const std::string& name) {
  vi->set_name(name);
  vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
}

void SetTensorType(onnx::ValueInfoProto* vi, const std::string& name, int type) {
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(type);
}

// x[3, 4] -> Loop over its rows (trip count 3): body appends row i + 1 (Gather, Add) to a sequence that starts empty
// -> ConcatFromSequence(axis 0) = x + 1; an Optional of the type attribute seq(float) tells it holds nothing.
onnx::ModelProto LoopModel() {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "seq_loop");
  SetTensorType(g->add_input(), "x", onnx::TensorProto::FLOAT);
  SetTensorType(g->add_output(), "y", onnx::TensorProto::FLOAT);
  SetTensorType(g->add_output(), "has", onnx::TensorProto::BOOL);
  auto* trips = testing::AddInitializer(g, "trips", onnx::TensorProto::INT64, {});
  trips->add_int64_data(3);
  auto* empty = AddNode(g, "SequenceEmpty", "empty", {}, {"s0"});
  testing::IntAttr(empty, "dtype", onnx::TensorProto::FLOAT);
  auto* loop = AddNode(g, "Loop", "loop", {"trips", "", "s0"}, {"s"});
  auto* body_attr = loop->add_attribute();
  body_attr->set_name("body");
  body_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* body = body_attr->mutable_g();
  body->set_name("body");
  SetTensorType(body->add_input(), "i", onnx::TensorProto::INT64);
  SetTensorType(body->add_input(), "c", onnx::TensorProto::BOOL);
  SetSequenceType(body->add_input(), "s_in");
  SetTensorType(body->add_output(), "c_out", onnx::TensorProto::BOOL);
  SetSequenceType(body->add_output(), "s_out");
  auto* one = testing::AddInitializer(body, "one", onnx::TensorProto::FLOAT, {});
  one->add_float_data(1.f);
  auto* gather = AddNode(body, "Gather", "row", {"x", "i"}, {"r"});  // x: read from the outer graph
  testing::IntAttr(gather, "axis", 0);
  AddNode(body, "Add", "plus_one", {"r", "one"}, {"r1"});
  auto* axes = testing::AddInitializer(body, "axes", onnx::TensorProto::INT64, {1});
  axes->add_int64_data(0);
  AddNode(body, "Unsqueeze", "unsqueeze", {"r1", "axes"}, {"r2"});
  AddNode(body, "SequenceInsert", "append", {"s_in", "r2"}, {"s_out"});
  AddNode(body, "Identity", "keep", {"c"}, {"c_out"});
  testing::IntAttr(AddNode(g, "ConcatFromSequence", "cat", {"s"}, {"y"}), "axis", 0);
  auto* opt = AddNode(g, "Optional", "nothing", {}, {"o"});
  auto* type = opt->add_attribute();
  type->set_name("type");
  type->set_type(onnx::AttributeProto::TYPE_PROTO);
  type->mutable_tp()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  AddNode(g, "OptionalHasElement", "has_element", {"o"}, {"has"});
  return m;
}

TEST(Sequences, ImportedLoopCollectsASequence) {
  ImportOptions o;
  o.infer.evaluator = cpu::MakeConstEvaluator();
  auto g = ImportOnnxBytes(LoopModel().SerializeAsString(), ".", "seq_loop.onnx", o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Value* s = (*g)->FindValue("s");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind, ValueKind::kSequence);
  EXPECT_EQ((*g)->FindValue("o")->kind, ValueKind::kOptionalSequence);
  const Tensor x = Iota({3, 4});
  auto out = cpu::RunGraph(**g, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& y = out->at("y");
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{3, 4}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(y.data<float>()[i], x.data<float>()[i] + 1) << i;
  EXPECT_EQ(out->at("has").GetAsInt(0), 0);
}

TEST(Sequences, ImporterRefusesMapsAndNestedSequences) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "nested");
  auto* in = g->add_input();
  in->set_name("ss");
  in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_sequence_type()->mutable_elem_type()
      ->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  SetSequenceType(g->add_output(), "out");
  AddNode(g, "Identity", "id", {"ss"}, {"out"});
  ImportOptions o;
  auto r = ImportOnnxBytes(m.SerializeAsString(), ".", "nested.onnx", o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'ss'"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace kiln
