// Concurrency under load on the cuda backend (issue 11): 8 threads, each with its own execution context on its
// own stream, on one dynamic-shape engine, 1,000 inferences each with its own inputs and batch sizes, every
// output compared (bit for bit) with a single-threaded run of the same inputs; then the same while a ninth
// thread creates and destroys contexts (each on its own stream). The cpu version is tests/unit/test_stress.cpp.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <atomic>
#include <random>
#include <thread>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
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

// x[batch, 3, 12, 12] -> Conv(8, 3x3, pad 1) -> Relu -> GlobalAveragePool -> Flatten -> Gemm(8 -> 6) -> Softmax
// -> y[batch, 6], and z = ReduceSum(x * x) over channels and pixels: a conv, a GEMM, a fused chain, a reduction.
std::unique_ptr<Engine> BuildEngine() {
  Builder b(Logger());
  auto net = b.createNetwork();
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 3, 12, 12}, {"batch", "", "", ""}).ok());
  auto w = Random(8 * 3 * 3 * 3, 1), cb = Random(8, 2), g = Random(8 * 6, 3), gb = Random(6, 4);
  std::vector<int64_t> axes{1, 2, 3};
  EXPECT_TRUE(net->addConstant("W", DataType::kFloat32, {8, 3, 3, 3}, w.data()).ok());
  EXPECT_TRUE(net->addConstant("B", DataType::kFloat32, {8}, cb.data()).ok());
  EXPECT_TRUE(net->addConstant("G", DataType::kFloat32, {8, 6}, g.data()).ok());
  EXPECT_TRUE(net->addConstant("GB", DataType::kFloat32, {6}, gb.data()).ok());
  EXPECT_TRUE(net->addConstant("axes", DataType::kInt64, {3}, axes.data()).ok());
  EXPECT_TRUE(net->addOp("Conv", "conv", {"x", "W", "B"}, {"c"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}).ok());
  EXPECT_TRUE(net->addOp("Relu", "relu", {"c"}, {"r"}).ok());
  EXPECT_TRUE(net->addOp("GlobalAveragePool", "gap", {"r"}, {"p"}).ok());
  EXPECT_TRUE(net->addOp("Flatten", "flat", {"p"}, {"f"}).ok());
  EXPECT_TRUE(net->addOp("Gemm", "fc", {"f", "G", "GB"}, {"h"}).ok());
  EXPECT_TRUE(net->addOp("Softmax", "softmax", {"h"}, {"y"}, {{"axis", int64_t{-1}}}).ok());
  EXPECT_TRUE(net->addOp("Mul", "sq", {"x", "x"}, {"xx"}).ok());
  EXPECT_TRUE(net->addOp("ReduceSum", "sum", {"xx", "axes"}, {"z"}, {{"keepdims", int64_t{0}}}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  EXPECT_TRUE(net->markOutput("z").ok());
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cuda");
  OptimizationProfile p;
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMin, {1, 3, 12, 12}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kOpt, {4, 3, 12, 12}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMax, {kMaxBatch, 3, 12, 12}).ok());
  EXPECT_TRUE(cfg->addOptimizationProfile(p).ok());
  auto bytes = b.buildSerializedNetwork(*net, *cfg);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return nullptr;
  Runtime rt(Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

int64_t BatchOf(int t, int k) { return 1 + (t * 7 + k * 3) % kMaxBatch; }
uint32_t SeedOf(int t, int k) { return 1000u + static_cast<uint32_t>(t * kRuns + k); }
constexpr size_t kPixels = 3 * 12 * 12;

struct Outputs {
  std::vector<float> y, z;
  bool operator==(const Outputs& o) const { return y == o.y && z == o.z; }
};

// One context's stream and device buffers (sized for the largest batch).
struct Lane {
  cuda::Stream stream;
  cuda::DeviceBuffer x, y, z;
  static Result<Lane> Make() {
    Lane l;
    KILN_ASSIGN_OR_RETURN(l.stream, cuda::Stream::Create());
    KILN_ASSIGN_OR_RETURN(l.x, cuda::DeviceBuffer::Allocate(kMaxBatch * kPixels * 4));
    KILN_ASSIGN_OR_RETURN(l.y, cuda::DeviceBuffer::Allocate(kMaxBatch * 6 * 4));
    KILN_ASSIGN_OR_RETURN(l.z, cuda::DeviceBuffer::Allocate(kMaxBatch * 4));
    return l;
  }
};

Status RunOnce(ExecutionContext& ctx, Lane& lane, int t, int k, Outputs* out) {
  const int64_t batch = BatchOf(t, k);
  const std::vector<float> x = Random(static_cast<size_t>(batch) * kPixels, SeedOf(t, k));
  cudaStream_t s = lane.stream.get();
  KILN_RETURN_IF_ERROR(ctx.setInputShape("x", {batch, 3, 12, 12}));
  KILN_RETURN_IF_ERROR(cuda::CopyToDevice(lane.x.get(), x.data(), x.size() * 4, s));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", lane.x.get()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", lane.y.get()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("z", lane.z.get()));
  KILN_RETURN_IF_ERROR(ctx.enqueue(s));
  out->y.assign(batch * 6, -7.f);
  out->z.assign(batch, -7.f);
  KILN_RETURN_IF_ERROR(cuda::CopyToHost(out->y.data(), lane.y.get(), out->y.size() * 4, s));
  KILN_RETURN_IF_ERROR(cuda::CopyToHost(out->z.data(), lane.z.get(), out->z.size() * 4, s));
  return KILN_CUDA_STATUS(cudaStreamSynchronize(s));
}

std::vector<std::vector<Outputs>> SingleThreaded(const Engine& e) {
  std::vector<std::vector<Outputs>> want(kThreads, std::vector<Outputs>(kRuns));
  auto ctx = e.createExecutionContext();
  auto lane = Lane::Make();
  EXPECT_TRUE(ctx.ok() && lane.ok());
  if (!ctx.ok() || !lane.ok()) return want;
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kRuns; ++k) {
      Status st = RunOnce(**ctx, *lane, t, k, &want[t][k]);
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) return want;
    }
  return want;
}

struct Load {
  std::vector<int> mismatches = std::vector<int>(kThreads, 0);
  std::vector<Status> errors = std::vector<Status>(kThreads);
};

void Worker(const Engine& e, const std::vector<std::vector<Outputs>>& want, int t, Load& load) {
  auto ctx = e.createExecutionContext();
  auto lane = Lane::Make();
  if (!ctx.ok() || !lane.ok()) {
    load.errors[t] = ctx.ok() ? lane.status() : ctx.status();
    return;
  }
  (*ctx)->setUseCudaGraph(t % 4 == 3);  // some contexts replay CUDA graphs (re-captured at each new shape)
  Outputs got;
  for (int i = 0; i < kRuns; ++i) {
    const int k = t % 2 ? kRuns - 1 - i : i;
    Status st = RunOnce(**ctx, *lane, t, k, &got);
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

TEST(GpuStress, EightContextsOnEightStreamsMatchASingleThread) {
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  const auto want = SingleThreaded(*e);
  Load load;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Worker, std::cref(*e), std::cref(want), t, std::ref(load));
  for (auto& th : threads) th.join();
  ExpectClean(load);
}

TEST(GpuStress, ContextsComeAndGoWhileOthersRun) {
  auto e = BuildEngine();
  ASSERT_TRUE(e);
  const auto want = SingleThreaded(*e);
  Load load;
  std::atomic<bool> done{false};
  std::atomic<int> churned{0}, churn_mismatches{0};
  Status churn_error;
  std::thread churn([&] {
    for (int i = 0; !done.load() || i < 50; ++i) {
      auto ctx = e->createExecutionContext();
      auto lane = Lane::Make();
      if (!ctx.ok() || !lane.ok()) {
        churn_error = ctx.ok() ? lane.status() : ctx.status();
        return;
      }
      const int t = i % kThreads, k = (i * 37) % kRuns;
      Outputs got;
      Status st = RunOnce(**ctx, *lane, t, k, &got);
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
