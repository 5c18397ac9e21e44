// Differential tests of the INT8 layers (kiln.QConv, kiln.QMatMul) against the CPU reference on random data and odd
// shapes: int8/uint8 inputs with zero points, per-tensor and per-channel weight scales, bias, residual, activations,
// groups, strides, dilations, pads (auto_pad too), 1 to 3 spatial dims. Requantized outputs must match exactly (the
// epilogue's float arithmetic is the reference's); float outputs within float rounding.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

std::vector<float> Scales(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.002f, 0.02f);
  std::vector<float> s(static_cast<size_t>(n));
  for (auto& v : s) v = u(rng);
  return s;
}

struct QCase {
  bool conv = true;
  Shape x, w;  // conv: W [M, C/g, k...]; matmul: W [K, N]
  DataType x_type = DataType::kInt8;
  int64_t x_zero_point = 0;
  bool per_channel = true, bias = true, residual = false;
  std::string act = "None";
  DataType y_type = DataType::kInt8;
  std::map<std::string, Attribute> attrs;  // conv attributes
  Shape y;  // the output's shape (for the residual)
  uint32_t seed = 1;
  std::string tactic;  // empty: the layer's first
  int64_t y_zero_point = 0;  // 8-bit output's; 0 below means the default (uint8: 17, int8: -3)
  bool nhwc = false;         // kiln_layout = "NHWC": x [N,H,W,C], y and the residual [N,P,Q,K]
  bool symmetric_y = false;  // int8 output with zero point 0
  bool residual_int8 = false;  // the residual is int8 with kiln_r_scale
  double one_off = 0;          // the fraction of integer outputs that may be one step off (OneNode::IntegersOneOff)
  bool residual_f16 = false;   // a float16 residual (read exactly)
};

::testing::AssertionResult RunCase(const QCase& c, double atol = 0, double rtol = 0) {
  OneNode node(c.conv ? "QConv" : "QMatMul", "kiln");
  const bool fp8 = c.x_type == DataType::kFloat8E4M3FN;
  const double lo = c.x_type == DataType::kUInt8 ? 0 : fp8 ? -12 : -128;
  const double hi = c.x_type == DataType::kUInt8 ? 255 : fp8 ? 12 : 127;
  node.Input(Random(c.x_type, c.x, c.seed, lo, hi));
  if (fp8) node.Const(Random(DataType::kFloat8E4M3FN, c.w, c.seed + 1, -3, 3));
  else node.Const(Random(DataType::kInt8, c.w, c.seed + 1, -127, 127));
  const int64_t channels = c.conv ? c.w[0] : c.w[1];
  if (c.bias) node.Const(Random(DataType::kFloat32, {channels}, c.seed + 2, -1, 1));
  else if (c.residual) node.Omitted();
  if (c.residual && c.residual_int8) node.Input(Random(DataType::kInt8, c.y, c.seed + 3, -128, 127));
  else if (c.residual) node.Input(Random(c.residual_f16 ? DataType::kFloat16 : DataType::kFloat32, c.y, c.seed + 3, -2, 2));
  if (c.residual_int8) node.Attr("kiln_r_scale", Attribute::Float(0.017f));
  for (const auto& [k, v] : c.attrs) node.Attr(k, v);
  node.Attr("kiln_x_scale", Attribute::Float(0.013f));
  node.Attr("kiln_x_zero_point", Attribute::Int(c.x_zero_point));
  node.Attr("kiln_w_scales", Attribute::Floats(Scales(c.per_channel ? channels : 1, c.seed + 4)));
  node.Attr("kiln_activation", Attribute::String(c.act));
  node.Attr("kiln_activation_alpha", Attribute::Float(c.act == "Clip" ? -0.5f : 0.1f));
  node.Attr("kiln_activation_beta", Attribute::Float(c.act == "Clip" ? 3.f : 0.f));
  node.Attr("kiln_y_type", Attribute::Int(static_cast<int64_t>(c.y_type)));
  if (!IsFloatType(c.y_type) || c.y_type == DataType::kFloat8E4M3FN) {
    node.Attr("kiln_y_scale", Attribute::Float(0.05f));
    const int64_t zp = c.symmetric_y || fp8                    ? 0
                       : c.y_zero_point != 0                   ? c.y_zero_point
                       : c.y_type == DataType::kUInt8 ? 17 : -3;
    node.Attr("kiln_y_zero_point", Attribute::Int(zp));
  }
  if (c.nhwc) node.Attr("kiln_layout", Attribute::String("NHWC"));
  if (!c.tactic.empty()) node.Tactic(c.tactic);
  if (c.one_off > 0) node.IntegersOneOff(c.one_off);
  return node.MatchesCpu(atol, rtol);
}

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }

TEST(GpuQuantized, ConvRequantizedMatchesExactly) {
  QCase c;
  c.x = {2, 5, 9, 7};
  c.w = {6, 5, 3, 3};
  c.attrs = {{"pads", Ints({1, 1, 1, 1})}};
  c.act = "Relu";
  EXPECT_TRUE(RunCase(c));
  c.x_type = DataType::kUInt8;  // asymmetric uint8 input, uint8 output, per-tensor weights, strided, dilated
  c.x_zero_point = 121;
  c.y_type = DataType::kUInt8;
  c.per_channel = false;
  c.attrs = {{"pads", Ints({2, 1, 0, 2})}, {"strides", Ints({2, 1})}, {"dilations", Ints({2, 1})}};
  c.seed = 7;
  EXPECT_TRUE(RunCase(c));
}

TEST(GpuQuantized, ConvGroupsDepthwiseAndAutoPad) {
  QCase c;
  c.x = {1, 8, 11, 13};
  c.w = {8, 1, 3, 3};  // depthwise
  c.attrs = {{"group", Attribute::Int(8)}, {"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Ints({2, 2})}};
  c.x_zero_point = -5;
  EXPECT_TRUE(RunCase(c));
  c.w = {12, 2, 1, 1};  // grouped 1x1, 4 groups
  c.attrs = {{"group", Attribute::Int(4)}};
  c.seed = 3;
  EXPECT_TRUE(RunCase(c));
}

TEST(GpuQuantized, ConvFloatOutputWithResidualAndActivations) {
  for (const char* act : {"None", "Sigmoid", "LeakyRelu", "Clip", "SiLU", "GeluTanh"}) {
    QCase c;
    c.x = {2, 4, 6, 6};
    c.w = {5, 4, 3, 3};
    c.attrs = {{"pads", Ints({1, 1, 1, 1})}};
    c.y_type = DataType::kFloat32;
    c.residual = true;
    c.y = {2, 5, 6, 6};
    c.act = act;
    EXPECT_TRUE(RunCase(c, 1e-5, 1e-5)) << act;
  }
}

TEST(GpuQuantized, Conv1dAnd3d) {
  QCase c;
  c.x = {3, 4, 17};
  c.w = {7, 4, 5};
  c.attrs = {{"pads", Ints({2, 1})}, {"strides", Ints({3})}};
  EXPECT_TRUE(RunCase(c));
  c.x = {1, 3, 5, 6, 7};
  c.w = {4, 3, 3, 2, 3};
  c.attrs = {{"pads", Ints({1, 0, 1, 1, 1, 0})}};
  c.seed = 11;
  EXPECT_TRUE(RunCase(c));
}

TEST(GpuQuantized, ConvLargerThanOneTile) {
  QCase c;
  c.x = {2, 67, 20, 19};  // K = 603 (not a multiple of 32), 380 positions, 70 channels
  c.w = {70, 67, 3, 3};
  c.attrs = {{"pads", Ints({1, 1, 1, 1})}};
  c.bias = false;
  EXPECT_TRUE(RunCase(c));
}

TEST(GpuQuantized, MatMul) {
  QCase c;
  c.conv = false;
  c.x = {2, 3, 37};
  c.w = {37, 29};
  c.act = "Relu";
  EXPECT_TRUE(RunCase(c));
  c.x = {130, 70};  // uint8 with zero point, per-tensor weights, uint8 out
  c.w = {70, 66};
  c.x_type = DataType::kUInt8;
  c.x_zero_point = 128;
  c.y_type = DataType::kUInt8;
  c.per_channel = false;
  c.seed = 5;
  EXPECT_TRUE(RunCase(c));
  c.x = {5, 33};  // float out, bias and residual, GELU
  c.w = {33, 64};
  c.x_type = DataType::kInt8;
  c.x_zero_point = 3;
  c.y_type = DataType::kFloat32;
  c.residual = true;
  c.y = {5, 64};
  c.act = "Gelu";
  EXPECT_TRUE(RunCase(c, 1e-5, 1e-5));
}

}  // namespace
}  // namespace kiln::gputest

namespace kiln::gputest {
namespace {

// int8 inputs with K and N multiples of 4 run on cuBLASLt's int8 tensor cores (the graph runner takes the first
// tactic, a cuBLASLt algorithm), the epilogue after: zero points (the weight column sums' share), per-tensor and
// per-channel scales, bias, residual, float and requantized outputs. The tiled kernel runs the same for comparison.
TEST(GpuQuantized, MatMulOnInt8TensorCores) {
  for (const char* tactic : {"", "int8-tiled"}) {
    SCOPED_TRACE(*tactic ? tactic : "first tactic (cuBLASLt)");
    QCase c;
    c.conv = false;
    c.x = {96, 64};
    c.w = {64, 128};
    c.act = "Relu";
    c.tactic = tactic;
    EXPECT_TRUE(RunCase(c));
    c.x = {3, 40, 256};  // zero point, float out with residual
    c.w = {256, 96};
    c.x_zero_point = -9;
    c.y_type = DataType::kFloat32;
    c.residual = true;
    c.y = {3, 40, 96};
    c.act = "GeluTanh";
    c.seed = 21;
    EXPECT_TRUE(RunCase(c, 1e-5, 1e-5));
    c.x = {1, 768};  // a decode-shaped row, per-tensor weights, int8 out with zero point
    c.w = {768, 2304};
    c.per_channel = false;
    c.y_type = DataType::kInt8;
    c.residual = false;
    c.x_zero_point = 4;
    c.act = "None";
    c.seed = 22;
    EXPECT_TRUE(RunCase(c));
  }
}

}  // namespace
}  // namespace kiln::gputest

namespace kiln::gputest {
namespace {

// A compute capability 9.0 device, and a build with the int8-sm90 tactics (CUTLASS found when configured).
bool ComputeCapability90() {
#if !defined(KILN_HAVE_CUTLASS_SM90)
  return false;
#endif
  int device = 0, major = 0, minor = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 &&
         minor == 0;
}

// NHWC QConv (as layout planning leaves it) on the Hopper int8 tensor-core tactics, both tiles, and on the tiled
// kernel: int8 and float outputs, residual, Relu / Clip / none, strides, dilations, pads, 1x1, partial tiles in
// every dimension. The epilogue rounds each float step as the CPU does, so both outputs must match exactly.
TEST(GpuQuantized, ConvNhwcOnInt8TensorCores) {
  std::vector<std::string> tactics = {"int8-tiled"};
  if (ComputeCapability90())
    tactics = {"int8-sm90-128x128x128", "int8-sm90-128x64x128", "int8-sm90-128x128x64", "int8-sm90-128x64x64",
               "int8-sm90-gemm-128x128", "int8-sm90-gemm-128x64", "int8-sm90-gemm-256x128", "int8-tiled"};
  for (const std::string& tactic : tactics) {
    SCOPED_TRACE(tactic);
    const bool gemm = tactic.find("gemm") != std::string::npos;  // 1x1, stride 1, unpadded only
    QCase c;
    c.nhwc = true;
    c.symmetric_y = true;
    c.tactic = tactic;
    if (!gemm) {
      c.x = {2, 9, 7, 32};  // 3x3, pad 1, Relu, int8 out
      c.w = {48, 32, 3, 3};
      c.attrs = {{"pads", Ints({1, 1, 1, 1})}};
      c.act = "Relu";
      EXPECT_TRUE(RunCase(c));
      c.x = {3, 11, 10, 16};  // strided and dilated, float out with a residual, Clip, 20 channels
      c.w = {20, 16, 3, 3};
      c.attrs = {{"pads", Ints({2, 1, 2, 1})}, {"strides", Ints({2, 2})}, {"dilations", Ints({2, 1})}};
      c.y_type = DataType::kFloat32;
      c.residual = true;
      c.y = {3, 6, 5, 20};
      c.act = "Clip";
      c.seed = 31;
      EXPECT_TRUE(RunCase(c));
    }
    c.x = {4, 14, 13, 64};  // 1x1 to 272 channels, int8 out with a residual, per-tensor weights, no bias
    c.w = {272, 64, 1, 1};
    c.attrs = {};
    c.y_type = DataType::kInt8;
    c.residual = true;
    c.y = {4, 14, 13, 272};
    c.per_channel = false;
    c.bias = false;
    c.act = "None";
    c.seed = 32;
    EXPECT_TRUE(RunCase(c));
    c.residual_int8 = true;  // the same with an int8 residual (ResNet's blocks in implicit INT8), Relu
    c.act = "Relu";
    EXPECT_TRUE(RunCase(c));
    c.y_type = DataType::kFloat32;  // float out, int8 residual
    EXPECT_TRUE(RunCase(c));
    c.residual_int8 = false;
    c.x = {3, 7, 9, 48};  // 1x1, float out, Relu, 36 channels (189 rows: partial tiles)
    c.w = {36, 48, 1, 1};
    c.y_type = DataType::kFloat32;
    c.residual = false;
    c.per_channel = true;
    c.bias = true;
    c.act = "Relu";
    c.seed = 34;
    EXPECT_TRUE(RunCase(c));
    if (!gemm) {
      c.x = {1, 5, 3, 144};  // 7x7 window larger than the image, K = 7056
      c.w = {16, 144, 7, 7};
      c.attrs = {{"pads", Ints({3, 3, 3, 3})}};
      c.y_type = DataType::kInt8;
      c.seed = 33;
      EXPECT_TRUE(RunCase(c));
    }
  }
}

// A float16 output (the precision planner's Cast folded into the layer) with no residual or a float16 one, on every
// tactic: the Hopper GEMM's tiles where the device has them, cuBLASLt (the first tactic elsewhere) and the tiled
// kernel. The float32 value is the CPU's to the bit; its float16 rounding is then the same.
TEST(GpuQuantized, MatMulFloat16OutputAndResidualOnEveryTactic) {
  std::vector<std::string> tactics = {"", "int8-tiled"};
#if defined(KILN_HAVE_CUTLASS_SM90)
  int device = 0, major = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major == 9)
    tactics.insert(tactics.end(), {"int8-sm90-gemm-128x128", "int8-sm90-gemm-128x64", "int8-sm90-gemm-256x128"});
#endif
  for (const std::string& tactic : tactics) {
    SCOPED_TRACE(tactic.empty() ? "first tactic" : tactic);
    QCase c;
    c.conv = false;
    c.tactic = tactic;
    c.y_type = DataType::kFloat16;
    c.x = {3, 67, 768};  // BERT's QKV shape: no residual
    c.w = {768, 2304};
    EXPECT_TRUE(RunCase(c, 0, 0));
    c.x = {200, 3072};  // BERT's FFN output: float16 residual, Relu
    c.w = {3072, 768};
    c.residual = true;
    c.residual_f16 = true;
    c.y = {200, 768};
    c.act = "Relu";
    c.seed = 51;
    EXPECT_TRUE(RunCase(c, 0, 0));
  }
}

// QMatMul on the Hopper GEMM with the epilogue fused (every tile), against the CPU: int8 and float outputs,
// residual, Relu / Clip / GELU, rows that fill no tile.
TEST(GpuQuantized, MatMulOnHopperFusedGemm) {
  if (!ComputeCapability90())
    GTEST_SKIP() << "the int8-sm90 tactics need a compute capability 9.0 GPU and a build with CUTLASS";
  for (const char* tactic : {"int8-sm90-gemm-128x128", "int8-sm90-gemm-128x64", "int8-sm90-gemm-256x128"}) {
    SCOPED_TRACE(tactic);
    QCase c;
    c.conv = false;
    c.symmetric_y = true;
    c.tactic = tactic;
    c.x = {3, 67, 768};  // BERT-shaped, int8 out, Relu
    c.w = {768, 3072};
    c.act = "Relu";
    EXPECT_TRUE(RunCase(c));
    c.act = "Gelu";  // BERT's FFN: GELU, int8 out (its erf, within 1e-6 (GeluErf), may put a rare tie one step off)
    c.one_off = 1e-3;
    EXPECT_TRUE(RunCase(c));
    c.one_off = 0;
    c.x = {200, 3072};  // float out with a residual, Clip, per-tensor weights
    c.w = {3072, 768};
    c.y_type = DataType::kFloat32;
    c.residual = true;
    c.y = {200, 768};
    c.act = "Clip";
    c.per_channel = false;
    c.seed = 41;
    EXPECT_TRUE(RunCase(c));
    c.residual_int8 = true;  // int8 out, int8 residual
    c.y_type = DataType::kInt8;
    EXPECT_TRUE(RunCase(c));
    c.residual_int8 = false;
    c.x = {1, 32};  // one row, 20 columns, no bias, float out
    c.y_type = DataType::kFloat32;
    c.w = {32, 20};
    c.residual = false;
    c.bias = false;
    c.act = "None";
    c.seed = 42;
    EXPECT_TRUE(RunCase(c));
  }
}

// FP8 QMatMul (float8e4m3fn x and weight) on the Hopper GEMM's tiles where the device has them (the tensor cores'
// fast accumulation) and on the tiled kernel (float32 sums), against the CPU (OpenBLAS sums: another order). Float
// outputs within the accumulations' rounding (on the tensor cores up to about 1e-3 of the terms' size at K = 3072),
// float16 within one float16 rounding more, float8 outputs to the code, or one code apart for a few.
TEST(GpuQuantized, Fp8MatMulOnEveryTactic) {
  std::vector<std::string> tactics = {"fp8-tiled"};
  if (ComputeCapability90())
    tactics.insert(tactics.end(), {"fp8-sm90-gemm-128x128", "fp8-sm90-gemm-128x64", "fp8-sm90-gemm-256x128"});
  for (const std::string& tactic : tactics) {
    SCOPED_TRACE(tactic);
    QCase c;
    c.conv = false;
    c.x_type = DataType::kFloat8E4M3FN;
    c.tactic = tactic;
    c.x = {3, 67, 768};  // BERT's QKV: float16 out, no residual
    c.w = {768, 2304};
    c.y_type = DataType::kFloat16;
    EXPECT_TRUE(RunCase(c, 1e-3, 2e-3));
    c.act = "Gelu";  // BERT's FFN1: GELU, float8 out
    c.w = {768, 3072};
    c.y_type = DataType::kFloat8E4M3FN;
    c.one_off = 0.01;
    c.seed = 61;
    EXPECT_TRUE(RunCase(c));
    c.act = "Relu";
    EXPECT_TRUE(RunCase(c));
    c.one_off = 0;
    c.x = {200, 3072};  // BERT's FFN2: float16 out with a float16 residual
    c.w = {3072, 768};
    c.act = "None";
    c.y_type = DataType::kFloat16;
    c.residual = true;
    c.residual_f16 = true;
    c.y = {200, 768};
    c.seed = 62;
    EXPECT_TRUE(RunCase(c, 3e-3, 3e-3));  // K = 3072 (measured: 1.3e-3 at worst on an H200)
    c.residual_f16 = false;  // float32 out and residual, Clip, per-tensor weight scale
    c.y_type = DataType::kFloat32;
    c.act = "Clip";
    c.per_channel = false;
    c.seed = 63;
    EXPECT_TRUE(RunCase(c, 3e-3, 3e-3));
  }
  // Odd shapes (no tensor-core tile takes them): the tiled kernel, float8 and float32 outputs.
  QCase c;
  c.conv = false;
  c.x_type = DataType::kFloat8E4M3FN;
  c.tactic = "fp8-tiled";
  c.x = {5, 37};
  c.w = {37, 21};
  c.y_type = DataType::kFloat8E4M3FN;
  c.act = "Relu";
  c.one_off = 0.02;
  EXPECT_TRUE(RunCase(c));
  c.y_type = DataType::kFloat32;
  c.bias = false;
  c.one_off = 0;
  EXPECT_TRUE(RunCase(c, 1e-5, 1e-5));
}

// QuantizeLinear-23's precision (x, the scale and x / scale rounded to it) and DequantizeLinear-23's output_dtype,
// and a float16 x with a float32 scale (a float32 division), against the CPU: exact.
TEST(GpuQuantized, QuantizeLinearPrecisionAndDequantizeOutputDtype) {
  EXPECT_TRUE(OneNode("QuantizeLinear")
                  .Input(Random(DataType::kFloat32, {1000}, 7, -2000, 2000))
                  .Const(Tensor::Scalar(DataType::kFloat32, 0.37))
                  .Const(Tensor(DataType::kInt16, {}))
                  .Attr("precision", Attribute::Int(10))
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("QuantizeLinear")
                  .Input(Random(DataType::kFloat16, {1000}, 8, -60, 60))
                  .Const(Tensor::Scalar(DataType::kFloat32, 0.37))
                  .Const(Tensor(DataType::kInt8, {}))
                  .MatchesCpu(0, 0));
  for (int64_t out : {int64_t{10}, int64_t{16}})
    EXPECT_TRUE(OneNode("DequantizeLinear")
                    .Input(Random(DataType::kInt8, {1000}, 9, -128, 127))
                    .Const(Tensor::Scalar(DataType::kFloat32, 1.0009765625))
                    .Attr("output_dtype", Attribute::Int(out))
                    .MatchesCpu(0, 0));
}

}  // namespace
}  // namespace kiln::gputest
