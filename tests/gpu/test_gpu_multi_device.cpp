// Several GPUs through the public API (kiln/backend.h's devices, runtime.h's engine device): one engine built on
// device 0 and its bytes deserialized on devices 0 and 1, both run at once from two threads, each output equal to
// the CPU backend's; a context used from a thread whose current device is another one (enqueue switches to the
// engine's device and gives the thread its own back); errors for devices that do not exist. The network has a
// convolution (cuDNN plans, cached per device), a GEMM (cuBLASLt, a handle per device) and a pointwise chain (a
// fused kernel compiled per device). Skipped where fewer than two CUDA devices are visible.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_util.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

constexpr int64_t kMaxBatch = 8;
constexpr int64_t kClasses = 5;

using gputest::Logger;
using gputest::RandomVec;

// x[batch, 3, 9, 9] -> Conv(8, 3x3, pad 1) -> Relu -> GlobalAveragePool -> Flatten -> Gemm(8 -> 5)
// -> h + tanh(h) * h -> Softmax -> y[batch, 5]
std::unique_ptr<NetworkDefinition> MakeNetwork(const Builder& b) {
  auto net = b.createNetwork();
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 3, 9, 9}, {"batch", "", "", ""}).ok());
  auto w = RandomVec(8 * 3 * 3 * 3, 1, 0.5f), cb = RandomVec(8, 2), g = RandomVec(8 * kClasses, 3),
       gb = RandomVec(kClasses, 4);
  EXPECT_TRUE(net->addConstant("W", DataType::kFloat32, {8, 3, 3, 3}, w.data()).ok());
  EXPECT_TRUE(net->addConstant("B", DataType::kFloat32, {8}, cb.data()).ok());
  EXPECT_TRUE(net->addConstant("G", DataType::kFloat32, {8, kClasses}, g.data()).ok());
  EXPECT_TRUE(net->addConstant("GB", DataType::kFloat32, {kClasses}, gb.data()).ok());
  EXPECT_TRUE(net->addOp("Conv", "conv", {"x", "W", "B"}, {"c"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}).ok());
  EXPECT_TRUE(net->addOp("Relu", "relu", {"c"}, {"r"}).ok());
  EXPECT_TRUE(net->addOp("GlobalAveragePool", "gap", {"r"}, {"p"}).ok());
  EXPECT_TRUE(net->addOp("Flatten", "flat", {"p"}, {"f"}).ok());
  EXPECT_TRUE(net->addOp("Gemm", "fc", {"f", "G", "GB"}, {"h"}).ok());
  EXPECT_TRUE(net->addOp("Tanh", "tanh", {"h"}, {"t"}).ok());
  EXPECT_TRUE(net->addOp("Mul", "mul", {"t", "h"}, {"th"}).ok());
  EXPECT_TRUE(net->addOp("Add", "add", {"th", "h"}, {"s"}).ok());
  EXPECT_TRUE(net->addOp("Softmax", "softmax", {"s"}, {"y"}, {{"axis", int64_t{-1}}}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  return net;
}

// The serialized engine for `backend`, built on the calling thread's current device (TF32 off: fp32 math).
std::vector<uint8_t> BuildBytes(const std::string& backend) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend(backend);
  cfg->clearFlag(BuilderFlag::kTF32);
  OptimizationProfile p;
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMin, {1, 3, 9, 9}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kOpt, {4, 3, 9, 9}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMax, {kMaxBatch, 3, 9, 9}).ok());
  EXPECT_TRUE(cfg->addOptimizationProfile(p).ok());
  auto bytes = b.buildSerializedNetwork(*net, *cfg);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

std::vector<float> RunCpu(const Engine& e, const std::vector<float>& x, int64_t batch) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  std::vector<float> y(batch * kClasses);
  EXPECT_TRUE((*ctx)->setInputShape("x", {batch, 3, 9, 9}).ok());
  EXPECT_TRUE((*ctx)->setTensorAddress("x", const_cast<float*>(x.data())).ok());
  EXPECT_TRUE((*ctx)->setTensorAddress("y", y.data()).ok());
  EXPECT_TRUE((*ctx)->enqueue(nullptr).ok());
  return y;
}

// One context's stream and device buffers, made on the calling thread's current device.
struct DeviceIo {
  DeviceStream stream;
  DeviceMemory x, y;
  static Result<DeviceIo> Create() {
    DeviceIo io;
    KILN_ASSIGN_OR_RETURN(io.stream, DeviceStream::create("cuda"));
    KILN_ASSIGN_OR_RETURN(io.x, DeviceMemory::allocate("cuda", kMaxBatch * 3 * 9 * 9 * sizeof(float)));
    KILN_ASSIGN_OR_RETURN(io.y, DeviceMemory::allocate("cuda", kMaxBatch * kClasses * sizeof(float)));
    return io;
  }
};

Status RunGpu(ExecutionContext& ctx, DeviceIo& io, const std::vector<float>& x, int64_t batch,
              std::vector<float>* y) {
  KILN_RETURN_IF_ERROR(ctx.setInputShape("x", {batch, 3, 9, 9}));
  KILN_RETURN_IF_ERROR(CopyToDevice(io.x.data(), x.data(), x.size() * sizeof(float), io.stream));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", io.x.data()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", io.y.data()));
  KILN_RETURN_IF_ERROR(ctx.enqueue(io.stream.get()));
  y->assign(batch * kClasses, 0.f);
  KILN_RETURN_IF_ERROR(CopyToHost(y->data(), io.y.data(), y->size() * sizeof(float), io.stream));
  return io.stream.synchronize();
}

::testing::AssertionResult Close(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " values, want " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 + 1e-3 * std::fabs(want[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

int CudaDevices() {
  auto n = GetDeviceCount("cuda");
  return n.ok() ? *n : 0;
}

TEST(GpuMultiDevice, DevicesThatDoNotExistAreRefusedNamingTheCount) {
  const int n = CudaDevices();
  ASSERT_GT(n, 0);
  const int before = *GetDevice("cuda");
  for (int bad : {n, -1}) {
    Status st = SetDevice("cuda", bad);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("device " + std::to_string(bad) + " does not exist"), std::string::npos)
        << st.ToString();
    EXPECT_NE(st.message().find(std::to_string(n) + " CUDA device"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(*GetDevice("cuda"), before) << "a refused SetDevice leaves the current device alone";
}

TEST(GpuMultiDevice, OneEnginePerGpuFromTheSameBytesRunsConcurrentlyAndMatchesCpu) {
  const int n = CudaDevices();
  if (n < 2) GTEST_SKIP() << "needs 2 CUDA devices, this machine has " << n;
  ASSERT_TRUE(SetDevice("cuda", 0).ok());
  const std::vector<uint8_t> bytes = BuildBytes("cuda"), cpu_bytes = BuildBytes("cpu");
  ASSERT_FALSE(bytes.empty() || cpu_bytes.empty());
  Runtime rt(Logger());
  auto cpu = rt.deserializeEngine(cpu_bytes.data(), cpu_bytes.size());
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();

  std::vector<std::unique_ptr<Engine>> engines;  // engines[d] lives on device d
  for (int d = 0; d < 2; ++d) {
    ASSERT_TRUE(SetDevice("cuda", d).ok());
    auto e = rt.deserializeEngine(bytes.data(), bytes.size());
    ASSERT_TRUE(e.ok()) << "device " << d << ": " << e.status().ToString();
    EXPECT_EQ((*e)->getDevice(), d);
    engines.push_back(std::move(*e));
  }
  ASSERT_TRUE(SetDevice("cuda", 0).ok());

  const std::vector<int64_t> batches = {1, 3, 8, 4, 6};
  std::vector<std::vector<float>> inputs, want;
  for (size_t i = 0; i < batches.size(); ++i) {
    inputs.push_back(RandomVec(batches[i] * 3 * 9 * 9, static_cast<uint32_t>(10 + i)));
    want.push_back(RunCpu(**cpu, inputs[i], batches[i]));
  }

  // Each thread takes its engine's device (a new thread starts on device 0), as kiln serve's workers do.
  constexpr int kRounds = 40;
  std::vector<Status> status(2);
  std::vector<std::vector<std::vector<float>>> got(2, std::vector<std::vector<float>>(batches.size()));
  std::vector<std::thread> threads;
  for (int d = 0; d < 2; ++d)
    threads.emplace_back([&, d] {
      Status& st = status[d];
      st = SetDevice("cuda", d);
      if (!st.ok()) return;
      auto ctx = engines[d]->createExecutionContext();
      auto io = DeviceIo::Create();
      if (!ctx.ok() || !io.ok()) {
        st = ctx.ok() ? io.status() : ctx.status();
        return;
      }
      for (int r = 0; r < kRounds && st.ok(); ++r)
        for (size_t i = 0; i < batches.size() && st.ok(); ++i) {
          st = RunGpu(**ctx, *io, inputs[i], batches[i], &got[d][i]);
          if (st.ok() && !static_cast<bool>(Close(got[d][i], want[i])))
            st = Status(StatusCode::kInternal, "round " + std::to_string(r) + ": output differs from the cpu's");
        }
    });
  for (auto& t : threads) t.join();
  for (int d = 0; d < 2; ++d) {
    ASSERT_TRUE(status[d].ok()) << "device " << d << ": " << status[d].ToString();
    for (size_t i = 0; i < batches.size(); ++i) EXPECT_TRUE(Close(got[d][i], want[i])) << "device " << d;
  }
}

TEST(GpuMultiDevice, AContextRunsOnItsEnginesDeviceFromAThreadOnAnother) {
  const int n = CudaDevices();
  if (n < 2) GTEST_SKIP() << "needs 2 CUDA devices, this machine has " << n;
  ASSERT_TRUE(SetDevice("cuda", 0).ok());
  const std::vector<uint8_t> bytes = BuildBytes("cuda"), cpu_bytes = BuildBytes("cpu");
  ASSERT_FALSE(bytes.empty() || cpu_bytes.empty());
  Runtime rt(Logger());
  auto cpu = rt.deserializeEngine(cpu_bytes.data(), cpu_bytes.size());
  ASSERT_TRUE(cpu.ok());
  {
    ASSERT_TRUE(SetDevice("cuda", 1).ok());
    auto engine = rt.deserializeEngine(bytes.data(), bytes.size());
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto io = DeviceIo::Create();  // the stream and buffers on device 1, like the engine
    ASSERT_TRUE(io.ok()) << io.status().ToString();
    // From here on device 0 is current: the context is created, run and destroyed (and the engine, stream and
    // buffers freed) on device 1 by calls that each give the thread device 0 back.
    ASSERT_TRUE(SetDevice("cuda", 0).ok());
    auto ctx = (*engine)->createExecutionContext();
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    EXPECT_EQ(*GetDevice("cuda"), 0);
    for (int64_t batch : {2, 7}) {
      auto x = RandomVec(batch * 3 * 9 * 9, static_cast<uint32_t>(50 + batch));
      std::vector<float> y;
      Status st = RunGpu(**ctx, *io, x, batch, &y);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(*GetDevice("cuda"), 0) << "enqueue restores the calling thread's device";
      EXPECT_TRUE(Close(y, RunCpu(**cpu, x, batch)));
    }
  }
  EXPECT_EQ(*GetDevice("cuda"), 0);
}

}  // namespace
}  // namespace kiln
