// CUDA engines end to end through the public API: a small network built op by op, FP32 (TF32 off) and FP16
// engines against the CPU reference, dynamic shapes, CUDA graph capture and replay (and re-capture after a shape
// change), two contexts on two streams at once, per-layer profiling, and a timing-cache rebuild that picks the
// same tactics without timing.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "gpu_test_util.h"
#include "kiln/kiln.h"
#include "engine/engine_file.h"
#include "runtime/engine_impl.h"

namespace kiln {
namespace {

using gputest::Logger;
using gputest::RandomVec;

// x[batch, 3, 9, 9] -> Conv(8, 3x3, pad 1) -> Relu -> GlobalAveragePool -> Flatten -> Gemm(8 -> 5) -> Softmax
std::unique_ptr<NetworkDefinition> MakeNetwork(const Builder& b) {
  auto net = b.createNetwork();
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 3, 9, 9}, {"batch", "", "", ""}).ok());
  auto w = RandomVec(8 * 3 * 3 * 3, 1, 0.5f), cb = RandomVec(8, 2), g = RandomVec(8 * 5, 3), gb = RandomVec(5, 4);
  EXPECT_TRUE(net->addConstant("W", DataType::kFloat32, {8, 3, 3, 3}, w.data()).ok());
  EXPECT_TRUE(net->addConstant("B", DataType::kFloat32, {8}, cb.data()).ok());
  EXPECT_TRUE(net->addConstant("G", DataType::kFloat32, {8, 5}, g.data()).ok());
  EXPECT_TRUE(net->addConstant("GB", DataType::kFloat32, {5}, gb.data()).ok());
  EXPECT_TRUE(net->addOp("Conv", "conv", {"x", "W", "B"}, {"c"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}).ok());
  EXPECT_TRUE(net->addOp("Relu", "relu", {"c"}, {"r"}).ok());
  EXPECT_TRUE(net->addOp("GlobalAveragePool", "gap", {"r"}, {"p"}).ok());
  EXPECT_TRUE(net->addOp("Flatten", "flat", {"p"}, {"f"}).ok());
  EXPECT_TRUE(net->addOp("Gemm", "fc", {"f", "G", "GB"}, {"h"}).ok());
  EXPECT_TRUE(net->addOp("Softmax", "softmax", {"h"}, {"y"}, {{"axis", int64_t{-1}}}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  return net;
}

struct Built {
  std::unique_ptr<Engine> engine;
  BuildReport report;
};

// Loads an engine file's bytes (nullptr, with a test failure, where the build or the load failed).
std::unique_ptr<Engine> Load(const Result<std::vector<uint8_t>>& bytes) {
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return nullptr;
  auto e = Runtime(Logger()).deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

// Builds `net` with `cfg` and loads the engine (nullptr, with a test failure, where either fails).
std::unique_ptr<Engine> BuildAndLoad(Builder& b, const NetworkDefinition& net, const BuilderConfig& cfg,
                                     BuildReport* rep) {
  return Load(b.buildSerializedNetwork(net, cfg, rep));
}

// One run of an engine with input "x" of shape `x_shape` and output "y" of `y_elems` floats: host memory for a cpu
// engine, device buffers for a cuda one (copied back).
std::vector<float> RunOnce(const Engine& e, const std::vector<float>& x, const Dims& x_shape, size_t y_elems) {
  std::vector<float> y(y_elems);
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  if (!ctx.ok()) return y;
  EXPECT_TRUE((*ctx)->setInputShape("x", x_shape).ok());
  if (e.getBackend() != "cuda") {
    EXPECT_TRUE((*ctx)->setTensorAddress("x", const_cast<float*>(x.data())).ok());
    EXPECT_TRUE((*ctx)->setTensorAddress("y", y.data()).ok());
    EXPECT_TRUE((*ctx)->enqueue(nullptr).ok());
    return y;
  }
  auto dx = cuda::DeviceBuffer::Allocate(x.size() * 4), dy = cuda::DeviceBuffer::Allocate(y.size() * 4);
  EXPECT_TRUE(dx.ok() && dy.ok());
  if (!dx.ok() || !dy.ok()) return y;
  EXPECT_TRUE(cuda::CopyToDevice(dx->get(), x.data(), x.size() * 4, nullptr).ok());
  EXPECT_TRUE((*ctx)->setTensorAddress("x", dx->get()).ok());
  EXPECT_TRUE((*ctx)->setTensorAddress("y", dy->get()).ok());
  EXPECT_TRUE((*ctx)->enqueue(nullptr).ok());
  EXPECT_TRUE(cuda::CopyToHost(y.data(), dy->get(), y.size() * 4, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return y;
}

Built Build(const std::string& backend, bool fp16, bool tf32, const std::string& cache = "", int64_t max_b = 8,
            size_t workspace = 0) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend(backend);
  if (workspace) cfg->setMemoryPoolLimit("workspace", workspace);
  if (fp16) cfg->setFlag(BuilderFlag::kFP16);
  if (!tf32) cfg->clearFlag(BuilderFlag::kTF32);
  if (!cache.empty()) cfg->setTimingCacheFile(cache);
  OptimizationProfile p;
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMin, {1, 3, 9, 9}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kOpt, {4, 3, 9, 9}).ok());
  EXPECT_TRUE(p.setDimensions("x", ProfileSelector::kMax, {max_b, 3, 9, 9}).ok());
  EXPECT_TRUE(cfg->addOptimizationProfile(p).ok());
  Built r;
  r.engine = BuildAndLoad(b, *net, *cfg, &r.report);
  return r;
}

// Runs a cpu engine on host memory.
std::vector<float> RunCpu(const Engine& e, const std::vector<float>& x, int64_t batch) {
  return RunOnce(e, x, {batch, 3, 9, 9}, static_cast<size_t>(batch * 5));
}

// Device buffers for one context's x and y.
struct Io {
  cuda::DeviceBuffer x, y;
};

Status RunGpu(ExecutionContext& ctx, Io& io, const std::vector<float>& x, int64_t batch, cudaStream_t s,
              std::vector<float>* y) {
  KILN_RETURN_IF_ERROR(ctx.setInputShape("x", {batch, 3, 9, 9}));
  KILN_RETURN_IF_ERROR(cuda::CopyToDevice(io.x.get(), x.data(), x.size() * 4, s));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", io.x.get()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", io.y.get()));
  KILN_RETURN_IF_ERROR(ctx.enqueue(s));
  y->assign(batch * 5, 0.f);
  KILN_RETURN_IF_ERROR(cuda::CopyToHost(y->data(), io.y.get(), y->size() * 4, s));
  return KILN_CUDA_STATUS(cudaStreamSynchronize(s));
}

Io MakeIo(int64_t max_b) {
  Io io;
  auto x = cuda::DeviceBuffer::Allocate(max_b * 3 * 9 * 9 * 4);
  auto y = cuda::DeviceBuffer::Allocate(max_b * 5 * 4);
  EXPECT_TRUE(x.ok() && y.ok());
  if (x.ok()) io.x = std::move(*x);
  if (y.ok()) io.y = std::move(*y);
  return io;
}

double MaxRelL2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), atol + rtol * std::fabs(want[i])) << "element " << i;
}

TEST(GpuEngine, Fp32WithoutTF32MatchesCpuAtEveryBatch) {
  Built cpu = Build("cpu", false, true), gpu = Build("cuda", false, false);
  ASSERT_TRUE(cpu.engine && gpu.engine);
  EXPECT_EQ(gpu.engine->getBackend(), "cuda");
  auto ctx = gpu.engine->createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto stream = cuda::Stream::Create();
  ASSERT_TRUE(stream.ok());
  Io io = MakeIo(8);
  for (int64_t batch : {1, 3, 8, 4}) {
    auto x = RandomVec(batch * 3 * 9 * 9, 10 + batch);
    std::vector<float> y;
    Status st = RunGpu(**ctx, io, x, batch, stream->get(), &y);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectClose(y, RunCpu(*cpu.engine, x, batch), 1e-3, 1e-5);
  }
}

TEST(GpuEngine, Fp16WithinOnePercentRelativeL2) {
  Built cpu = Build("cpu", false, true), gpu = Build("cuda", true, true);
  ASSERT_TRUE(cpu.engine && gpu.engine);
  EXPECT_GT(gpu.report.layers_reduced_precision, 0);
  auto ctx = gpu.engine->createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto stream = cuda::Stream::Create();
  Io io = MakeIo(8);
  auto x = RandomVec(4 * 3 * 9 * 9, 5);
  std::vector<float> y;
  Status st = RunGpu(**ctx, io, x, 4, stream->get(), &y);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_LT(MaxRelL2(y, RunCpu(*cpu.engine, x, 4)), 1e-2);
}

TEST(GpuEngine, CudaGraphReplayEqualsPlainRunsAndRecapturesOnShapeChange) {
  Built gpu = Build("cuda", false, false);
  ASSERT_TRUE(gpu.engine);
  auto plain = gpu.engine->createExecutionContext();
  auto graph = gpu.engine->createExecutionContext();
  ASSERT_TRUE(plain.ok() && graph.ok());
  (*graph)->setUseCudaGraph(true);
  auto stream = cuda::Stream::Create();
  Io a = MakeIo(8), b = MakeIo(8);
  // Alternating shapes reuse each shape's plan and graph; six shapes cycle through the four kept plans.
  for (int64_t batch : {2, 2, 2, 5, 5, 2, 5, 2, 1, 3, 4, 6, 2, 1, 6}) {
    auto x = RandomVec(batch * 3 * 9 * 9, static_cast<uint32_t>(100 + batch));
    std::vector<float> y1, y2;
    ASSERT_TRUE(RunGpu(**plain, a, x, batch, stream->get(), &y1).ok());
    Status st = RunGpu(**graph, b, x, batch, stream->get(), &y2);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(y1, y2) << "batch " << batch;
  }
}

TEST(GpuEngine, TwoContextsOnTwoStreamsAtOnce) {
  Built gpu = Build("cuda", false, false);
  ASSERT_TRUE(gpu.engine);
  std::vector<float> ref;
  auto x = RandomVec(6 * 3 * 9 * 9, 77);
  {
    auto ctx = gpu.engine->createExecutionContext();
    auto s = cuda::Stream::Create();
    Io io = MakeIo(8);
    ASSERT_TRUE(RunGpu(**ctx, io, x, 6, s->get(), &ref).ok());
  }
  std::vector<std::vector<float>> outs(2);
  std::vector<Status> sts(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      auto ctx = gpu.engine->createExecutionContext();
      if (!ctx.ok()) {
        sts[t] = ctx.status();
        return;
      }
      (*ctx)->setUseCudaGraph(t == 1);
      auto s = cuda::Stream::Create();
      Io io = MakeIo(8);
      for (int i = 0; i < 20 && sts[t].ok(); ++i) sts[t] = RunGpu(**ctx, io, x, 6, s->get(), &outs[t]);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(sts[t].ok()) << sts[t].ToString();
    EXPECT_EQ(outs[t], ref);
  }
}

class CountingProfiler : public IProfiler {
 public:
  void reportLayerTime(const char* name, float ms) noexcept override {
    names.push_back(name);
    total += ms;
  }
  std::vector<std::string> names;
  double total = 0;
};

TEST(GpuEngine, PerLayerProfileNamesEveryLaunchedLayer) {
  Built gpu = Build("cuda", false, true);
  ASSERT_TRUE(gpu.engine);
  auto ctx = gpu.engine->createExecutionContext();
  CountingProfiler prof;
  (*ctx)->setProfiler(&prof);
  auto s = cuda::Stream::Create();
  Io io = MakeIo(8);
  std::vector<float> y;
  ASSERT_TRUE(RunGpu(**ctx, io, RandomVec(2 * 3 * 9 * 9, 3), 2, s->get(), &y).ok());
  EXPECT_EQ(static_cast<int>(prof.names.size()), gpu.engine->getNbLayers());
  EXPECT_GT(prof.total, 0.0);
}

// Three branches from one input, joined by a Concat: x -> conv3x3 -> Relu -> conv3x3; x -> conv1x1 -> Sigmoid ->
// conv1x1; x -> conv5x5. Built with two auxiliary streams, the branches run side by side: every way of running it
// (plain, a CUDA graph, the context's streams or the caller's, a profiled run on one stream) equals the CPU's, run
// after run (a buffer shared by work that overlaps would show as a difference some of the time).
std::unique_ptr<Engine> BuildBranches(const std::string& backend, int aux, BuildReport* rep) {
  Builder b(Logger());
  auto net = b.createNetwork();
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 16, 24, 24}).ok());
  const std::vector<float> wa1 = RandomVec(32 * 16 * 9, 41, 0.1f), wa2 = RandomVec(16 * 32 * 9, 42, 0.1f),
                           wb1 = RandomVec(32 * 16, 43, 0.2f), wb2 = RandomVec(16 * 32, 44, 0.2f),
                           wc = RandomVec(16 * 16 * 25, 45, 0.05f);
  EXPECT_TRUE(net->addConstant("Wa1", DataType::kFloat32, {32, 16, 3, 3}, wa1.data()).ok());
  EXPECT_TRUE(net->addConstant("Wa2", DataType::kFloat32, {16, 32, 3, 3}, wa2.data()).ok());
  EXPECT_TRUE(net->addConstant("Wb1", DataType::kFloat32, {32, 16, 1, 1}, wb1.data()).ok());
  EXPECT_TRUE(net->addConstant("Wb2", DataType::kFloat32, {16, 32, 1, 1}, wb2.data()).ok());
  EXPECT_TRUE(net->addConstant("Wc", DataType::kFloat32, {16, 16, 5, 5}, wc.data()).ok());
  const AttrMap pad1{{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, pad2{{"pads", std::vector<int64_t>{2, 2, 2, 2}}};
  EXPECT_TRUE(net->addOp("Conv", "a1", {"x", "Wa1"}, {"a1"}, pad1).ok());
  EXPECT_TRUE(net->addOp("Relu", "a1_relu", {"a1"}, {"a1r"}).ok());
  EXPECT_TRUE(net->addOp("Conv", "a2", {"a1r", "Wa2"}, {"a2"}, pad1).ok());
  EXPECT_TRUE(net->addOp("Conv", "b1", {"x", "Wb1"}, {"b1"}).ok());
  EXPECT_TRUE(net->addOp("Sigmoid", "b1_sigmoid", {"b1"}, {"b1s"}).ok());
  EXPECT_TRUE(net->addOp("Conv", "b2", {"b1s", "Wb2"}, {"b2"}).ok());
  EXPECT_TRUE(net->addOp("Conv", "c", {"x", "Wc"}, {"c"}, pad2).ok());
  EXPECT_TRUE(net->addOp("Concat", "cat", {"a2", "b2", "c"}, {"y"}, AttrMap{{"axis", int64_t{1}}}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  auto cfg = b.createBuilderConfig();
  cfg->setBackend(backend);
  cfg->clearFlag(BuilderFlag::kTF32);
  cfg->setMaxAuxStreams(aux);
  auto profile = b.createOptimizationProfile();
  EXPECT_TRUE(profile->setDimensions("x", ProfileSelector::kMin, {1, 16, 24, 24}).ok());
  EXPECT_TRUE(profile->setDimensions("x", ProfileSelector::kOpt, {8, 16, 24, 24}).ok());
  EXPECT_TRUE(profile->setDimensions("x", ProfileSelector::kMax, {16, 16, 24, 24}).ok());
  EXPECT_TRUE(cfg->addOptimizationProfile(*profile).ok());
  return BuildAndLoad(b, *net, *cfg, rep);
}

TEST(GpuEngine, AuxStreamsRunBranchesSideBySide) {
  BuildReport rep, cpu_rep;
  auto gpu = BuildBranches("cuda", 2, &rep), cpu = BuildBranches("cpu", 0, &cpu_rep);
  ASSERT_TRUE(gpu && cpu);
  EXPECT_EQ(rep.aux_streams_used, 2);
  EXPECT_EQ(gpu->getNbAuxStreams(), 2);  // kept through the engine file
  EXPECT_GE(rep.cross_stream_waits, 2);
  ASSERT_EQ(rep.aux_stream_layers.size(), 2u);
  EXPECT_FALSE(rep.aux_stream_layers[0].empty());
  const std::vector<int32_t>& streams = ImplOf(*gpu).streams;
  EXPECT_EQ(streams.size(), ImplOf(*gpu).graph->nodes().size());

  const int64_t batch = 16;
  const Dims shape{batch, 16, 24, 24};
  const std::vector<float> x = RandomVec(batch * 16 * 24 * 24, 46);
  const size_t y_elems = batch * 48 * 24 * 24;
  const std::vector<float> want = RunOnce(*cpu, x, shape, y_elems);
  auto ctx = gpu->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  auto s = cuda::Stream::Create();
  auto mine1 = cuda::Stream::Create(), mine2 = cuda::Stream::Create();
  ASSERT_TRUE(s.ok() && mine1.ok() && mine2.ok());
  auto dx = cuda::DeviceBuffer::Allocate(x.size() * 4), dy = cuda::DeviceBuffer::Allocate(y_elems * 4);
  ASSERT_TRUE(dx.ok() && dy.ok());
  ASSERT_TRUE(cuda::CopyToDevice(dx->get(), x.data(), x.size() * 4, nullptr).ok());
  ASSERT_TRUE((*ctx)->setInputShape("x", shape).ok());
  ASSERT_TRUE((*ctx)->setTensorAddress("x", dx->get()).ok());
  ASSERT_TRUE((*ctx)->setTensorAddress("y", dy->get()).ok());
  CountingProfiler prof;
  struct Mode {
    const char* name;
    bool graph, caller_streams, profiled;
  };
  for (const Mode m : {Mode{"plain", false, false, false}, Mode{"cuda graph", true, false, false},
                       Mode{"caller's streams", false, true, false}, Mode{"graph on the caller's streams", true, true, false},
                       Mode{"profiled", false, false, true}}) {
    SCOPED_TRACE(m.name);
    (*ctx)->setUseCudaGraph(m.graph);
    void* given[] = {mine1->get(), mine2->get()};
    ASSERT_TRUE((*ctx)->setAuxStreams(given, m.caller_streams ? 2 : 0).ok());
    (*ctx)->setProfiler(m.profiled ? &prof : nullptr);
    for (int run = 0; run < 6; ++run) {
      ASSERT_EQ(cudaMemsetAsync(dy->get(), 0xff, y_elems * 4, s->get()), cudaSuccess);  // NaNs until written
      ASSERT_TRUE((*ctx)->enqueue(s->get()).ok());
      std::vector<float> y(y_elems);
      ASSERT_TRUE(cuda::CopyToHost(y.data(), dy->get(), y_elems * 4, s->get()).ok());
      ASSERT_EQ(cudaStreamSynchronize(s->get()), cudaSuccess);
      ExpectClose(y, want, 1e-4, 1e-4);
    }
  }
  EXPECT_EQ(static_cast<int>(prof.names.size()) % gpu->getNbLayers(), 0);
  void* none = nullptr;
  EXPECT_FALSE((*ctx)->setAuxStreams(&none, -1).ok());
  EXPECT_FALSE((*ctx)->setAuxStreams(nullptr, 2).ok());
  // Other batches (new launch plans, their auxiliary workspaces sized again).
  for (int64_t b2 : {1, 5}) {
    const std::vector<float> xb = RandomVec(b2 * 16 * 24 * 24, 47 + b2);
    const size_t yb = b2 * 48 * 24 * 24;
    ExpectClose(RunOnce(*gpu, xb, {b2, 16, 24, 24}, yb), RunOnce(*cpu, xb, {b2, 16, 24, 24}, yb), 1e-4, 1e-4);
  }
}

TEST(GpuEngine, AuxStreamsAreRefusedOutOfRange) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cuda");
  cfg->setMaxAuxStreams(65);
  auto bytes = b.buildSerializedNetwork(*net, *cfg);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("--maxAuxStreams=65"), std::string::npos) << bytes.status().message();
}

TEST(GpuEngine, TimingCacheRebuildPicksTheSameTacticsWithoutTiming) {
  const std::string cache = (std::filesystem::temp_directory_path() / "kiln_gpu_engine_cache.json").string();
  std::filesystem::remove(cache);
  Built cold = Build("cuda", true, true, cache);
  ASSERT_TRUE(cold.engine);
  ASSERT_TRUE(std::filesystem::exists(cache));
  Built warm = Build("cuda", true, true, cache);
  ASSERT_TRUE(warm.engine);
  EXPECT_EQ(ImplOf(*cold.engine).tactics, ImplOf(*warm.engine).tactics);
  EXPECT_EQ(warm.report.layers_timed, 0);
  EXPECT_EQ(warm.report.timing_cache_hits, cold.report.layers_timed);
  std::filesystem::remove(cache);
}

// x[batch, 16, 12, 12] -> Conv(32, 3x3, pad 1) -> Relu -> Conv(8, 1x1) = y, float32 without TF32, a batch profile
// 1 / `opt` / 16; weights from seeds `seed` and `seed + 1`. The engine file's bytes.
Result<std::vector<uint8_t>> BuildConvPair(const std::string& backend, int64_t opt, uint32_t seed, BuildReport* rep) {
  Builder b(Logger());
  auto net = b.createNetwork();
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 16, 12, 12}).ok());
  const std::vector<float> w1 = RandomVec(32 * 16 * 9, seed, 0.2f), w2 = RandomVec(8 * 32, seed + 1, 0.2f);
  EXPECT_TRUE(net->addConstant("W1", DataType::kFloat32, {32, 16, 3, 3}, w1.data()).ok());
  EXPECT_TRUE(net->addConstant("W2", DataType::kFloat32, {8, 32, 1, 1}, w2.data()).ok());
  EXPECT_TRUE(net->addOp("Conv", "conv1", {"x", "W1"}, {"c1"}, AttrMap{{"pads", std::vector<int64_t>{1, 1, 1, 1}}}).ok());
  EXPECT_TRUE(net->addOp("Relu", "relu1", {"c1"}, {"r1"}).ok());
  EXPECT_TRUE(net->addOp("Conv", "conv2", {"r1", "W2"}, {"y"}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  auto cfg = b.createBuilderConfig();
  cfg->setBackend(backend);
  cfg->clearFlag(BuilderFlag::kTF32);
  auto profile = b.createOptimizationProfile();
  EXPECT_TRUE(profile->setDimensions("x", ProfileSelector::kMin, {1, 16, 12, 12}).ok());
  EXPECT_TRUE(profile->setDimensions("x", ProfileSelector::kOpt, {opt, 16, 12, 12}).ok());
  EXPECT_TRUE(profile->setDimensions("x", ProfileSelector::kMax, {16, 16, 12, 12}).ok());
  EXPECT_TRUE(cfg->addOptimizationProfile(*profile).ok());
  return b.buildSerializedNetwork(*net, *cfg, rep);
}

// The conv pair's cuda engine against its cpu engine at each batch (inputs from seed `x_seed + batch`).
void ExpectConvPairMatchesCpu(const Engine& gpu, const Engine& cpu, std::initializer_list<int> batches, uint32_t x_seed) {
  for (int batch : batches) {
    SCOPED_TRACE(batch);
    const std::vector<float> x = RandomVec(batch * 16 * 12 * 12, x_seed + batch);
    const size_t y_elems = batch * 8 * 12 * 12;
    ExpectClose(RunOnce(gpu, x, {batch, 16, 12, 12}, y_elems), RunOnce(cpu, x, {batch, 16, 12, 12}, y_elems), 1e-4,
                1e-4);
  }
}

// A dynamic batch profile: the convolutions are also timed at the profile's other batches (1, 2, 8 and 16 around
// opt 4), the report counts them, and the engine equals the CPU at batches in and between those points.
TEST(GpuEngine, TacticsAreTimedAcrossADynamicProfile) {
  BuildReport gpu_rep, cpu_rep;
  auto gpu = Load(BuildConvPair("cuda", 4, 21, &gpu_rep)), cpu = Load(BuildConvPair("cpu", 4, 21, &cpu_rep));
  ASSERT_TRUE(gpu && cpu);
  EXPECT_GE(gpu_rep.tactics_across_profile, 1);  // the convolutions have several candidates
  EXPECT_LE(gpu_rep.tactics_profile_changed, gpu_rep.tactics_across_profile);
  ExpectConvPairMatchesCpu(*gpu, *cpu, {1, 3, 4, 16}, 30);
}

// Per-shape tactics at run time: the conv pair's dynamic engine with a per-shape layer added to its file for the
// profile's min shape (each convolution made again at batch 1 with its tactic), loaded: batches near 1 run the
// per-shape layers, the others the main ones, and every batch equals the CPU's.
TEST(GpuEngine, PerShapeLayersRunNearTheirPoint) {
  auto gpu_bytes = BuildConvPair("cuda", 8, 51, nullptr), cpu_bytes = BuildConvPair("cpu", 8, 51, nullptr);
  ASSERT_TRUE(gpu_bytes.ok() && cpu_bytes.ok());
  auto header = ReadEngineHeader(gpu_bytes->data(), gpu_bytes->size());
  ASSERT_TRUE(header.ok());
  EngineCompat compat{"cuda", header->target.device_name, header->target.compute_capability, 0};
  auto contents = DeserializeEngine(gpu_bytes->data(), gpu_bytes->size(), compat);
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  contents->tactic_points = {{{"x", {1, 16, 12, 12}}}};
  contents->tactic_variants.assign(contents->graph->nodes().size(), {});
  int convs = 0;
  for (size_t k = 0; k < contents->graph->nodes().size(); ++k)
    if (contents->graph->nodes()[k]->op_type.find("Conv") != std::string::npos) {
      contents->tactic_variants[k].emplace_back(0, contents->tactics[k]);
      ++convs;
    }
  ASSERT_EQ(convs, 2);
  auto gpu = Load(SerializeEngine(*contents)), cpu = Load(cpu_bytes);
  ASSERT_TRUE(gpu && cpu);
  EXPECT_EQ(ImplOf(*gpu).tactic_points.size(), 1u);
  ExpectConvPairMatchesCpu(*gpu, *cpu, {1, 2, 5, 8, 16}, 60);
}

// Two identical convolutions (same shapes and attributes, different weights) and a third of another shape: the first
// of the pair is timed, the second takes its tactic without timing, and the engine still equals the CPU's.
TEST(GpuEngine, IdenticalLayersAreTimedOnce) {
  auto build = [](const std::string& backend, BuildReport* rep) -> std::unique_ptr<Engine> {
    Builder b(Logger());
    auto net = b.createNetwork();
    EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {4, 16, 12, 12}).ok());
    const std::vector<float> w1 = RandomVec(16 * 16 * 9, 11, 0.2f), w2 = RandomVec(16 * 16 * 9, 12, 0.2f),
                             w3 = RandomVec(8 * 16, 13, 0.2f);
    EXPECT_TRUE(net->addConstant("W1", DataType::kFloat32, {16, 16, 3, 3}, w1.data()).ok());
    EXPECT_TRUE(net->addConstant("W2", DataType::kFloat32, {16, 16, 3, 3}, w2.data()).ok());
    EXPECT_TRUE(net->addConstant("W3", DataType::kFloat32, {8, 16, 1, 1}, w3.data()).ok());
    const AttrMap pads{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    EXPECT_TRUE(net->addOp("Conv", "conv1", {"x", "W1"}, {"c1"}, pads).ok());
    EXPECT_TRUE(net->addOp("Relu", "relu1", {"c1"}, {"r1"}).ok());
    EXPECT_TRUE(net->addOp("Conv", "conv2", {"r1", "W2"}, {"c2"}, pads).ok());
    EXPECT_TRUE(net->addOp("Relu", "relu2", {"c2"}, {"r2"}).ok());
    EXPECT_TRUE(net->addOp("Conv", "conv3", {"r2", "W3"}, {"y"}).ok());
    EXPECT_TRUE(net->markOutput("y").ok());
    auto cfg = b.createBuilderConfig();
    cfg->setBackend(backend);
    cfg->clearFlag(BuilderFlag::kTF32);
    return BuildAndLoad(b, *net, *cfg, rep);
  };
  BuildReport gpu_rep, cpu_rep;
  auto gpu = build("cuda", &gpu_rep), cpu = build("cpu", &cpu_rep);
  ASSERT_TRUE(gpu && cpu);
  EXPECT_EQ(gpu_rep.tactic_repeats, 1);
  EXPECT_EQ(gpu_rep.timing_cache_hits, 0);
  const auto& nodes = ImplOf(*gpu).graph->nodes();
  const auto& tactics = ImplOf(*gpu).tactics;
  ASSERT_EQ(nodes.size(), tactics.size());
  std::vector<std::string> conv_tactics;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i]->name.find("conv1") != std::string::npos || nodes[i]->name.find("conv2") != std::string::npos)
      conv_tactics.push_back(tactics[i]);
  ASSERT_EQ(conv_tactics.size(), 2u);
  EXPECT_EQ(conv_tactics[0], conv_tactics[1]);
  const std::vector<float> x = RandomVec(4 * 16 * 12 * 12, 14);
  const size_t y_elems = 4 * 8 * 12 * 12;
  ExpectClose(RunOnce(*gpu, x, {4, 16, 12, 12}, y_elems), RunOnce(*cpu, x, {4, 16, 12, 12}, y_elems), 1e-4, 1e-4);
}

// The WORKSPACE pool: the float32 Gemm's tactics are cuBLASLt's, each taking 32 MiB of scratch memory. Under 1 MiB
// the build fails naming the node and the limit; at 32 MiB it builds and matches the CPU.
TEST(GpuEngine, WorkspaceLimitBoundsTheChosenKernels) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cuda");
  cfg->clearFlag(BuilderFlag::kTF32);
  cfg->setMemoryPoolLimit("workspace", size_t{1} << 20);
  OptimizationProfile p;
  for (auto sel : {ProfileSelector::kMin, ProfileSelector::kOpt, ProfileSelector::kMax})
    ASSERT_TRUE(p.setDimensions("x", sel, {4, 3, 9, 9}).ok());
  ASSERT_TRUE(cfg->addOptimizationProfile(p).ok());
  auto bytes = b.buildSerializedNetwork(*net, *cfg);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("node 'fc'"), std::string::npos) << bytes.status().message();
  EXPECT_NE(bytes.status().message().find("WORKSPACE limit of 1.00 MiB"), std::string::npos) << bytes.status().message();

  Built fits = Build("cuda", false, false, "", 8, size_t{32} << 20);
  ASSERT_TRUE(fits.engine);
  Built cpu = Build("cpu", false, false);
  ASSERT_TRUE(cpu.engine);
  auto ctx = fits.engine->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  Io io = MakeIo(8);
  const auto x = RandomVec(4 * 3 * 9 * 9, 11);
  std::vector<float> y;
  ASSERT_TRUE(RunGpu(**ctx, io, x, 4, nullptr, &y).ok());
  ExpectClose(y, RunCpu(*cpu.engine, x, 4), 1e-4, 1e-5);
}

TEST(GpuEngine, EngineFileRoundTripKeepsTactics) {
  Builder b(Logger());
  auto net = MakeNetwork(b);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cuda");
  OptimizationProfile p;
  ASSERT_TRUE(p.setDimensions("x", ProfileSelector::kMin, {2, 3, 9, 9}).ok());
  ASSERT_TRUE(p.setDimensions("x", ProfileSelector::kOpt, {2, 3, 9, 9}).ok());
  ASSERT_TRUE(p.setDimensions("x", ProfileSelector::kMax, {2, 3, 9, 9}).ok());
  ASSERT_TRUE(cfg->addOptimizationProfile(p).ok());
  auto bytes = b.buildSerializedNetwork(*net, *cfg);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Runtime rt(Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)->getBackend(), "cuda");
  EXPECT_EQ(ImplOf(**e).tactics.size(), static_cast<size_t>((*e)->getNbLayers()));
}

TEST(GpuEngine, ShapeOutsideTheProfileNamesTheInput) {
  Built gpu = Build("cuda", false, true);
  ASSERT_TRUE(gpu.engine);
  auto ctx = gpu.engine->createExecutionContext();
  Status st = (*ctx)->setInputShape("x", {9, 3, 9, 9});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace kiln
