// FoldQuantizedCasts: an INT8 layer's float32 output read only by Casts to float16 is written as float16 by the layer,
// and its float32 residual that is a Cast of a float16 value is read as float16 — with results equal to the bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "backends/cpu/executor.h"
#include "ops/infer.h"
#include "ops/op_def.h"
#include "ops/quantized_ops.h"
#include "plan/fold_quantized_casts.h"

namespace kiln {
namespace {

Tensor RandomTensor(DataType t, std::vector<int64_t> shape, uint32_t seed, double lo, double hi) {
  Tensor x(t, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < x.numel(); ++i) x.SetFromDouble(i, IsFloatType(t) ? u(rng) : std::round(u(rng)));
  return x;
}

struct Net {
  std::unique_ptr<Graph> g;
  std::map<std::string, Tensor> feeds;
};

// xq int8 [6, 32], h float16 [6, 16]:  y = QMatMul(xq, W, B, R = Cast<f32>(h));  out = Relu(Cast<f16>(y));
// hq = QuantizeLinear(Cast<f32>(h)) (the same Cast); a second QMatMul whose float32 output a Sigmoid reads (no
// Cast: it stays float32); a third whose residual is a float32 input (out3 = Cast<f16>: no fused float16 kernel
// reads a float32 residual, so it stays float32 too); and a LayerNormalization of h (float16) whose Y a Relu reads and
// QuantizeLinear(Cast<f32>(Y)) quantizes (lnq).
Net Make() {
  Net net;
  net.g = std::make_unique<Graph>();
  Graph& g = *net.g;
  g.opsets[""] = 21;
  auto input = [&](const char* name, DataType t, std::vector<int64_t> shape) {
    Value* v = g.GetOrAddValue(name);
    v->dtype = t;
    v->shape = FromStatic(shape);
    v->has_shape = true;
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  };
  Value* xq = input("xq", DataType::kInt8, {6, 32});
  Value* h = input("h", DataType::kFloat16, {6, 16});
  Value* r32 = input("r32", DataType::kFloat32, {6, 16});
  net.feeds["r32"] = RandomTensor(DataType::kFloat32, {6, 16}, 5, -3, 3);
  net.feeds["xq"] = RandomTensor(DataType::kInt8, {6, 32}, 1, -128, 127);
  net.feeds["h"] = RandomTensor(DataType::kFloat16, {6, 16}, 2, -3, 3);
  Value* w = g.AddConstant("w", RandomTensor(DataType::kInt8, {32, 16}, 3, -127, 127));
  Value* b = g.AddConstant("b", RandomTensor(DataType::kFloat32, {16}, 4, -1, 1));
  auto add = [&](const char* op, const char* domain, const char* name, std::vector<Value*> in, const char* out) {
    Node* n = g.AddNode(op, name);
    n->domain = domain;
    n->opset = 21;
    n->inputs = std::move(in);
    Value* o = g.GetOrAddValue(out);
    o->producer = n;
    n->outputs = {o};
    return n;
  };
  auto quantized = [&](Node* n) {
    n->attrs[quant_attrs::kXScale] = Attribute::Float(0.02f);
    n->attrs[quant_attrs::kWScales] = Attribute::Floats({0.003f});
  };
  add("Cast", "", "h_to_f32", {h}, "h32")->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat32));
  quantized(add("QMatMul", kKilnDomain, "qmm", {xq, w, b, g.FindValue("h32")}, "y"));
  add("Cast", "", "y_to_f16", {g.FindValue("y")}, "y16")->attrs["to"] =
      Attribute::Int(static_cast<int64_t>(DataType::kFloat16));
  add("Relu", "", "relu", {g.FindValue("y16")}, "out");
  quantized(add("QMatMul", kKilnDomain, "qmm_f32", {xq, w, b}, "z"));
  add("Sigmoid", "", "sigmoid", {g.FindValue("z")}, "out2");
  quantized(add("QMatMul", kKilnDomain, "qmm_res32", {xq, w, b, r32}, "v"));
  add("Cast", "", "v_to_f16", {g.FindValue("v")}, "out3")->attrs["to"] =
      Attribute::Int(static_cast<int64_t>(DataType::kFloat16));
  Tensor zp(DataType::kInt8, {});
  zp.SetFromDouble(0, 3);
  add("QuantizeLinear", "", "quantize", {g.FindValue("h32"), g.AddConstant("s", Tensor::Scalar(DataType::kFloat32, 0.0173)),
                                         g.AddConstant("zp", zp)}, "hq");
  Value* gamma = g.AddConstant("gamma", RandomTensor(DataType::kFloat16, {16}, 6, 0.5, 1.5));
  Value* beta = g.AddConstant("beta", RandomTensor(DataType::kFloat16, {16}, 7, -0.5, 0.5));
  add("LayerNormalization", "", "ln", {h, gamma, beta}, "ln_y");
  add("Relu", "", "ln_relu", {g.FindValue("ln_y")}, "ln_out");
  add("Cast", "", "ln_to_f32", {g.FindValue("ln_y")}, "ln_y32")->attrs["to"] =
      Attribute::Int(static_cast<int64_t>(DataType::kFloat32));
  Tensor zp2(DataType::kUInt8, {});
  zp2.SetFromDouble(0, 120);
  add("QuantizeLinear", "", "ln_quantize", {g.FindValue("ln_y32"), g.AddConstant("s2", Tensor::Scalar(DataType::kFloat32, 0.0119)),
                                            g.AddConstant("zp2", zp2)}, "lnq");
  for (const char* o : {"out", "out2", "hq", "out3", "ln_out", "lnq"}) {
    g.FindValue(o)->is_graph_output = true;
    g.outputs.push_back(g.FindValue(o));
  }
  EXPECT_TRUE(InferGraph(g, InferOptions{}).ok());
  return net;
}

const Node* Find(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n->name == name) return n.get();
  return nullptr;
}

TEST(FoldQuantizedCasts, OutputAndResidualCastsFoldAndResultsAreEqual) {
  Net before = Make(), after = Make();
  const QuantizedCastFolds f = FoldQuantizedCasts(*after.g, [](const Node&) { return true; });
  EXPECT_EQ(f.outputs, 1);
  EXPECT_EQ(f.residuals, 1);
  EXPECT_EQ(f.quantize_inputs, 2);
  EXPECT_EQ(f.norm_quantizes, 1);
  EXPECT_EQ(f.casts_removed, 3);
  EXPECT_EQ(Find(*after.g, "ln_quantize"), nullptr);
  ASSERT_NE(Find(*after.g, "ln"), nullptr);
  ASSERT_NE(Find(*after.g, "ln")->output(3), nullptr);
  EXPECT_EQ(Find(*after.g, "ln")->output(3)->name, "lnq");
  EXPECT_EQ(Find(*after.g, "quantize")->input(0)->name, "h");
  ASSERT_TRUE(InferGraph(*after.g, InferOptions{}).ok());
  const Node* q = Find(*after.g, "qmm");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->output(0)->dtype, DataType::kFloat16);
  EXPECT_EQ(q->input(3)->name, "h");
  EXPECT_EQ(Find(*after.g, "y_to_f16"), nullptr);
  EXPECT_EQ(Find(*after.g, "h_to_f32"), nullptr);
  const Node* q2 = Find(*after.g, "qmm_f32");  // read by a Sigmoid: unchanged
  ASSERT_NE(q2, nullptr);
  EXPECT_EQ(q2->output(0)->dtype, DataType::kFloat32);
  EXPECT_EQ(Find(*after.g, "qmm_res32")->output(0)->dtype, DataType::kFloat32);
  EXPECT_NE(Find(*after.g, "v_to_f16"), nullptr);
  auto want = cpu::RunGraph(*before.g, before.feeds);
  auto got = cpu::RunGraph(*after.g, after.feeds);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const char* o : {"out", "out2", "hq", "out3", "ln_out", "lnq"}) {
    const Tensor &a = want->at(o), &b = got->at(o);
    ASSERT_EQ(a.dtype(), b.dtype());
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << o;
  }
}

TEST(FoldQuantizedCasts, NothingFoldsWhereTheBackendDeclines) {
  Net net = Make();
  const QuantizedCastFolds f = FoldQuantizedCasts(*net.g, [](const Node&) { return false; });
  EXPECT_EQ(f.outputs, 0);
  EXPECT_NE(Find(*net.g, "y_to_f16"), nullptr);
  EXPECT_EQ(Find(*net.g, "qmm")->output(0)->dtype, DataType::kFloat32);
}

}  // namespace
}  // namespace kiln
