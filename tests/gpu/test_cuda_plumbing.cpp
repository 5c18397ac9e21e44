// GPU tests (ctest label `gpu`): exit code 77 = skipped where no CUDA device is found.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/device.h"

namespace kiln::cuda {
namespace {

TEST(CudaPlumbing, DeviceInfo) {
  auto info = GetDeviceInfo(0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_GT(info->cc_major, 0);
  EXPECT_GT(info->total_memory, 0u);
  EXPECT_FALSE(info->name.empty());
}

TEST(CudaPlumbing, AxpyMatchesCpuOnOddSizes) {
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t n : {1, 7, 255, 1000003}) {
    std::vector<float> x(n), y(n), ref(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = u(rng);
      y[i] = u(rng);
      ref[i] = 0.5f * x[i] + y[i];
    }
    auto px = PinnedBuffer::Allocate(n * 4);
    auto dx = DeviceBuffer::Allocate(n * 4);
    auto dy = DeviceBuffer::Allocate(n * 4);
    ASSERT_TRUE(px.ok() && dx.ok() && dy.ok());
    std::memcpy(px->get(), x.data(), n * 4);
    ASSERT_TRUE(CopyToDevice(dx->get(), px->get(), n * 4, stream->get()).ok());
    ASSERT_TRUE(CopyToDevice(dy->get(), y.data(), n * 4, stream->get()).ok());
    ASSERT_TRUE(Axpy(0.5f, static_cast<float*>(dx->get()), static_cast<float*>(dy->get()), n, stream->get()).ok());
    std::vector<float> out(n);
    ASSERT_TRUE(CopyToHost(out.data(), dy->get(), n * 4, stream->get()).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(out[i], ref[i]) << "n=" << n << " i=" << i;
  }
}

TEST(CudaPlumbing, ImpossibleAllocationIsAnError) {
  auto b = DeviceBuffer::Allocate(size_t{1} << 60);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("cudaMalloc"), std::string::npos) << b.status().ToString();
  // The failure must not poison later calls.
  auto ok = DeviceBuffer::Allocate(1024);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

}  // namespace
}  // namespace kiln::cuda
