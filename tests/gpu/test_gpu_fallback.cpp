// CPU fallback inside a CUDA engine: a node whose GPU layer refuses it (a ReduceSumSquare of rank 9, above the CUDA
// reduce layer's 8 dims) between GPU layers runs on the CPU in stream
// order. The engine matches the CPU engine at every batch, with and without CUDA graphs and in FP16; the build report
// names the node and its bytes; --noFallback (BuilderFlag::kNO_FALLBACK) refuses the network naming the node.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "gpu_test_util.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using gputest::Logger;
using gputest::RandomVec;

constexpr int64_t kMaxBatch = 6;

// x[batch, 4, 4] -> Add(0.5) -> Relu -> Reshape [batch, 1, 1, 1, 1, 1, 1, 4, 4] -> ReduceSumSquare over dims 7-8
// (rank 9: CPU only) -> [batch, 1, 1, 1, 1, 1, 1] -> Mul(0.05) -> Sigmoid -> Reshape -> y[batch]
std::unique_ptr<NetworkDefinition> MakeNetwork(const Builder& b) {
  auto net = b.createNetwork();
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 4, 4}, {"batch", "", ""}).ok());
  const float half = 0.5f, scale = 0.05f;
  const int64_t rank9[] = {-1, 1, 1, 1, 1, 1, 1, 4, 4};
  const int64_t flat[] = {-1};
  EXPECT_TRUE(net->addConstant("half", DataType::kFloat32, {}, &half).ok());
  EXPECT_TRUE(net->addConstant("scale_by", DataType::kFloat32, {}, &scale).ok());
  EXPECT_TRUE(net->addConstant("rank9", DataType::kInt64, {9}, rank9).ok());
  EXPECT_TRUE(net->addConstant("flat", DataType::kInt64, {1}, flat).ok());
  EXPECT_TRUE(net->addOp("Add", "shift", {"x", "half"}, {"a"}).ok());
  EXPECT_TRUE(net->addOp("Relu", "relu", {"a"}, {"r"}).ok());
  EXPECT_TRUE(net->addOp("Reshape", "to_rank9", {"r", "rank9"}, {"r9"}).ok());
  EXPECT_TRUE(net->addOp("ReduceSumSquare", "energy", {"r9"}, {"e"},
                         {{"axes", std::vector<int64_t>{7, 8}}, {"keepdims", int64_t{0}}})
                  .ok());
  EXPECT_TRUE(net->addOp("Mul", "scale", {"e", "scale_by"}, {"m"}).ok());
  EXPECT_TRUE(net->addOp("Sigmoid", "squash", {"m"}, {"s"}).ok());
  EXPECT_TRUE(net->addOp("Reshape", "to_batch", {"s", "flat"}, {"y"}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  return net;
}

struct Built {
  std::unique_ptr<Engine> engine;
  BuildReport report;
  Status status;
};

Built Build(const std::string& backend, bool fp16, bool no_fallback) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend(backend);
  if (fp16) cfg->setFlag(BuilderFlag::kFP16);
  if (no_fallback) cfg->setFlag(BuilderFlag::kNO_FALLBACK);
  OptimizationProfile p;
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMin, {1, 4, 4}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kOpt, {4, 4, 4}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMax, {kMaxBatch, 4, 4}).ok());
  EXPECT_TRUE(cfg->addOptimizationProfile(p).ok());
  Built r;
  auto bytes = b.buildSerializedNetwork(*net, *cfg, &r.report);
  if (!bytes.ok()) {
    r.status = bytes.status();
    return r;
  }
  Runtime rt(Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (e.ok()) r.engine = std::move(*e);
  return r;
}

std::vector<float> RunCpu(const Engine& e, const std::vector<float>& x, int64_t batch) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  std::vector<float> y(batch);
  EXPECT_TRUE((*ctx)->setInputShape("x", {batch, 4, 4}).ok());
  EXPECT_TRUE((*ctx)->setTensorAddress("x", const_cast<float*>(x.data())).ok());
  EXPECT_TRUE((*ctx)->setTensorAddress("y", y.data()).ok());
  EXPECT_TRUE((*ctx)->enqueue(nullptr).ok());
  return y;
}

Status RunGpu(ExecutionContext& ctx, const std::vector<float>& x, int64_t batch, cudaStream_t s,
              std::vector<float>* y) {
  KILN_ASSIGN_OR_RETURN(cuda::DeviceBuffer dx, cuda::DeviceBuffer::Allocate(kMaxBatch * 16 * 4));
  KILN_ASSIGN_OR_RETURN(cuda::DeviceBuffer dy, cuda::DeviceBuffer::Allocate(kMaxBatch * 4));
  KILN_RETURN_IF_ERROR(ctx.setInputShape("x", {batch, 4, 4}));
  KILN_RETURN_IF_ERROR(cuda::CopyToDevice(dx.get(), x.data(), x.size() * 4, s));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", dx.get()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", dy.get()));
  KILN_RETURN_IF_ERROR(ctx.enqueue(s));
  y->assign(batch, 0.f);
  KILN_RETURN_IF_ERROR(cuda::CopyToHost(y->data(), dy.get(), y->size() * 4, s));
  return KILN_CUDA_STATUS(cudaStreamSynchronize(s));
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(std::fabs(got[i] - want[i]), tol * (1 + std::fabs(want[i]))) << "element " << i;
}

class GpuFallback : public ::testing::TestWithParam<bool> {};  // FP16 off / on

TEST_P(GpuFallback, Rank9ReduceRunsOnTheCpuInsideTheEngineWithAndWithoutGraphs) {
  const bool fp16 = GetParam();
  Built cpu = Build("cpu", false, false);
  Built gpu = Build("cuda", fp16, false);
  ASSERT_TRUE(cpu.engine) << cpu.status.ToString();
  ASSERT_TRUE(gpu.engine) << gpu.status.ToString();
  ASSERT_EQ(gpu.report.cpu_fallbacks.size(), 1u);
  EXPECT_EQ(gpu.report.cpu_fallbacks[0].layer, "energy");
  EXPECT_EQ(gpu.report.cpu_fallbacks[0].op, "ReduceSumSquare");
  EXPECT_NE(gpu.report.cpu_fallbacks[0].reason.find("rank"), std::string::npos) << gpu.report.cpu_fallbacks[0].reason;
  // [4,1,1,1,1,1,1,4,4] down, [4,1,1,1,1,1,1] up (opt shapes)
  EXPECT_EQ(gpu.report.cpu_fallbacks[0].bytes_per_inference, (4 * 16 + 4) * 4);
  const std::string json = gpu.report.ToJson("m.onnx", "m.engine", BuilderConfig(), true);
  EXPECT_NE(json.find("\"fallback\""), std::string::npos);
  auto plain = gpu.engine->createExecutionContext();
  auto graphed = gpu.engine->createExecutionContext();
  ASSERT_TRUE(plain.ok() && graphed.ok());
  (*graphed)->setUseCudaGraph(true);
  auto stream = cuda::Stream::Create();
  ASSERT_TRUE(stream.ok());
  for (int64_t batch : {4, 1, 6, 4, 3, 6}) {
    const auto x = RandomVec(static_cast<size_t>(batch * 16), static_cast<uint32_t>(30 + batch));
    const std::vector<float> want = RunCpu(*cpu.engine, x, batch);
    std::vector<float> y1, y2;
    Status st = RunGpu(**plain, x, batch, stream->get(), &y1);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = RunGpu(**graphed, x, batch, stream->get(), &y2);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectClose(y1, want, fp16 ? 2e-2 : 1e-5);
    EXPECT_EQ(y1, y2) << "CUDA graph replay differs at batch " << batch;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuFallback, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "fp16" : "fp32"; });

TEST(GpuFallbackRefused, NoFallbackListsTheNode) {
  Built gpu = Build("cuda", false, true);
  ASSERT_FALSE(gpu.engine);
  const std::string m = gpu.status.message();
  EXPECT_NE(m.find("'energy'"), std::string::npos) << m;
  EXPECT_NE(m.find("--noFallback"), std::string::npos) << m;
}

}  // namespace
}  // namespace kiln
