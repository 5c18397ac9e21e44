// INT8 layers on the CPU backend: explicitly quantized networks (DequantizeLinear -> Conv/MatMul/Gemm (+ bias,
// residual, activation) -> QuantizeLinear) build into one QConv/QMatMul each, and their outputs match the network
// run as written (float layers over dequantized values, no optimizer) on random data and odd shapes — exactly up
// to one quantization step where the output is requantized; implicit INT8 (--int8 with dynamic ranges or a
// calibrator) places Q/DQ itself, and a calibrator's cache rebuilds the same engine file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kiln/builder.h"
#include "kiln/calibrator.h"
#include "kiln/debug.h"
#include "kiln/runtime.h"
#include "quant_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using quant_testing::AddTensor;
using quant_testing::Built;
using quant_testing::QuietLogger;
using quant_testing::RelL2;
using quant_testing::RunEngine;
using quant_testing::TryBuild;

Tensor Scalar(DataType t, double v) { return Tensor::Scalar(t, v); }

// Symmetric per-channel (or per-tensor) int8 of a float weight along `axis`.
std::pair<Tensor, Tensor> QuantizeWeight(const Tensor& w, int64_t axis, bool per_channel) {
  const int64_t ch = w.dim(axis);
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  std::vector<float> amax(per_channel ? ch : 1, 0.f);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = per_channel ? (i / inner) % ch : 0;
    amax[c] = std::max(amax[c], std::fabs(w.data<float>()[i]));
  }
  Tensor scales(DataType::kFloat32, per_channel ? std::vector<int64_t>{ch} : std::vector<int64_t>{});
  for (size_t c = 0; c < amax.size(); ++c) scales.data<float>()[c] = amax[c] > 0 ? amax[c] / 127.f : 1.f;
  Tensor q(DataType::kInt8, w.shape());
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = per_channel ? (i / inner) % ch : 0;
    q.data<int8_t>()[i] = static_cast<int8_t>(std::nearbyint(w.data<float>()[i] / scales.data<float>()[c]));
  }
  return {q, scales};
}

Built Build(const NetworkDefinition& net, BuilderConfig* cfg_in = nullptr, ILogger* logger = nullptr) {
  Built r = TryBuild(net, cfg_in, logger);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  return r;
}

// Elementwise |got - want| <= tol; at most `max_bad` elements may differ by up to `step` (one quantization step).
void ExpectClose(const Tensor& got, const Tensor& want, double tol, double step, double max_bad_fraction) {
  ASSERT_EQ(got.shape(), want.shape());
  int64_t off_by_step = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double d = std::fabs(got.GetAsDouble(i) - want.GetAsDouble(i));
    if (d <= tol) continue;
    ASSERT_LE(d, step * 1.001 + tol) << "element " << i << ": " << got.GetAsDouble(i) << " vs " << want.GetAsDouble(i);
    ++off_by_step;
  }
  EXPECT_LE(off_by_step, static_cast<int64_t>(max_bad_fraction * got.numel()) + 1)
      << off_by_step << " of " << got.numel() << " elements one step apart";
}

struct ConvCase {
  int64_t n, c, h, w, m, k, stride, pad, group;
  bool uint8_x, per_channel, bias, residual;
  const char* act;  // "" or an ONNX activation op
  bool quant_out;
};

TEST(QuantizedLayers, ConvMatchesTheNetworkAsWritten) {
  const ConvCase cases[] = {
      {1, 3, 7, 9, 5, 3, 1, 1, 1, false, true, true, false, "Relu", true},
      {2, 4, 6, 5, 6, 3, 2, 0, 2, true, true, false, false, "", true},
      {1, 8, 5, 5, 8, 3, 1, 1, 8, false, false, true, true, "Relu", false},  // depthwise, residual, float out
      {2, 5, 4, 6, 7, 1, 1, 0, 1, true, false, true, true, "", true},
      {1, 2, 9, 3, 3, 5, 3, 2, 1, false, true, true, false, "Sigmoid", false},
  };
  int index = 0;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE("case " + std::to_string(index));
    const uint32_t seed = 100 + index++;
    std::mt19937 rng(seed);
    NetworkDefinition net;
    ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {c.n, c.c, c.h, c.w}).ok());
    const DataType xt = c.uint8_x ? DataType::kUInt8 : DataType::kInt8;
    const float sx = 0.021f;
    const int64_t zx = c.uint8_x ? 131 : -7;
    ASSERT_TRUE(AddTensor(net, "sx", Scalar(DataType::kFloat32, sx)).ok());
    ASSERT_TRUE(AddTensor(net, "zx", Scalar(xt, static_cast<double>(zx))).ok());
    ASSERT_TRUE(net.addOp("QuantizeLinear", "qx", {"x", "sx", "zx"}, {"xq"}).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqx", {"xq", "sx", "zx"}, {"xd"}).ok());
    const Tensor wf = testing::Random({c.m, c.c / c.group, c.k, c.k}, seed + 1, -0.5, 0.5);
    auto [wq, sw] = QuantizeWeight(wf, 0, c.per_channel);
    ASSERT_TRUE(AddTensor(net, "wq", wq).ok());
    ASSERT_TRUE(AddTensor(net, "sw", sw).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqw", {"wq", "sw"}, {"wd"}, {{"axis", int64_t{0}}}).ok());
    std::vector<std::string> conv_in{"xd", "wd"};
    if (c.bias) {
      ASSERT_TRUE(AddTensor(net, "b", testing::Random({c.m}, seed + 2, -0.3, 0.3)).ok());
      conv_in.push_back("b");
    }
    AttrMap conv_attrs{{"strides", std::vector<int64_t>{c.stride, c.stride}},
                       {"pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad}},
                       {"group", c.group}};
    ASSERT_TRUE(net.addOp("Conv", "conv", conv_in, {"y"}, conv_attrs).ok());
    std::string cur = "y";
    const int64_t oh = (c.h + 2 * c.pad - c.k) / c.stride + 1, ow = (c.w + 2 * c.pad - c.k) / c.stride + 1;
    std::map<std::string, Tensor> inputs{{"x", testing::Random({c.n, c.c, c.h, c.w}, seed + 3, -2.5, 2.5)}};
    if (c.residual) {
      ASSERT_TRUE(net.addInput("r", DataType::kFloat32, {c.n, c.m, oh, ow}).ok());
      ASSERT_TRUE(net.addOp("Add", "add", {cur, "r"}, {"y_r"}).ok());
      cur = "y_r";
      inputs["r"] = testing::Random({c.n, c.m, oh, ow}, seed + 4, -1, 1);
    }
    if (*c.act) {
      ASSERT_TRUE(net.addOp(c.act, "act", {cur}, {"y_a"}).ok());
      cur = "y_a";
    }
    const float sy = 0.037f;
    if (c.quant_out) {
      ASSERT_TRUE(AddTensor(net, "sy", Scalar(DataType::kFloat32, sy)).ok());
      ASSERT_TRUE(AddTensor(net, "zy", Scalar(DataType::kInt8, 3)).ok());
      ASSERT_TRUE(net.addOp("QuantizeLinear", "qy", {cur, "sy", "zy"}, {"yq"}).ok());
      ASSERT_TRUE(net.addOp("DequantizeLinear", "dqy", {"yq", "sy", "zy"}, {"out"}).ok());
    } else {
      ASSERT_TRUE(net.addOp("Identity", "id", {cur}, {"out"}).ok());
    }
    ASSERT_TRUE(net.markOutput("out").ok());

    auto want = debug::RunNetwork(net, inputs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    Built b = Build(net);
    ASSERT_TRUE(b.engine);
    EXPECT_EQ(b.report.op_counts["kiln.QConv"], 1) << b.engine->getLayerInformationJson();
    EXPECT_EQ(b.report.op_counts.count("Conv"), 0u);
    EXPECT_EQ(b.report.layers_int8, 1);
    const Tensor got = RunEngine(*b.engine, inputs, "out");
    if (c.quant_out) ExpectClose(got, want->at("out"), 1e-6, sy, 0.02);
    else ExpectClose(got, want->at("out"), 2e-4, 0, 0);
  }
}

TEST(QuantizedLayers, MatMulAndGemmMatchTheNetworkAsWritten) {
  for (int variant = 0; variant < 3; ++variant) {  // MatMul + bias + Relu, Gemm transB, MatMul rank 3 float out
    SCOPED_TRACE("variant " + std::to_string(variant));
    const uint32_t seed = 300 + variant;
    const int64_t k = 19, n = 11;
    const std::vector<int64_t> xs = variant == 2 ? std::vector<int64_t>{2, 3, k} : std::vector<int64_t>{5, k};
    NetworkDefinition net;
    ASSERT_TRUE(net.addInput("x", DataType::kFloat32, xs).ok());
    ASSERT_TRUE(AddTensor(net, "sx", Scalar(DataType::kFloat32, 0.017)).ok());
    ASSERT_TRUE(AddTensor(net, "zx", Scalar(DataType::kUInt8, 120)).ok());
    ASSERT_TRUE(net.addOp("QuantizeLinear", "qx", {"x", "sx", "zx"}, {"xq"}).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqx", {"xq", "sx", "zx"}, {"xd"}).ok());
    const bool trans_b = variant == 1;
    const Tensor wf = testing::Random(trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, seed, -1, 1);
    auto [wq, sw] = QuantizeWeight(wf, trans_b ? 0 : 1, variant != 2);
    ASSERT_TRUE(AddTensor(net, "wq", wq).ok());
    ASSERT_TRUE(AddTensor(net, "sw", sw).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqw", {"wq", "sw"}, {"wd"}, {{"axis", int64_t{trans_b ? 0 : 1}}}).ok());
    ASSERT_TRUE(AddTensor(net, "b", testing::Random({n}, seed + 1, -0.5, 0.5)).ok());
    std::string cur;
    if (trans_b) {
      ASSERT_TRUE(net.addOp("Gemm", "gemm", {"xd", "wd", "b"}, {"y"}, {{"transB", int64_t{1}}}).ok());
      cur = "y";
    } else {
      ASSERT_TRUE(net.addOp("MatMul", "mm", {"xd", "wd"}, {"p"}).ok());
      ASSERT_TRUE(net.addOp("Add", "bias", {"p", "b"}, {"y"}).ok());
      cur = "y";
      if (variant == 0) {
        ASSERT_TRUE(net.addOp("Relu", "relu", {"y"}, {"y_a"}).ok());
        cur = "y_a";
      }
    }
    const bool quant_out = variant != 2;
    if (quant_out) {
      ASSERT_TRUE(AddTensor(net, "sy", Scalar(DataType::kFloat32, 0.05)).ok());
      ASSERT_TRUE(AddTensor(net, "zy", Scalar(DataType::kUInt8, 9)).ok());
      ASSERT_TRUE(net.addOp("QuantizeLinear", "qy", {cur, "sy", "zy"}, {"yq"}).ok());
      ASSERT_TRUE(net.addOp("DequantizeLinear", "dqy", {"yq", "sy", "zy"}, {"out"}).ok());
    } else {
      ASSERT_TRUE(net.addOp("Identity", "id", {cur}, {"out"}).ok());
    }
    ASSERT_TRUE(net.markOutput("out").ok());
    std::map<std::string, Tensor> inputs{{"x", testing::Random(xs, seed + 2, -2, 2)}};
    auto want = debug::RunNetwork(net, inputs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    Built b = Build(net);
    ASSERT_TRUE(b.engine);
    EXPECT_EQ(b.report.op_counts["kiln.QMatMul"], 1) << b.engine->getLayerInformationJson();
    const Tensor got = RunEngine(*b.engine, inputs, "out");
    if (quant_out) ExpectClose(got, want->at("out"), 1e-6, 0.05, 0.02);
    else ExpectClose(got, want->at("out"), 2e-4, 0, 0);
  }
}

TEST(QuantizedLayers, LayerPrecisionsKeepAnExplicitLayerUnfused) {
  NetworkDefinition net;
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {1, 3, 6, 6}).ok());
  ASSERT_TRUE(AddTensor(net, "sx", Scalar(DataType::kFloat32, 0.02)).ok());
  ASSERT_TRUE(AddTensor(net, "zx", Scalar(DataType::kInt8, 0)).ok());
  ASSERT_TRUE(net.addOp("QuantizeLinear", "qx", {"x", "sx", "zx"}, {"xq"}).ok());
  ASSERT_TRUE(net.addOp("DequantizeLinear", "dqx", {"xq", "sx", "zx"}, {"xd"}).ok());
  auto [wq, sw] = QuantizeWeight(testing::Random({4, 3, 3, 3}, 5, -0.5, 0.5), 0, true);
  ASSERT_TRUE(AddTensor(net, "wq", wq).ok());
  ASSERT_TRUE(AddTensor(net, "sw", sw).ok());
  ASSERT_TRUE(net.addOp("DequantizeLinear", "dqw", {"wq", "sw"}, {"wd"}, {{"axis", int64_t{0}}}).ok());
  ASSERT_TRUE(net.addOp("Conv", "conv", {"xd", "wd"}, {"y"}).ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  std::map<std::string, Tensor> inputs{{"x", testing::Random({1, 3, 6, 6}, 6, -2, 2)}};
  auto want = debug::RunNetwork(net, inputs);
  ASSERT_TRUE(want.ok());
  auto cfg = std::make_unique<BuilderConfig>();
  cfg->setLayerPrecision("conv", DataType::kFloat32);
  Built b = Build(net, cfg.get());
  ASSERT_TRUE(b.engine);
  EXPECT_EQ(b.report.op_counts.count("kiln.QConv"), 0u);
  EXPECT_EQ(b.report.op_counts["Conv"], 1);  // over the dequantized input and the folded weight
  ExpectClose(RunEngine(*b.engine, inputs, "y"), want->at("y"), 1e-5, 0, 0);
}

TEST(QuantizedLayers, GemmBiasRowAndSumsThatCouldOverflow) {
  // A Gemm's [1, N] bias becomes the layer's [N]; a product whose int32 sums could overflow (K = 70,000 weights of
  // -127 against inputs up to 255 from the zero point) stays unfused and exact.
  for (const int64_t k : {int64_t{24}, int64_t{70000}}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    NetworkDefinition net;
    ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {2, k}).ok());
    ASSERT_TRUE(AddTensor(net, "sx", Scalar(DataType::kFloat32, 0.01)).ok());
    ASSERT_TRUE(AddTensor(net, "zx", Scalar(DataType::kUInt8, 255)).ok());
    ASSERT_TRUE(net.addOp("QuantizeLinear", "qx", {"x", "sx", "zx"}, {"xq"}).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqx", {"xq", "sx", "zx"}, {"xd"}).ok());
    Tensor wq(DataType::kInt8, {k, 4});
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = k > 1000 ? -127 : static_cast<int8_t>(i % 7 - 3);
    ASSERT_TRUE(AddTensor(net, "wq", wq).ok());
    ASSERT_TRUE(AddTensor(net, "sw", Scalar(DataType::kFloat32, 0.001)).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqw", {"wq", "sw"}, {"wd"}).ok());
    ASSERT_TRUE(AddTensor(net, "b", testing::Random({1, 4}, 3, -1, 1)).ok());
    ASSERT_TRUE(net.addOp("Gemm", "gemm", {"xd", "wd", "b"}, {"y"}).ok());
    ASSERT_TRUE(net.markOutput("y").ok());
    std::map<std::string, Tensor> inputs{{"x", testing::Random({2, k}, 4, -3, 0)}};
    auto want = debug::RunNetwork(net, inputs);
    ASSERT_TRUE(want.ok());
    Built b = Build(net);
    ASSERT_TRUE(b.engine);
    EXPECT_EQ(b.report.op_counts["kiln.QMatMul"], k > 1000 ? 0 : 1);
    ExpectClose(RunEngine(*b.engine, inputs, "y"), want->at("y"), 1e-3 * (k > 1000 ? 1000 : 1), 0, 0);
  }
}

// A small float CNN: conv -> relu -> conv -> relu -> global pool -> gemm.
void MakeFloatCnn(NetworkDefinition& net) {
  ASSERT_TRUE(net.addInput("img", DataType::kFloat32, {2, 3, 8, 8}).ok());
  ASSERT_TRUE(AddTensor(net, "w1", testing::Random({8, 3, 3, 3}, 1, -0.4, 0.4)).ok());
  ASSERT_TRUE(AddTensor(net, "b1", testing::Random({8}, 2, -0.1, 0.1)).ok());
  ASSERT_TRUE(AddTensor(net, "w2", testing::Random({8, 8, 3, 3}, 3, -0.2, 0.2)).ok());
  ASSERT_TRUE(AddTensor(net, "w3", testing::Random({8, 4}, 4, -0.5, 0.5)).ok());
  AttrMap pad1{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  ASSERT_TRUE(net.addOp("Conv", "conv1", {"img", "w1", "b1"}, {"c1"}, pad1).ok());
  ASSERT_TRUE(net.addOp("Relu", "relu1", {"c1"}, {"r1"}).ok());
  ASSERT_TRUE(net.addOp("Conv", "conv2", {"r1", "w2"}, {"c2"}, pad1).ok());
  ASSERT_TRUE(net.addOp("Relu", "relu2", {"c2"}, {"r2"}).ok());
  ASSERT_TRUE(net.addOp("GlobalAveragePool", "gap", {"r2"}, {"g"}).ok());
  ASSERT_TRUE(net.addOp("Flatten", "flat", {"g"}, {"f"}).ok());
  ASSERT_TRUE(net.addOp("Gemm", "fc", {"f", "w3"}, {"logits"}).ok());
  ASSERT_TRUE(net.markOutput("logits").ok());
}

TEST(ImplicitInt8, DynamicRangesQuantizeEveryLayer) {
  NetworkDefinition net;
  MakeFloatCnn(net);
  std::map<std::string, Tensor> inputs{{"img", testing::Random({2, 3, 8, 8}, 9, -1, 1)}};
  auto want = debug::RunNetwork(net, inputs, {"", true});
  ASSERT_TRUE(want.ok());
  for (const char* t : {"img", "r1", "f"}) {
    float amax = 0;
    for (float v : want->at(t).ToFloatVector()) amax = std::max(amax, std::fabs(v));
    ASSERT_TRUE(net.setDynamicRange(t, -amax, amax).ok());
  }
  EXPECT_FALSE(net.setDynamicRange("nope", -1, 1).ok());
  EXPECT_FALSE(net.setDynamicRange("img", 1, -1).ok());
  auto cfg = std::make_unique<BuilderConfig>();
  cfg->setFlag(BuilderFlag::kINT8);
  Built b = Build(net, cfg.get());
  ASSERT_TRUE(b.engine);
  EXPECT_EQ(b.report.op_counts["kiln.QConv"], 2);
  EXPECT_EQ(b.report.op_counts["kiln.QMatMul"], 1);
  EXPECT_EQ(b.report.int8_tensors_calibrated, 3);
  EXPECT_EQ(b.report.calibration_source, "dynamic ranges");
  // Quantize nodes only where float meets int8: the input, and the global average pool's output (its Quantize moved
  // before the Flatten, so the Gemm reads int8); no Dequantize is left.
  EXPECT_EQ(b.report.op_counts["QuantizeLinear"], 2);
  EXPECT_EQ(b.report.op_counts.count("DequantizeLinear"), 0u);
  const Tensor got = RunEngine(*b.engine, inputs, "logits");
  EXPECT_LT(RelL2(got, want->at("logits")), 0.03);

  // Without any range source, --int8 says what it needs.
  NetworkDefinition bare;
  MakeFloatCnn(bare);
  Builder builder(*std::make_unique<QuietLogger>());
  auto c2 = builder.createBuilderConfig();
  c2->setBackend("cpu");
  c2->setFlag(BuilderFlag::kINT8);
  auto r = builder.buildSerializedNetwork(bare, *c2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--calib"), std::string::npos) << r.status().message();
}

// A residual block (TensorRT's implicit INT8 does the same): the shortcut of Add(conv, shortcut) is read
// quantize-dequantized, so the convolution before the Add takes it as an int8 residual (kiln_r_scale) and the
// block's output, read only by the next convolution's Quantize, is written in int8: no Dequantize is left and the
// only Quantize is the network input's. The engine stays close to the float network.
TEST(ImplicitInt8, ResidualBlocksStayInt8) {
  NetworkDefinition net;
  ASSERT_TRUE(net.addInput("img", DataType::kFloat32, {2, 8, 6, 6}).ok());
  AttrMap pad1{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  ASSERT_TRUE(AddTensor(net, "w1", testing::Random({16, 8, 3, 3}, 11, -0.3, 0.3)).ok());
  ASSERT_TRUE(AddTensor(net, "w2", testing::Random({16, 16, 3, 3}, 12, -0.2, 0.2)).ok());
  ASSERT_TRUE(AddTensor(net, "b2", testing::Random({16}, 13, -0.1, 0.1)).ok());
  ASSERT_TRUE(AddTensor(net, "w3", testing::Random({4, 16, 1, 1}, 14, -0.4, 0.4)).ok());
  ASSERT_TRUE(net.addOp("Conv", "conv1", {"img", "w1"}, {"c1"}, pad1).ok());
  ASSERT_TRUE(net.addOp("Relu", "relu1", {"c1"}, {"a"}).ok());
  ASSERT_TRUE(net.addOp("Conv", "conv2", {"a", "w2", "b2"}, {"c2"}, pad1).ok());
  ASSERT_TRUE(net.addOp("Add", "add", {"c2", "a"}, {"s"}).ok());
  ASSERT_TRUE(net.addOp("Relu", "relu2", {"s"}, {"r"}).ok());
  ASSERT_TRUE(net.addOp("Conv", "conv3", {"r", "w3"}, {"out"}).ok());
  ASSERT_TRUE(net.markOutput("out").ok());
  std::map<std::string, Tensor> inputs{{"img", testing::Random({2, 8, 6, 6}, 15, -1, 1)}};
  auto want = debug::RunNetwork(net, inputs, {"", true});
  ASSERT_TRUE(want.ok());
  for (const char* t : {"img", "a", "r"}) {
    float amax = 0;
    for (float v : want->at(t).ToFloatVector()) amax = std::max(amax, std::fabs(v));
    ASSERT_TRUE(net.setDynamicRange(t, -amax, amax).ok());
  }
  auto cfg = std::make_unique<BuilderConfig>();
  cfg->setFlag(BuilderFlag::kINT8);
  Built b = Build(net, cfg.get());
  ASSERT_TRUE(b.engine);
  EXPECT_EQ(b.report.op_counts["kiln.QConv"], 3);
  EXPECT_EQ(b.report.op_counts["QuantizeLinear"], 1);
  EXPECT_EQ(b.report.op_counts.count("DequantizeLinear"), 0u) << b.engine->getLayerInformationJson();
  EXPECT_EQ(b.report.op_counts.count("Add"), 0u);
  const Tensor got = RunEngine(*b.engine, inputs, "out");
  EXPECT_LT(RelL2(got, want->at("out")), 0.05);
}

// A layer implicit INT8 quantizes but no INT8 layer takes (here a Gemm with alpha 0.5, which fuse-quantized leaves
// alone) computes in float on the float value: drop-implicit-qdq removes its Q/DQ round trip, so the engine equals
// the float network.
TEST(ImplicitInt8, LayersNoInt8KernelTakesStayFloatWithoutTheRoundTrip) {
  NetworkDefinition net;
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {3, 16}).ok());
  ASSERT_TRUE(AddTensor(net, "w", testing::Random({16, 8}, 21, -0.5, 0.5)).ok());
  ASSERT_TRUE(net.addOp("Gemm", "fc", {"x", "w"}, {"y"}, {{"alpha", 0.5f}}).ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  std::map<std::string, Tensor> inputs{{"x", testing::Random({3, 16}, 22, -1, 1)}};
  auto want = debug::RunNetwork(net, inputs);
  ASSERT_TRUE(want.ok());
  ASSERT_TRUE(net.setDynamicRange("x", -1, 1).ok());
  auto cfg = std::make_unique<BuilderConfig>();
  cfg->setFlag(BuilderFlag::kINT8);
  Built b = Build(net, cfg.get());
  ASSERT_TRUE(b.engine);
  EXPECT_EQ(b.report.op_counts.count("kiln.QMatMul"), 0u);
  EXPECT_EQ(b.report.op_counts.count("QuantizeLinear"), 0u) << b.engine->getLayerInformationJson();
  EXPECT_EQ(b.report.op_counts.count("DequantizeLinear"), 0u);
  ExpectClose(RunEngine(*b.engine, inputs, "y"), want->at("y"), 1e-5, 0, 0);
}

TEST(ImplicitInt8, LayerPrecisionsKeepLayersInFloat) {
  NetworkDefinition net;
  MakeFloatCnn(net);
  for (const char* t : {"img", "r1", "f"}) ASSERT_TRUE(net.setDynamicRange(t, -4, 4).ok());
  auto cfg = std::make_unique<BuilderConfig>();
  cfg->setFlag(BuilderFlag::kINT8);
  cfg->setLayerPrecision("conv2", DataType::kFloat32);
  cfg->setLayerPrecision("fc", DataType::kInt8);
  Built b = Build(net, cfg.get());
  ASSERT_TRUE(b.engine);
  EXPECT_EQ(b.report.op_counts["kiln.QConv"], 1);
  EXPECT_EQ(b.report.op_counts["kiln.QMatMul"], 1);
  EXPECT_EQ(b.report.int8_candidate_layers, (std::vector<std::string>{"conv1", "fc"}));
  ASSERT_EQ(b.report.int8_fallbacks.size(), 1u);
  EXPECT_EQ(b.report.int8_fallbacks[0].first, "conv2");
  EXPECT_NE(b.report.int8_fallbacks[0].second.find("--layerPrecisions"), std::string::npos);

  // int8 for a layer that cannot be: a warning, or an error under --precisionConstraints=obey.
  cfg->setLayerPrecision("relu1", DataType::kInt8);
  QuietLogger log;
  Built warned = Build(net, cfg.get(), &log);
  ASSERT_TRUE(warned.engine);
  EXPECT_NE(log.last_warning.find("relu1"), std::string::npos) << log.last_warning;
  cfg->setFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS);
  Builder builder(log);
  auto r = builder.buildSerializedNetwork(net, *cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("relu1"), std::string::npos);

  // fp16 is not a precision the cpu backend has.
  auto c2 = std::make_unique<BuilderConfig>();
  c2->setBackend("cpu");
  c2->setLayerPrecision("conv1", DataType::kFloat16);
  auto r2 = builder.buildSerializedNetwork(net, *c2);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("fp32 or int8"), std::string::npos) << r2.status().message();
}

class TestCalibrator : public IInt8EntropyCalibrator2 {
 public:
  int32_t getBatchSize() const noexcept override { return 2; }
  bool getBatch(void* bindings[], const char* names[], int32_t nb) noexcept override {
    if (next_ == 4 || nb != 1 || std::strcmp(names[0], "img") != 0) return false;
    batch_ = testing::Random({2, 3, 8, 8}, 50 + next_++, -1, 1);
    bindings[0] = batch_.raw();
    return true;
  }
  const void* readCalibrationCache(size_t& length) noexcept override {
    length = cache_in.size();
    return cache_in.empty() ? nullptr : cache_in.data();
  }
  void writeCalibrationCache(const void* p, size_t n) noexcept override {
    cache_out.assign(static_cast<const char*>(p), n);
  }
  std::string cache_in, cache_out;

 private:
  int next_ = 0;
  Tensor batch_;
};

TEST(ImplicitInt8, CalibratorCacheRebuildsTheSameEngine) {
  NetworkDefinition net;
  MakeFloatCnn(net);
  TestCalibrator calib;
  auto cfg = std::make_unique<BuilderConfig>();
  cfg->setFlag(BuilderFlag::kINT8);
  cfg->setInt8Calibrator(&calib);
  Built first = Build(net, cfg.get());
  ASSERT_TRUE(first.engine);
  EXPECT_EQ(first.report.calibration_source, "calibrated 4 batch(es) (EntropyCalibration2)");
  ASSERT_EQ(calib.cache_out.rfind("TRT-8601-EntropyCalibration2\n", 0), 0u) << calib.cache_out;
  EXPECT_NE(calib.cache_out.find("\nr1: "), std::string::npos);

  TestCalibrator from_cache;
  from_cache.cache_in = calib.cache_out;
  cfg->setInt8Calibrator(&from_cache);
  Built second = Build(net, cfg.get());
  ASSERT_TRUE(second.engine);
  EXPECT_EQ(second.report.calibration_source, "calibration cache");
  EXPECT_TRUE(from_cache.cache_out.empty());  // no calibration ran
  // The same engine file, byte for byte (its build report carries no timings), and so the same results.
  EXPECT_EQ(first.bytes, second.bytes);
  EXPECT_EQ(first.engine->getLayerInformationJson(), second.engine->getLayerInformationJson());
  std::map<std::string, Tensor> inputs{{"img", testing::Random({2, 3, 8, 8}, 77, -1, 1)}};
  const Tensor a = RunEngine(*first.engine, inputs, "logits"), b = RunEngine(*second.engine, inputs, "logits");
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);

  // A malformed cache fails the build naming the line.
  TestCalibrator bad;
  bad.cache_in = "TRT-8601-EntropyCalibration2\nimg: zz\n";
  cfg->setInt8Calibrator(&bad);
  Builder builder(*std::make_unique<QuietLogger>());
  auto r = builder.buildSerializedNetwork(net, *cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the calibrator's cache:2:"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace kiln
