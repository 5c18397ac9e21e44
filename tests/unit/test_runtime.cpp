// The public API end to end on the cpu backend: a network built op by op, a dynamic-shape profile, the builder,
// the runtime, execution contexts (two threads at once), per-layer profiling, and the errors users meet.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "kiln/kiln.h"

namespace kiln {
namespace {

StderrLogger& Logger() {
  static StderrLogger logger(Severity::kError);
  return logger;
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// x[batch, 16] -> Gemm(W[16,8], b[8]) -> Relu -> Softmax -> y[batch, 8]
std::unique_ptr<NetworkDefinition> MakeNetwork(const Builder& b) {
  auto net = b.createNetwork();
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 16}, {"batch", ""}).ok());
  auto w = Random(16 * 8, 1), bias = Random(8, 2);
  EXPECT_TRUE(net->addConstant("W", DataType::kFloat32, {16, 8}, w.data()).ok());
  EXPECT_TRUE(net->addConstant("b", DataType::kFloat32, {8}, bias.data()).ok());
  EXPECT_TRUE(net->addOp("Gemm", "fc", {"x", "W", "b"}, {"h"}).ok());
  EXPECT_TRUE(net->addOp("Relu", "relu", {"h"}, {"r"}).ok());
  EXPECT_TRUE(net->addOp("Softmax", "softmax", {"r"}, {"y"}, {{"axis", int64_t{-1}}}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  return net;
}

std::vector<float> Expected(const std::vector<float>& x, int64_t batch) {
  auto w = Random(16 * 8, 1), bias = Random(8, 2);
  std::vector<float> y(batch * 8);
  for (int64_t r = 0; r < batch; ++r) {
    double h[8], sum = 0, mx = -1e30;
    for (int c = 0; c < 8; ++c) {
      double acc = bias[c];
      for (int k = 0; k < 16; ++k) acc += static_cast<double>(x[r * 16 + k]) * w[k * 8 + c];
      h[c] = std::max(0.0, acc);
      mx = std::max(mx, h[c]);
    }
    for (int c = 0; c < 8; ++c) sum += std::exp(h[c] - mx);
    for (int c = 0; c < 8; ++c) y[r * 8 + c] = static_cast<float>(std::exp(h[c] - mx) / sum);
  }
  return y;
}

std::unique_ptr<Engine> BuildEngine(int64_t min_b = 1, int64_t opt_b = 4, int64_t max_b = 8) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  OptimizationProfile p;
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMin, {min_b, 16}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kOpt, {opt_b, 16}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMax, {max_b, 16}).ok());
  EXPECT_TRUE(cfg->addOptimizationProfile(p).ok());
  BuildReport report;
  auto bytes = b.buildSerializedNetwork(*net, *cfg, &report);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return nullptr;
  EXPECT_EQ(report.layers_before, 3u);
  EXPECT_GT(report.engine_bytes, 0u);
  // The phases cover the build in order and add up to no more than its time.
  std::vector<std::string> phases;
  double sum = 0;
  for (const auto& [name, s] : report.phases_s) {
    phases.push_back(name);
    sum += s;
    EXPECT_GE(s, 0.0) << name;
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"copy-network", "optimize", "memory-plan", "first-run", "serialize"}));
  EXPECT_LE(sum - report.phases_s.back().second, report.build_time_s + 1e-9);  // serialize runs after the timer
  Runtime rt(Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

Status RunBatch(ExecutionContext& ctx, const std::vector<float>& x, int64_t batch, std::vector<float>& y) {
  KILN_RETURN_IF_ERROR(ctx.setInputShape("x", {batch, 16}));
  y.assign(batch * 8, 0.f);
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", const_cast<float*>(x.data())));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", y.data()));
  return ctx.enqueue(nullptr);
}

TEST(Runtime, EngineDescribesItsTensors) {
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  ASSERT_EQ(e->getNbIOTensors(), 2);
  EXPECT_EQ(e->getIOTensorName(0), "x");
  EXPECT_EQ(e->getTensorIOMode("x"), TensorIOMode::kInput);
  EXPECT_EQ(e->getTensorIOMode("y"), TensorIOMode::kOutput);
  EXPECT_EQ(e->getTensorShape("x"), (Dims{-1, 16}));
  EXPECT_EQ(e->getProfileShape("x", 0, ProfileSelector::kMax), (Dims{8, 16}));
  EXPECT_GT(e->getDeviceMemorySize(), 0u);
  EXPECT_EQ(e->getBackend(), "cpu");
}

TEST(Runtime, RunsEveryShapeInsideTheProfile) {
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (int64_t batch : {1, 3, 8, 5}) {
    auto x = Random(batch * 16, 10 + batch);
    std::vector<float> y;
    Status st = RunBatch(**ctx, x, batch, y);
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto shape = (*ctx)->getTensorShape("y");
    ASSERT_TRUE(shape.ok());
    EXPECT_EQ(*shape, (Dims{batch, 8}));
    auto want = Expected(x, batch);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-5) << "batch " << batch << " i " << i;
  }
}

TEST(Runtime, ShapeOutsideTheProfileNamesInputAndRange) {
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  Status st = (*ctx)->setInputShape("x", {9, 16});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[1, 8]"), std::string::npos) << st.message();
  EXPECT_FALSE((*ctx)->setInputShape("x", {2, 15}).ok());
  EXPECT_FALSE((*ctx)->setInputShape("nope", {2, 16}).ok());
  EXPECT_FALSE((*ctx)->setOptimizationProfile(3).ok());
}

TEST(Runtime, TwoContextsOnTwoThreadsMatchOneThread) {
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  constexpr int kRuns = 20;
  std::vector<std::vector<float>> inputs, single(kRuns);
  for (int i = 0; i < kRuns; ++i) inputs.push_back(Random(8 * 16, 100 + i));
  {
    auto ctx = e->createExecutionContext();
    ASSERT_TRUE(ctx.ok());
    for (int i = 0; i < kRuns; ++i) ASSERT_TRUE(RunBatch(**ctx, inputs[i], 8, single[i]).ok());
  }
  std::vector<std::vector<float>> a(kRuns), b(kRuns);
  std::vector<Status> errs(2);
  auto worker = [&](int id, std::vector<std::vector<float>>& out) {
    auto ctx = e->createExecutionContext();
    if (!ctx.ok()) {
      errs[id] = ctx.status();
      return;
    }
    for (int i = 0; i < kRuns; ++i) {
      const int k = id == 0 ? i : kRuns - 1 - i;  // the two threads walk the inputs in opposite orders
      Status st = RunBatch(**ctx, inputs[k], 8, out[k]);
      if (!st.ok()) {
        errs[id] = st;
        return;
      }
    }
  };
  std::thread t0(worker, 0, std::ref(a)), t1(worker, 1, std::ref(b));
  t0.join();
  t1.join();
  ASSERT_TRUE(errs[0].ok()) << errs[0].ToString();
  ASSERT_TRUE(errs[1].ok()) << errs[1].ToString();
  for (int i = 0; i < kRuns; ++i) {
    EXPECT_EQ(a[i], single[i]) << "run " << i;
    EXPECT_EQ(b[i], single[i]) << "run " << i;
  }
}

TEST(Runtime, ProfilerHearsEveryLayer) {
  struct Counter : IProfiler {
    std::vector<std::string> names;
    void reportLayerTime(const char* n, float ms) noexcept override {
      names.push_back(n);
      EXPECT_GE(ms, 0.f);
    }
  } prof;
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  (*ctx)->setProfiler(&prof);
  std::vector<float> y;
  ASSERT_TRUE(RunBatch(**ctx, Random(2 * 16, 5), 2, y).ok());
  EXPECT_EQ(static_cast<int>(prof.names.size()), e->getNbLayers());
}

TEST(Runtime, BuilderErrorsSayWhatToDo) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  auto r = b.buildSerializedNetwork(*net, *cfg);  // dynamic input, no profile
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'x'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("--minShapes"), std::string::npos) << r.status().message();

  OptimizationProfile bad;
  ASSERT_TRUE(bad.setDimensions("x", ProfileSelector::kMin, {4, 16}).ok());
  ASSERT_TRUE(bad.setDimensions("x", ProfileSelector::kOpt, {2, 16}).ok());
  ASSERT_TRUE(bad.setDimensions("x", ProfileSelector::kMax, {8, 16}).ok());
  EXPECT_FALSE(cfg->addOptimizationProfile(bad).ok());

  cfg->setFlag(BuilderFlag::kFP16);
  OptimizationProfile p;
  for (auto s : {ProfileSelector::kMin, ProfileSelector::kOpt, ProfileSelector::kMax})
    ASSERT_TRUE(p.setDimensions("x", s, {2, 16}).ok());
  ASSERT_TRUE(cfg->addOptimizationProfile(p).ok());
  auto fp16 = b.buildSerializedNetwork(*net, *cfg);
  ASSERT_FALSE(fp16.ok());
  EXPECT_EQ(fp16.status().code(), StatusCode::kUnsupported);

  EXPECT_FALSE(net->addOp("NoSuchOp", "n", {"x"}, {"z"}).ok());
  Status shape_err = net->addOp("MatMul", "mm", {"x", "W"}, {"z2"});  // [b,16] x [16,8] is fine
  EXPECT_TRUE(shape_err.ok()) << shape_err.ToString();
  Status mismatch = net->addOp("MatMul", "mm_bad", {"W", "W"}, {"z3"});  // [16,8] x [16,8]
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.message().find("mm_bad"), std::string::npos) << mismatch.message();
}

TEST(Runtime, CorruptedEngineBytesAreRejected) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  OptimizationProfile p;
  for (auto s : {ProfileSelector::kMin, ProfileSelector::kOpt, ProfileSelector::kMax})
    ASSERT_TRUE(p.setDimensions("x", s, {2, 16}).ok());
  ASSERT_TRUE(cfg->addOptimizationProfile(p).ok());
  auto bytes = b.buildSerializedNetwork(*net, *cfg);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Runtime rt(Logger());
  auto truncated = rt.deserializeEngine(bytes->data(), bytes->size() / 2);
  EXPECT_FALSE(truncated.ok());
  std::vector<uint8_t> flipped = *bytes;
  flipped[flipped.size() - 10] ^= 0x5a;
  EXPECT_FALSE(rt.deserializeEngine(flipped.data(), flipped.size()).ok());
  auto missing = rt.loadEngineFile("/nonexistent/x.engine");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/x.engine"), std::string::npos);
}

}  // namespace
}  // namespace kiln
