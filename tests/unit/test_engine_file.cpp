// Engine files: round trip of an imported model (every attribute kind, constants of every type, symbolic dims,
// profiles, memory plan, tactics, report) compared node by node and run on the CPU backend; each mismatch
// message; every truncation length; and a seeded fuzz loop of corruptions and insertions (never a crash).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <random>

#include "backends/cpu/executor.h"
#include "engine/engine_file.h"
#include "engine/engine_internal.h"
#include "kiln/kiln.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::AddNode;
using testing::IntAttr;
using testing::IntsAttr;

void Init(onnx::GraphProto* g, const std::string& name, int type, std::vector<int64_t> dims, std::mt19937& rng) {
  auto* t = testing::AddInitializer(g, name, type, dims);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < NumElements(dims); ++i) {
    if (type == onnx::TensorProto::FLOAT) t->add_float_data(u(rng));
    else if (type == onnx::TensorProto::INT64) t->add_int64_data(static_cast<int64_t>(rng() % 10));
    else if (type == onnx::TensorProto::FLOAT16) t->add_int32_data(FloatToHalf(u(rng)));
    else t->add_int32_data(static_cast<int32_t>(rng() % 2));  // int32 indices / bool
  }
}

// X[N,3,8,8] -> Conv -> LeakyRelu -> Transpose -> Cast(fp16) + fp16 const -> Cast(fp32) -> Reshape -> Gather
// (int32 indices) -> MatMul -> ReduceSum -> Where(bool const) -> Softmax -> Y[N,10]
std::unique_ptr<Graph> ImportTestModel() {
  std::mt19937 rng(3);
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "engine_test");
  testing::SetValueInfo(g->add_input(), "X", {"N", "3", "8", "8"});
  testing::SetValueInfo(g->add_output(), "Y", {"N", "10"});
  Init(g, "W", onnx::TensorProto::FLOAT, {4, 3, 3, 3}, rng);
  Init(g, "B", onnx::TensorProto::FLOAT, {4}, rng);
  Init(g, "H", onnx::TensorProto::FLOAT16, {8, 4}, rng);
  Init(g, "idx", onnx::TensorProto::INT32, {6}, rng);
  Init(g, "M", onnx::TensorProto::FLOAT, {32, 10}, rng);
  Init(g, "cond", onnx::TensorProto::BOOL, {10}, rng);
  Init(g, "neg", onnx::TensorProto::FLOAT, {10}, rng);
  Init(g, "shape", onnx::TensorProto::INT64, {3}, rng);
  g->mutable_initializer(g->initializer_size() - 1)->clear_int64_data();
  for (int64_t v : {0, 8, 32}) g->mutable_initializer(g->initializer_size() - 1)->add_int64_data(v);
  auto* conv = AddNode(g, "Conv", "conv", {"X", "W", "B"}, {"c"});
  IntsAttr(conv, "pads", {1, 1, 1, 1});
  auto* lr = AddNode(g, "LeakyRelu", "lrelu", {"c"}, {"l"});
  auto* alpha = lr->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.25f);
  IntsAttr(AddNode(g, "Transpose", "transpose", {"l"}, {"t"}), "perm", {0, 2, 3, 1});  // [N,8,8,4]
  IntAttr(AddNode(g, "Cast", "to_half", {"t"}, {"th"}), "to", onnx::TensorProto::FLOAT16);
  AddNode(g, "Add", "add_half", {"th", "H"}, {"ah"});
  IntAttr(AddNode(g, "Cast", "to_float", {"ah"}, {"af"}), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Reshape", "reshape", {"af", "shape"}, {"r"});                  // [N,8,32]
  IntAttr(AddNode(g, "Gather", "gather", {"r", "idx"}, {"gt"}), "axis", 1);  // [N,6,32]
  AddNode(g, "MatMul", "matmul", {"gt", "M"}, {"mm"});                      // [N,6,10]
  AddNode(g, "Constant", "axes_c", {}, {"axes1"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("value");
    a.set_type(onnx::AttributeProto::TENSOR);
    a.mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a.mutable_t()->add_dims(1);
    a.mutable_t()->add_int64_data(1);
    return a;
  }());
  IntAttr(AddNode(g, "ReduceSum", "sum", {"mm", "axes1"}, {"rs"}), "keepdims", 0);  // [N,10]
  AddNode(g, "Where", "where", {"cond", "rs", "neg"}, {"w"});
  IntAttr(AddNode(g, "Softmax", "softmax", {"w"}, {"Y"}), "axis", -1);
  ImportOptions o;
  o.infer.evaluator = cpu::MakeConstEvaluator();
  auto r = ImportOnnxBytes(m.SerializeAsString(), ".", "engine_test.onnx", o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return nullptr;
  return std::move(r).value();
}

// Attributes of every kind, attached to a node whose kernel ignores them.
void AddEveryAttributeKind(Graph& g) {
  Node* n = g.mutable_nodes().front().get();
  n->attrs["kiln_test_int"] = Attribute::Int(-42);
  n->attrs["kiln_test_float"] = Attribute::Float(1.5e-3f);
  n->attrs["kiln_test_string"] = Attribute::String("héllo\nworld");
  n->attrs["kiln_test_ints"] = Attribute::Ints({1, -2, 1ll << 40});
  n->attrs["kiln_test_floats"] = Attribute::Floats({0.5f, -3.25f, 1e30f});
  Attribute strs;
  strs.kind = Attribute::Kind::kStrings;
  strs.strings = {"a", "", "ccc"};
  n->attrs["kiln_test_strings"] = strs;
  Tensor t(DataType::kBFloat16, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<uint16_t>()[i] = FloatToBFloat16(static_cast<float>(i) - 2.5f);
  n->attrs["kiln_test_tensor"] = Attribute::TensorValue(t);
  // A body (as If/Loop/Scan hold): its own values, including a name the outer graph also uses, and a constant.
  auto body = std::make_shared<Graph>();
  Value* bin = body->GetOrAddValue("x");
  bin->dtype = DataType::kFloat32;
  bin->shape = {Dim(2)};
  bin->has_shape = true;
  bin->is_graph_input = true;
  body->inputs.push_back(bin);
  Value* bc = body->AddConstant("two", Tensor::FromFloat({2.f, 2.f}, {2}));
  Node* bn = body->AddNode("Mul", "body_mul");
  bn->inputs = {bin, bc};
  Value* bout = body->GetOrAddValue("y");
  bout->dtype = DataType::kFloat32;
  bout->shape = {Dim(2)};
  bout->has_shape = true;
  bout->is_graph_output = true;
  bn->outputs = {bout};
  body->outputs.push_back(bout);
  EXPECT_TRUE(body->TopoSort().ok());
  Attribute graph_kind;
  graph_kind.kind = Attribute::Kind::kGraph;
  graph_kind.g = body;
  n->attrs["kiln_test_graph"] = graph_kind;
  n->attrs["kiln_flatten_2d"] = Attribute::Int(1);
}

void ExpectSameTensor(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.nbytes(), b.nbytes()) << what;
  if (a.nbytes()) EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << what;
}

void ExpectSameDims(const std::vector<Dim>& a, const std::vector<Dim>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].value, b[i].value) << what;
    EXPECT_EQ(a[i].sym, b[i].sym) << what;
  }
}

void ExpectSameValue(const Value* a, const Value* b) {
  if (!a || !b) {
    EXPECT_EQ(a == nullptr, b == nullptr);
    return;
  }
  EXPECT_EQ(a->name, b->name);
  EXPECT_EQ(a->dtype, b->dtype) << a->name;
  EXPECT_EQ(a->has_shape, b->has_shape) << a->name;
  ExpectSameDims(a->shape, b->shape, a->name);
  EXPECT_EQ(a->is_graph_input, b->is_graph_input) << a->name;
  EXPECT_EQ(a->is_graph_output, b->is_graph_output) << a->name;
  ASSERT_EQ(a->is_const(), b->is_const()) << a->name;
  if (a->is_const()) ExpectSameTensor(*a->const_value, *b->const_value, a->name);
  ASSERT_EQ(a->sym_value.has_value(), b->sym_value.has_value()) << a->name;
  if (a->sym_value) ExpectSameDims(*a->sym_value, *b->sym_value, a->name);
}

void ExpectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.opsets, b.opsets);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) ExpectSameValue(a.inputs[i], b.inputs[i]);
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) ExpectSameValue(a.outputs[i], b.outputs[i]);
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t k = 0; k < a.nodes().size(); ++k) {
    const Node& x = *a.nodes()[k];
    const Node& y = *b.nodes()[k];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op_type, y.op_type);
    EXPECT_EQ(x.domain, y.domain);
    EXPECT_EQ(x.opset, y.opset);
    ASSERT_EQ(x.inputs.size(), y.inputs.size()) << x.name;
    for (size_t i = 0; i < x.inputs.size(); ++i) ExpectSameValue(x.inputs[i], y.inputs[i]);
    ASSERT_EQ(x.outputs.size(), y.outputs.size()) << x.name;
    for (size_t i = 0; i < x.outputs.size(); ++i) {
      ExpectSameValue(x.outputs[i], y.outputs[i]);
      if (y.outputs[i]) EXPECT_EQ(y.outputs[i]->producer, &y);
    }
    ASSERT_EQ(x.attrs.size(), y.attrs.size()) << x.name;
    for (const auto& [key, at] : x.attrs) {
      ASSERT_TRUE(y.attrs.count(key)) << x.name << "." << key;
      const Attribute& bt = y.attrs.at(key);
      EXPECT_EQ(at.kind, bt.kind) << key;
      EXPECT_EQ(at.i, bt.i) << key;
      EXPECT_EQ(at.f, bt.f) << key;
      EXPECT_EQ(at.s, bt.s) << key;
      EXPECT_EQ(at.ints, bt.ints) << key;
      EXPECT_EQ(at.floats, bt.floats) << key;
      EXPECT_EQ(at.strings, bt.strings) << key;
      EXPECT_EQ(at.t.defined(), bt.t.defined()) << key;
      if (at.t.defined()) ExpectSameTensor(at.t, bt.t, key);
      ASSERT_EQ(at.g != nullptr, bt.g != nullptr) << key;
      if (at.g) {  // a body: same inputs, outputs, nodes and constants
        ASSERT_EQ(at.g->nodes().size(), bt.g->nodes().size()) << key;
        ASSERT_EQ(at.g->inputs.size(), bt.g->inputs.size()) << key;
        ASSERT_EQ(at.g->outputs.size(), bt.g->outputs.size()) << key;
        for (size_t i = 0; i < at.g->inputs.size(); ++i) ExpectSameValue(at.g->inputs[i], bt.g->inputs[i]);
        for (size_t i = 0; i < at.g->outputs.size(); ++i) ExpectSameValue(at.g->outputs[i], bt.g->outputs[i]);
        for (size_t k = 0; k < at.g->nodes().size(); ++k) {
          EXPECT_EQ(at.g->nodes()[k]->op_type, bt.g->nodes()[k]->op_type) << key;
          for (size_t i = 0; i < at.g->nodes()[k]->inputs.size(); ++i)
            ExpectSameValue(at.g->nodes()[k]->inputs[i], bt.g->nodes()[k]->inputs[i]);
        }
      }
    }
  }
}

Result<int64_t> BytesAtBatch2(const Value& v) {
  int64_t n = static_cast<int64_t>(DataTypeSize(v.dtype));
  for (const Dim& d : v.shape) n *= d.known() ? d.value : 2;
  return n;
}

// Engines in these tests are for the cpu backend, and load where it runs.
const EngineCompat kOnCpu{"cpu"};

EngineContents MakeContents(std::unique_ptr<Graph> g) {
  EngineContents e;
  e.target.backend = "cpu";
  e.graph = std::move(g);
  auto plan = PlanMemory(*e.graph, BytesAtBatch2);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) e.plan = std::move(plan).value();
  EngineProfile p;
  p.inputs["X"] = {{1, 3, 8, 8}, {2, 3, 8, 8}, {4, 3, 8, 8}};
  e.profiles = {p, EngineProfile{}};
  for (const auto& n : e.graph->nodes()) e.tactics.push_back("cpu.reference." + n->op_type);
  e.build_report_json = R"({"passes":[],"fused":{"gelu":0}})";
  e.target.build_flags = kBuildFlagFP16 | kBuildFlagOptimized;
  return e;
}

Tensor Input(int64_t n) { return testing::Random<float>({n, 3, 8, 8}, 5); }

std::vector<uint8_t> SmallEngine() {
  auto g = ImportTestModel();
  EXPECT_NE(g, nullptr);
  if (!g) return {};
  AddEveryAttributeKind(*g);
  auto bytes = SerializeEngine(MakeContents(std::move(g)));
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

TEST(EngineFile, RoundTripKeepsEverythingAndRunsTheSame) {
  auto g = ImportTestModel();
  ASSERT_NE(g, nullptr);
  AddEveryAttributeKind(*g);
  EngineContents e = MakeContents(std::move(g));
  auto bytes = SerializeEngine(e);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_EQ(std::string(reinterpret_cast<const char*>(bytes->data()), 8), "KILNENG1");

  auto hdr = ReadEngineHeader(bytes->data(), bytes->size());
  ASSERT_TRUE(hdr.ok()) << hdr.status().ToString();
  EXPECT_EQ(hdr->weights_offset % kEngineWeightsAlignment, 0u);
  EXPECT_EQ(hdr->weights_offset + hdr->weights_size, bytes->size());
  EXPECT_EQ(hdr->target.backend, "cpu");
  EXPECT_EQ(hdr->kiln_version, KilnVersion());

  auto back = DeserializeEngine(bytes->data(), bytes->size(), kOnCpu);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameGraph(*e.graph, *back->graph);
  EXPECT_EQ(back->tactics, e.tactics);
  EXPECT_EQ(back->build_report_json, e.build_report_json);
  EXPECT_EQ(back->target.build_flags, e.target.build_flags);
  ASSERT_EQ(back->profiles.size(), 2u);
  EXPECT_EQ(back->profiles[0].inputs.at("X").max, (std::vector<int64_t>{4, 3, 8, 8}));
  EXPECT_TRUE(back->profiles[1].inputs.empty());
  ASSERT_TRUE(back->plan.has_value());
  EXPECT_EQ(back->plan->arena_bytes, e.plan->arena_bytes);
  EXPECT_EQ(back->plan->naive_bytes, e.plan->naive_bytes);
  ASSERT_EQ(back->plan->buffers.size(), e.plan->buffers.size());
  for (size_t i = 0; i < e.plan->buffers.size(); ++i) {
    const BufferPlan& a = e.plan->buffers[i];
    const BufferPlan& b = back->plan->buffers[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.first, b.first);
    EXPECT_EQ(a.last, b.last);
    EXPECT_EQ(a.alias_of, b.alias_of);
    EXPECT_EQ(b.value, back->graph->FindValue(b.name));
  }
  // The same bytes again (deterministic), and the same outputs.
  auto again = SerializeEngine(*back);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes);
  for (int64_t n : {1, 3}) {
    auto ra = cpu::RunGraph(*e.graph, {{"X", Input(n)}});
    auto rb = cpu::RunGraph(*back->graph, {{"X", Input(n)}});
    ASSERT_TRUE(ra.ok()) << ra.status().ToString();
    ASSERT_TRUE(rb.ok()) << rb.status().ToString();
    ExpectSameTensor(ra->at("Y"), rb->at("Y"), "Y");
  }
}

TEST(EngineFile, ConstantsOfEveryTypeRoundTrip) {
  EngineContents src;
  src.target.backend = "cpu";
  src.graph = std::make_unique<Graph>();
  Graph& g = *src.graph;
  g.name = "consts";
  Value* x = g.AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = {Dim::Symbol("batch"), Dim(4), Dim::Unknown(), Dim::Symbol("2*seq+1")};
  x->has_shape = true;
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Node* n = g.AddNode("KilnTestOp", "all_types");
  n->domain = "kiln";
  n->opset = 1;
  n->inputs.push_back(x);
  n->inputs.push_back(nullptr);  // an omitted optional input
  std::mt19937 rng(9);
  for (DataType dt : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64, DataType::kInt8,
                      DataType::kUInt8, DataType::kInt16, DataType::kUInt16, DataType::kInt32, DataType::kUInt32,
                      DataType::kInt64, DataType::kUInt64, DataType::kBool, DataType::kFloat8E4M3FN,
                      DataType::kFloat8E5M2}) {
    Tensor t(dt, {3, 5});
    for (size_t i = 0; i < t.nbytes(); ++i) static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(rng());
    n->inputs.push_back(g.AddConstant(DataTypeName(dt), t));
  }
  n->inputs.push_back(g.AddConstant("scalar", Tensor::Scalar(DataType::kFloat32, 2.5)));
  n->inputs.push_back(g.AddConstant("empty", Tensor(DataType::kFloat32, {0, 7})));
  Value* shape_like = g.AddValue("shape_like");
  shape_like->dtype = DataType::kInt64;
  shape_like->shape = {Dim(2)};
  shape_like->has_shape = true;
  shape_like->sym_value = std::vector<Dim>{Dim::Symbol("batch"), Dim(7)};
  Value* y = g.AddValue("y");
  y->dtype = DataType::kFloat16;
  n->outputs = {y, nullptr, shape_like};
  Node* m = g.AddNode("Identity", "");
  m->inputs = {shape_like};
  Value* z = g.AddValue("z");
  m->outputs = {z};
  y->is_graph_output = z->is_graph_output = true;
  g.outputs = {y, z};
  g.AddConstant("dead_weight", Tensor(DataType::kFloat32, {1000}));  // unreferenced: not written
  ASSERT_TRUE(g.TopoSort().ok());

  auto bytes = SerializeEngine(src);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = DeserializeEngine(bytes->data(), bytes->size(), kOnCpu);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameGraph(g, *back->graph);
  EXPECT_EQ(back->graph->FindValue("dead_weight"), nullptr);
  EXPECT_FALSE(back->plan.has_value());
  EXPECT_TRUE(back->tactics.empty());
  auto hdr = ReadEngineHeader(bytes->data(), bytes->size());
  ASSERT_TRUE(hdr.ok());
  EXPECT_LT(hdr->weights_size, 1000u * 4);

  // A string constant cannot be written: a clear error, not a crash.
  EngineContents sc;
  sc.target.backend = "cpu";
  sc.graph = std::make_unique<Graph>();
  Graph& s = *sc.graph;
  Value* in = s.AddValue("in");
  in->dtype = DataType::kFloat32;
  in->is_graph_input = true;
  s.inputs.push_back(in);
  Node* sn = s.AddNode("Add", "add");
  Tensor st(DataType::kString, {1});
  sn->inputs = {in, s.AddConstant("strings", st)};
  Value* so = s.AddValue("out");
  sn->outputs = {so};
  so->is_graph_output = true;
  s.outputs.push_back(so);
  auto sb = SerializeEngine(sc);
  ASSERT_FALSE(sb.ok());
  EXPECT_NE(sb.status().message().find("strings"), std::string::npos) << sb.status().message();
}

void ExpectError(const std::vector<uint8_t>& b, const EngineCompat& c, std::initializer_list<const char*> words) {
  auto r = DeserializeEngine(b.data(), b.size(), c);
  ASSERT_FALSE(r.ok()) << "accepted";
  for (const char* w : words) EXPECT_NE(r.status().message().find(w), std::string::npos) << r.status().message();
}

TEST(EngineFile, MismatchMessagesSayWhichAndWhatToDo) {
  const std::vector<uint8_t> good = SmallEngine();
  ASSERT_FALSE(good.empty());

  std::vector<uint8_t> b = good;
  std::memcpy(b.data(), "PK\x03\x04....", 8);
  ExpectError(b, kOnCpu, {"not a kiln engine", "KILNENG1"});

  for (uint32_t v : {kEngineFormatVersion + 1, kEngineFormatVersion - 1}) {
    b = good;
    engine_layout::Put32(b.data() + engine_layout::kFormatVersion, v);
    ResealEngine(b);
    ExpectError(b, kOnCpu, {"format version", v > kEngineFormatVersion ? "newer" : "older", "rebuild the engine with this kiln"});
  }

  auto g = ImportTestModel();
  ASSERT_NE(g, nullptr);
  EngineContents cuda = MakeContents(std::move(g));
  cuda.target.backend = "cuda";
  cuda.target.device_name = "NVIDIA H100 80GB HBM3";
  cuda.target.compute_capability = 90;
  cuda.target.cuda_version = 12040;
  auto cb = SerializeEngine(cuda);
  ASSERT_TRUE(cb.ok());
  ExpectError(*cb, kOnCpu, {"built for cuda", "runs cpu", "rebuild"});
  EngineCompat a100{"cuda", "NVIDIA A100-SXM4-80GB", 80, 12040};
  ExpectError(*cb, a100, {"built for sm_90 (NVIDIA H100 80GB HBM3)", "this GPU is sm_80", "rebuild the engine on this GPU"});
  EngineCompat old_cuda{"cuda", "NVIDIA H100", 90, 12020};
  ExpectError(*cb, old_cuda, {"CUDA 12.4", "CUDA 12.2"});
  EngineCompat h100{"cuda", "NVIDIA H100 PCIe", 90, 12040};
  auto ok = DeserializeEngine(cb->data(), cb->size(), h100);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->target.device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(ok->target.compute_capability, 90);
  EXPECT_EQ(ok->target.cuda_version, 12040u);
  ExpectError(good, EngineCompat{"cuda", "NVIDIA H100", 90, 0}, {"built for cpu", "runs cuda"});

  b = good;
  b[b.size() - 3] ^= 0x10;  // a weight byte
  ExpectError(b, kOnCpu, {"checksum mismatch", "corrupted"});
  b = good;
  b.push_back(0);
  ExpectError(b, kOnCpu, {"extra bytes", "corrupted"});

  // A payload that fails the FlatBuffers verifier (root offset out of range), with a valid checksum.
  b = good;
  engine_layout::Put32(b.data() + kEngineHeaderSize, 0x7FFFFFF0u);
  ResealEngine(b);
  ExpectError(b, kOnCpu, {"FlatBuffers verification", "corrupted"});
}

// An engine whose profile is inconsistent (written with a valid checksum, as an edited-and-resealed file would be)
// is refused at load, naming the input, before anything is sized from it.
TEST(EngineFile, InconsistentProfilesAreRefusedAtLoad) {
  auto bad_profile = [](ProfileInputDims d) {
    auto g = ImportTestModel();
    EngineContents e = MakeContents(std::move(g));
    e.profiles[0].inputs["X"] = std::move(d);
    auto bytes = SerializeEngine(e);
    EXPECT_TRUE(bytes.ok());
    return DeserializeEngine(bytes->data(), bytes->size(), kOnCpu).status();
  };
  Status st = bad_profile({{1, 3, 8, 8}, {8, 3, 8, 8}, {4, 3, 8, 8}});  // opt > max
  EXPECT_NE(st.message().find("min <= opt <= max"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'X'"), std::string::npos) << st.message();
  st = bad_profile({{-1, 3, 8, 8}, {2, 3, 8, 8}, {4, 3, 8, 8}});  // negative min
  EXPECT_NE(st.message().find("min <= opt <= max"), std::string::npos) << st.message();
  st = bad_profile({{1, 3, 8}, {2, 3, 8}, {4, 3, 8}});  // wrong rank
  EXPECT_NE(st.message().find("rank"), std::string::npos) << st.message();
  st = bad_profile({{1, 3, 8, 8}, {2, 3, 8, 8}, {int64_t{1} << 40, 3, 8, 8}});  // too many elements
  EXPECT_NE(st.message().find("2^40"), std::string::npos) << st.message();
}

// Auxiliary streams: the per-node streams round-trip; counts that disagree with them are refused at load.
TEST(EngineFile, NodeStreamsRoundTripAndMustAgreeWithTheirCount) {
  auto with_streams = [](std::vector<int32_t> streams, int32_t n) {
    EngineContents e = MakeContents(ImportTestModel());
    if (streams.size() == 1 && streams[0] == -2) streams.assign(e.graph->nodes().size(), 0);
    if (!streams.empty() && streams.back() == -3) {  // the last node on stream 1, the others on 0
      streams.assign(e.graph->nodes().size(), 0);
      streams.back() = 1;
    }
    e.node_streams = streams;
    e.num_streams = n;
    auto bytes = SerializeEngine(e);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return DeserializeEngine(bytes->data(), bytes->size(), kOnCpu);
  };
  auto ok = with_streams({-3}, 2);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->num_streams, 2);
  EXPECT_EQ(ok->node_streams.back(), 1);
  EXPECT_EQ(ok->node_streams.front(), 0);
  auto none = with_streams({}, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->node_streams.empty());
  for (auto [streams, n, want] : {std::tuple{std::vector<int32_t>{}, 3, "no node on any"},
                                  std::tuple{std::vector<int32_t>{-2}, 2, "of which nodes use 1"},
                                  std::tuple{std::vector<int32_t>{-3}, 66, "at most 64"}}) {
    auto bad = with_streams(streams, n);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find(want), std::string::npos) << bad.status().message();
  }
}

// Per-shape tactics round-trip; a variant naming a node or point that does not exist, or a point that is not one
// shape, is refused at load.
TEST(EngineFile, PerShapeTacticsRoundTripAndAreChecked) {
  auto with = [](std::vector<std::map<std::string, std::vector<int64_t>>> points, int32_t node, int32_t point) {
    EngineContents e = MakeContents(ImportTestModel());
    e.tactic_points = std::move(points);
    e.tactic_variants.assign(e.graph->nodes().size(), {});
    if (node >= 0 && static_cast<size_t>(node) < e.tactic_variants.size())
      e.tactic_variants[node].emplace_back(point, "cpu.reference.x");
    auto bytes = SerializeEngine(e);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return DeserializeEngine(bytes->data(), bytes->size(), kOnCpu);
  };
  auto ok = with({{{"X", {1, 3, 8, 8}}}, {{"X", {4, 3, 8, 8}}}}, 0, 1);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->tactic_points.size(), 2u);
  EXPECT_EQ(ok->tactic_points[1].at("X"), (std::vector<int64_t>{4, 3, 8, 8}));
  ASSERT_FALSE(ok->tactic_variants.empty());
  EXPECT_EQ(ok->tactic_variants[0], (std::vector<std::pair<int32_t, std::string>>{{1, "cpu.reference.x"}}));
  auto bad_point = with({{{"X", {1, 3, 8, 8}}}}, 0, 3);
  ASSERT_FALSE(bad_point.ok());
  EXPECT_NE(bad_point.status().message().find("per-shape tactic"), std::string::npos) << bad_point.status().message();
  auto bad_rank = with({{{"X", {1, 3, 8}}}}, 0, 0);
  ASSERT_FALSE(bad_rank.ok());
  EXPECT_NE(bad_rank.status().message().find("rank"), std::string::npos) << bad_rank.status().message();
  auto outside = with({{{"X", {8, 3, 8, 8}}}}, 0, 0);  // the profile allows batch 1..4
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("outside the profile"), std::string::npos) << outside.status().message();
  auto empty_point = with({{}}, 0, 0);
  ASSERT_FALSE(empty_point.ok());
  EXPECT_NE(empty_point.status().message().find("names 0 of the first profile's 1 inputs"), std::string::npos)
      << empty_point.status().message();
  // The same node and point twice.
  EngineContents e = MakeContents(ImportTestModel());
  e.tactic_points = {{{"X", {2, 3, 8, 8}}}};
  e.tactic_variants.assign(e.graph->nodes().size(), {});
  e.tactic_variants[0] = {{0, "cpu.reference.a"}, {0, "cpu.reference.b"}};
  auto bytes = SerializeEngine(e);
  ASSERT_TRUE(bytes.ok());
  auto twice = DeserializeEngine(bytes->data(), bytes->size(), kOnCpu);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("two per-shape tactics"), std::string::npos) << twice.status().message();
}

// Cross-field invariants the loader checks before anything is sized from them (issue 11): buffer lifetimes inside
// the node order (a lifetime of 2^31 made the peak-memory check allocate 16 GiB), value shapes within the engine's
// element cap, the profiling verbosity in range; and an engine whose arena is larger than this machine's memory is
// refused by the runtime rather than allocated.
TEST(EngineFile, CrossFieldInvariantsAreCheckedAtLoad) {
  auto load = [](const std::function<void(EngineContents&)>& edit) {
    EngineContents e = MakeContents(ImportTestModel());
    edit(e);
    auto bytes = SerializeEngine(e);
    EXPECT_TRUE(bytes.ok());
    return DeserializeEngine(bytes->data(), bytes->size(), kOnCpu).status();
  };
  Status st = load([](EngineContents& e) { e.plan->buffers[0].last = (1 << 30); });
  EXPECT_NE(st.message().find("lives over nodes"), std::string::npos) << st.message();
  st = load([](EngineContents& e) {
    e.max_tensor_elements = 100;  // the test model's activations are larger
  });
  EXPECT_NE(st.message().find("over 100 elements"), std::string::npos) << st.message();
  st = load([](EngineContents& e) { e.profiling_verbosity = 7; });
  EXPECT_NE(st.message().find("profiling verbosity"), std::string::npos) << st.message();
  EXPECT_TRUE(load([](EngineContents& e) { e.profiling_verbosity = 1; }).ok());

  // Through the runtime: an arena of 2^50 bytes (a consistent plan: its last buffer moved to offset 2^50 - 4096)
  // cannot be this machine's.
  EngineContents big = MakeContents(ImportTestModel());
  BufferPlan* last = nullptr;
  for (BufferPlan& b : big.plan->buffers)
    if (b.kind == BufferPlan::Kind::kArena && (!last || b.offset > last->offset)) last = &b;
  ASSERT_NE(last, nullptr);
  ASSERT_LE(last->bytes, 4096);
  const int64_t old_end = big.plan->arena_bytes;
  last->offset = (int64_t{1} << 50) - 4096;
  const int64_t align = big.plan->alignment;
  big.plan->arena_bytes = last->offset + (last->bytes + align - 1) / align * align;
  ASSERT_LE(old_end, last->offset);
  auto bytes = SerializeEngine(big);
  ASSERT_TRUE(bytes.ok());
  StderrLogger quiet(Severity::kError);
  Runtime rt(quiet);
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("activation memory per execution context"), std::string::npos)
      << e.status().message();
}

TEST(EngineFile, EveryTruncationIsAnError) {
  const std::vector<uint8_t> good = SmallEngine();
  ASSERT_FALSE(good.empty());
  for (size_t len = 0; len < good.size(); ++len) {
    auto r = DeserializeEngine(good.data(), len, kOnCpu);
    ASSERT_FALSE(r.ok()) << "truncated to " << len << " bytes was accepted";
    if (len >= 8) {
      EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
      if (len >= kEngineHeaderSize)
        EXPECT_NE(r.status().message().find(fmt::format("the file is {} bytes, the header says {}", len, good.size())),
                  std::string::npos)
            << r.status().message();
    }
  }
  auto none = DeserializeEngine(nullptr, 0, kOnCpu);
  EXPECT_FALSE(none.ok());
}

TEST(EngineFile, FuzzedEnginesNeverCrash) {
  const std::vector<uint8_t> good = SmallEngine();
  ASSERT_FALSE(good.empty());
  auto hdr = ReadEngineHeader(good.data(), good.size());
  ASSERT_TRUE(hdr.ok());
  const size_t payload_end = hdr->payload_offset + hdr->payload_size;
  std::mt19937 rng(20240601);
  int rejected = 0, loaded = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> b = good;
    const int mode = trial % 4;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      if (mode == 0) {  // anywhere
        b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      } else if (mode == 1) {  // insert or delete bytes anywhere
        const size_t at = rng() % b.size();
        if (rng() % 2) b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng()));
        else b.erase(b.begin() + static_cast<std::ptrdiff_t>(at));
      } else {  // inside the payload, then resealed: exercises the verifier and the reader's own checks
        const size_t at = kEngineHeaderSize + rng() % (payload_end - kEngineHeaderSize);
        b[at] = mode == 2 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(b[at] ^ (1u << (rng() % 8)));
      }
    }
    if (mode >= 2) ResealEngine(b);
    auto r = DeserializeEngine(b.data(), b.size(), kOnCpu);
    if (!r.ok()) {
      ++rejected;
      EXPECT_FALSE(r.status().message().empty());
      if (mode <= 1) {
        const std::string& m = r.status().message();
        EXPECT_TRUE(m.find("corrupted") != std::string::npos || m.find("truncated") != std::string::npos ||
                    m.find("not a kiln engine") != std::string::npos || m.find("format version") != std::string::npos)
            << m;
      }
      continue;
    }
    ++loaded;  // a harmless change (a weight or an attribute value): the graph must still be well formed
    ASSERT_NE(r->graph, nullptr);
    EXPECT_TRUE(VerifyGraph(*r->graph).ok());
    if (r->plan) EXPECT_TRUE(r->plan->Validate().ok());
  }
  EXPECT_GT(rejected, 2000);
  RecordProperty("loaded_after_corruption", loaded);
}

TEST(EngineFile, SaveAndLoadFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_engine_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.engine").string();
  auto g = ImportTestModel();
  ASSERT_NE(g, nullptr);
  EngineContents e = MakeContents(std::move(g));
  ASSERT_TRUE(SaveEngineFile(path, e).ok());
  auto back = LoadEngineFile(path, kOnCpu);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameGraph(*e.graph, *back->graph);

  auto missing = LoadEngineFile((dir / "nope.engine").string(), kOnCpu);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.engine"), std::string::npos);

  const std::string cut = (dir / "cut.engine").string();
  std::filesystem::copy_file(path, cut);
  std::filesystem::resize_file(cut, 1000);
  auto rc = LoadEngineFile(cut, kOnCpu);
  ASSERT_FALSE(rc.ok());
  EXPECT_NE(rc.status().message().find("cut.engine"), std::string::npos);
  EXPECT_NE(rc.status().message().find("truncated"), std::string::npos);

  const std::string empty = (dir / "empty.engine").string();
  std::ofstream(empty).close();
  EXPECT_FALSE(LoadEngineFile(empty, kOnCpu).ok());
  EXPECT_FALSE(SaveEngineFile((dir / "no_such_dir" / "x.engine").string(), e).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
