// GPU tests (ctest label `gpu`): exit code 77 = skipped where no CUDA device is found.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/tuning_fill.h"
#include "core/dtype.h"

namespace kiln::cuda {
namespace {

TEST(CudaPlumbing, DeviceInfo) {
  auto info = GetDeviceInfo(0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_GT(info->cc_major, 0);
  EXPECT_GT(info->total_memory, 0u);
  EXPECT_FALSE(info->name.empty());
}

// The tactic timer's inputs: uniform in [-1, 1) for each float type at odd sizes (mean near 0, spread near 1/3 of the
// square), the same data for the same seed and other data for another, and the other types left to the caller.
TEST(CudaPlumbing, TuningFillIsUniformAndRepeatable) {
  const int64_t n = 100003;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64}) {
    const size_t es = DataTypeSize(t);
    auto d = DeviceBuffer::Allocate(n * es);
    ASSERT_TRUE(d.ok());
    std::vector<uint8_t> a(n * es), b(n * es), c(n * es);
    for (auto [seed, host] : {std::pair<uint32_t, uint8_t*>{5, a.data()}, {5, b.data()}, {6, c.data()}}) {
      ASSERT_TRUE(FillTuningInput(d->get(), t, n, seed, nullptr).ok()) << DataTypeName(t);
      ASSERT_TRUE(CopyToHost(host, d->get(), n * es, nullptr).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    EXPECT_EQ(a, b) << DataTypeName(t);
    EXPECT_NE(a, c) << DataTypeName(t);
    auto value = [&](int64_t i) -> double {
      const uint8_t* p = a.data() + i * es;
      switch (t) {
        case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
        case DataType::kFloat64: { double f; std::memcpy(&f, p, 8); return f; }
        case DataType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); return HalfToFloat(h); }
        default: { uint16_t h; std::memcpy(&h, p, 2); return BFloat16ToFloat(h); }
      }
    };
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = value(i);
      ASSERT_TRUE(v >= -1.0 && v <= 1.0) << DataTypeName(t) << " element " << i << " = " << v;
      sum += v;
      sq += v * v;
    }
    EXPECT_NEAR(sum / n, 0.0, 0.01) << DataTypeName(t);
    EXPECT_NEAR(sq / n, 1.0 / 3.0, 0.01) << DataTypeName(t);
  }
  auto d = DeviceBuffer::Allocate(64);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(FillTuningInput(d->get(), DataType::kInt32, 16, 1, nullptr).ok());
  EXPECT_FALSE(FillTuningInput(d->get(), DataType::kFloat8E4M3FN, 16, 1, nullptr).ok());
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
