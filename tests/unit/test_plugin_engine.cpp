// Plugins in engines on the cpu backend: a model with the example plugins builds and runs and matches the plugins'
// CPU results; the engine round-trips through a file; loading it without its plugin (or with another version) says
// what to load; a plugin that breaks its output contract gets an error, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "backends/cpu/executor.h"
#include "engine/engine_file.h"
#include "onnx/importer.h"
#include "plugin_testing.h"
#include "plugins/plugin_registry.h"

namespace kiln {
namespace {

using plugintest::LoadExamples;

bool Has(const Status& st, const std::string& text) { return st.message().find(text) != std::string::npos; }

std::vector<float> Inputs(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(1.3f * static_cast<float>(i)) * 2.f;
  return x;
}

struct Outputs {
  std::vector<float> s, y;
};

// Runs an engine of the ScaleSelect model on x of shape `shape` (host buffers: the cpu backend).
Result<Outputs> RunEngine(const std::vector<uint8_t>& bytes, std::vector<float> x, const Dims& shape) {
  Runtime rt(plugintest::Logger());
  KILN_ASSIGN_OR_RETURN(auto engine, rt.deserializeEngine(bytes.data(), bytes.size()));
  KILN_ASSIGN_OR_RETURN(auto ctx, engine->createExecutionContext());
  Outputs o;
  o.s.resize(x.size());
  KILN_RETURN_IF_ERROR(ctx->setInputShape("x", shape));
  KILN_RETURN_IF_ERROR(ctx->setTensorAddress("x", x.data()));
  KILN_RETURN_IF_ERROR(ctx->setTensorAddress("s", o.s.data()));
  KILN_RETURN_IF_ERROR(ctx->enqueue());
  KILN_ASSIGN_OR_RETURN(Dims yshape, ctx->getTensorShape("y"));
  if (yshape.size() != 1) return Status(StatusCode::kInternal, "y is not 1-D");
  KILN_ASSIGN_OR_RETURN(const void* y, ctx->getOutputBuffer("y"));
  o.y.assign(static_cast<const float*>(y), static_cast<const float*>(y) + yshape[0]);
  return o;
}

TEST(PluginEngine, CpuEngineMatchesThePluginsCpuResults) {
  LoadExamples();
  const std::string model = plugintest::ScaleSelectModel({"3", "7"}, 1.5f, -0.25f, "relu", 0.5f);
  auto bytes = plugintest::BuildCpu(model);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  const std::vector<float> x = Inputs(21);
  auto out = RunEngine(*bytes, x, {3, 7});
  ASSERT_TRUE(out.ok()) << out.status().ToString();

  const std::vector<float> s = plugintest::ScaleShiftRef(x, 1.5f, -0.25f, true);
  const std::vector<float> y = plugintest::SelectAboveRef(s, 0.5f);
  EXPECT_EQ(out->s, s);
  EXPECT_EQ(out->y, y);
  ASSERT_GT(y.size(), 0u);
  ASSERT_LT(y.size(), x.size()) << "the inputs exercise a data-dependent length strictly inside its bound";

  // The reference: the imported graph, unoptimized, node by node on the CPU backend (what `kiln run --onnx` does).
  auto g = ImportOnnxBytes(model, "", "m.onnx", {});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::vector<float> xin = x;
  auto ref = cpu::RunGraph(**g, {{"x", Tensor::View(DataType::kFloat32, {3, 7}, xin.data())}}, {});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const Tensor& ry = ref->at("y");
  EXPECT_EQ(std::vector<float>(ry.data<float>(), ry.data<float>() + ry.numel()), out->y);
}

TEST(PluginEngine, EnginesRoundTripThroughAFile) {
  LoadExamples();
  OptimizationProfile profile;
  ASSERT_TRUE(profile.setDimensions("x", ProfileSelector::kMin, {1, 4}).ok());
  ASSERT_TRUE(profile.setDimensions("x", ProfileSelector::kOpt, {2, 4}).ok());
  ASSERT_TRUE(profile.setDimensions("x", ProfileSelector::kMax, {8, 4}).ok());
  auto bytes = plugintest::BuildCpu(plugintest::ScaleSelectModel({"batch", "4"}, -2.f, 1.f, "none", 0.f), &profile);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  const std::string path = (std::filesystem::temp_directory_path() / "kiln_plugin_roundtrip.engine").string();
  EngineCompat cpu;
  cpu.backend = "cpu";
  auto contents = DeserializeEngine(bytes->data(), bytes->size(), cpu);
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  ASSERT_EQ(contents->plugins.size(), 2u) << "the engine records the plugins it needs";
  EXPECT_EQ(contents->plugins[0].domain, "com.example");
  EXPECT_EQ(contents->plugins[0].name, "ScaleShift");
  EXPECT_EQ(contents->plugins[0].version, "1");
  EXPECT_EQ(contents->plugins[0].library, std::filesystem::path(plugintest::ExamplesPath()).filename().string());
  ASSERT_TRUE(SaveEngineFile(path, *contents).ok());

  Runtime rt(plugintest::Logger());
  auto loaded = rt.loadEngineFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  for (int64_t batch : {1, 5}) {
    const std::vector<float> x = Inputs(static_cast<size_t>(batch * 4));
    auto a = RunEngine(*bytes, x, {batch, 4});
    auto b = RunEngine(file, x, {batch, 4});
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
    EXPECT_EQ(a->s, b->s);
    EXPECT_EQ(a->y, b->y);
    EXPECT_EQ(b->y, plugintest::SelectAboveRef(plugintest::ScaleShiftRef(x, -2.f, 1.f, false), 0.f));
  }
}

TEST(PluginEngine, LoadingWithoutThePluginNamesItsLibrary) {
  LoadExamples();
  auto bytes = plugintest::BuildCpu(plugintest::ScaleSelectModel({"2", "3"}, 1.f, 0.f, "none", 0.f));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_TRUE(deregisterPlugin("com.example", "ScaleShift").ok());
  Runtime rt(plugintest::Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(Has(e.status(), "plugin com.example.ScaleShift (version 1)")) << e.status().message();
  EXPECT_TRUE(Has(e.status(), "libkiln_example_plugins.so")) << e.status().message();
  EXPECT_TRUE(Has(e.status(), "--dynamicPlugins")) << e.status().message();
  EXPECT_TRUE(Has(e.status(), "'scale'")) << "names a node that uses it: " << e.status().message();
  LoadExamples();  // registers ScaleShift again
  EXPECT_TRUE(rt.deserializeEngine(bytes->data(), bytes->size()).ok());
}

// Versioned test plugins: y = x.
class Identity : public IPlugin {
 public:
  PluginFields serializeFields() const override { return {}; }
  Status inferOutputs(const std::vector<PluginInputInfo>& in, std::vector<PluginOutputInfo>& out,
                      IDimBuilder&) const override {
    out[0] = {in[0].dtype, in[0].dims, {}};
    return Status::Ok();
  }
  Status runCpu(const std::vector<PluginTensor>& in, std::vector<PluginTensor>& out,
                const PluginCpuContext&) const override {
    std::copy_n(in[0].as<const float>(), in[0].numel(), out[0].as<float>());
    return Status::Ok();
  }
};
class VersionedCreator : public IPluginCreator {
 public:
  explicit VersionedCreator(const char* v) : v_(v) {}
  const char* name() const override { return "Versioned"; }
  const char* domain() const override { return "com.test"; }
  const char* version() const override { return v_; }
  std::vector<PluginFieldSpec> fieldSpecs() const override { return {}; }
  Result<std::unique_ptr<IPlugin>> create(const PluginFields&) const override {
    return std::unique_ptr<IPlugin>(new Identity());
  }

 private:
  const char* v_;
};

TEST(PluginEngine, AnotherVersionOrAMissingLinkedInPluginIsRefused) {
  ASSERT_TRUE(registerPlugin(std::make_shared<VersionedCreator>("1")).ok());
  auto bytes = plugintest::BuildCpu(plugintest::OneNodeModel("com.test", "Versioned").SerializeAsString());
  ASSERT_TRUE(deregisterPlugin("com.test", "Versioned").ok());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Runtime rt(plugintest::Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(Has(e.status(), "--staticPlugins=com.test.Versioned")) << e.status().message();

  ASSERT_TRUE(registerPlugin(std::make_shared<VersionedCreator>("2")).ok());
  e = rt.deserializeEngine(bytes->data(), bytes->size());
  ASSERT_TRUE(deregisterPlugin("com.test", "Versioned").ok());
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(Has(e.status(), "built with plugin com.test.Versioned version 1")) << e.status().message();
  EXPECT_TRUE(Has(e.status(), "registered one is version 2")) << e.status().message();
}

// A data-dependent plugin that breaks its contract in one of three ways, chosen by its field "mode".
class Unruly : public IPlugin {
 public:
  explicit Unruly(std::string mode) : mode_(std::move(mode)) {}
  PluginFields serializeFields() const override {
    PluginFields f;
    f.set("mode", mode_);
    return f;
  }
  Status inferOutputs(const std::vector<PluginInputInfo>& in, std::vector<PluginOutputInfo>& out,
                      IDimBuilder&) const override {
    out[0] = {in[0].dtype, {PluginDim::Unknown()}, {PluginDim(4)}};
    if (mode_ == "unbounded") out[0].max_dims.clear();
    return Status::Ok();
  }
  Status runCpu(const std::vector<PluginTensor>&, std::vector<PluginTensor>&,
                const PluginCpuContext& ctx) const override {
    if (mode_ == "too_big" && !ctx.outputs->allocate(0, {5})) return Status(StatusCode::kInternal, "refused");
    if (mode_ == "fails") return Status(StatusCode::kInvalidArgument, "the plugin says no");
    return Status::Ok();  // "forgets": never allocates
  }

 private:
  std::string mode_;
};
class UnrulyCreator : public IPluginCreator {
 public:
  const char* name() const override { return "Unruly"; }
  const char* domain() const override { return "com.test"; }
  const char* version() const override { return "1"; }
  std::vector<PluginFieldSpec> fieldSpecs() const override {
    return {PluginFieldSpec::Required("mode", PluginFieldType::kString)};
  }
  Result<std::unique_ptr<IPlugin>> create(const PluginFields& f) const override {
    auto mode = f.get<std::string>("mode");
    if (!mode.ok()) return mode.status();
    return std::unique_ptr<IPlugin>(new Unruly(*mode));
  }
};

TEST(PluginEngine, BrokenOutputContractsAreErrorsNamingTheNode) {
  ASSERT_TRUE(registerPlugin(std::make_shared<UnrulyCreator>()).ok());
  auto run = [](const std::string& mode) -> Status {
    onnx::ModelProto m = plugintest::OneNodeModel("com.test", "Unruly");
    if (!mode.empty()) plugintest::StringAttr(m.mutable_graph()->mutable_node(0), "mode", mode);
    auto bytes = plugintest::BuildCpu(m.SerializeAsString());
    if (!bytes.ok()) return bytes.status();
    std::vector<float> x(6, 1.f);
    Runtime rt(plugintest::Logger());
    KILN_ASSIGN_OR_RETURN(auto engine, rt.deserializeEngine(bytes->data(), bytes->size()));
    KILN_ASSIGN_OR_RETURN(auto ctx, engine->createExecutionContext());
    KILN_RETURN_IF_ERROR(ctx->setTensorAddress("x", x.data()));
    return ctx->enqueue();
  };
  Status st = run("too_big");
  EXPECT_TRUE(Has(st, "the_node")) << st.message();
  EXPECT_TRUE(Has(st, "exceeds the bound [4]")) << st.message();
  st = run("forgets");
  EXPECT_TRUE(Has(st, "without giving data-dependent output 0 a shape")) << st.message();
  st = run("fails");
  EXPECT_TRUE(Has(st, "the_node")) << st.message();
  EXPECT_TRUE(Has(st, "the plugin says no")) << st.message();
  st = run("unbounded");
  EXPECT_TRUE(Has(st, "max_dims")) << st.message();
  st = run("");
  EXPECT_TRUE(Has(st, "lacks field 'mode' (string), which the plugin requires")) << st.message();
  ASSERT_TRUE(deregisterPlugin("com.test", "Unruly").ok());
}

}  // namespace
}  // namespace kiln
