// The op table: every OpDef is well formed; the CPU backend's kernel table and the OpDefs agree (an OpDef
// without a CPU kernel, or a kernel without an OpDef, fails here); lookups are domain- and opset-aware; the
// planner's traits come from the OpDefs; external (plugin) ops are refused when they collide or lack a shape
// function; the importer names what is wrong with an op it cannot place.
#include <gtest/gtest.h>

#include <set>

#include "backends/cpu/kernel.h"
#include "kiln/ops.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx_testing.h"
#include "ops/op_def.h"

namespace kiln {
namespace {

// The keys a backend's kernel table may hold: the qualified names of the built-in ops a kernel runs.
std::set<std::string> RunnableOpNames() {
  std::set<std::string> r;
  for (const OpDef* d : BuiltinOps().All())
    if (!d->traits.import_only) r.insert(d->QualifiedName());
  return r;
}

TEST(OpRegistry, BuiltinTableIsValid) {
  Status st = BuiltinOps().Validate();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_GT(BuiltinOps().All().size(), 100u);
}

TEST(OpRegistry, EveryOpDefHasACpuKernel) {
  std::vector<std::string> missing;
  for (const OpDef* d : BuiltinOps().All())
    if (!d->traits.import_only && !cpu::Kernels().Find(d->QualifiedName())) missing.push_back(d->QualifiedName());
  EXPECT_TRUE(missing.empty()) << "OpDefs without a CPU kernel (the CPU backend is the oracle: every op needs one): "
                               << ::testing::PrintToString(missing);
}

TEST(OpRegistry, EveryCpuKernelHasAnOpDef) {
  std::vector<std::string> orphans;
  const std::set<std::string> runnable = RunnableOpNames();
  for (const std::string& key : cpu::Kernels().OpTypes())
    if (!runnable.count(key)) orphans.push_back(key);
  EXPECT_TRUE(orphans.empty()) << "CPU kernels registered under no OpDef (or under an import-only one): "
                               << ::testing::PrintToString(orphans);
}

TEST(OpRegistry, LookupsAreDomainAware) {
  const OpDef* relu = FindOp("", "Relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(FindOp("ai.onnx", "Relu"), relu);
  EXPECT_EQ(FindOp("kiln", "Relu"), nullptr);
  // kiln's internal Attention is not ONNX's (opset 23) Attention.
  ASSERT_NE(FindOp("kiln", "Attention"), nullptr);
  EXPECT_EQ(FindOp("kiln", "Attention")->QualifiedName(), "kiln.Attention");
  const OpDef* onnx_attention = FindOp("", "Attention");
  EXPECT_TRUE(onnx_attention == nullptr || onnx_attention->domain.empty());
  EXPECT_EQ(FindOp("com.example", "Relu"), nullptr);
}

TEST(OpRegistry, LookupsAreOpsetAware) {
  EXPECT_EQ(FindOp("", "HardSwish", 13), nullptr);  // HardSwish arrived in opset 14
  ASSERT_NE(FindOp("", "HardSwish", 14), nullptr);
  EXPECT_NE(FindOp("", "HardSwish", 21), nullptr);
  EXPECT_NE(FindOp("", "HardSwish"), nullptr);  // any version
  Node n;
  n.op_type = "HardSwish";
  n.opset = 12;
  EXPECT_EQ(FindOp(n), FindOp("", "HardSwish")) << "a node a pass created under an old opset still finds its op";
}

TEST(OpRegistry, TraitsComeFromTheOpDefs) {
  auto traits = [](const char* domain, const char* op) {
    Node n;
    n.domain = domain;
    n.op_type = op;
    return TraitsOf(n);
  };
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) EXPECT_TRUE(traits("", op).view) << op;
  EXPECT_FALSE(traits("", "Transpose").view);
  EXPECT_TRUE(traits("", "Cast").keeps_fp32);
  EXPECT_TRUE(traits("", "Shape").keeps_fp32);
  EXPECT_FALSE(traits("", "Conv").keeps_fp32);
  EXPECT_FALSE(traits("", "Resize").is_parameter_input(0));
  EXPECT_TRUE(traits("", "Resize").is_parameter_input(1));
  EXPECT_TRUE(traits("", "Resize").is_parameter_input(2));
  EXPECT_TRUE(traits("", "Add").layout_neutral);
  EXPECT_TRUE(traits("kiln", "FusedPointwise").layout_neutral);
  EXPECT_FALSE(traits("", "Conv").layout_neutral);
  EXPECT_TRUE(traits("", "Relu").fusable_pointwise());
  EXPECT_EQ(traits("", "Relu").pointwise_arity, 1);
  EXPECT_EQ(traits("", "Mul").pointwise_arity, 2);
  EXPECT_FALSE(traits("", "Mod").fusable_pointwise());
  // an op kiln does not know has no traits
  EXPECT_FALSE(traits("com.example", "Reshape").view);
}

ShapeFn PassThrough() {
  return [](InferContext& c) -> Status {
    if (c.has_input(0)) c.set_output(0, c.in(0).dtype, c.in(0).shape);
    return Status::Ok();
  };
}

TEST(OpRegistry, ExternalOpsAreCheckedAndListed) {
  OpDef bad;
  bad.domain = "com.example";
  bad.name = "NoShape";
  Status st = AddExternalOp(bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("shape function"), std::string::npos) << st.message();

  OpDef clash;
  clash.name = "Relu";
  clash.infer = PassThrough();
  st = AddExternalOp(clash);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("built into kiln"), std::string::npos) << st.message();

  OpDef ok;
  ok.domain = "com.example";
  ok.name = "Twice";
  ok.infer = PassThrough();
  ASSERT_TRUE(AddExternalOp(ok).ok());
  EXPECT_FALSE(AddExternalOp(ok).ok()) << "the same op twice";
  ASSERT_NE(FindOp("com.example", "Twice"), nullptr);
  EXPECT_EQ(FindOp("com.example", "Twice")->QualifiedName(), "com.example.Twice");
  bool listed = false;
  for (const OpInfo& info : getSupportedOps()) listed |= info.plugin && info.name == "Twice";
  EXPECT_TRUE(listed);
  const OpDef* held = FindOp("com.example", "Twice");  // as an import on another thread might hold it
  RemoveExternalOp("com.example", "Twice");
  EXPECT_EQ(FindOp("com.example", "Twice"), nullptr);
  EXPECT_EQ(held->name, "Twice") << "a removed definition stays alive for whoever still holds it";
  EXPECT_TRUE(static_cast<bool>(held->infer));
}

TEST(OpRegistry, PublicOpTableListsOnnxOpsOnly) {
  std::set<std::string> names;
  for (const OpInfo& info : getSupportedOps()) {
    EXPECT_NE(info.domain, "kiln") << info.name;
    names.insert(info.name);
  }
  EXPECT_TRUE(names.count("Conv"));
  EXPECT_TRUE(names.count("Mod"));
  EXPECT_FALSE(names.count("FusedConv"));
}

// A one-node model of `op` in `domain` (with that domain's opset imported), x -> y.
std::string OneNodeModel(const std::string& domain, const std::string& op) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "one");
  if (!domain.empty() && domain != "ai.onnx") {
    auto* os = m.add_opset_import();
    os->set_domain(domain);
    os->set_version(1);
  }
  testing::SetValueInfo(g->add_input(), "x", {"2", "3"});
  testing::SetValueInfo(g->add_output(), "y", {"2", "3"});
  testing::AddNode(g, op, "the_node", {"x"}, {"y"})->set_domain(domain);
  return m.SerializeAsString();
}

TEST(OpRegistry, ImporterNamesOpsItCannotPlace) {
  auto r = ImportOnnxBytes(OneNodeModel("com.example", "Frobnicate"), "", "m.onnx", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the_node"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("kiln plugin new"), std::string::npos) << r.status().message();

  r = ImportOnnxBytes(OneNodeModel("kiln", "FusedPointwise"), "", "m.onnx", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("internal"), std::string::npos) << r.status().message();

  r = ImportOnnxBytes(OneNodeModel("", "NoSuchOnnxOp"), "", "m.onnx", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not implement"), std::string::npos) << r.status().message();

  EXPECT_TRUE(ImportOnnxBytes(OneNodeModel("ai.onnx", "Relu"), "", "m.onnx", {}).ok());
}

TEST(OpRegistry, ImporterUsesRegisteredExternalOps) {
  OpDef def;
  def.domain = "com.example";
  def.name = "Copy";
  def.infer = PassThrough();
  ASSERT_TRUE(AddExternalOp(def).ok());
  auto r = ImportOnnxBytes(OneNodeModel("com.example", "Copy"), "", "m.onnx", {});
  RemoveExternalOp("com.example", "Copy");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Graph& g = **r;
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0]->domain, "com.example");
  EXPECT_EQ(g.outputs[0]->shape.size(), 2u);
}

}  // namespace
}  // namespace kiln
