// Concurrency under load on the cpu backend (issue 11): 8 threads, each with its own execution context on one
// dynamic-shape engine, 1,000 inferences each with its own inputs and batch sizes, every output compared with a
// single-threaded run of the same inputs; then the same while a ninth thread creates and destroys contexts. The
// GPU version is tests/gpu/test_gpu_stress.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "kiln/kiln.h"

namespace kiln {
namespace {

constexpr int kThreads = 8;
constexpr int kRuns = 1000;
constexpr int64_t kMaxBatch = 8;

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

// x[batch, 24] -> MatMul(W[24,16]) -> Add(b) -> Relu -> MatMul(V[16,8]) -> Softmax -> y[batch, 8], and
// z = ReduceSum(x * x, axis 1): two outputs, a fusable pointwise chain, a reduction.
std::unique_ptr<Engine> BuildEngine() {
  Builder b(Logger());
  auto net = b.createNetwork();
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 24}, {"batch", ""}).ok());
  auto w = Random(24 * 16, 1), bias = Random(16, 2), v = Random(16 * 8, 3);
  std::vector<int64_t> axes{1};
  EXPECT_TRUE(net->addConstant("W", DataType::kFloat32, {24, 16}, w.data()).ok());
  EXPECT_TRUE(net->addConstant("b", DataType::kFloat32, {16}, bias.data()).ok());
  EXPECT_TRUE(net->addConstant("V", DataType::kFloat32, {16, 8}, v.data()).ok());
  EXPECT_TRUE(net->addConstant("axes", DataType::kInt64, {1}, axes.data()).ok());
  EXPECT_TRUE(net->addOp("MatMul", "mm1", {"x", "W"}, {"h"}).ok());
  EXPECT_TRUE(net->addOp("Add", "bias", {"h", "b"}, {"hb"}).ok());
  EXPECT_TRUE(net->addOp("Relu", "relu", {"hb"}, {"r"}).ok());
  EXPECT_TRUE(net->addOp("MatMul", "mm2", {"r", "V"}, {"l"}).ok());
  EXPECT_TRUE(net->addOp("Softmax", "softmax", {"l"}, {"y"}, {{"axis", int64_t{-1}}}).ok());
  EXPECT_TRUE(net->addOp("Mul", "sq", {"x", "x"}, {"xx"}).ok());
  EXPECT_TRUE(net->addOp("ReduceSum", "sum", {"xx", "axes"}, {"z"}, {{"keepdims", int64_t{0}}}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  EXPECT_TRUE(net->markOutput("z").ok());
  auto cfg = b.createBuilderConfig();
  OptimizationProfile p;
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMin, {1, 24}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kOpt, {4, 24}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMax, {kMaxBatch, 24}).ok());
  EXPECT_TRUE(cfg->addOptimizationProfile(p).ok());
  auto bytes = b.buildSerializedNetwork(*net, *cfg);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return nullptr;
  Runtime rt(Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

// Inference k of thread t: its own batch size and input values.
int64_t BatchOf(int t, int k) { return 1 + (t * 7 + k * 3) % kMaxBatch; }
uint32_t SeedOf(int t, int k) { return 1000u + static_cast<uint32_t>(t * kRuns + k); }

struct Outputs {
  std::vector<float> y, z;
  bool operator==(const Outputs& o) const { return y == o.y && z == o.z; }
};

Status RunOnce(ExecutionContext& ctx, int t, int k, Outputs* out) {
  const int64_t batch = BatchOf(t, k);
  const std::vector<float> x = Random(static_cast<size_t>(batch * 24), SeedOf(t, k));
  out->y.assign(batch * 8, -7.f);
  out->z.assign(batch, -7.f);
  KILN_RETURN_IF_ERROR(ctx.setInputShape("x", {batch, 24}));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", const_cast<float*>(x.data())));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", out->y.data()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("z", out->z.data()));
  return ctx.enqueue(nullptr);
}

// Every inference of every thread, run one after another on one context: what the threads must reproduce.
std::vector<std::vector<Outputs>> SingleThreaded(const Engine& e) {
  std::vector<std::vector<Outputs>> want(kThreads, std::vector<Outputs>(kRuns));
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  if (!ctx.ok()) return want;
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kRuns; ++k) {
      Status st = RunOnce(**ctx, t, k, &want[t][k]);
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) return want;
    }
  return want;
}

// Runs the threads; each counts its mismatches and keeps its first error.
struct Load {
  std::vector<int> mismatches = std::vector<int>(kThreads, 0);
  std::vector<Status> errors = std::vector<Status>(kThreads);
};

void Worker(const Engine& e, const std::vector<std::vector<Outputs>>& want, int t, Load& load) {
  auto ctx = e.createExecutionContext();
  if (!ctx.ok()) {
    load.errors[t] = ctx.status();
    return;
  }
  Outputs got;
  for (int i = 0; i < kRuns; ++i) {
    const int k = t % 2 ? kRuns - 1 - i : i;  // odd threads walk their inputs backwards
    Status st = RunOnce(**ctx, t, k, &got);
    if (!st.ok()) {
      load.errors[t] = st;
      return;
    }
    if (!(got == want[t][k])) ++load.mismatches[t];
  }
}

void ExpectClean(const Load& load) {
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(load.errors[t].ok()) << "thread " << t << ": " << load.errors[t].ToString();
    EXPECT_EQ(load.mismatches[t], 0) << "thread " << t << " got outputs unlike the single-threaded run";
  }
}

TEST(Stress, EightContextsOnOneEngineMatchASingleThread) {
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  const auto want = SingleThreaded(*e);
  Load load;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Worker, std::cref(*e), std::cref(want), t, std::ref(load));
  for (auto& th : threads) th.join();
  ExpectClean(load);
}

TEST(Stress, ContextsComeAndGoWhileOthersRun) {
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  const auto want = SingleThreaded(*e);
  Load load;
  std::atomic<bool> done{false};
  std::atomic<int> churned{0}, churn_mismatches{0};
  Status churn_error;
  // A ninth thread: create a context, run one inference on it, destroy it, again, until the others finish.
  std::thread churn([&] {
    for (int i = 0; !done.load() || i < 50; ++i) {
      auto ctx = e->createExecutionContext();
      if (!ctx.ok()) {
        churn_error = ctx.status();
        return;
      }
      const int t = i % kThreads, k = (i * 37) % kRuns;
      Outputs got;
      Status st = RunOnce(**ctx, t, k, &got);
      if (!st.ok()) {
        churn_error = st;
        return;
      }
      if (!(got == want[t][k])) ++churn_mismatches;
      ++churned;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Worker, std::cref(*e), std::cref(want), t, std::ref(load));
  for (auto& th : threads) th.join();
  done = true;
  churn.join();
  ExpectClean(load);
  EXPECT_TRUE(churn_error.ok()) << churn_error.ToString();
  EXPECT_EQ(churn_mismatches.load(), 0);
  EXPECT_GE(churned.load(), 50);
}

}  // namespace
}  // namespace kiln
