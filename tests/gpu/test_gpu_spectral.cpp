// Differential tests of the CUDA signal-processing layers (spectral_layers.cpp, spectral.cu, fft_plan.cpp) against
// the CPU reference (a direct O(n^2) DFT in double where the length is not a power of two):
//  - DFT: real and complex signals, every signal axis, lengths 1, 2, prime (7, 17, 997), odd, powers of two,
//    forward / inverse / one-sided / IRFFT, dft_length padding and cropping, the axis as an attribute (DFT-17's
//    form) or an input, values the runtime keeps on the host, empty tensors;
//  - STFT: with and without a window, frame_length or the window's length or the whole signal, frames that leave
//    samples over, complex signals, one- and two-sided;
//  - MelWeightMatrix: exact against the CPU for every output type, edges past the Nyquist bin, reversed and
//    zero-width ranges, more mel bins than one launch carries;
//  - an engine with DFT and STFT at several batch sizes, replayed from a CUDA graph and on two threads at once.
// float32 through both tactics (cufft-f64 within 1e-6, cufft-f32 within 1e-4 relative plus 1e-6 x length),
// float64 within 1e-9, float16/bfloat16 within 1e-2 of a float32 reference.
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "gpu_test_util.h"
#include "kiln/kiln.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

const char* kF64 = "cufft-f64";
const char* kF32 = "cufft-f32";

Tensor I64(int64_t v) { return Tensor::Scalar(DataType::kInt64, static_cast<double>(v)); }

// Runs `n` on the GPU with each tactic the signal's type has, within that tactic's tolerance.
::testing::AssertionResult Check(const OneNode& n, DataType t, int64_t len) {
  const double l = static_cast<double>(len);
  if (t == DataType::kFloat64) return OneNode(n).Tactic(kF64).MatchesCpu(1e-12 * l, 1e-9);
  if (t == DataType::kFloat32) {
    auto r = OneNode(n).Tactic(kF64).MatchesCpu(1e-8, 1e-6);
    if (!r) return r << " (tactic " << kF64 << ")";
    r = OneNode(n).Tactic(kF32).MatchesCpu(1e-6 * l, 1e-4);
    if (!r) return r << " (tactic " << kF32 << ")";
    return r;
  }
  for (const char* tactic : {kF64, kF32}) {
    auto r = OneNode(n).Tactic(tactic).ReferenceInFloat32().MatchesCpu(1e-3 * std::sqrt(l), 1e-2);
    if (!r) return r << " (tactic " << tactic << ")";
  }
  return ::testing::AssertionSuccess();
}

struct DftCase {
  Shape shape;  // the last dim: 1 (real) or 2 (complex)
  int64_t axis;
  int inverse, onesided;
  int64_t dft_length;  // 0: none
};

// The transform length the case runs at (for the tolerances).
int64_t LengthOf(const DftCase& c) {
  const int64_t r = static_cast<int64_t>(c.shape.size());
  const int64_t m = c.shape[static_cast<size_t>(c.axis < 0 ? c.axis + r : c.axis)];
  if (c.dft_length) return c.dft_length;
  return c.inverse && c.onesided ? 2 * (m - 1) : m;
}

OneNode DftNode(const DftCase& c, DataType t, uint32_t seed) {
  OneNode n("DFT");
  n.Input(Random(t, c.shape, seed));
  if (c.dft_length) n.Const(I64(c.dft_length));
  else n.Omitted();
  n.Const(I64(c.axis)).Attr("inverse", Attribute::Int(c.inverse)).Attr("onesided", Attribute::Int(c.onesided));
  return n;
}

std::string Describe(const DftCase& c) {
  return ShapeToString(c.shape) + " axis " + std::to_string(c.axis) + " inverse " + std::to_string(c.inverse) +
         " onesided " + std::to_string(c.onesided) + " dft_length " + std::to_string(c.dft_length);
}

TEST(GpuDft, MatchesTheCpuReference) {
  std::vector<DftCase> cases;
  for (int64_t ch : {1, 2}) {
    const std::vector<std::pair<Shape, std::vector<int64_t>>> shapes = {
        {{2, 7, ch}, {1}},           {{3, 10, 5, ch}, {1, 2, -2}}, {{2, 3, 17, 4, ch}, {0, 1, 2, 3}},
        {{1, 128, ch}, {1}},         {{2, 997, ch}, {1}},          {{4, 1, ch}, {1}},
        {{1, 10, 10, ch}, {1, 2}},   {{3, 2, ch}, {1}},
    };
    for (const auto& [shape, axes] : shapes)
      for (int64_t axis : axes)
        for (int inverse : {0, 1}) {
          cases.push_back({shape, axis, inverse, 0, 0});
          if (!inverse) cases.push_back({shape, axis, 0, 1, 0});
        }
    // dft_length: padding, cropping, 1; forward, one-sided and inverse.
    for (int64_t len : {37, 16, 1, 31})
      for (auto [inverse, onesided] : {std::pair{0, 0}, {0, 1}, {1, 0}})
        cases.push_back({{2, 30, 3, ch}, 1, inverse, onesided, len});
  }
  // IRFFT (inverse one-sided): bins -> 2 * (bins - 1) points, or dft_length (odd, fewer or more points); a real
  // spectrum (last dim 1) too.
  for (const auto& [shape, axis, len] : std::vector<std::tuple<Shape, int64_t, int64_t>>{
           {{1, 6, 10, 2}, 1, 0}, {{3, 9, 2}, 1, 0}, {{3, 9, 2}, 1, 17}, {{3, 9, 2}, 1, 5}, {{3, 9, 2}, 1, 30},
           {{2, 5, 4, 2}, 2, 0}, {{2, 4, 50, 2}, -2, 99}, {{2, 8, 1}, 1, 0}, {{2, 2, 2}, 1, 0}})
    cases.push_back({shape, axis, 1, 1, len});
  uint32_t seed = 100;
  for (const DftCase& c : cases)
    for (DataType t : {DataType::kFloat32, DataType::kFloat64})
      EXPECT_TRUE(Check(DftNode(c, t, seed++), t, LengthOf(c))) << DataTypeName(t) << " " << Describe(c);
  for (size_t i = 0; i < cases.size(); i += 3)
    for (DataType t : {DataType::kFloat16, DataType::kBFloat16})
      EXPECT_TRUE(Check(DftNode(cases[i], t, seed++), t, LengthOf(cases[i])))
          << DataTypeName(t) << " " << Describe(cases[i]);
}

TEST(GpuDft, AxisAttributeHostInputsAndEmptyTensors) {
  const DataType f = DataType::kFloat32;
  // DFT-17's axis attribute (a node the importer has not moved to input 2).
  EXPECT_TRUE(Check(OneNode("DFT").Opset(17).Input(Random(f, {2, 9, 6, 2}, 1)).Attr("axis", Attribute::Int(2)), f, 6));
  EXPECT_TRUE(Check(OneNode("DFT").Opset(17).Input(Random(f, {2, 9, 6, 1}, 2)).Attr("axis", Attribute::Int(1))
                        .Attr("onesided", Attribute::Int(1)), f, 9));
  // dft_length and the axis as graph inputs (values the runtime keeps on the host).
  EXPECT_TRUE(Check(OneNode("DFT").Input(Random(f, {3, 11, 2}, 3)).Input(I64(13)).Input(I64(1))
                        .Attr("inverse", Attribute::Int(1)), f, 13));
  // Without an axis: opset 20's default, -2.
  EXPECT_TRUE(Check(OneNode("DFT").Input(Random(f, {4, 15, 2}, 4)), f, 15));
  // Repeated runs on a workspace refilled with garbage before each (the buffer and cuFFT's work area hold nothing
  // from one run to the next): a power of two, a prime (Bluestein's algorithm), an STFT.
  for (int64_t len : {256, 997}) {
    EXPECT_TRUE(OneNode("DFT").Input(Random(f, {3, len, 2}, 7)).Omitted().Const(I64(1)).Repeat(3)
                    .Tactic(kF64).MatchesCpu(1e-8, 1e-6)) << len;
    EXPECT_TRUE(OneNode("DFT").Input(Random(f, {3, len, 2}, 8)).Omitted().Const(I64(1)).Repeat(3)
                    .Tactic(kF32).MatchesCpu(1e-6 * static_cast<double>(len), 1e-4)) << len;
  }
  EXPECT_TRUE(OneNode("STFT").Input(Random(f, {2, 300, 1}, 9)).Const(I64(30)).Omitted().Const(I64(61)).Repeat(3)
                  .MatchesCpu(1e-8, 1e-6));
  // No elements; a signal of no samples zero-padded to dft_length.
  EXPECT_TRUE(Check(OneNode("DFT").Input(Random(f, {0, 5, 2}, 5)).Omitted().Const(I64(1)), f, 5));
  EXPECT_TRUE(Check(OneNode("DFT").Input(Random(f, {2, 0, 1}, 6)).Const(I64(4)).Const(I64(1)), f, 4));
}

struct StftCase {
  Shape shape;  // [batch, length, 1 or 2]
  int64_t step, window, frame_length;  // window / frame_length 0: none
  int onesided;
};

OneNode StftNode(const StftCase& c, DataType t, uint32_t seed) {
  OneNode n("STFT");
  n.Input(Random(t, c.shape, seed)).Const(I64(c.step));
  if (c.window) n.Const(Random(t, {c.window}, seed + 1000, 0.0, 1.0));
  else if (c.frame_length) n.Omitted();
  if (c.frame_length) n.Const(I64(c.frame_length));
  n.Attr("onesided", Attribute::Int(c.onesided));
  return n;
}

TEST(GpuStft, MatchesTheCpuReference) {
  const std::vector<StftCase> cases = {
      {{1, 128, 1}, 8, 0, 16, 1},   {{1, 128, 1}, 8, 16, 0, 1},  {{2, 100, 1}, 5, 0, 17, 1},
      {{2, 100, 1}, 5, 0, 17, 0},   {{3, 61, 2}, 4, 13, 13, 0},  {{2, 50, 2}, 7, 10, 0, 1},
      {{1, 45, 1}, 45, 0, 0, 1},    {{2, 1000, 1}, 160, 400, 0, 1}, {{1, 37, 1}, 1, 0, 5, 1},
      {{2, 37, 1}, 3, 37, 37, 0},   {{2, 23, 2}, 2, 0, 1, 0},    {{0, 20, 1}, 2, 0, 4, 1},
  };
  uint32_t seed = 500;
  for (const StftCase& c : cases) {
    const int64_t frame = c.frame_length ? c.frame_length : c.window ? c.window : c.shape[1];
    for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16})
      EXPECT_TRUE(Check(StftNode(c, t, seed++), t, frame))
          << DataTypeName(t) << " " << ShapeToString(c.shape) << " step " << c.step << " window " << c.window
          << " frame_length " << c.frame_length << " onesided " << c.onesided;
  }
  // frame_step as a graph input.
  EXPECT_TRUE(Check(OneNode("STFT").Input(Random(DataType::kFloat32, {2, 90, 1}, 1)).Input(I64(11)).Omitted()
                        .Const(I64(24)), DataType::kFloat32, 24));
}

struct MelCase {
  int64_t mels, dft_length, rate;
  double lower, upper;
};

TEST(GpuMelWeightMatrix, MatchesTheCpuExactly) {
  const std::vector<MelCase> cases = {
      {8, 16, 8192, 0, 4096},      {40, 512, 16000, 20, 8000},   {80, 400, 16000, 0, 8000}, {1, 10, 100, 5, 45},
      {13, 64, 8000, 300, 12000},  {600, 4096, 44100, 0, 22050}, {10, 32, 1000, 400, 100},  {20, 64, 8000, 0, 0},
      {481, 2000, 16000, 0, 8000},
  };
  for (const MelCase& c : cases)
    for (DataType out : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                         DataType::kInt32, DataType::kUInt8, DataType::kInt64}) {
      const DataType it = c.mels % 2 ? DataType::kInt32 : DataType::kInt64;
      const DataType ft = c.rate % 3 ? DataType::kFloat32 : DataType::kFloat64;
      OneNode n("MelWeightMatrix");
      n.Const(Tensor::Scalar(it, static_cast<double>(c.mels)))
          .Const(Tensor::Scalar(it, static_cast<double>(c.dft_length)))
          .Const(Tensor::Scalar(it, static_cast<double>(c.rate)))
          .Const(Tensor::Scalar(ft, c.lower))
          .Const(Tensor::Scalar(ft, c.upper));
      if (out != DataType::kFloat32) n.Attr("output_datatype", Attribute::Int(static_cast<int64_t>(out)));
      EXPECT_TRUE(n.MatchesCpu(0, 0)) << DataTypeName(out) << " mels " << c.mels << " dft_length " << c.dft_length
                                      << " rate " << c.rate << " edges " << c.lower << ".." << c.upper;
    }
  // Graph inputs (the runtime's host copies).
  EXPECT_TRUE(OneNode("MelWeightMatrix").Input(Tensor::Scalar(DataType::kInt32, 8))
                  .Input(Tensor::Scalar(DataType::kInt32, 16)).Input(Tensor::Scalar(DataType::kInt32, 8192))
                  .Input(Tensor::Scalar(DataType::kFloat32, 0)).Input(Tensor::Scalar(DataType::kFloat32, 4096))
                  .MatchesCpu(0, 0));
}

// ---- an engine: DFT and STFT at several batch sizes, CUDA graphs, two threads ----

constexpr int64_t kMaxBatch = 6;

std::unique_ptr<Engine> BuildSpectralEngine(const std::string& backend) {
  Builder b(Logger());
  auto net = b.createNetwork();
  net->setOpset(20);
  EXPECT_TRUE(net->addInput("x", DataType::kFloat32, {-1, 37, 3, 2}, {"batch", "", "", ""}).ok());
  EXPECT_TRUE(net->addInput("s", DataType::kFloat32, {-1, 60, 1}, {"batch", "", ""}).ok());
  const int64_t axis = 1, len = 41, step = 7;
  EXPECT_TRUE(net->addConstant("axis", DataType::kInt64, {}, &axis).ok());
  EXPECT_TRUE(net->addConstant("len", DataType::kInt64, {}, &len).ok());
  EXPECT_TRUE(net->addConstant("step", DataType::kInt64, {}, &step).ok());
  std::vector<float> w(16);
  for (size_t i = 0; i < w.size(); ++i)  // a periodic Hann window
    w[i] = static_cast<float>(0.5 - 0.5 * std::cos(2 * 3.14159265358979323846 * static_cast<double>(i) / 16.0));
  EXPECT_TRUE(net->addConstant("w", DataType::kFloat32, {16}, w.data()).ok());
  EXPECT_TRUE(net->addOp("DFT", "dft", {"x", "len", "axis"}, {"y"}).ok());
  EXPECT_TRUE(net->addOp("STFT", "stft", {"s", "step", "w"}, {"z"}).ok());
  EXPECT_TRUE(net->markOutput("y").ok());
  EXPECT_TRUE(net->markOutput("z").ok());
  auto cfg = b.createBuilderConfig();
  cfg->setBackend(backend);
  cfg->clearFlag(BuilderFlag::kTF32);
  OptimizationProfile p;
  for (const auto& [name, dims] : {std::pair<std::string, Dims>{"x", {37, 3, 2}}, {"s", {60, 1}}}) {
    for (auto [sel, batch] : {std::pair{ProfileSelector::kMin, 1}, {ProfileSelector::kOpt, 4},
                              {ProfileSelector::kMax, static_cast<int>(kMaxBatch)}}) {
      Dims d = dims;
      d.insert(d.begin(), batch);
      EXPECT_TRUE(p.setDimensions(name, sel, d).ok());
    }
  }
  EXPECT_TRUE(cfg->addOptimizationProfile(p).ok());
  auto bytes = b.buildSerializedNetwork(*net, *cfg);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return nullptr;
  Runtime rt(Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

struct Outputs {
  std::vector<float> y, z;
};

int64_t YSize(int64_t batch) { return batch * 41 * 3 * 2; }
int64_t ZSize(int64_t batch) { return batch * 7 * 9 * 2; }

// Device buffers of one context's inputs and outputs, for the largest batch.
struct Io {
  cuda::DeviceBuffer x, s, y, z;
};

Result<Io> MakeIo() {
  Io io;
  KILN_ASSIGN_OR_RETURN(io.x, cuda::DeviceBuffer::Allocate(kMaxBatch * 37 * 3 * 2 * 4));
  KILN_ASSIGN_OR_RETURN(io.s, cuda::DeviceBuffer::Allocate(kMaxBatch * 60 * 4));
  KILN_ASSIGN_OR_RETURN(io.y, cuda::DeviceBuffer::Allocate(YSize(kMaxBatch) * 4));
  KILN_ASSIGN_OR_RETURN(io.z, cuda::DeviceBuffer::Allocate(ZSize(kMaxBatch) * 4));
  return io;
}

// Runs a cpu engine on host memory (io null) or a cuda engine on io's buffers.
Status RunEngine(ExecutionContext& ctx, Io* io, const std::vector<float>& x, const std::vector<float>& s,
                 int64_t batch, cudaStream_t stream, Outputs* out) {
  out->y.assign(YSize(batch), 0.f);
  out->z.assign(ZSize(batch), 0.f);
  KILN_RETURN_IF_ERROR(ctx.setInputShape("x", {batch, 37, 3, 2}));
  KILN_RETURN_IF_ERROR(ctx.setInputShape("s", {batch, 60, 1}));
  if (!io) {
    KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", const_cast<float*>(x.data())));
    KILN_RETURN_IF_ERROR(ctx.setTensorAddress("s", const_cast<float*>(s.data())));
    KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", out->y.data()));
    KILN_RETURN_IF_ERROR(ctx.setTensorAddress("z", out->z.data()));
    return ctx.enqueue(nullptr);
  }
  KILN_RETURN_IF_ERROR(cuda::CopyToDevice(io->x.get(), x.data(), x.size() * 4, stream));
  KILN_RETURN_IF_ERROR(cuda::CopyToDevice(io->s.get(), s.data(), s.size() * 4, stream));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("x", io->x.get()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("s", io->s.get()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("y", io->y.get()));
  KILN_RETURN_IF_ERROR(ctx.setTensorAddress("z", io->z.get()));
  KILN_RETURN_IF_ERROR(ctx.enqueue(stream));
  KILN_RETURN_IF_ERROR(cuda::CopyToHost(out->y.data(), io->y.get(), out->y.size() * 4, stream));
  KILN_RETURN_IF_ERROR(cuda::CopyToHost(out->z.data(), io->z.get(), out->z.size() * 4, stream));
  return KILN_CUDA_STATUS(cudaStreamSynchronize(stream));
}

// Within either tactic's rounding of the reference (values of size ~10).
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, const char* what, int64_t batch) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), 1e-4 + 1e-4 * std::fabs(want[i]))
        << what << " element " << i << " at batch " << batch;
}

TEST(GpuSpectralEngine, BatchesCudaGraphsAndTwoThreadsMatchTheCpuEngine) {
  auto cpu = BuildSpectralEngine("cpu");
  auto gpu = BuildSpectralEngine("cuda");
  ASSERT_TRUE(cpu && gpu);
  auto cpu_ctx = cpu->createExecutionContext();
  auto plain = gpu->createExecutionContext();
  auto graph = gpu->createExecutionContext();
  ASSERT_TRUE(cpu_ctx.ok() && plain.ok() && graph.ok());
  (*graph)->setUseCudaGraph(true);
  auto stream = cuda::Stream::Create();
  ASSERT_TRUE(stream.ok());
  auto io_plain = MakeIo(), io_graph = MakeIo();
  ASSERT_TRUE(io_plain.ok() && io_graph.ok());
  // New batch sizes make new cuFFT plans; repeated ones reuse the plans and the captured graphs.
  for (int64_t batch : {2, 2, 5, 1, 5, 6, 2, 3}) {
    const auto x = RandomVec(static_cast<size_t>(batch * 37 * 3 * 2), static_cast<uint32_t>(10 + batch));
    const auto s = RandomVec(static_cast<size_t>(batch * 60), static_cast<uint32_t>(20 + batch));
    Outputs want, got_plain, got_graph;
    ASSERT_TRUE(RunEngine(**cpu_ctx, nullptr, x, s, batch, nullptr, &want).ok());
    Status st = RunEngine(**plain, &*io_plain, x, s, batch, stream->get(), &got_plain);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = RunEngine(**graph, &*io_graph, x, s, batch, stream->get(), &got_graph);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectNear(got_plain.y, want.y, "DFT", batch);
    ExpectNear(got_plain.z, want.z, "STFT", batch);
    ASSERT_EQ(got_plain.y, got_graph.y) << "batch " << batch;
    ASSERT_EQ(got_plain.z, got_graph.z) << "batch " << batch;
  }
  // Two contexts on two threads share the layers (and their plans); one replays CUDA graphs.
  const auto x = RandomVec(4 * 37 * 3 * 2, 5), s = RandomVec(4 * 60, 6);
  Outputs want;
  ASSERT_TRUE(RunEngine(**cpu_ctx, nullptr, x, s, 4, nullptr, &want).ok());
  std::vector<Outputs> outs(2);
  std::vector<Status> sts(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      auto ctx = gpu->createExecutionContext();
      if (!ctx.ok()) {
        sts[t] = ctx.status();
        return;
      }
      (*ctx)->setUseCudaGraph(t == 1);
      auto ts = cuda::Stream::Create();
      auto io = MakeIo();
      if (!ts.ok() || !io.ok()) {
        sts[t] = ts.ok() ? io.status() : ts.status();
        return;
      }
      for (int i = 0; i < 10 && sts[t].ok(); ++i) sts[t] = RunEngine(**ctx, &*io, x, s, 4, ts->get(), &outs[t]);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(sts[t].ok()) << sts[t].ToString();
    ExpectNear(outs[t].y, want.y, "DFT", 4);
    ExpectNear(outs[t].z, want.z, "STFT", 4);
  }
}

}  // namespace
}  // namespace kiln::gputest
