// Backends behind one interface, seen through the factory and the public API: names and what each backend takes,
// device memory asked of a host-memory backend, the debug API's reference run and an engine's layers run node by
// node, and the network and engine-file descriptions the tools use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backends/factory.h"
#include "kiln/debug.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

StderrLogger& Logger() {
  static StderrLogger logger(Severity::kError);
  return logger;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// x[2, 4] -> MatMul(W[4,3]) -> Add(b) -> Relu -> y[2, 3]
std::unique_ptr<NetworkDefinition> MakeNetwork() {
  auto net = std::make_unique<NetworkDefinition>();
  std::vector<float> w(12), b = {0.1f, -0.2f, 0.3f};
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i) - 0.5f;
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {2, 4}).ok());
  EXPECT_TRUE(net->addConstant("W", DataType::kFloat32, {4, 3}, w.data()).ok());
  EXPECT_TRUE(net->addConstant("b", DataType::kFloat32, {3}, b.data()).ok());
  EXPECT_TRUE(net->addOp("MatMul", "mm", {"x", "W"}, {"xw"}).ok());
  EXPECT_TRUE(net->addOp("Add", "bias", {"xw", "b"}, {"h"}).ok());
  EXPECT_TRUE(net->addOp("Relu", "relu", {"h"}, {"y"}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  return net;
}

Tensor RandomInput(uint32_t seed) {
  Tensor t(DataType::kFloat32, {2, 4});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, u(rng));
  return t;
}

TEST(Backends, TheFactoryFindsEveryBuiltInBackendByName) {
  for (const std::string& name : BackendNames()) {
    auto b = FindBackend(name);
    if (!b.ok()) {  // a backend this build leaves out says how to get it
      EXPECT_TRUE(Contains(b.status().message(), "built without")) << b.status().ToString();
      continue;
    }
    EXPECT_EQ((*b)->Name(), name);
  }
  auto unknown = FindBackend("tpu");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(Contains(unknown.status().message(), "unknown backend 'tpu'")) << unknown.status().ToString();
  EXPECT_TRUE(ReferenceBackend().CheckAvailable().ok());
  EXPECT_TRUE(DefaultBackend().CheckAvailable().ok());
  const auto available = AvailableBackends();
  ASSERT_FALSE(available.empty());
  EXPECT_EQ(available.front(), &DefaultBackend());
  EXPECT_NE(std::find(available.begin(), available.end(), &ReferenceBackend()), available.end());
}

TEST(Backends, PublicInfoSaysWhatEachBackendTakes) {
  const auto names = GetBackendNames();
  ASSERT_NE(std::find(names.begin(), names.end(), debug::ReferenceBackendName()), names.end());
  auto ref = GetBackendInfo(debug::ReferenceBackendName());
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  EXPECT_TRUE(ref->available);
  EXPECT_FALSE(ref->device_memory);  // host memory: enqueue computes in place
  EXPECT_FALSE(ref->reduced_precision);
  EXPECT_FALSE(ref->description.empty());
  auto def = GetBackendInfo(GetDefaultBackendName());
  ASSERT_TRUE(def.ok());
  EXPECT_TRUE(def->available);
  for (const std::string& name : names) {
    auto info = GetBackendInfo(name);
    if (info.ok() && !info->available)  // why not, and what to do
      EXPECT_TRUE(Contains(info->description, "--backend=")) << info->description;
  }
  EXPECT_FALSE(GetBackendInfo("tpu").ok());
}

TEST(Backends, AnUnavailableBackendFailsTheBuildWithWhatToDo) {
  for (const std::string& name : GetBackendNames()) {
    auto info = GetBackendInfo(name);
    if (!info.ok() || info->available) continue;
    Builder builder(Logger());
    auto net = MakeNetwork();
    auto cfg = builder.createBuilderConfig();
    cfg->setBackend(name);
    auto bytes = builder.buildSerializedNetwork(*net, *cfg);
    ASSERT_FALSE(bytes.ok());
    EXPECT_TRUE(Contains(bytes.status().message(), name)) << bytes.status().ToString();
    EXPECT_TRUE(Contains(bytes.status().message(), "--backend=")) << bytes.status().ToString();
  }
}

TEST(Backends, HostMemoryBackendsLendNoDeviceMemory) {
  const std::string ref = debug::ReferenceBackendName();
  auto m = DeviceMemory::allocate(ref, 64);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "host memory")) << m.status().ToString();
  EXPECT_FALSE(DeviceStream::create(ref).ok());
  EXPECT_FALSE(DeviceEvent::create(ref).ok());
  DeviceStream none;
  EXPECT_FALSE(none.synchronize().ok());  // not created: an error, not a crash
}

TEST(Backends, DevicesAreCountedAndChosenPerBackend) {
  const std::string ref = debug::ReferenceBackendName();  // the host: one device, 0
  auto count = GetDeviceCount(ref);
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, 1);
  EXPECT_EQ(*GetDevice(ref), 0);
  EXPECT_TRUE(SetDevice(ref, 0).ok());
  EXPECT_FALSE(GetDeviceCount("tpu").ok());
  EXPECT_FALSE(SetDevice("tpu", 0).ok());
  // Every backend this build has refuses a device past its last (on cuda without a GPU: device 0 already), and a
  // negative one, naming the device; the current device stays.
  for (const std::string& name : GetBackendNames()) {
    auto n = GetDeviceCount(name);
    if (!n.ok()) {  // a backend this build leaves out says how to get it
      EXPECT_TRUE(Contains(n.status().message(), "built without")) << n.status().ToString();
      continue;
    }
    auto before = GetDevice(name);
    for (int bad : {*n, -1}) {
      Status st = SetDevice(name, bad);
      ASSERT_FALSE(st.ok()) << name << " device " << bad;
      EXPECT_TRUE(Contains(st.message(), "device " + std::to_string(bad) + " does not exist")) << st.ToString();
    }
    if (before.ok()) {
      EXPECT_EQ(*GetDevice(name), *before) << name;
    }
  }
}

TEST(Backends, NetworksDescribeTheirTensorsAndLayers) {
  auto net = MakeNetwork();
  const NetworkTensor x = net->getInput(0);
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DataType::kFloat32);
  EXPECT_EQ(x.dims, (Dims{2, 4}));
  EXPECT_EQ(x.type, "float32[2,4]");
  EXPECT_EQ(net->getOutput(0).name, "y");
  EXPECT_TRUE(net->getInput(5).name.empty());
  ASSERT_EQ(net->getNbLayers(), 3);
  const NetworkLayer mm = net->getLayer(0);
  EXPECT_EQ(mm.name, "mm");
  EXPECT_EQ(mm.op_type, "MatMul");
  EXPECT_EQ(mm.inputs, (std::vector<std::string>{"x", "W"}));
  EXPECT_EQ(mm.outputs, (std::vector<std::string>{"xw"}));
  EXPECT_EQ(net->getWeightBytes(), (12u + 3u) * 4u);
  EXPECT_TRUE(Contains(net->toString(), "MatMul"));
}

TEST(Backends, TheReferenceRunKeepsEveryTensorOnRequest) {
  auto net = MakeNetwork();
  const Tensor x = RandomInput(3);
  auto outs = debug::RunNetwork(*net, {{"x", x}});
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  ASSERT_EQ(outs->count("y"), 1u);
  EXPECT_EQ(outs->count("xw"), 0u);
  debug::NetworkRunOptions all;
  all.keep_all = true;
  auto every = debug::RunNetwork(*net, {{"x", x}}, all);
  ASSERT_TRUE(every.ok()) << every.status().ToString();
  ASSERT_EQ(every->count("xw"), 1u);
  ASSERT_EQ(every->count("h"), 1u);
  const Tensor& y = outs->at("y");
  const Tensor& h = every->at("h");
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_FLOAT_EQ(y.GetAsDouble(i), std::max(0.0, h.GetAsDouble(i)));
  debug::NetworkRunOptions nowhere;
  nowhere.backend = "tpu";
  EXPECT_FALSE(debug::RunNetwork(*net, {{"x", x}}, nowhere).ok());
  auto missing = debug::RunNetwork(*net, {});
  EXPECT_FALSE(missing.ok());
}

TEST(Backends, AnEnginesLayersRunNodeByNodeMatchTheReference) {
  Builder builder(Logger());
  auto net = MakeNetwork();
  auto cfg = builder.createBuilderConfig();
  cfg->setBackend(debug::ReferenceBackendName());
  auto bytes = builder.buildSerializedNetwork(*net, *cfg);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto info = ReadEngineFileInfo(bytes->data(), bytes->size());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->backend, debug::ReferenceBackendName());
  EXPECT_EQ(info->size_bytes, bytes->size());
  EXPECT_GE(info->format_version, 1u);
  EXPECT_FALSE(ReadEngineFileInfo(bytes->data(), 16).ok());

  Runtime runtime(Logger());
  auto engine = runtime.deserializeEngine(bytes->data(), bytes->size());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->getDevice(), 0);  // a host backend's one device
  const Tensor x = RandomInput(5);
  auto layers = debug::RunEngineLayers(**engine, {{"x", x}});
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  auto ref = debug::RunNetwork(*net, {{"x", x}});
  ASSERT_TRUE(ref.ok());
  const Tensor& got = layers->at("y");
  const Tensor& want = ref->at("y");
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got.GetAsDouble(i), want.GetAsDouble(i), 1e-5);
}

}  // namespace
}  // namespace kiln
