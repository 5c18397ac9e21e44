// GPU out-of-memory at run time (issue 11): two execution contexts whose activation memory together exceeds the
// card. The second one's enqueue fails with an error naming what it was allocating; the process stays usable, and
// once the first context is gone the second runs and computes the right values.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

constexpr int64_t kCols = int64_t{1} << 20;  // 4 MiB of float32 per row

// x[b, 2^20] -> Relu -> h; s = ReduceSum(h, axis 1); y = h / (s + 1). h (b x 4 MiB) lives in the arena: it is read
// twice, so nothing fuses it away.
Result<std::unique_ptr<Engine>> BuildEngine(int64_t max_batch) {
  StderrLogger quiet(Severity::kError);
  Builder b(quiet);
  auto net = b.createNetwork();
  std::vector<int64_t> axes{1};
  float one = 1.f;
  KILN_RETURN_IF_ERROR(net->addInput("x", DataType::kFloat32, {-1, kCols}, {"batch", ""}));
  KILN_RETURN_IF_ERROR(net->addConstant("axes", DataType::kInt64, {1}, axes.data()));
  KILN_RETURN_IF_ERROR(net->addConstant("one", DataType::kFloat32, {}, &one));
  KILN_RETURN_IF_ERROR(net->addOp("Relu", "relu", {"x"}, {"h"}));
  KILN_RETURN_IF_ERROR(net->addOp("ReduceSum", "sum", {"h", "axes"}, {"s"}, {{"keepdims", int64_t{1}}}));
  KILN_RETURN_IF_ERROR(net->addOp("Add", "plus1", {"s", "one"}, {"s1"}));
  KILN_RETURN_IF_ERROR(net->addOp("Div", "div", {"h", "s1"}, {"y"}));
  KILN_RETURN_IF_ERROR(net->markOutput("y"));
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cuda");
  OptimizationProfile p;
  KILN_RETURN_IF_ERROR(p.setDimensions("x", ProfileSelector::kMin, {1, kCols}));
  KILN_RETURN_IF_ERROR(p.setDimensions("x", ProfileSelector::kOpt, {1, kCols}));
  KILN_RETURN_IF_ERROR(p.setDimensions("x", ProfileSelector::kMax, {max_batch, kCols}));
  KILN_RETURN_IF_ERROR(cfg->addOptimizationProfile(p).status());
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, b.buildSerializedNetwork(*net, *cfg));
  Runtime rt(quiet);
  return rt.deserializeEngine(bytes.data(), bytes.size());
}

Status RunOnce(ExecutionContext& ctx, void* x, void* y) {
  KILN_RETURN_IF_ERROR(ctx.setInputShape("x", {1, kCols}));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", x));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", y));
  KILN_RETURN_IF_ERROR(ctx.enqueue(nullptr));
  return KILN_CUDA_STATUS(cudaDeviceSynchronize());
}

TEST(GpuOutOfMemory, AContextThatDoesNotFitIsAnErrorAndTheProcessStaysUsable) {
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  // Each context's arena takes about 60% of the free memory: one fits, two do not.
  const int64_t max_batch = static_cast<int64_t>(0.6 * static_cast<double>(free_bytes) / (4.0 * kCols));
  ASSERT_GT(max_batch, 1);
  auto engine = BuildEngine(max_batch);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ASSERT_GT((*engine)->getDeviceMemorySize(), free_bytes / 2);

  std::vector<float> host(kCols);
  for (int64_t i = 0; i < kCols; ++i) host[i] = static_cast<float>(i % 7) - 3.f;
  auto x = cuda::DeviceBuffer::Allocate(kCols * 4);
  auto y = cuda::DeviceBuffer::Allocate(kCols * 4);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_EQ(cudaMemcpy(x->get(), host.data(), kCols * 4, cudaMemcpyHostToDevice), cudaSuccess);

  auto first = (*engine)->createExecutionContext();
  auto second = (*engine)->createExecutionContext();
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(RunOnce(**first, x->get(), y->get()).ok());
  Status st = RunOnce(**second, x->get(), y->get());
  ASSERT_FALSE(st.ok()) << "two arenas of 60% of the free memory each should not both fit";
  EXPECT_NE(st.message().find("activation memory"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("cudaMalloc"), std::string::npos) << st.ToString();

  // Still usable: the first context runs again, and once it is gone the second one runs too.
  ASSERT_TRUE(RunOnce(**first, x->get(), y->get()).ok());
  first->reset();
  st = RunOnce(**second, x->get(), y->get());
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<float> out(kCols);
  ASSERT_EQ(cudaMemcpy(out.data(), y->get(), kCols * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  double sum = 0;
  for (float v : host) sum += std::max(v, 0.f);
  for (int64_t i = 0; i < kCols; i += 4099)
    ASSERT_NEAR(out[i], std::max(host[i], 0.f) / (sum + 1), 1e-9) << i;
}

}  // namespace
}  // namespace kiln
