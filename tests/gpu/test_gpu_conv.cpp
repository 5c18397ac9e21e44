// Differential tests of the cuDNN conv layers (Conv, kiln.FusedConv, ConvTranspose) against the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"
#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Attrs = std::map<std::string, Attribute>;
using Shape = std::vector<int64_t>;

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }

// One conv-family node: X as a graph input, W (and B) as constants unless `runtime_weights`.
struct ConvCase {
  std::string op = "Conv";
  DataType dtype = DataType::kFloat32;
  Shape x, w;
  bool bias = true;
  bool runtime_weights = false;
  Shape residual;  // FusedConv's input 3 (Y's shape) when not empty
  Attrs attrs;
  uint32_t seed = 1;

  int64_t OutChannels() const {
    if (op != "ConvTranspose") return w[0];
    auto it = attrs.find("group");
    return w[1] * (it == attrs.end() ? 1 : it->second.i);
  }

  OneNode Make() const {
    OneNode n(op, op == "FusedConv" ? "kiln" : "");
    n.Input(Random(dtype, x, seed));
    Tensor wt = Random(dtype, w, seed + 1, -0.5, 0.5);
    if (runtime_weights) n.Input(wt);
    else n.Const(wt);
    if (bias) {
      Tensor bt = Random(dtype, {OutChannels()}, seed + 2);
      if (runtime_weights) n.Input(bt);
      else n.Const(bt);
    }
    if (!residual.empty()) {
      if (!bias) n.Omitted();
      n.Input(Random(dtype, residual, seed + 3));
    }
    for (const auto& [k, v] : attrs) n.Attr(k, v);
    if (dtype != DataType::kFloat32) n.ReferenceInFloat32();
    return n;
  }
};

// Tolerances: float32 without TF32 is tight; TF32, float16 and bfloat16 are loose.
::testing::AssertionResult Check(const ConvCase& c, bool tf32 = false, const std::string& tactic = "") {
  OneNode n = c.Make();
  if (!tactic.empty()) n.Tactic(tactic);
  switch (c.dtype) {
    case DataType::kFloat16: return n.MatchesCpu(2e-2, 1e-2);
    case DataType::kBFloat16: return n.MatchesCpu(6e-2, 2e-2);
    default:
      if (tf32) return n.MatchesCpu(2e-2, 1e-2);
      n.NoTF32();
      return n.MatchesCpu(1e-4, 1e-4);
  }
}

ConvCase Conv(Shape x, Shape w, Attrs a = {}, bool bias = true) {
  ConvCase c;
  c.x = std::move(x);
  c.w = std::move(w);
  c.attrs = std::move(a);
  c.bias = bias;
  return c;
}

ConvCase Transposed(Shape x, Shape w, Attrs a = {}, bool bias = true) {
  ConvCase c = Conv(std::move(x), std::move(w), std::move(a), bias);
  c.op = "ConvTranspose";
  return c;
}

ConvCase Fused(Shape x, Shape w, const std::string& act, float alpha = 0.f, float beta = 0.f, bool bias = true) {
  ConvCase c = Conv(std::move(x), std::move(w), {}, bias);
  c.op = "FusedConv";
  c.attrs["kiln_activation"] = Attribute::String(act);
  c.attrs["kiln_activation_alpha"] = Attribute::Float(alpha);
  c.attrs["kiln_activation_beta"] = Attribute::Float(beta);
  c.attrs["pads"] = Ints({1, 1, 1, 1});
  return c;
}

// The factory's tactic list for a case (weights as constants, as the builder sees them).
std::vector<std::string> TacticsOf(const ConvCase& c, bool tf32) {
  Graph g;
  Node* n = g.AddNode(c.op, "probe");
  n->domain = c.op == "FusedConv" ? "kiln" : "";
  n->attrs = c.attrs;
  Value* x = g.GetOrAddValue("x");
  x->dtype = c.dtype;
  x->shape = FromStatic(c.x);
  x->has_shape = true;
  n->inputs = {x, g.AddConstant("w", Random(c.dtype, c.w, 2))};
  cuda::LayerSpec spec{*n, {c.x, c.w}, {}, tf32};
  if (c.bias) {
    n->inputs.push_back(g.AddConstant("b", Random(c.dtype, {c.OutChannels()}, 3)));
    spec.input_shapes.push_back({c.OutChannels()});
  }
  if (!c.residual.empty()) {
    if (!c.bias) {  // an omitted B: the slots of the spec's shapes follow the inputs
      n->inputs.push_back(nullptr);
      spec.input_shapes.push_back({});
    }
    Value* r = g.GetOrAddValue("r");
    r->dtype = c.dtype;
    r->shape = FromStatic(c.residual);
    r->has_shape = true;
    n->inputs.push_back(r);
    spec.input_shapes.push_back(c.residual);
  }
  auto t = cuda::TacticsFor(spec);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : std::vector<std::string>{};
}

// ---- Conv ----

TEST(GpuConv, Conv2dBasic) {
  EXPECT_TRUE(Check(Conv({2, 3, 9, 11}, {5, 3, 3, 3}, {{"pads", Ints({1, 1, 1, 1})}})));
  EXPECT_TRUE(Check(Conv({2, 3, 9, 11}, {5, 3, 3, 3}, {{"pads", Ints({1, 1, 1, 1})}}), /*tf32=*/true));
  EXPECT_TRUE(Check(Conv({1, 1, 1, 1}, {1, 1, 1, 1})));
  EXPECT_TRUE(Check(Conv({3, 7, 13, 5}, {4, 7, 1, 1}, {}, /*bias=*/false)));
}

TEST(GpuConv, Conv1dAnd3d) {
  EXPECT_TRUE(Check(Conv({2, 4, 33}, {6, 4, 5}, {{"strides", Ints({2})}, {"pads", Ints({2, 1})}, {"dilations", Ints({2})}})));
  EXPECT_TRUE(Check(Conv({1, 3, 1000}, {2, 3, 7}, {{"pads", Ints({3, 3})}}, false)));
  EXPECT_TRUE(Check(Conv({1, 2, 5, 6, 7}, {4, 2, 3, 3, 3}, {{"pads", Ints({1, 1, 1, 1, 1, 1})}, {"strides", Ints({1, 2, 1})}})));
  EXPECT_TRUE(Check(Conv({2, 3, 4, 7, 5}, {5, 3, 2, 3, 1}, {{"dilations", Ints({2, 1, 1})}, {"pads", Ints({0, 1, 0, 1, 2, 0})}})));
}

TEST(GpuConv, StridesPadsDilations) {
  const std::vector<Attrs> variants = {
      {{"strides", Ints({2, 2})}},
      {{"strides", Ints({3, 1})}, {"pads", Ints({1, 2, 1, 2})}},
      {{"dilations", Ints({2, 3})}, {"pads", Ints({2, 3, 2, 3})}},
      {{"strides", Ints({2, 3})}, {"dilations", Ints({2, 2})}, {"pads", Ints({1, 0, 1, 0})}},
      {{"pads", Ints({0, 1, 2, 0})}},                              // asymmetric
      {{"pads", Ints({2, 0, 0, 1})}, {"strides", Ints({2, 2})}},   // asymmetric with stride
      {{"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Ints({2, 2})}},
      {{"auto_pad", Attribute::String("SAME_LOWER")}, {"strides", Ints({2, 1})}},
      {{"auto_pad", Attribute::String("VALID")}, {"strides", Ints({2, 2})}},
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    ConvCase c = Conv({2, 3, 17, 14}, {4, 3, 3, 4}, variants[i]);
    c.seed = static_cast<uint32_t>(10 + i);
    EXPECT_TRUE(Check(c)) << "variant " << i;
  }
}

TEST(GpuConv, GroupsAndDepthwise) {
  EXPECT_TRUE(Check(Conv({2, 6, 10, 9}, {9, 2, 3, 3}, {{"group", Attribute::Int(3)}, {"pads", Ints({1, 1, 1, 1})}})));
  EXPECT_TRUE(Check(Conv({2, 8, 15, 15}, {8, 1, 3, 3}, {{"group", Attribute::Int(8)}, {"pads", Ints({1, 1, 1, 1})}})));
  EXPECT_TRUE(Check(Conv({1, 8, 12, 13}, {16, 1, 5, 5},
                         {{"group", Attribute::Int(8)}, {"strides", Ints({2, 2})}, {"pads", Ints({2, 2, 2, 2})}})));
  EXPECT_TRUE(Check(Conv({2, 4, 21}, {4, 1, 3}, {{"group", Attribute::Int(4)}, {"pads", Ints({1, 0})}})));
}

TEST(GpuConv, LargerImage) {
  EXPECT_TRUE(Check(Conv({2, 16, 40, 37}, {32, 16, 3, 3}, {{"pads", Ints({1, 1, 1, 1})}}), /*tf32=*/true));
  ConvCase c = Conv({1, 16, 33, 31}, {24, 16, 3, 3}, {{"pads", Ints({1, 1, 1, 1})}});
  EXPECT_TRUE(Check(c));
}

TEST(GpuConv, RuntimeWeights) {
  ConvCase c = Conv({2, 4, 8, 9}, {6, 4, 3, 3}, {{"pads", Ints({0, 1, 1, 0})}});
  c.runtime_weights = true;
  EXPECT_TRUE(Check(c));
}

TEST(GpuConv, HalfAndBFloat16) {
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    ConvCase a = Conv({2, 8, 13, 11}, {16, 8, 3, 3}, {{"pads", Ints({1, 1, 1, 1})}});
    a.dtype = dt;
    EXPECT_TRUE(Check(a)) << DataTypeName(dt);
    ConvCase b = Conv({1, 6, 9, 10}, {6, 1, 3, 3}, {{"group", Attribute::Int(6)}, {"pads", Ints({0, 1, 2, 1})}});
    b.dtype = dt;
    EXPECT_TRUE(Check(b)) << DataTypeName(dt);
    ConvCase c = Conv({2, 3, 31}, {5, 3, 4}, {{"strides", Ints({2})}}, false);
    c.dtype = dt;
    EXPECT_TRUE(Check(c)) << DataTypeName(dt);
    ConvCase d = Conv({1, 4, 5, 6, 7}, {3, 4, 3, 3, 3}, {{"pads", Ints({1, 1, 1, 1, 1, 1})}});
    d.dtype = dt;
    EXPECT_TRUE(Check(d)) << DataTypeName(dt);
  }
}

TEST(GpuConv, EmptyBatch) { EXPECT_TRUE(Check(Conv({0, 3, 5, 5}, {4, 3, 3, 3}))); }

TEST(GpuConv, Float64IsRejectedWithAClearError) {
  ConvCase c = Conv({1, 2, 5, 5}, {3, 2, 3, 3});
  c.dtype = DataType::kFloat64;
  OneNode n = c.Make();
  auto r = n.MatchesCpu();
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("float32, float16 and bfloat16"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("node0"), std::string::npos) << r.message();
}

// ---- FusedConv ----

TEST(GpuConv, FusedConvActivations) {
  struct Act {
    const char* name;
    float alpha, beta;
  };
  const Act acts[] = {{"None", 0, 0},    {"Relu", 0, 0},         {"LeakyRelu", 0.1f, 0}, {"Sigmoid", 0, 0},
                      {"Tanh", 0, 0},    {"Clip", -0.5f, 0.5f},  {"HardSigmoid", 0.2f, 0.5f},
                      {"SiLU", 0, 0},    {"Gelu", 0, 0},         {"GeluTanh", 0, 0}};
  for (const Act& a : acts) {
    for (bool bias : {true, false}) {
      EXPECT_TRUE(Check(Fused({2, 5, 9, 8}, {7, 5, 3, 3}, a.name, a.alpha, a.beta, bias))) << a.name << " " << bias;
    }
    ConvCase h = Fused({1, 8, 10, 10}, {8, 8, 3, 3}, a.name, a.alpha, a.beta);
    h.dtype = DataType::kFloat16;
    EXPECT_TRUE(Check(h)) << a.name << " fp16";
    h.dtype = DataType::kBFloat16;
    EXPECT_TRUE(Check(h)) << a.name << " bf16";
  }
}

// FusedConv with a residual (input 3): Y = act(conv + B + R), as fuse-residual-add makes of ResNet's
// conv -> Add -> Relu; SiLU has no cuDNN pointwise mode, so only the conv-then-epilogue tactics run it.
TEST(GpuConv, FusedConvResidual) {
  for (const char* act : {"Relu", "None", "SiLU"}) {
    for (bool bias : {true, false}) {
      ConvCase c = Fused({2, 6, 9, 7}, {5, 6, 3, 3}, act, 0.f, 0.f, bias);
      c.residual = {2, 5, 9, 7};
      EXPECT_TRUE(Check(c)) << act << " bias " << bias;
      ConvCase h = Fused({1, 16, 10, 10}, {16, 16, 3, 3}, act, 0.f, 0.f, bias);
      h.residual = {1, 16, 10, 10};
      for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
        h.dtype = dt;
        EXPECT_TRUE(Check(h)) << act << " bias " << bias << " " << DataTypeName(dt);
      }
    }
  }
  // Strided 1x1 (a ResNet downsampling branch with the main branch as the residual) and 1-D.
  ConvCase d = Conv({2, 8, 14, 14}, {16, 8, 1, 1}, {{"strides", Ints({2, 2})}});
  d.op = "FusedConv";
  d.attrs["kiln_activation"] = Attribute::String("Relu");
  d.residual = {2, 16, 7, 7};
  d.dtype = DataType::kFloat16;
  EXPECT_TRUE(Check(d));
  ConvCase one = Conv({2, 4, 19}, {6, 4, 3}, {{"pads", Ints({1, 1})}});
  one.op = "FusedConv";
  one.attrs["kiln_activation"] = Attribute::String("Relu");
  one.residual = {2, 6, 19};
  EXPECT_TRUE(Check(one));
}

// ---- ConvTranspose ----

TEST(GpuConv, ConvTransposeVariants) {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 4, 5, 6}, {4, 3, 3, 3}}};
  const std::vector<Attrs> variants = {
      {},
      {{"strides", Ints({2, 2})}},
      {{"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}, {"output_padding", Ints({1, 1})}},
      {{"strides", Ints({3, 2})}, {"pads", Ints({0, 1, 2, 0})}},  // asymmetric
      {{"strides", Ints({2, 2})}, {"output_shape", Ints({12, 13})}},
      {{"strides", Ints({2, 1})}, {"dilations", Ints({2, 2})}, {"pads", Ints({1, 2, 1, 2})}},
      {{"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Ints({2, 2})}},
      {{"auto_pad", Attribute::String("SAME_LOWER")}, {"strides", Ints({2, 3})}},
      {{"pads", Ints({2, 2, 2, 2})}},  // pads larger than the unpadded border: crop
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    ConvCase c = Transposed({2, 4, 5, 6}, {4, 3, 3, 3}, variants[i]);
    c.seed = static_cast<uint32_t>(30 + i);
    EXPECT_TRUE(Check(c)) << "variant " << i;
  }
  // Groups (W is [C, M/g, k...]), 1-D and 3-D, no bias.
  EXPECT_TRUE(Check(Transposed({1, 6, 7, 5}, {6, 2, 3, 3}, {{"group", Attribute::Int(3)}, {"strides", Ints({2, 2})}})));
  EXPECT_TRUE(Check(Transposed({1, 4, 9, 9}, {4, 1, 3, 3}, {{"group", Attribute::Int(4)}, {"pads", Ints({1, 1, 1, 1})}})));
  EXPECT_TRUE(Check(Transposed({2, 3, 33}, {3, 5, 4}, {{"strides", Ints({3})}, {"pads", Ints({1, 2})}}, false)));
  EXPECT_TRUE(Check(Transposed({1, 2, 3, 4, 5}, {2, 3, 3, 3, 2},
                               {{"strides", Ints({2, 1, 2})}, {"pads", Ints({1, 0, 0, 1, 0, 0})}})));
}

TEST(GpuConv, ConvTransposeHalfAndBFloat16) {
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    ConvCase a = Transposed({2, 8, 7, 6}, {8, 4, 4, 4}, {{"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}});
    a.dtype = dt;
    EXPECT_TRUE(Check(a)) << DataTypeName(dt);
    ConvCase b = Transposed({1, 4, 5, 5}, {4, 2, 3, 3}, {{"strides", Ints({2, 2})}, {"output_padding", Ints({1, 0})}});
    b.dtype = dt;
    EXPECT_TRUE(Check(b)) << DataTypeName(dt);
  }
}

TEST(GpuConv, ConvTransposeRuntimeWeights) {
  ConvCase c = Transposed({1, 3, 6, 7}, {3, 2, 3, 3}, {{"strides", Ints({2, 2})}});
  c.runtime_weights = true;
  EXPECT_TRUE(Check(c));
}

// ---- the epilogue kernel on 16-byte packs ----

// Conv then the bias/activation kernel ("cudnn:auto") where H*W is a multiple of the pack (8 halves, 4 floats):
// one bias value per pack; without a bias, any element count that is a multiple of the pack.
TEST(GpuConv, EpiloguePacksMatchCpu) {
  const char* acts[] = {"None", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "SiLU", "Gelu",
                        "GeluTanh"};
  for (const char* act : acts) {
    for (bool bias : {true, false}) {
      for (DataType dt : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
        ConvCase c = Fused({2, 8, 8, 8}, {16, 8, 3, 3}, act, 0.1f, 0.6f, bias);  // Y [2, 16, 8, 8]
        c.dtype = dt;
        EXPECT_TRUE(Check(c, false, "cudnn:auto")) << act << " bias " << bias << " " << DataTypeName(dt);
        ConvCase one = Conv({2, 4, 16}, {8, 4, 3}, {{"pads", Ints({1, 1})}}, bias);  // Y [2, 8, 16]
        one.op = "FusedConv";
        one.attrs["kiln_activation"] = Attribute::String(act);
        one.dtype = dt;
        EXPECT_TRUE(Check(one, false, "cudnn:auto")) << act << " 1-D bias " << bias << " " << DataTypeName(dt);
      }
    }
  }
}

// ---- every tactic ----

TEST(GpuConv, EveryTacticMatches) {
  std::vector<ConvCase> cases = {
      Conv({2, 8, 17, 15}, {16, 8, 3, 3}, {{"pads", Ints({1, 1, 1, 1})}}),
      Fused({2, 8, 17, 15}, {16, 8, 3, 3}, "Relu"),
      Transposed({2, 8, 9, 7}, {8, 4, 3, 3}, {{"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}}),
  };
  ConvCase half = Fused({2, 16, 12, 12}, {16, 16, 3, 3}, "Relu");
  half.dtype = DataType::kFloat16;
  cases.push_back(half);
  half.residual = {2, 16, 12, 12};  // cuDNN-fused graphs with the residual add too
  cases.push_back(half);
  ConvCase bare = Fused({2, 16, 12, 12}, {16, 16, 3, 3}, "None", 0.f, 0.f, /*bias=*/false);  // conv -> + R only
  bare.dtype = DataType::kFloat16;
  bare.residual = {2, 16, 12, 12};
  cases.push_back(bare);
  for (const ConvCase& c : cases) {
    for (bool tf32 : {false, true}) {
      if (tf32 && c.dtype != DataType::kFloat32) continue;
      const auto tactics = TacticsOf(c, tf32);
      EXPECT_FALSE(tactics.empty()) << c.op;
      std::printf("%s %s tf32=%d: %zu tactics:", c.op.c_str(), DataTypeName(c.dtype), tf32 ? 1 : 0, tactics.size());
      for (const std::string& t : tactics) std::printf(" %s", t.c_str());
      std::printf("\n");
      for (const std::string& t : tactics) EXPECT_TRUE(Check(c, tf32, t)) << c.op << " tactic " << t;
    }
  }
}

// A layer tuned for one shape runs others (plans built on first use): a Conv with asymmetric pads (explicit
// padding copy) created for X [1,3,8,8], run at X [2,3,11,9], against the CPU reference at that shape.
TEST(GpuConv, LayerRunsShapesOtherThanTuned) {
  const Tensor wt = Random(DataType::kFloat32, {4, 3, 3, 3}, 5, -0.5, 0.5);
  auto make_graph = [&](const Shape& xs) {
    auto g = std::make_unique<Graph>();
    Node* n = g->AddNode("Conv", "dyn");
    n->attrs["pads"] = Ints({1, 0, 1, 2});
    Value* x = g->GetOrAddValue("x");
    x->dtype = DataType::kFloat32;
    x->shape = FromStatic(xs);
    x->has_shape = true;
    x->is_graph_input = true;
    g->inputs.push_back(x);
    n->inputs = {x, g->AddConstant("w", wt)};
    Value* y = g->GetOrAddValue("y");
    y->producer = n;
    y->is_graph_output = true;
    n->outputs = {y};
    g->outputs.push_back(y);
    return g;
  };
  auto tuned = make_graph({1, 3, 8, 8});
  const Node& node = *tuned->nodes().front();
  cuda::LayerSpec spec{node, {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{1, 4, 8, 8}}, /*allow_tf32=*/false};
  auto tactics = cuda::TacticsFor(spec);
  ASSERT_TRUE(tactics.ok()) << tactics.status().ToString();
  auto layer = cuda::CreateLayer(spec, tactics->front());
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();

  const Tensor xt = Random(DataType::kFloat32, {2, 3, 11, 9}, 6);
  auto ref = cpu::RunGraph(*make_graph(xt.shape()), {{"x", xt}});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const Tensor& want = ref->at("y");
  ASSERT_EQ(want.shape(), (Shape{2, 4, 11, 9}));

  auto stream = cuda::Stream::Create();
  ASSERT_TRUE(stream.ok());
  cuda::Handles handles;
  ASSERT_TRUE(handles.Init(stream->get()).ok());
  auto dx = cuda::DeviceBuffer::Allocate(xt.nbytes());
  auto dw = cuda::DeviceBuffer::Allocate(wt.nbytes());
  auto dy = cuda::DeviceBuffer::Allocate(want.nbytes());
  ASSERT_TRUE(dx.ok() && dw.ok() && dy.ok());
  ASSERT_TRUE(cuda::CopyToDevice(dx->get(), xt.raw(), xt.nbytes(), stream->get()).ok());
  ASSERT_TRUE(cuda::CopyToDevice(dw->get(), wt.raw(), wt.nbytes(), stream->get()).ok());
  std::vector<cuda::DeviceTensor> ins(2), outs(1);
  ins[0] = {dx->get(), DataType::kFloat32, xt.shape(), nullptr};
  ins[1] = {dw->get(), DataType::kFloat32, wt.shape(), &wt};
  outs[0] = {dy->get(), DataType::kFloat32, want.shape(), nullptr};
  const size_t ws_bytes = (*layer)->WorkspaceBytes(ins, outs);
  auto ws = cuda::DeviceBuffer::Allocate(ws_bytes);
  ASSERT_TRUE(ws.ok());
  cuda::LaunchContext ctx{stream->get(), ws->get(), ws_bytes, handles.cublaslt(), handles.cudnn()};
  Status st = (*layer)->Enqueue(ctx, ins, outs);
  ASSERT_TRUE(st.ok()) << st.ToString();
  Tensor got(DataType::kFloat32, want.shape());
  ASSERT_TRUE(cuda::CopyToHost(got.raw(), dy->get(), got.nbytes(), stream->get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4 + 1e-4 * std::fabs(want.data<float>()[i]))
        << "index " << i;
}

TEST(GpuConv, UnknownTacticIsAnError) {
  ConvCase c = Conv({1, 2, 5, 5}, {3, 2, 3, 3});
  auto r = c.Make().Tactic("winograd-please").MatchesCpu();
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("unknown tactic"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace kiln::gputest
