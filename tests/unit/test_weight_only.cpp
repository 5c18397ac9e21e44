// INT4 weight-only on the CPU backend: int4/uint4 tensors import from ONNX's packed form (raw data and int32_data,
// odd counts), and DequantizeLinear(4-bit constant) -> MatMul builds into one kiln.WeightOnlyMatMul whose output
// matches the network as written (DequantizeLinear then MatMul, no optimizer) for blocked, per-channel and per-tensor
// scales, zero points, float16 scales, odd K and N, and X of rank 1 to 3.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include "kiln/builder.h"
#include "kiln/debug.h"
#include "kiln/runtime.h"
#include "onnx.pb.h"
#include "onnx/tensor_proto.h"
#include "testing.h"

namespace kiln {
namespace {

class QuietLogger : public ILogger {
 public:
  void log(Severity, const char*) noexcept override {}
};

// A network built on the cpu backend (the config adjusted by `setup`), its report, engine and an execution context;
// failures are test failures, and leave ctx null.
struct CpuBuild {
  BuildReport report;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ExecutionContext> ctx;
};

CpuBuild BuildOnCpu(const NetworkDefinition& net, const std::function<void(BuilderConfig&)>& setup = {}) {
  static QuietLogger quiet;
  CpuBuild r;
  Builder b(quiet);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cpu");
  if (setup) setup(*cfg);
  auto bytes = b.buildSerializedNetwork(net, *cfg, &r.report);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return r;
  Runtime rt(quiet);
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return r;
  r.engine = std::move(*e);
  auto ctx = r.engine->createExecutionContext();
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  if (ctx.ok()) r.ctx = std::move(*ctx);
  return r;
}

TEST(Int4Tensors, ImportFromPackedRawDataAndInt32Data) {
  const std::vector<int> values = {1, -2, 3, -8, 7};  // odd count: the last byte's high nibble is padding
  for (bool raw : {true, false}) {
    for (bool is_signed : {true, false}) {
      SCOPED_TRACE(std::string(raw ? "raw_data" : "int32_data") + (is_signed ? " int4" : " uint4"));
      onnx::TensorProto p;
      p.set_name("w");
      p.set_data_type(is_signed ? 22 : 21);  // INT4, UINT4 (newer than the onnx.proto kiln compiles)
      p.add_dims(5);
      std::string bytes(3, '\0');
      for (size_t i = 0; i < values.size(); ++i) {
        const int v = is_signed ? values[i] : values[i] + 8;
        bytes[i / 2] = static_cast<char>(bytes[i / 2] | ((v & 0xf) << ((i % 2) * 4)));
      }
      if (raw) p.set_raw_data(bytes);
      else
        for (char c : bytes) p.add_int32_data(static_cast<int8_t>(c));  // onnx's helper writes them sign-extended
      auto t = TensorFromProto(p, {"."}, "initializer 'w'");
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      EXPECT_EQ(t->dtype(), is_signed ? DataType::kInt4 : DataType::kUInt4);
      ASSERT_EQ(t->shape(), std::vector<int64_t>{5});
      for (size_t i = 0; i < values.size(); ++i)
        EXPECT_EQ(t->GetAsInt(static_cast<int64_t>(i)), is_signed ? values[i] : values[i] + 8);
    }
  }
  onnx::TensorProto bad;
  bad.set_data_type(22);
  bad.add_dims(5);
  bad.set_raw_data(std::string(5, '\0'));  // one byte per value: ONNX packs two
  auto t = TensorFromProto(bad, {"."}, "initializer 'w'");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("two values per byte"), std::string::npos) << t.status().ToString();
}

// Cast to a 4-bit type rounds half to even and saturates (ONNX's reference); a cast from one to another integer type
// is an integer conversion (wraps); and an engine that keeps an int4 tensor (an input here) saves and loads.
// Cast to int4 keeps the low four bits of the value truncated toward zero (onnx 1.23's reference and node tests).
TEST(Int4Tensors, CastTruncatesAndWrapsAndEnginesKeepThem) {
  NetworkDefinition net;
  net.setOpset(21);
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {6}).ok());
  ASSERT_TRUE(net.addInput("q", DataType::kInt4, {3}).ok());
  ASSERT_TRUE(net.addOp("Cast", "to_int4", {"x"}, {"x4"}, {{"to", int64_t{22}}}).ok());
  ASSERT_TRUE(net.addOp("Cast", "back", {"x4"}, {"y"}, {{"to", int64_t{1}}}).ok());
  ASSERT_TRUE(net.addOp("Cast", "to_uint8", {"q"}, {"u"}, {{"to", int64_t{2}}}).ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  ASSERT_TRUE(net.markOutput("u").ok());
  CpuBuild built = BuildOnCpu(net);
  ASSERT_TRUE(built.ctx);
  ExecutionContext* ctx = built.ctx.get();
  const std::vector<float> x = {2.7f, -1.5f, 2.5f, 100.f, -100.f, 0.5f};
  const std::vector<int8_t> q = {-3, 7, -8};
  std::vector<float> y(6);
  std::vector<uint8_t> u(3);
  ASSERT_TRUE(ctx->setTensorAddress("x", const_cast<float*>(x.data())).ok());
  ASSERT_TRUE(ctx->setTensorAddress("q", const_cast<int8_t*>(q.data())).ok());
  ASSERT_TRUE(ctx->setTensorAddress("y", y.data()).ok());
  ASSERT_TRUE(ctx->setTensorAddress("u", u.data()).ok());
  ASSERT_TRUE(ctx->enqueue(nullptr).ok());
  EXPECT_EQ(y, (std::vector<float>{2, -1, 2, 4, -4, 0}));  // 100 = 0x64 -> 4, -100 -> 0x...9c -> 12 -> -4
  EXPECT_EQ(u, (std::vector<uint8_t>{253, 7, 248}));
}

struct WoqCase {
  int64_t k, n;
  std::vector<int64_t> x_shape;  // ends in k
  bool is_signed;
  int64_t axis, block;  // block 0: per axis (or per tensor when per_tensor)
  bool per_tensor, zero_points, half_scales;
};

TEST(WeightOnly, MatMulMatchesTheNetworkAsWritten) {
  const std::vector<WoqCase> cases = {
      {70, 13, {3, 70}, true, 0, 32, false, false, false},      // blocked along K, a partial last block
      {64, 9, {2, 1, 64}, false, 0, 16, false, true, false},    // uint4 with zero points, rank-3 X
      {37, 5, {37}, true, 1, 0, false, false, false},           // per output channel, rank-1 X
      {40, 6, {4, 40}, true, 0, 0, true, false, true},          // per tensor, float16 scale
      {33, 8, {2, 33}, true, 0, 0, false, true, false},          // per K row: group size 1
      {16, 24, {5, 16}, false, 1, 8, false, true, true},         // blocked along N
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const WoqCase& c = cases[ci];
    SCOPED_TRACE("case " + std::to_string(ci));
    std::mt19937 rng(900 + static_cast<uint32_t>(ci));
    const DataType wt = c.is_signed ? DataType::kInt4 : DataType::kUInt4;
    const DataType st = c.half_scales ? DataType::kFloat16 : DataType::kFloat32;
    Tensor q(wt, {c.k, c.n});
    std::uniform_int_distribution<int> qd(c.is_signed ? -8 : 0, c.is_signed ? 7 : 15);
    for (int64_t i = 0; i < q.numel(); ++i) q.data<int8_t>()[i] = static_cast<int8_t>(qd(rng));
    std::vector<int64_t> s_shape;
    if (!c.per_tensor) {
      if (c.block == 0) s_shape = {c.axis == 0 ? c.k : c.n};
      else if (c.axis == 0) s_shape = {(c.k + c.block - 1) / c.block, c.n};
      else s_shape = {c.k, (c.n + c.block - 1) / c.block};
    }
    Tensor s(st, s_shape), z(wt, s_shape);
    std::uniform_real_distribution<float> sd(0.01f, 0.2f);
    for (int64_t i = 0; i < s.numel(); ++i) {
      s.SetFromDouble(i, sd(rng));
      z.SetFromDouble(i, qd(rng));
    }
    NetworkDefinition net;
    net.setOpset(21);  // 4-bit types and block_size
    const DataType xt = c.half_scales ? DataType::kFloat16 : DataType::kFloat32;  // DequantizeLinear writes S's type
    ASSERT_TRUE(net.addInput("x", xt, c.x_shape).ok());
    ASSERT_TRUE(net.addConstant("q", wt, q.shape(), q.raw()).ok());
    ASSERT_TRUE(net.addConstant("s", st, s.shape(), s.raw()).ok());
    std::vector<std::string> dq_in = {"q", "s"};
    if (c.zero_points) {
      ASSERT_TRUE(net.addConstant("z", wt, z.shape(), z.raw()).ok());
      dq_in.push_back("z");
    }
    AttrMap attrs = {{"axis", c.axis}};
    if (c.block) attrs["block_size"] = c.block;
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dq", dq_in, {"w"}, attrs).ok());
    ASSERT_TRUE(net.addOp("MatMul", "mm", {"x", "w"}, {"y"}).ok());
    ASSERT_TRUE(net.markOutput("y").ok());
    Tensor x = testing::Random(c.x_shape, 950 + static_cast<uint32_t>(ci), -1, 1);
    if (xt == DataType::kFloat16) x = CastTensor(x, DataType::kFloat16);
    std::map<std::string, Tensor> inputs{{"x", x}};
    auto want = debug::RunNetwork(net, inputs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();

    CpuBuild built = BuildOnCpu(net);
    ASSERT_TRUE(built.ctx);
    BuildReport& report = built.report;
    ExecutionContext* ctx = built.ctx.get();
    EXPECT_EQ(report.op_counts["kiln.WeightOnlyMatMul"], 1);
    EXPECT_EQ(report.layers_int4_weight_only, 1);
    EXPECT_TRUE(report.weight_only_fallbacks.empty());
    EXPECT_EQ(report.op_counts["DequantizeLinear"], 0);
    ASSERT_TRUE(ctx->setInputShape("x", c.x_shape).ok());
    ASSERT_TRUE(ctx->setTensorAddress("x", x.raw()).ok());
    auto shape = ctx->getTensorShape("y");
    ASSERT_TRUE(shape.ok());
    Tensor got(xt, *shape);
    ASSERT_TRUE(ctx->setTensorAddress("y", got.raw()).ok());
    ASSERT_TRUE(ctx->enqueue(nullptr).ok());
    const Tensor& ref = want->at("y");
    ASSERT_EQ(got.shape(), ref.shape());
    const double tol = xt == DataType::kFloat16 ? 2e-3 : 1e-5;
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_NEAR(got.GetAsDouble(i), ref.GetAsDouble(i), tol * (1 + std::fabs(ref.GetAsDouble(i)))) << "element " << i;
  }
}

// A 4-bit weight that a Gemm reads is dequantized to float at build time (only MatMul runs weight-only): the engine
// still computes what the network says, and the build report names the layer and why.
TEST(WeightOnly, AGemmReadingAFourBitWeightRunsInFloatAndIsReported) {
  NetworkDefinition net;
  net.setOpset(21);
  const int64_t k = 24, n = 5;
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {2, k}).ok());
  Tensor q(DataType::kInt4, {k, n});
  for (int64_t i = 0; i < q.numel(); ++i) q.data<int8_t>()[i] = static_cast<int8_t>(i % 16 - 8);
  const Tensor s = Tensor::Scalar(DataType::kFloat32, 0.05);
  ASSERT_TRUE(net.addConstant("q", DataType::kInt4, q.shape(), q.raw()).ok());
  ASSERT_TRUE(net.addConstant("s", DataType::kFloat32, {}, s.raw()).ok());
  ASSERT_TRUE(net.addOp("DequantizeLinear", "dq", {"q", "s"}, {"w"}).ok());
  ASSERT_TRUE(net.addOp("Gemm", "gemm", {"x", "w"}, {"y"}).ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  const Tensor x = testing::Random({2, k}, 77, -1, 1);
  auto want = debug::RunNetwork(net, {{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  CpuBuild built = BuildOnCpu(net);
  ASSERT_TRUE(built.ctx);
  const BuildReport& report = built.report;
  ExecutionContext* ctx = built.ctx.get();
  EXPECT_EQ(report.layers_int4_weight_only, 0);
  ASSERT_EQ(report.weight_only_fallbacks.size(), 1u);
  EXPECT_EQ(report.weight_only_fallbacks[0].first, "gemm");
  EXPECT_NE(report.weight_only_fallbacks[0].second.find("only MatMul runs weight-only"), std::string::npos);
  Tensor got(DataType::kFloat32, {2, n});
  ASSERT_TRUE(ctx->setTensorAddress("x", const_cast<void*>(x.raw())).ok());
  ASSERT_TRUE(ctx->setTensorAddress("y", got.raw()).ok());
  ASSERT_TRUE(ctx->enqueue(nullptr).ok());
  for (int64_t i = 0; i < got.numel(); ++i) EXPECT_NEAR(got.GetAsDouble(i), want->at("y").GetAsDouble(i), 1e-5);
}

// --int4Weights: a float model's MatMul weights are quantized at build time (symmetric int4, blocks of K per column);
// the layer then computes exactly what DequantizeLinear of those int4 values followed by MatMul computes, and a layer
// pinned by --layerPrecisions keeps its float weight.
TEST(WeightOnly, FloatWeightsQuantizedAtBuildTime) {
  const int64_t k = 40, n = 7, block = 16;
  const Tensor w = testing::Random({k, n}, 31, -1, 1);
  NetworkDefinition net;
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {3, k}).ok());
  ASSERT_TRUE(net.addConstant("w", DataType::kFloat32, w.shape(), w.raw()).ok());
  ASSERT_TRUE(net.addConstant("w2", DataType::kFloat32, {n, n}, testing::Random({n, n}, 32, -1, 1).raw()).ok());
  ASSERT_TRUE(net.addOp("MatMul", "mm", {"x", "w"}, {"h"}).ok());
  ASSERT_TRUE(net.addOp("MatMul", "pinned", {"h", "w2"}, {"y"}).ok());
  ASSERT_TRUE(net.markOutput("h").ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  CpuBuild built = BuildOnCpu(net, [&](BuilderConfig& cfg) {
    cfg.setInt4WeightBlockSize(block);
    cfg.setLayerPrecision("pinned", DataType::kFloat32);
  });
  ASSERT_TRUE(built.ctx);
  ExecutionContext* ctx = built.ctx.get();
  EXPECT_EQ(built.report.layers_int4_weight_only, 1);
  EXPECT_EQ(built.report.op_counts["MatMul"], 1);
  const Tensor x = testing::Random({3, k}, 33, -1, 1);
  Tensor h(DataType::kFloat32, {3, n}), y(DataType::kFloat32, {3, n});
  ASSERT_TRUE(ctx->setTensorAddress("x", const_cast<void*>(x.raw())).ok());
  ASSERT_TRUE(ctx->setTensorAddress("h", h.raw()).ok());
  ASSERT_TRUE(ctx->setTensorAddress("y", y.raw()).ok());
  ASSERT_TRUE(ctx->enqueue(nullptr).ok());
  // The reference: the same int4 values and scales, dequantized and multiplied here.
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t g0 = 0; g0 < k; g0 += block) {
        float amax = 0;
        for (int64_t i = g0; i < std::min(k, g0 + block); ++i) amax = std::max(amax, std::fabs(w.data<float>()[i * n + j]));
        const float s = static_cast<float>(static_cast<double>(amax) / 7.0);  // as the builder rounds it
        for (int64_t i = g0; i < std::min(k, g0 + block); ++i) {
          const float q = std::min(7.f, std::max(-8.f, std::nearbyint(w.data<float>()[i * n + j] / s)));
          want += static_cast<double>(x.data<float>()[r * k + i]) * static_cast<double>(q * s);
        }
      }
      EXPECT_NEAR(h.data<float>()[r * n + j], want, 1e-4) << r << "," << j;
    }
  // The pinned layer multiplies by its float weight.
  Tensor w2 = testing::Random({n, n}, 32, -1, 1);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double v = 0;
      for (int64_t i = 0; i < n; ++i) v += static_cast<double>(h.data<float>()[r * n + i]) * w2.data<float>()[i * n + j];
      EXPECT_NEAR(y.data<float>()[r * n + j], v, 1e-4) << r << "," << j;
    }
}

// With --int8 too, a MatMul whose input implicit INT8 quantized stays an INT8 layer: --int4Weights takes only the
// MatMuls that compute in float.
TEST(WeightOnly, Int8LayersStayInt8UnderInt4Weights) {
  NetworkDefinition net;
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {4, 32}).ok());
  ASSERT_TRUE(net.addConstant("w", DataType::kFloat32, {32, 16}, testing::Random({32, 16}, 41, -1, 1).raw()).ok());
  ASSERT_TRUE(net.addOp("MatMul", "mm", {"x", "w"}, {"y"}).ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  ASSERT_TRUE(net.setDynamicRange("x", -1, 1).ok());
  CpuBuild built = BuildOnCpu(net, [](BuilderConfig& cfg) {
    cfg.setFlag(BuilderFlag::kINT8);
    cfg.setInt4WeightBlockSize(16);
  });
  ASSERT_TRUE(built.ctx);
  EXPECT_EQ(built.report.op_counts["kiln.QMatMul"], 1);
  EXPECT_EQ(built.report.layers_int4_weight_only, 0);
}

TEST(Int4Tensors, ConstantsOutsideTheirRangeAreRefused) {
  NetworkDefinition net;
  net.setOpset(21);
  const uint8_t bytes[2] = {0x0f, 0x03};  // 15 is not an int4 (kiln holds -1 as 0xff)
  Status st = net.addConstant("q", DataType::kInt4, {2}, bytes);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("constant 'q': element 0 is 15, outside int4"), std::string::npos) << st.ToString();
  EXPECT_TRUE(net.addConstant("u", DataType::kUInt4, {2}, bytes).ok());
}

}  // namespace
}  // namespace kiln
