// Plugins: loading libraries (and the errors of every bad one), registering creators, linked-in plugins, and how
// plugin nodes import (fields checked and canonicalized, shapes inferred).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kiln/ops.h"
#include "onnx/importer.h"
#include "plugin_testing.h"
#include "plugins/plugin_registry.h"

namespace kiln {
namespace {

using plugintest::LoadExamples;

bool Has(const Status& st, const std::string& text) { return st.message().find(text) != std::string::npos; }

// A minimal creator for registry tests: y = x, with configurable identity.
class CopyPlugin : public IPlugin {
 public:
  PluginFields serializeFields() const override { return {}; }
  Status inferOutputs(const std::vector<PluginInputInfo>& in, std::vector<PluginOutputInfo>& out,
                      IDimBuilder&) const override {
    out[0].dtype = in[0].dtype;
    out[0].dims = in[0].dims;
    return Status::Ok();
  }
  Status runCpu(const std::vector<PluginTensor>& in, std::vector<PluginTensor>& out,
                const PluginCpuContext&) const override {
    std::copy_n(in[0].as<const float>(), in[0].numel(), out[0].as<float>());
    return Status::Ok();
  }
};

class CopyCreator : public IPluginCreator {
 public:
  CopyCreator(std::string domain, std::string name, std::vector<PluginFieldSpec> specs = {})
      : domain_(std::move(domain)), name_(std::move(name)), specs_(std::move(specs)) {}
  const char* name() const override { return name_.c_str(); }
  const char* domain() const override { return domain_.c_str(); }
  const char* version() const override { return "1"; }
  std::vector<PluginFieldSpec> fieldSpecs() const override { return specs_; }
  Result<std::unique_ptr<IPlugin>> create(const PluginFields&) const override {
    return std::unique_ptr<IPlugin>(new CopyPlugin());
  }

 private:
  std::string domain_, name_;
  std::vector<PluginFieldSpec> specs_;
};

TEST(Plugins, LoadsTheExampleLibrary) {
  LoadExamples();
  auto again = loadPluginLibrary(plugintest::ExamplesPath());
  ASSERT_TRUE(again.ok()) << again.status().ToString() << " (loading a library twice is a no-op)";
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ((*again)[0].name, "ScaleShift");
  EXPECT_EQ((*again)[0].domain, "com.example");
  EXPECT_EQ((*again)[0].version, "1");
  EXPECT_NE((*again)[0].library.find("kiln_example_plugins"), std::string::npos);
  EXPECT_EQ((*again)[0].fields.size(), 3u);
  EXPECT_EQ((*again)[1].name, "SelectAbove");
  int listed = 0;
  for (const OpInfo& op : getSupportedOps()) listed += op.plugin && op.domain == "com.example";
  EXPECT_EQ(listed, 2) << "plugin ops appear in the public op table";
}

TEST(Plugins, AMissingLibraryIsNamed) {
  auto r = loadPluginLibrary("/no/such/dir/libmissing_plugin.so");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Has(r.status(), "/no/such/dir/libmissing_plugin.so")) << r.status().message();
  EXPECT_TRUE(Has(r.status(), "does not exist")) << r.status().message();
}

TEST(Plugins, AFileThatIsNoSharedLibraryIsRefused) {
  const std::string path = (std::filesystem::temp_directory_path() / "kiln_not_elf_plugin.so").string();
  std::ofstream(path) << "this is text, not a shared library\n";
  auto r = loadPluginLibrary(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.status(), "cannot load plugin library '" + path + "'")) << r.status().message();
}

TEST(Plugins, ALibraryWithoutTheEntryPointIsNotAPlugin) {
  auto r = loadPluginLibrary(KILN_TEST_NOT_A_PLUGIN_LIB);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.status(), "is not a kiln plugin library")) << r.status().message();
  EXPECT_TRUE(Has(r.status(), KILN_PLUGIN_ENTRY_POINT)) << r.status().message();
}

TEST(Plugins, ALibraryOfAnotherAbiIsRefusedWithASentence) {
  auto r = loadPluginLibrary(KILN_TEST_BAD_ABI_PLUGIN_LIB);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_TRUE(Has(r.status(), "plugin ABI version " + std::to_string(KILN_PLUGIN_ABI_VERSION + 1)))
      << r.status().message();
  EXPECT_TRUE(Has(r.status(), "rebuild the plugin")) << r.status().message();
}

TEST(Plugins, CreatorsAreCheckedWhenRegistered) {
  Status st = registerPlugin(std::make_shared<CopyCreator>("kiln", "Mine"));
  EXPECT_TRUE(Has(st, "kiln's internal ops")) << st.message();
  st = registerPlugin(std::make_shared<CopyCreator>("", "Relu"));
  EXPECT_TRUE(Has(st, "built into kiln")) << st.message();
  // A dotted name would read as a qualified one ("kiln.FusedConv" is kiln's kernel key): refused.
  st = registerPlugin(std::make_shared<CopyCreator>("", "kiln.FusedConv"));
  EXPECT_TRUE(Has(st, "has no '.'")) << st.message();
  st = registerPlugin(std::make_shared<CopyCreator>(
      "com.test", "Twice", std::vector<PluginFieldSpec>{PluginFieldSpec::Of("a", 1.f), PluginFieldSpec::Of("a", 2.f)}));
  EXPECT_TRUE(Has(st, "field 'a' twice")) << st.message();
  st = registerPlugin(std::make_shared<CopyCreator>(
      "com.test", "BadDefault", std::vector<PluginFieldSpec>{{"a", PluginFieldType::kInt, PluginFieldValue(1.f)}}));
  EXPECT_TRUE(Has(st, "its default is float")) << st.message();

  ASSERT_TRUE(registerPlugin(std::make_shared<CopyCreator>("com.test", "Copy")).ok());
  st = registerPlugin(std::make_shared<CopyCreator>("com.test", "Copy"));
  EXPECT_TRUE(Has(st, "is registered already")) << st.message();
  EXPECT_TRUE(deregisterPlugin("com.test", "Copy").ok());
  EXPECT_EQ(deregisterPlugin("com.test", "Copy").code(), StatusCode::kNotFound);
  EXPECT_EQ(plugins::FindPlugin("com.test", "Copy"), nullptr);
}

TEST(Plugins, LinkedInPluginsRegisterByName) {
  addLinkedInPlugin(std::make_shared<CopyCreator>("com.linked", "Copy"));
  bool listed = false;
  for (const PluginInfo& p : getLinkedInPlugins()) listed |= p.domain == "com.linked" && p.name == "Copy";
  EXPECT_TRUE(listed);
  EXPECT_EQ(plugins::FindPlugin("com.linked", "Copy"), nullptr) << "listed, not registered, until asked";
  Status st = registerLinkedInPlugins({"com.linked.Nope"});
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_TRUE(Has(st, "com.linked.Copy")) << "the error lists what is linked in: " << st.message();
  ASSERT_TRUE(registerLinkedInPlugins({"com.linked.Copy"}).ok());
  EXPECT_TRUE(registerLinkedInPlugins({"com.linked.Copy"}).ok()) << "registering again is a no-op";
  auto p = plugins::FindPlugin("com.linked", "Copy");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->library, "");
  EXPECT_TRUE(deregisterPlugin("com.linked", "Copy").ok());
}

TEST(Plugins, ImportChecksAndCanonicalizesFields) {
  LoadExamples();
  onnx::ModelProto m = plugintest::OneNodeModel("com.example", "ScaleShift");
  plugintest::FloatAttr(m.mutable_graph()->mutable_node(0), "alpha", 2.5f);
  auto g = ImportOnnxBytes(m.SerializeAsString(), "", "m.onnx", {});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Node& n = *(*g)->nodes()[0];
  EXPECT_EQ(n.domain, "com.example");
  EXPECT_FLOAT_EQ(n.getf("alpha", 0), 2.5f);
  EXPECT_FLOAT_EQ(n.getf("beta", 7), 0.f) << "defaults are filled in: the engine stores every field";
  EXPECT_EQ(n.gets("activation", ""), "none");
  ASSERT_EQ((*g)->outputs[0]->shape.size(), 2u);
  EXPECT_EQ((*g)->outputs[0]->shape[1].value, 3);

  onnx::ModelProto wrong_type = plugintest::OneNodeModel("com.example", "ScaleShift");
  testing::IntAttr(wrong_type.mutable_graph()->mutable_node(0), "alpha", 2);
  g = ImportOnnxBytes(wrong_type.SerializeAsString(), "", "m.onnx", {});
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Has(g.status(), "the_node")) << g.status().message();
  EXPECT_TRUE(Has(g.status(), "field 'alpha' must be of type float")) << g.status().message();

  onnx::ModelProto unknown = plugintest::OneNodeModel("com.example", "ScaleShift");
  plugintest::FloatAttr(unknown.mutable_graph()->mutable_node(0), "gamma", 1.f);
  g = ImportOnnxBytes(unknown.SerializeAsString(), "", "m.onnx", {});
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Has(g.status(), "no field 'gamma' (its fields: alpha, beta, activation)")) << g.status().message();

  onnx::ModelProto bad_value = plugintest::OneNodeModel("com.example", "ScaleShift");
  plugintest::StringAttr(bad_value.mutable_graph()->mutable_node(0), "activation", "gelu");
  g = ImportOnnxBytes(bad_value.SerializeAsString(), "", "m.onnx", {});
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Has(g.status(), "the_node")) << g.status().message();
  EXPECT_TRUE(Has(g.status(), "activation must be 'none' or 'relu', not 'gelu'")) << g.status().message();
}

TEST(Plugins, ShapeFunctionsKeepSymbolsAndBoundDataDependentSizes) {
  LoadExamples();
  auto g = ImportOnnxBytes(plugintest::ScaleSelectModel({"batch", "5"}, 1.f, 0.f, "none", 0.f), "", "m.onnx", {});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Value* s = (*g)->FindValue("s");
  const Value* y = (*g)->FindValue("y");
  ASSERT_TRUE(s && y);
  ASSERT_EQ(s->shape.size(), 2u);
  EXPECT_EQ(s->shape[0].sym, "batch") << "symbolic dims pass through the plugin's shape function";
  ASSERT_TRUE(y->has_shape);
  ASSERT_EQ(y->shape.size(), 1u);
  EXPECT_TRUE(y->shape[0].unknown()) << "SelectAbove's length depends on the data";

  // The bound is symbolic at build time: batch*5.
  auto p = plugins::FindPlugin("com.example", "SelectAbove");
  ASSERT_NE(p, nullptr);
  auto plugin = plugins::PluginForNode(*p, *(*g)->nodes()[1]);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  PluginInputInfo in;
  in.present = true;
  in.dtype = DataType::kFloat32;
  in.dims = {PluginDim::Symbol("batch"), PluginDim(5)};
  auto outs = plugins::InferPluginOutputs(*p, **plugin, "select", {in}, 1);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  ASSERT_EQ((*outs)[0].max_dims.size(), 1u);
  EXPECT_EQ((*outs)[0].max_dims[0].toString(), "batch*5");
}

TEST(Plugins, UnregisteredOpsNameTheWayOut) {
  auto g = ImportOnnxBytes(plugintest::OneNodeModel("com.nobody", "Frob").SerializeAsString(), "", "m.onnx", {});
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Has(g.status(), "--dynamicPlugins")) << g.status().message();
  EXPECT_TRUE(Has(g.status(), "kiln plugin new Frob --domain com.nobody")) << g.status().message();
}

}  // namespace
}  // namespace kiln
