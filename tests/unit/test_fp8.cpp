// FP8 (float8e4m3fn) matrix products on the CPU backend: explicitly quantized networks (float8 Q/DQ around MatMul /
// Gemm) build into one kiln.QMatMul with float8 operands and match the network run as written — float outputs within
// float rounding, float8 outputs to the code or one code apart (the sums are ordered differently); implicit FP8
// (--fp8 with ranges) quantizes every matrix product and leaves convolutions in float. (A LayerNormalization's float8
// output 3: test_fold_quantized_casts.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "kiln/builder.h"
#include "kiln/debug.h"
#include "kiln/runtime.h"
#include "quant_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using quant_testing::AddTensor;
using quant_testing::Built;
using quant_testing::RelL2;
using quant_testing::RunEngine;
using quant_testing::TryBuild;

// Per-column (axis 1 of [K, N], or axis 0 of a transposed [N, K]) float8 of a float weight: max |w| / 448.
std::pair<Tensor, Tensor> Fp8Weight(const Tensor& w, int64_t axis) {
  const int64_t ch = w.dim(axis), inner = axis == 0 ? w.dim(1) : 1;
  std::vector<float> amax(static_cast<size_t>(ch), 0.f);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = (i / inner) % ch;
    amax[c] = std::max(amax[c], std::fabs(w.data<float>()[i]));
  }
  Tensor scales(DataType::kFloat32, {ch});
  for (int64_t c = 0; c < ch; ++c) scales.data<float>()[c] = amax[c] > 0 ? amax[c] / 448.f : 1.f;
  Tensor q(DataType::kFloat8E4M3FN, w.shape());
  for (int64_t i = 0; i < w.numel(); ++i)
    q.data<uint8_t>()[i] = FloatToFloat8E4M3(w.data<float>()[i] / scales.data<float>()[(i / inner) % ch]);
  return {q, scales};
}

// A cpu build, with `flag` set when `with_flag` (and --int8 too with `both`); layer precisions in the layer info.
Built Build(const NetworkDefinition& net, BuilderFlag flag = BuilderFlag::kTF32, bool with_flag = false,
            bool both = false) {
  BuilderConfig cfg;
  cfg.setProfilingVerbosity(ProfilingVerbosity::kDetailed);
  if (with_flag) cfg.setFlag(flag);
  if (both) cfg.setFlag(BuilderFlag::kINT8);
  return TryBuild(net, &cfg);
}

// Dequantized float8 outputs (value / scale is a float8 value): equal, or one float8 code apart for at most 2%.
void ExpectSameOrNextCode(const Tensor& got, const Tensor& want, float scale) {
  ASSERT_EQ(got.shape(), want.shape());
  int64_t apart = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const int g = FloatToFloat8E4M3(static_cast<float>(got.GetAsDouble(i)) / scale);
    const int w = FloatToFloat8E4M3(static_cast<float>(want.GetAsDouble(i)) / scale);
    if (g == w || (g & 0x7f) == 0 || (w & 0x7f) == 0) {  // (+0 and -0 are one value)
      if (g != w) ASSERT_EQ(g & 0x7f, w & 0x7f) << "element " << i;
      continue;
    }
    ASSERT_EQ(g & 0x80, w & 0x80) << "element " << i << ": " << got.GetAsDouble(i) << " vs " << want.GetAsDouble(i);
    ASSERT_EQ(std::abs(g - w), 1) << "element " << i << ": " << got.GetAsDouble(i) << " vs " << want.GetAsDouble(i);
    ++apart;
  }
  EXPECT_LE(apart, got.numel() / 50 + 1) << apart << " of " << got.numel() << " one code apart";
}

TEST(Fp8, ExplicitQdqMatMulAndGemmMatchTheNetworkAsWritten) {
  for (int variant = 0; variant < 3; ++variant) {  // MatMul + bias + Relu -> fp8, Gemm transB -> float, rank 3 MatMul
    SCOPED_TRACE("variant " + std::to_string(variant));
    const uint32_t seed = 700 + variant;
    const int64_t k = 37, n = 21;
    const std::vector<int64_t> xs = variant == 2 ? std::vector<int64_t>{2, 3, k} : std::vector<int64_t>{5, k};
    NetworkDefinition net;
    ASSERT_TRUE(net.addInput("x", DataType::kFloat32, xs).ok());
    ASSERT_TRUE(AddTensor(net, "sx", Tensor::Scalar(DataType::kFloat32, 0.011)).ok());
    ASSERT_TRUE(AddTensor(net, "zx", Tensor(DataType::kFloat8E4M3FN, {})).ok());
    ASSERT_TRUE(net.addOp("QuantizeLinear", "qx", {"x", "sx", "zx"}, {"xq"}).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqx", {"xq", "sx", "zx"}, {"xd"}).ok());
    const bool trans_b = variant == 1;
    const Tensor wf = testing::Random(trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, seed, -1, 1);
    auto [wq, sw] = Fp8Weight(wf, trans_b ? 0 : 1);
    ASSERT_TRUE(AddTensor(net, "wq", wq).ok());
    ASSERT_TRUE(AddTensor(net, "sw", sw).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqw", {"wq", "sw"}, {"wd"}, {{"axis", int64_t{trans_b ? 0 : 1}}}).ok());
    ASSERT_TRUE(AddTensor(net, "b", testing::Random({n}, seed + 1, -0.5, 0.5)).ok());
    std::string cur = "y";
    if (trans_b) {
      ASSERT_TRUE(net.addOp("Gemm", "gemm", {"xd", "wd", "b"}, {"y"}, {{"transB", int64_t{1}}}).ok());
    } else {
      ASSERT_TRUE(net.addOp("MatMul", "mm", {"xd", "wd"}, {"p"}).ok());
      ASSERT_TRUE(net.addOp("Add", "bias", {"p", "b"}, {"y"}).ok());
      if (variant == 0) {
        ASSERT_TRUE(net.addOp("Relu", "relu", {"y"}, {"y_a"}).ok());
        cur = "y_a";
      }
    }
    const bool quant_out = variant == 0;
    const float sy = 0.02f;
    if (quant_out) {
      ASSERT_TRUE(AddTensor(net, "sy", Tensor::Scalar(DataType::kFloat32, sy)).ok());
      ASSERT_TRUE(AddTensor(net, "zy", Tensor(DataType::kFloat8E4M3FN, {})).ok());
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
    ASSERT_TRUE(b.engine) << b.status.ToString();
    EXPECT_EQ(b.report.op_counts["kiln.QMatMul"], 1) << b.engine->getLayerInformationJson();
    EXPECT_EQ(b.report.op_counts.count("DequantizeLinear"), quant_out ? 1u : 0u);  // the output's, when quantized
    const Tensor got = RunEngine(*b.engine, inputs, "out");
    if (quant_out) {
      ExpectSameOrNextCode(got, want->at("out"), sy);
    } else {
      for (int64_t i = 0; i < got.numel(); ++i)
        ASSERT_NEAR(got.GetAsDouble(i), want->at("out").GetAsDouble(i), 1e-5 + 1e-5 * std::fabs(got.GetAsDouble(i)));
    }
  }
}

// A float8 Q/DQ whose zero point is not 0, or an int8 activation with a float8 weight, stays as written.
TEST(Fp8, MixedOrNonZeroZeroPointsStayUnfused) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    NetworkDefinition net;
    ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {4, 16}).ok());
    ASSERT_TRUE(AddTensor(net, "sx", Tensor::Scalar(DataType::kFloat32, 0.01)).ok());
    if (variant == 0) ASSERT_TRUE(AddTensor(net, "zx", Tensor::Scalar(DataType::kFloat8E4M3FN, 0.5)).ok());
    else ASSERT_TRUE(AddTensor(net, "zx", Tensor(DataType::kInt8, {})).ok());
    ASSERT_TRUE(net.addOp("QuantizeLinear", "qx", {"x", "sx", "zx"}, {"xq"}).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqx", {"xq", "sx", "zx"}, {"xd"}).ok());
    auto [wq, sw] = Fp8Weight(testing::Random({16, 8}, 5, -1, 1), 1);
    ASSERT_TRUE(AddTensor(net, "wq", wq).ok());
    ASSERT_TRUE(AddTensor(net, "sw", sw).ok());
    ASSERT_TRUE(net.addOp("DequantizeLinear", "dqw", {"wq", "sw"}, {"wd"}, {{"axis", int64_t{1}}}).ok());
    ASSERT_TRUE(net.addOp("MatMul", "mm", {"xd", "wd"}, {"out"}).ok());
    ASSERT_TRUE(net.markOutput("out").ok());
    std::map<std::string, Tensor> inputs{{"x", testing::Random({4, 16}, 6, -1, 1)}};
    auto want = debug::RunNetwork(net, inputs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    Built b = Build(net);
    ASSERT_TRUE(b.engine) << b.status.ToString();
    EXPECT_EQ(b.report.op_counts.count("kiln.QMatMul"), 0u);
    const Tensor got = RunEngine(*b.engine, inputs, "out");
    EXPECT_LT(RelL2(got, want->at("out")), 1e-6);
  }
}

// A float MLP with a convolution in front: --fp8 with dynamic ranges makes float8 QMatMuls of both matrix products
// (weights per column, max |w| / 448) and leaves the convolution in float; the result stays near the float network.
void MakeFloatNet(NetworkDefinition& net) {
  ASSERT_TRUE(net.addInput("img", DataType::kFloat32, {2, 3, 6, 6}).ok());
  ASSERT_TRUE(AddTensor(net, "wc", testing::Random({4, 3, 3, 3}, 11, -0.4, 0.4)).ok());
  ASSERT_TRUE(AddTensor(net, "w1", testing::Random({64, 48}, 12, -0.3, 0.3)).ok());
  ASSERT_TRUE(AddTensor(net, "b1", testing::Random({48}, 13, -0.1, 0.1)).ok());
  ASSERT_TRUE(AddTensor(net, "w2", testing::Random({48, 10}, 14, -0.3, 0.3)).ok());
  ASSERT_TRUE(net.addOp("Conv", "conv", {"img", "wc"}, {"c"}, {{"pads", std::vector<int64_t>{0, 0, 0, 0}}}).ok());
  ASSERT_TRUE(net.addOp("Flatten", "flat", {"c"}, {"f"}).ok());
  ASSERT_TRUE(net.addOp("Gemm", "fc1", {"f", "w1", "b1"}, {"h"}).ok());
  ASSERT_TRUE(net.addOp("Relu", "relu", {"h"}, {"r"}).ok());
  ASSERT_TRUE(net.addOp("MatMul", "fc2", {"r", "w2"}, {"logits"}).ok());
  ASSERT_TRUE(net.markOutput("logits").ok());
}

TEST(Fp8, ImplicitFp8FromDynamicRanges) {
  NetworkDefinition net;
  MakeFloatNet(net);
  std::map<std::string, Tensor> inputs{{"img", testing::Random({2, 3, 6, 6}, 15, -1, 1)}};
  auto want = debug::RunNetwork(net, inputs, {"", true});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const char* t : {"img", "f", "r"}) {
    float amax = 0;
    for (float v : want->at(t).ToFloatVector()) amax = std::max(amax, std::fabs(v));
    ASSERT_TRUE(net.setDynamicRange(t, -amax, amax).ok());
  }
  Built b = Build(net, BuilderFlag::kFP8, true);
  ASSERT_TRUE(b.engine) << b.status.ToString();
  EXPECT_EQ(b.report.op_counts["kiln.QMatMul"], 2) << b.engine->getLayerInformationJson();
  EXPECT_EQ(b.report.op_counts.count("kiln.QConv"), 0u);
  EXPECT_EQ(b.report.op_counts.count("DequantizeLinear"), 0u);
  EXPECT_NE(b.engine->getLayerInformationJson().find("float8e4m3fn"), std::string::npos);
  const Tensor got = RunEngine(*b.engine, inputs, "logits");
  const double err = RelL2(got, want->at("logits"));
  EXPECT_LT(err, 0.1);
  EXPECT_GT(err, 0.0);  // it did quantize

  // --int8 and --fp8 together on a float network: refused, naming both.
  Built both = Build(net, BuilderFlag::kFP8, true, true);
  ASSERT_FALSE(both.status.ok());
  EXPECT_NE(both.status.message().find("--int8 and --fp8"), std::string::npos) << both.status.message();
}

}  // namespace
}  // namespace kiln
