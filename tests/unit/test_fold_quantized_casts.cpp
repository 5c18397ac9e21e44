// FoldQuantizedCasts: an INT8 layer's float32 output read only by Casts to float16 is written as float16 by the layer,
// and its float32 residual that is a Cast of a float16 value is read as float16 — with results equal to the bit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "ops/op_def.h"
#include "ops/quantized_ops.h"
#include "plan/fold_quantized_casts.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::Random;
using testing::TestGraph;

// xq int8 [6, 32], h float16 [6, 16]:  y = QMatMul(xq, W, B, R = Cast<f32>(h));  out = Relu(Cast<f16>(y));
// hq = QuantizeLinear(Cast<f32>(h)) (the same Cast); a second QMatMul whose float32 output a Sigmoid reads (no
// Cast: it stays float32); a third whose residual is a float32 input (Cast<f16> of it: no fused float16 kernel
// reads a float32 residual, so it stays float32 too); and a LayerNormalization of h (float16) whose Y a Relu reads and
// QuantizeLinear(Cast<f32>(Y)) quantizes; a second one whose Y only a float8 QuantizeLinear(Cast<f32>(Y)) reads;
// attentions (below) likewise.
// Nodes are named as below; a node's output is "<name>_out".
std::unique_ptr<TestGraph> Make() {
  auto t = std::make_unique<TestGraph>();
  t->opset = 21;
  t->g.opsets[""] = 21;
  Value* xq = t->Input("xq", {6, 32}, DataType::kInt8, -128, 127);
  Value* h = t->Input("h", {6, 16}, DataType::kFloat16, -3, 3);
  Value* r32 = t->Input("r32", {6, 16}, DataType::kFloat32, -3, 3);
  Value* w = t->g.AddConstant("w", Random({32, 16}, 3, -127, 127, DataType::kInt8));
  Value* b = t->g.AddConstant("b", Random({16}, 4));
  const std::map<std::string, Attribute> to_f32 = {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat32))}};
  const std::map<std::string, Attribute> to_f16 = {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat16))}};
  const std::map<std::string, Attribute> quantized = {{quant_attrs::kXScale, Attribute::Float(0.02f)},
                                                      {quant_attrs::kWScales, Attribute::Floats({0.003f})}};
  auto qmm = [&](const char* name, std::vector<Value*> in) {
    return t->OpNode("QMatMul", name, std::move(in), quantized, 1, kKilnDomain)->outputs[0];
  };
  auto scalar = [&](const char* name, DataType dt, double v) { return t->g.AddConstant(name, Tensor::Scalar(dt, v)); };
  Value* h32 = t->Op("Cast", "h_to_f32", {h}, to_f32);
  Value* y16 = t->Op("Cast", "y_to_f16", {qmm("qmm", {xq, w, b, h32})}, to_f16);
  t->Output(t->Op("Relu", "relu", {y16}));
  t->Output(t->Op("Sigmoid", "sigmoid", {qmm("qmm_f32", {xq, w, b})}));
  t->Output(t->Op("Cast", "v_to_f16", {qmm("qmm_res32", {xq, w, b, r32})}, to_f16));
  t->Output(t->Op("QuantizeLinear", "quantize",
                  {h32, scalar("s", DataType::kFloat32, 0.0173), scalar("zp", DataType::kInt8, 3)}));
  Value* ln_y = t->Op("LayerNormalization", "ln",
                      {h, t->g.AddConstant("gamma", Random({16}, 6, 0.5, 1.5, DataType::kFloat16)),
                       t->g.AddConstant("beta", Random({16}, 7, -0.5, 0.5, DataType::kFloat16))});
  t->Output(t->Op("Relu", "ln_relu", {ln_y}));
  t->Output(t->Op("QuantizeLinear", "ln_quantize",
                  {t->Op("Cast", "ln_to_f32", {ln_y}, to_f32), scalar("s2", DataType::kFloat32, 0.0119),
                   scalar("zp2", DataType::kUInt8, 120)}));
  Value* ln8_y = t->Op("LayerNormalization", "ln8", {h, t->g.FindValue("gamma"), t->g.FindValue("beta")});
  t->Output(t->Op("QuantizeLinear", "ln8_quantize",
                  {t->Op("Cast", "ln8_to_f32", {ln8_y}, to_f32), scalar("s3", DataType::kFloat32, 0.0071),
                   t->g.AddConstant("zp3", Tensor(DataType::kFloat8E4M3FN, {}))}));
  // kiln.Attention (float16) whose Y only QuantizeLinear(Cast<f32>(Y)) reads: int8 with a zero point, and float8;
  // a third whose Y a Relu reads too (it keeps writing float16).
  Value* q4 = t->Input("q4", {2, 2, 6, 8}, DataType::kFloat16, -2, 2);
  Value* k4 = t->Input("k4", {2, 2, 6, 8}, DataType::kFloat16, -2, 2);
  Value* v4 = t->Input("v4", {2, 2, 6, 8}, DataType::kFloat16, -2, 2);
  auto attention = [&](const char* name) {
    return t->OpNode("Attention", name, {q4, k4, v4}, {{"scale", Attribute::Float(0.35f)}}, 1, kKilnDomain)->outputs[0];
  };
  t->Output(t->Op("QuantizeLinear", "at_quantize",
                  {t->Op("Cast", "at_to_f32", {attention("at")}, to_f32), scalar("s4", DataType::kFloat32, 0.0093),
                   scalar("zp4", DataType::kInt8, -3)}));
  t->Output(t->Op("QuantizeLinear", "at8_quantize",
                  {t->Op("Cast", "at8_to_f32", {attention("at8")}, to_f32), scalar("s5", DataType::kFloat32, 0.0031),
                   t->g.AddConstant("zp5", Tensor(DataType::kFloat8E4M3FN, {}))}));
  Value* shared = attention("at_shared");
  t->Output(t->Op("Relu", "at_relu", {shared}));
  t->Output(t->Op("QuantizeLinear", "at_shared_quantize",
                  {t->Op("Cast", "at_shared_to_f32", {shared}, to_f32), scalar("s6", DataType::kFloat32, 0.01)}));
  t->Finish(false);
  return t;
}

TEST(FoldQuantizedCasts, OutputAndResidualCastsFoldAndResultsAreEqual) {
  auto before = Make(), after = Make();
  const QuantizedCastFolds f = FoldQuantizedCasts(after->g, [](const Node&) { return true; });
  EXPECT_EQ(f.outputs, 1);
  EXPECT_EQ(f.residuals, 1);
  EXPECT_EQ(f.quantize_inputs, 6);
  EXPECT_EQ(f.norm_quantizes, 2);
  EXPECT_EQ(f.attention_quantizes, 2);
  EXPECT_EQ(f.casts_removed, 7);
  EXPECT_FALSE(after->Has("at_quantize"));
  EXPECT_EQ(after->Named("at")->output(0)->name, "at_quantize_out");
  EXPECT_EQ(after->Named("at")->output(0)->dtype, DataType::kInt8);
  EXPECT_EQ(after->Named("at8")->output(0)->dtype, DataType::kFloat8E4M3FN);
  ASSERT_TRUE(after->Has("at_shared_quantize"));  // Y has another reader: the attention writes float16
  EXPECT_EQ(after->Named("at_shared")->output(0)->dtype, DataType::kFloat16);
  EXPECT_FALSE(after->Has("ln8_quantize"));
  ASSERT_NE(after->Named("ln8")->output(3), nullptr);
  EXPECT_EQ(after->Named("ln8")->output(3)->dtype, DataType::kFloat8E4M3FN);
  EXPECT_FALSE(after->Has("ln_quantize"));
  ASSERT_TRUE(after->Has("ln"));
  ASSERT_NE(after->Named("ln")->output(3), nullptr);
  EXPECT_EQ(after->Named("ln")->output(3)->name, "ln_quantize_out");
  EXPECT_EQ(after->Named("quantize")->input(0)->name, "h");
  ASSERT_TRUE(InferGraph(after->g, InferOptions{}).ok());
  const Node* q = after->Named("qmm");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->output(0)->dtype, DataType::kFloat16);
  EXPECT_EQ(q->input(3)->name, "h");
  EXPECT_FALSE(after->Has("y_to_f16"));
  EXPECT_FALSE(after->Has("h_to_f32"));
  ASSERT_TRUE(after->Has("qmm_f32"));  // read by a Sigmoid: unchanged
  EXPECT_EQ(after->Named("qmm_f32")->output(0)->dtype, DataType::kFloat32);
  EXPECT_EQ(after->Named("qmm_res32")->output(0)->dtype, DataType::kFloat32);
  EXPECT_TRUE(after->Has("v_to_f16"));
  const auto want = before->Run(), got = after->Run();
  ASSERT_EQ(want.size(), 11u);
  for (const auto& [name, a] : want) {
    const Tensor& b = got.at(name);
    ASSERT_EQ(a.dtype(), b.dtype()) << name;
    ASSERT_EQ(a.nbytes(), b.nbytes()) << name;
    if (name == "at_quantize_out" || name == "at8_quantize_out") {
      // The attention scales by the float reciprocal of the scale (ops/quantized_ops.h), QuantizeLinear divides: a
      // code may move one step where the quotient lies within a rounding of a tie.
      const auto* x = static_cast<const uint8_t*>(a.raw());
      const auto* y = static_cast<const uint8_t*>(b.raw());
      int64_t apart = 0;
      for (size_t i = 0; i < a.nbytes(); ++i) {
        const int d = a.dtype() == DataType::kInt8 ? static_cast<int8_t>(x[i]) - static_cast<int8_t>(y[i]) : x[i] - y[i];
        EXPECT_LE(std::abs(d), 1) << name << " element " << i;
        apart += d != 0;
      }
      EXPECT_LE(apart, a.numel() / 100) << name;
      continue;
    }
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << name;
  }
}

TEST(FoldQuantizedCasts, NothingFoldsWhereTheBackendDeclines) {
  auto t = Make();
  const QuantizedCastFolds f = FoldQuantizedCasts(t->g, [](const Node&) { return false; });
  EXPECT_EQ(f.outputs, 0);
  EXPECT_TRUE(t->Has("y_to_f16"));
  EXPECT_EQ(t->Named("qmm")->output(0)->dtype, DataType::kFloat32);
}

}  // namespace
}  // namespace kiln
