// Layout planning (src/plan/layout.h): small conv nets are rewritten to channels-last (NHWC) as the cuda build
// does after precision planning, then run on the CPU reference: outputs must equal the original graph's, and
// the reformats (NCHW <-> NHWC Transposes) must be few: one at the input of a conv stack, one where a layer
// that needs NCHW reads it. CPU only.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "plan/layout.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

struct Net : testing::TestGraph {
  explicit Net(DataType t) { dt = t; }
  Value* Const(std::vector<int64_t> dims, double scale = 0.5) {
    return TestGraph::Const("w", std::move(dims), -scale, scale);
  }
  Value* Op(const std::string& op, std::vector<Value*> ins, std::map<std::string, Attribute> attrs = {},
            const std::string& domain = "") {
    return OpNode(op, op + std::to_string(g.nodes().size()), std::move(ins), std::move(attrs), 1, domain)->outputs[0];
  }
  // Conv k x k (pads k/2), optional bias, optionally fused with Relu (kiln.FusedConv).
  Value* Conv(Value* x, int64_t cin, int64_t cout, int64_t k, bool relu, int64_t stride = 1) {
    std::map<std::string, Attribute> a = {{"kernel_shape", Attribute::Ints({k, k})},
                                          {"pads", Attribute::Ints({k / 2, k / 2, k / 2, k / 2})},
                                          {"strides", Attribute::Ints({stride, stride})}};
    std::vector<Value*> ins = {x, Const({cout, cin, k, k}), Const({cout}, 0.1)};
    if (!relu) return Op("Conv", ins, a);
    a["kiln_activation"] = Attribute::String("Relu");
    return Op("FusedConv", ins, a, "kiln");
  }
  void Infer() { testing::Reinfer(g); }
  int CountNhwc() const {
    int c = 0;
    for (const auto& n : g.nodes()) c += n->gets("kiln_layout", "") == "NHWC";
    return c;
  }
  // Runs, plans the layout, re-infers, runs again: outputs must match. Returns the report.
  LayoutReport PlanAndCompare(const LayoutOptions& o, double tol) {
    Infer();
    const auto before = Run();
    auto r = AssignLayout(g, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    Infer();
    const auto after = Run();
    SCOPED_TRACE(PrintGraph(g));
    testing::ExpectSameOutputs(before, after, tol, tol);  // |x - y| <= tol * (1 + |x|)
    return *r;
  }
};

TEST(LayoutPlan, PermuteTensorMovesAxes) {
  Tensor t = Tensor::FromFloat({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {1, 3, 2, 2});
  Tensor p = PermuteTensor(t, {0, 2, 3, 1});
  ASSERT_EQ(p.shape(), (std::vector<int64_t>{1, 2, 2, 3}));
  const float want[] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(p.GetAsDouble(i), want[i]);
  Tensor back = PermuteTensor(p, {0, 3, 1, 2});
  for (int i = 0; i < 12; ++i) EXPECT_EQ(back.GetAsDouble(i), i);
}

// conv-relu-conv-add-relu (a per-channel scale, a channel concat) -maxpool-gap-flatten-gemm: one reformat (the
// input), the GAP result reaches Flatten through a free Reshape.
TEST(LayoutPlan, ConvStackToGemmTailHasOneReformat) {
  for (DataType dt : {DataType::kFloat16, DataType::kFloat32}) {
    SCOPED_TRACE(DataTypeName(dt));
    Net t(dt);
    Value* x = t.Input("x", {2, 3, 9, 11});
    Value* a = t.Conv(x, 3, 8, 3, true);
    Value* b = t.Conv(a, 8, 8, 3, false);
    Value* s = t.Op("Mul", {b, t.Const({8, 1, 1})});  // per-channel constant
    Value* r = t.Op("Relu", {t.Op("Add", {s, a})});
    Value* c = t.Op("Concat", {r, a}, {{"axis", Attribute::Int(1)}});
    Value* p = t.Op("MaxPool", {c}, {{"kernel_shape", Attribute::Ints({3, 3})},
                                     {"strides", Attribute::Ints({2, 2})},
                                     {"pads", Attribute::Ints({1, 1, 1, 1})}});
    Value* q = t.Op("AveragePool", {p}, {{"kernel_shape", Attribute::Ints({2, 2})}});
    Value* gap = t.Op("GlobalAveragePool", {q});
    Value* f = t.Op("Flatten", {gap}, {{"axis", Attribute::Int(1)}});
    Value* y = t.Op("Gemm", {f, t.Const({5, 16}), t.Const({5})}, {{"transB", Attribute::Int(1)}});
    t.Output(y);
    LayoutOptions o;
    o.float32 = dt == DataType::kFloat32;
    const LayoutReport rep = t.PlanAndCompare(o, dt == DataType::kFloat16 ? 4e-3 : 1e-5);
    EXPECT_EQ(rep.convs_nhwc, 2);
    EXPECT_EQ(rep.reformats_inserted, 1);
    EXPECT_EQ(rep.views_inserted, 1);
    EXPECT_EQ(rep.reformats_eliminated, 2 * 2 - 1);
    EXPECT_EQ(t.Count("Transpose"), 1);
    EXPECT_EQ(t.Count("GlobalAveragePool"), 0);
    EXPECT_EQ(t.Count("ReduceMean"), 1);
    EXPECT_EQ(t.CountNhwc(), 4);  // 2 convs, 2 pools
  }
}

// A ResNet bottleneck whose output is the graph's: one reformat in, one out.
TEST(LayoutPlan, ResNetBottleneckHasTwoReformats) {
  Net t(DataType::kFloat16);
  Value* x = t.Input("x", {2, 16, 8, 8});
  Value* stem = t.Conv(x, 16, 16, 3, true);
  Value* a = t.Conv(stem, 16, 4, 1, true);
  Value* b = t.Conv(a, 4, 4, 3, true);
  Value* c = t.Conv(b, 4, 16, 1, false);
  Value* y = t.Op("Relu", {t.Op("Add", {c, stem})});
  Value* d = t.Conv(y, 16, 8, 3, true, 2);  // strided downsample
  t.Output(d);
  const LayoutReport rep = t.PlanAndCompare({}, 4e-3);
  EXPECT_EQ(rep.convs_nhwc, 5);
  EXPECT_EQ(rep.reformats_inserted, 2);
  EXPECT_EQ(t.Count("Transpose"), 2);
  EXPECT_EQ(rep.reformats_eliminated, 5 * 2 - 2);
}

// The same bottleneck after fuse-residual-add: conv3 takes the block input as its residual (input 3), which is
// read in NHWC like Y, so the plan needs no reformat more.
TEST(LayoutPlan, ResidualOfAFusedConvIsReadInNhwc) {
  Net t(DataType::kFloat16);
  Value* x = t.Input("x", {2, 16, 8, 8});
  Value* stem = t.Conv(x, 16, 16, 3, true);
  Value* b = t.Conv(t.Conv(stem, 16, 4, 1, true), 4, 4, 3, true);
  std::map<std::string, Attribute> a = {{"kernel_shape", Attribute::Ints({1, 1})},
                                        {"kiln_activation", Attribute::String("Relu")}};
  Value* y = t.Op("FusedConv", {b, t.Const({16, 4, 1, 1}), t.Const({16}, 0.1), stem}, a, "kiln");
  t.Output(t.Conv(y, 16, 8, 3, true, 2));
  const LayoutReport rep = t.PlanAndCompare({}, 4e-3);
  EXPECT_EQ(rep.convs_nhwc, 5);
  EXPECT_EQ(rep.reformats_inserted, 2);
  for (const auto& n : t.g.nodes())
    if (n->op_type == "FusedConv" && n->inputs.size() == 4) {
      EXPECT_EQ(n->gets("kiln_layout", ""), "NHWC");
      EXPECT_EQ(n->input(3)->shape.size(), 4u);
      EXPECT_TRUE(n->input(3)->name.ends_with("_nhwc")) << n->input(3)->name;
    }
}

// An RGB stem reads its input zero-padded to 4 (here: 8) channels (W gains zero input channels); the result is the same.
// Grouped convolutions and convs with 8 or more channels are not padded; pad_channels 0 turns it off.
TEST(LayoutPlan, StemInputChannelsArePaddedToEight) {
  for (int64_t pad : {8, 0}) {
    SCOPED_TRACE(pad);
    Net t(DataType::kFloat16);
    Value* x = t.Input("x", {2, 3, 12, 12});
    Value* s = t.Op("FusedConv", {x, t.Const({8, 3, 7, 7}), t.Const({8}, 0.1)},
                    {{"kernel_shape", Attribute::Ints({7, 7})}, {"pads", Attribute::Ints({3, 3, 3, 3})},
                     {"strides", Attribute::Ints({2, 2})}, {"kiln_activation", Attribute::String("Relu")}},
                    "kiln");
    t.Output(t.Conv(s, 8, 8, 3, true));
    // A grouped (depthwise) conv of 3 channels is left as it is.
    t.Output(t.Op("Conv", {x, t.Const({3, 1, 3, 3})},
                  {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})},
                   {"group", Attribute::Int(3)}}));
    LayoutOptions o;
    o.pad_channels = pad;
    const LayoutReport rep = t.PlanAndCompare(o, 4e-3);
    EXPECT_EQ(rep.convs_nhwc, 3);
    EXPECT_EQ(rep.channels_padded, pad ? 1 : 0);
    EXPECT_EQ(t.Count("Pad"), pad ? 1 : 0);
    EXPECT_EQ(rep.reformats_inserted, 3);  // the input and the two outputs
    for (const auto& n : t.g.nodes())
      if (n->op_type == "FusedConv" && n->input(1)->const_value->dim(2) == 7) {
        EXPECT_EQ(n->input(1)->const_value->dim(1), pad ? 8 : 3);
        EXPECT_EQ(n->input(0)->shape[3].value, pad ? 8 : 3);
      }
  }
}

// kiln.QConv with int8 input of zero point 0 goes NHWC whatever the float options (the int8 tensor-core kernel
// reads channels-last, channels a multiple of 16): an RGB stem reads its input zero-padded to 16 channels, the
// residual is read in Y's layout, the int8 chain stays NHWC; a grouped QConv and one whose input has a zero point
// stay NCHW. The CPU runs the NHWC QConv through its NCHW kernel: outputs are identical.
TEST(LayoutPlan, Int8ConvolutionsGoNhwcWithChannelsPaddedToSixteen) {
  Net t(DataType::kFloat32);
  Value* x = t.Input("x", {2, 3, 10, 9}, DataType::kInt8, -128, 127);
  auto qconv = [&](Value* in, int64_t cin, int64_t cout, int64_t k, DataType y, Value* residual, int64_t group,
                   int64_t x_zp) {
    std::map<std::string, Attribute> a = {{"kernel_shape", Attribute::Ints({k, k})},
                                          {"pads", Attribute::Ints({k / 2, k / 2, k / 2, k / 2})},
                                          {"group", Attribute::Int(group)},
                                          {"kiln_x_scale", Attribute::Float(0.02f)},
                                          {"kiln_x_zero_point", Attribute::Int(x_zp)},
                                          {"kiln_w_scales", Attribute::Floats(std::vector<float>(cout, 0.01f))},
                                          {"kiln_activation", Attribute::String("Relu")},
                                          {"kiln_y_type", Attribute::Int(static_cast<int64_t>(y))}};
    if (y == DataType::kInt8) {
      a["kiln_y_scale"] = Attribute::Float(0.05f);
      a["kiln_y_zero_point"] = Attribute::Int(0);
    }
    Value* w = t.g.AddConstant("w", testing::Random({cout, cin / group, k, k}, t.seed++, -127, 127, DataType::kInt8));
    std::vector<Value*> ins = {in, w, t.Const({cout}, 0.5)};
    if (residual) ins.push_back(residual);
    return t.Op("QConv", ins, a, "kiln");
  };
  Value* stem = qconv(x, 3, 16, 3, DataType::kInt8, nullptr, 1, 0);
  Value* r = t.Input("r", {2, 32, 10, 9}, DataType::kFloat32, -1, 1);
  t.Output(qconv(qconv(stem, 16, 32, 3, DataType::kInt8, nullptr, 1, 0), 32, 32, 1, DataType::kFloat32, r, 1, 0));
  t.Output(qconv(stem, 16, 16, 3, DataType::kFloat32, nullptr, 4, 0));  // grouped: NCHW
  t.Output(qconv(x, 3, 8, 1, DataType::kFloat32, nullptr, 1, 5));       // input zero point: NCHW
  const LayoutReport rep = t.PlanAndCompare({}, 0);
  EXPECT_EQ(rep.convs_nhwc, 3);
  EXPECT_EQ(rep.channels_padded, 1);
  EXPECT_EQ(t.Count("Pad"), 1);
  int residual_nhwc = 0;
  for (const auto& n : t.g.nodes())
    if (n->op_type == "QConv" && n->gets("kiln_layout", "") == "NHWC") {
      EXPECT_EQ(n->input(0)->shape[3].value % 16, 0) << n->name;
      EXPECT_EQ(n->input(1)->const_value->dim(1) % 16, 0) << n->name;
      residual_nhwc += n->input(3) && n->input(3)->name.ends_with("_nhwc");
    }
  EXPECT_EQ(residual_nhwc, 1);
}

// ConvolutionLayout::kNCHW (float_convs off) keeps float convolutions NCHW; an int8 QConv still goes NHWC.
TEST(LayoutPlan, NchwModeStillMakesInt8ConvolutionsNhwc) {
  Net t(DataType::kFloat16);
  Value* x = t.Input("x", {1, 16, 6, 6});
  t.Output(t.Conv(x, 16, 16, 3, true));
  Value* xq = t.Input("xq", {1, 16, 6, 6}, DataType::kInt8, -128, 127);
  std::map<std::string, Attribute> a = {{"kernel_shape", Attribute::Ints({1, 1})},
                                        {"kiln_x_scale", Attribute::Float(0.02f)},
                                        {"kiln_w_scales", Attribute::Floats({0.01f})},
                                        {"kiln_y_type", Attribute::Int(static_cast<int64_t>(DataType::kFloat32))}};
  Value* w = t.g.AddConstant("wq", testing::Random({16, 16, 1, 1}, 5, -127, 127, DataType::kInt8));
  t.Output(t.Op("QConv", {xq, w}, a, "kiln"));
  LayoutOptions o;
  o.float_convs = false;
  const LayoutReport rep = t.PlanAndCompare(o, 0);
  EXPECT_EQ(rep.convs_nhwc, 1);
  for (const auto& n : t.g.nodes())
    EXPECT_EQ(n->gets("kiln_layout", "") == "NHWC", n->op_type == "QConv") << n->name;
}

// FP32 convolutions stay NCHW unless asked; so do convs with asymmetric pads.
TEST(LayoutPlan, LeavesFloat32AndAsymmetricPadsAlone) {
  Net t(DataType::kFloat32);
  Value* x = t.Input("x", {1, 4, 6, 6});
  t.Output(t.Conv(x, 4, 4, 3, true));
  const LayoutReport rep = t.PlanAndCompare({}, 1e-6);
  EXPECT_EQ(rep.convs_nhwc, 0);
  EXPECT_EQ(t.Count("Transpose"), 0);

  Net u(DataType::kFloat16);
  Value* ux = u.Input("x", {1, 4, 6, 6});
  u.Output(u.Op("Conv", {ux, u.Const({4, 4, 2, 2})},
                {{"kernel_shape", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({0, 0, 1, 1})}}));
  const LayoutReport r2 = u.PlanAndCompare({}, 1e-6);
  EXPECT_EQ(r2.convs_nhwc, 0);
  EXPECT_EQ(u.Count("Transpose"), 0);
}

// Layers that need NCHW get it back: a MaxPool whose Indices are read, a Resize, a Softmax over channels, and a
// value read both by an NHWC conv and by such a layer.
// A ConvNeXt stem and block as torchvision writes them: conv, LayerNorm2d (permute to channels-last, LayerNorm over
// C, permute back), then depthwise 7x7, permute, LayerNorm, MLP, permute back, layer scale, residual Add. The
// model's four permutes meet the NHWC layout and go: the only reformats left are the input's and the output's.
TEST(LayoutPlan, ConvNeXtBlockPermutesAreAbsorbed) {
  for (DataType dt : {DataType::kFloat16, DataType::kFloat32}) {
    SCOPED_TRACE(DataTypeName(dt));
    Net t(dt);
    const int64_t c = 8;
    Value* x = t.Input("x", {2, 4, 10, 10});
    Value* stem = t.Conv(x, 4, c, 3, false, 2);
    auto permute = [&](Value* v, std::vector<int64_t> p) { return t.Op("Transpose", {v}, {{"perm", Attribute::Ints(p)}}); };
    auto layer_norm = [&](Value* v) {
      return t.Op("LayerNormalization", {v, t.Const({c}), t.Const({c}, 0.1)}, {{"axis", Attribute::Int(-1)}});
    };
    Value* in = permute(layer_norm(permute(stem, {0, 2, 3, 1})), {0, 3, 1, 2});
    Value* dw = t.Op("Conv", {in, t.Const({c, 1, 7, 7}), t.Const({c}, 0.1)},
                     {{"kernel_shape", Attribute::Ints({7, 7})}, {"pads", Attribute::Ints({3, 3, 3, 3})},
                      {"group", Attribute::Int(c)}});
    Value* h = t.Op("Relu", {t.Op("MatMul", {layer_norm(permute(dw, {0, 2, 3, 1})), t.Const({c, 4 * c})})});
    Value* mlp = t.Op("MatMul", {h, t.Const({4 * c, c})});
    Value* scaled = t.Op("Mul", {permute(mlp, {0, 3, 1, 2}), t.Const({c, 1, 1})});
    Value* y = t.Op("Add", {scaled, in});
    t.Output(t.Conv(y, c, c, 1, false));
    LayoutOptions o;
    o.float32 = dt == DataType::kFloat32;
    const LayoutReport rep = t.PlanAndCompare(o, dt == DataType::kFloat16 ? 8e-3 : 1e-5);
    EXPECT_EQ(rep.convs_nhwc, 3);
    EXPECT_EQ(rep.transposes_absorbed, 4);
    EXPECT_EQ(rep.reformats_inserted, 2);  // x in, the last conv's output out
    EXPECT_EQ(t.Count("Transpose"), 2);
    EXPECT_EQ(t.Count("Mul") + t.Count("Add"), 2);
  }
}

// A Transpose that is neither: it reads the NHWC twin with the composed permutation, and no reformat back is needed
// for it; a graph output made by a permute back still gets its NCHW form.
TEST(LayoutPlan, OtherTransposesReadTheTwin) {
  Net t(DataType::kFloat16);
  Value* x = t.Input("x", {1, 4, 6, 5});
  Value* a = t.Conv(x, 4, 6, 3, true);
  t.Output(t.Op("Transpose", {a}, {{"perm", Attribute::Ints({0, 1, 3, 2})}}));  // [1, 6, 5, 6]
  Value* cl = t.Op("Transpose", {a}, {{"perm", Attribute::Ints({0, 2, 3, 1})}});
  t.Output(t.Op("Transpose", {t.Op("Sigmoid", {cl})}, {{"perm", Attribute::Ints({0, 3, 1, 2})}}));
  const LayoutReport rep = t.PlanAndCompare({}, 4e-3);
  EXPECT_EQ(rep.convs_nhwc, 1);
  EXPECT_EQ(rep.transposes_absorbed, 2);
  EXPECT_EQ(rep.reformats_inserted, 2);  // x in; the Sigmoid's result out (the graph output)
  EXPECT_EQ(t.Count("Transpose"), 3);    // those two and the model's [0,1,3,2], now [0,3,2,1] of the twin
}

// Squeeze-excitation (EfficientNet, RegNet, MobileNetV3): the block's output scaled per image and channel by a
// [N, C, 1, 1] tensor computed from it. The scale reads as its [N, 1, 1, C] twin: no reformat around the Mul.
TEST(LayoutPlan, SqueezeExcitationScaleStaysChannelsLast) {
  Net t(DataType::kFloat16);
  const int64_t c = 8;
  Value* x = t.Input("x", {2, c, 6, 6});
  Value* a = t.Conv(x, c, c, 3, true);
  Value* pooled = t.Op("GlobalAveragePool", {a});
  Value* s1 = t.Conv(pooled, c, 4, 1, true);
  Value* s2 = t.Op("Sigmoid", {t.Conv(s1, 4, c, 1, false)});
  Value* scaled = t.Op("Mul", {a, s2});
  Value* gate = t.Op("Mul", {scaled, t.Op("Sigmoid", {t.Op("ReduceMax", {a, t.Ints({2, 3})})})});  // [N, C, 1, 1] from NCHW
  t.Output(t.Conv(gate, c, c, 1, false));
  const LayoutReport rep = t.PlanAndCompare({}, 4e-3);
  EXPECT_EQ(rep.convs_nhwc, 4);
  // x in, the last conv's output out, and a back to NCHW once for the ReduceMax (which is not channels-last-able).
  EXPECT_EQ(rep.reformats_inserted, 3);
  EXPECT_EQ(t.Count("Transpose"), 3);
}

// YOLOv8's C2f (chunk the channels in two, a bottleneck on one half, concatenate) and its neck's nearest 2x
// upsampling: the Slices and the Resize run channels-last, no reformat between the convolutions.
TEST(LayoutPlan, ChannelSlicesAndResizeStayChannelsLast) {
  for (bool axes_attr : {false, true}) {
    SCOPED_TRACE(axes_attr ? "Resize with axes" : "Resize with scales for every axis");
    Net t(DataType::kFloat16);
    Value* x = t.Input("x", {2, 8, 6, 5});
    Value* a = t.Conv(x, 8, 8, 1, true);
    Value* lo = t.Op("Slice", {a, t.Ints({0}), t.Ints({4}), t.Ints({1})});
    Value* hi = t.Op("Slice", {a, t.Ints({-4}), t.Ints({INT64_MAX}), t.Ints({-3}), t.Ints({1})});
    Value* m = t.Op("Add", {hi, t.Conv(hi, 4, 4, 3, true)});
    Value* c = t.Op("Concat", {lo, hi, m}, {{"axis", Attribute::Int(1)}});
    Value* y = t.Conv(c, 12, 8, 1, true);
    Node* up = t.OpNode("Resize", "up", {y, nullptr, axes_attr ? t.g.AddConstant("sc", Tensor::FromFloat({2.f, 2.f}, {2}))
                                                              : t.g.AddConstant("sc", Tensor::FromFloat({1, 1, 2, 2}, {4}))},
                        {{"mode", Attribute::String("nearest")}}, 1, "", 19);
    if (axes_attr) up->attrs["axes"] = Attribute::Ints({2, 3});
    t.Output(t.Conv(up->outputs[0], 8, 4, 3, false));
    const LayoutReport rep = t.PlanAndCompare({}, 4e-3);
    EXPECT_EQ(rep.convs_nhwc, 4);
    EXPECT_EQ(rep.reformats_inserted, 2);  // x in, the last conv's output out
    EXPECT_EQ(t.Count("Transpose"), 2);
  }
}

TEST(LayoutPlan, NchwConsumersGetATransposeBack) {
  Net t(DataType::kFloat16);
  Value* x = t.Input("x", {1, 4, 6, 6});
  Value* a = t.Conv(x, 4, 6, 3, true);
  Node* mp = t.g.AddNode("MaxPool", "mp");
  mp->opset = 17;
  mp->inputs = {a};
  mp->attrs = {{"kernel_shape", Attribute::Ints({2, 2})}};
  mp->outputs = {t.g.AddValue("mp_y"), t.g.AddValue("mp_i")};
  t.Output(mp->outputs[0]);
  t.Output(mp->outputs[1]);
  Value* sm = t.Op("Softmax", {a}, {{"axis", Attribute::Int(1)}});
  t.Output(t.Conv(sm, 6, 2, 1, false));
  const LayoutReport rep = t.PlanAndCompare({}, 4e-3);
  EXPECT_EQ(rep.convs_nhwc, 2);
  // x -> NHWC, a -> NCHW (once, for MaxPool and Softmax), sm -> NHWC, the last conv's output -> NCHW.
  EXPECT_EQ(rep.reformats_inserted, 4);
  EXPECT_EQ(t.CountNhwc(), 2);
}

}  // namespace
}  // namespace kiln
