// Pass fuse-residual-add and the residual input of kiln.FusedMatMul / kiln.FusedGemm / kiln.FusedConv on the CPU
// reference: the pass fires on BERT-like post-LN blocks (and Gemm heads) and ResNet-like conv blocks exactly where
// the Add can move into the epilogue, leaves it alone where it cannot (GEMM output read elsewhere, an activation, broadcast or a Gemm C
// that is no bias), and the optimized graph gives the original's outputs on the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

struct TestGraph : testing::TestGraph {
  // x W + b, as exporters write a Linear layer.
  Value* Dense(const std::string& scope, Value* x, int64_t k, int64_t n, bool bias_first = true) {
    Value* m = Op("MatMul", scope + "/MatMul", {x, Const(scope + ".weight", {k, n})});
    Value* b = Const(scope + ".bias", {n});
    return Op("Add", scope + "/Add", bias_first ? std::vector<Value*>{b, m} : std::vector<Value*>{m, b});
  }
  Value* LayerNorm(const std::string& scope, Value* x, int64_t n) {
    return Op("LayerNormalization", scope + "/LayerNormalization", {x, Const(scope + ".g", {n}), Const(scope + ".b", {n})},
              {{"axis", Attribute::Int(-1)}, {"epsilon", Attribute::Float(1e-5f)}});
  }
};

// Runs fuse-bias-activation then fuse-residual-add; checks the verifier, the outputs (unchanged: the CPU
// kernel rounds the GEMM result to the output type before adding the residual, as the separate Add did) and
// one detail line per rewrite; returns fuse-residual-add's rewrite count.
int Apply(TestGraph& t, double tol = 1e-6) {
  auto before = t.Run();
  PassOptions o;
  o.evaluator = cpu::MakeConstEvaluator();
  auto r1 = FuseBiasActivationPass(t.g, o);
  EXPECT_TRUE(r1.ok()) << r1.status().ToString();
  auto r = FuseResidualAddPass(t.g, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r1.ok() || !r.ok()) return -1;
  Status st = VerifyGraph(t.g);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << PrintGraph(t.g);
  InferOptions io;
  io.evaluator = cpu::MakeConstEvaluator();
  st = InferGraph(t.g, io);  // the shape function accepts the residual input
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << PrintGraph(t.g);
  EXPECT_EQ(r->details.size(), static_cast<size_t>(r->rewrites));
  auto after = t.Run();
  testing::ExpectSameOutputs(before, after, tol, tol);  // |x - y| <= tol * (1 + |x|)
  return r->rewrites;
}

// BERT's post-LN encoder layer, attention replaced by a dense layer: two residual Adds, each read only by a
// LayerNormalization, with the residual on either side of the Add and the bias on either side of its Add.
void BertBlock(TestGraph& t, Value* x, int64_t h, int layer) {
  const std::string s = "/encoder/layer." + std::to_string(layer);
  Value* attn = t.Dense(s + "/attention/output/dense", x, h, h);
  Value* ln1 = t.LayerNorm(s + "/attention/output/LayerNorm", t.Op("Add", s + "/attention/output/Add", {attn, x}), h);
  Value* inter = t.Op("Relu", s + "/intermediate/act", {t.Dense(s + "/intermediate/dense", ln1, h, 2 * h, false)});
  Value* out = t.Dense(s + "/output/dense", inter, 2 * h, h);
  t.Output(t.LayerNorm(s + "/output/LayerNorm", t.Op("Add", s + "/output/Add", {ln1, out}), h));
}

TEST(FuseResidualAdd, BertLikeBlockFusesBothResidualAdds) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat16}) {
    SCOPED_TRACE(DataTypeName(dt));
    TestGraph t;
    t.dt = dt;
    BertBlock(t, t.Input("hidden", {2, 5, 16}), 16, 0);
    t.Finish();
    EXPECT_EQ(Apply(t, dt == DataType::kFloat16 ? 1e-3 : 1e-6), 2);
    EXPECT_EQ(t.Count("Add"), 0);
    EXPECT_EQ(t.Count("FusedMatMul", 4), 2);  // A, B, bias, residual
    EXPECT_EQ(t.Count("FusedMatMul", 3), 1);  // the intermediate dense keeps its Relu and takes no residual
    EXPECT_EQ(t.Count("LayerNormalization"), 2);
    for (const auto& n : t.g.nodes()) {
      if (n->op_type != "FusedMatMul" || n->inputs.size() != 4) continue;
      EXPECT_EQ(n->gets("kiln_activation", ""), "None");
      EXPECT_TRUE(n->name.ends_with("/dense/MatMul")) << n->name;  // the node takes the GEMM's name
    }
  }
}

TEST(FuseResidualAdd, RunsInTheOptimizerAfterBiasActivation) {
  TestGraph t;
  Value* x = t.Input("hidden", {2, 4, 8});
  BertBlock(t, x, 8, 0);
  t.Finish();
  auto before = t.Run();
  PassOptions o;
  o.evaluator = cpu::MakeConstEvaluator();
  auto r = OptimizeGraph(t.g, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->Count("fuse-residual-add"), 2);
  EXPECT_EQ(t.Count("FusedMatMul", 4), 2);
  EXPECT_EQ(t.Count("Add"), 0);
  auto after = t.Run();
  for (const auto& [name, a] : before)
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_NEAR(a.GetAsDouble(i), after.at(name).GetAsDouble(i), 1e-5) << name << " " << i;
}

TEST(FuseResidualAdd, DisabledByNameInTheOptimizer) {
  TestGraph t;
  BertBlock(t, t.Input("hidden", {2, 4, 8}), 8, 0);
  t.Finish();
  PassOptions o;
  o.evaluator = cpu::MakeConstEvaluator();
  o.disabled = {"fuse-residual-add"};
  auto r = OptimizeGraph(t.g, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->Count("fuse-residual-add"), 0);
  EXPECT_EQ(t.Count("Add"), 2);
  o.disabled = {"fuse-residual-adds"};
  auto bad = OptimizeGraph(t.g, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("fuse-residual-adds"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().ToString().find("fuse-residual-add,"), std::string::npos) << bad.status().ToString();
}

TEST(FuseResidualAdd, NotWhenTheGemmOutputHasAnotherReader) {
  TestGraph t;
  Value* x = t.Input("x", {3, 8});
  Value* d = t.Dense("/dense", x, 8, 8);
  t.Output(t.LayerNorm("/ln", t.Op("Add", "/res/Add", {x, d}), 8));
  t.Output(t.Op("Relu", "/other", {d}));  // the dense output is read beside the residual Add
  Value* d2 = t.Dense("/dense2", x, 8, 8);
  Value* sum = t.Op("Add", "/res2/Add", {x, d2});
  t.Output(sum);  // the GEMM output is consumed only by the Add; the Add's output may be read anywhere
  t.Output(t.LayerNorm("/ln2", sum, 8));
  Value* d3 = t.Dense("/dense3", x, 8, 8);
  t.Output(d3);  // a graph output cannot vanish into the fused node
  t.Output(t.Op("Add", "/res3/Add", {d3, x}));
  t.Finish();
  EXPECT_EQ(Apply(t), 1);
  EXPECT_EQ(t.Count("FusedMatMul", 4), 1);
  EXPECT_EQ(t.Count("Add"), 2);
}

TEST(FuseResidualAdd, NotWithAnActivation) {
  TestGraph t;
  Value* x = t.Input("x", {3, 8});
  Value* a = t.Op("Relu", "/act", {t.Dense("/dense", x, 8, 8)});
  t.Output(t.Op("Add", "/res/Add", {x, a}));
  Value* g = t.Op("Gemm", "/fc/Gemm", {x, t.Const("w", {8, 8}), t.Const("c", {8})});
  t.Output(t.Op("Add", "/res2/Add", {t.Op("Sigmoid", "/fc/Sigmoid", {g}), x}));
  t.Finish();
  EXPECT_EQ(Apply(t), 0);
  EXPECT_EQ(t.Count("Add"), 2);
  EXPECT_EQ(t.Count("FusedMatMul"), 1);
  EXPECT_EQ(t.Count("FusedGemm"), 1);
}

TEST(FuseResidualAdd, NotWithBroadcastShapes) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3, 8});
  Value* r = t.Input("r", {3, 8});
  t.Output(t.Op("Add", "/res/Add", {t.Dense("/dense", x, 8, 8), r}));  // r broadcasts over the batch
  Value* r1 = t.Input("r1", {2, 1, 8});
  t.Output(t.Op("Add", "/res1/Add", {r1, t.Dense("/dense1", x, 8, 8)}));
  t.Output(t.Op("Add", "/res2/Add", {t.Dense("/dense2", x, 8, 1), t.Input("wide", {2, 3, 8})}));  // y broadcasts
  Value* d3 = t.Dense("/dense3", x, 8, 8);
  t.Output(t.Op("Add", "/res3/Add", {d3, d3}));  // y + y
  t.Finish();
  EXPECT_EQ(Apply(t), 0);
  EXPECT_EQ(t.Count("Add"), 4);
}

TEST(FuseResidualAdd, GemmWithoutCOrWithABiasRow) {
  TestGraph t;
  Value* a = t.Input("a", {6, 16});
  Value* r = t.Input("r", {6, 8});
  t.Output(t.Op("Add", "/g0/Add", {t.Op("Gemm", "/g0/Gemm", {a, t.Const("w0", {16, 8})}), r}));
  t.Output(t.Op("Add", "/g1/Add", {r, t.Op("Gemm", "/g1/Gemm", {a, t.Const("w1", {8, 16}), t.Const("c1", {8})},
                                            {{"transB", Attribute::Int(1)}, {"alpha", Attribute::Float(0.5f)}})}));
  t.Output(t.Op("Add", "/g2/Add", {t.Op("Gemm", "/g2/Gemm", {a, t.Const("w2", {16, 8}), t.Const("c2", {1, 8})}), r}));
  // Not fused: a full C (cuBLASLt's one C matrix takes the residual), a scaled bias row.
  t.Output(t.Op("Add", "/g3/Add", {t.Op("Gemm", "/g3/Gemm", {a, t.Const("w3", {16, 8}), t.Const("c3", {6, 8})}), r}));
  t.Output(t.Op("Add", "/g4/Add", {t.Op("Gemm", "/g4/Gemm", {a, t.Const("w4", {16, 8}), t.Const("c4", {8})},
                                        {{"beta", Attribute::Float(0.5f)}}), r}));
  t.Finish();
  EXPECT_EQ(Apply(t), 3);
  EXPECT_EQ(t.Count("FusedGemm", 4), 3);
  EXPECT_EQ(t.Count("Gemm"), 2);
  EXPECT_EQ(t.Count("Add"), 2);
  for (const auto& n : t.g.nodes())
    if (n->op_type == "FusedGemm" && n->name == "/g0/Gemm") EXPECT_EQ(n->input(2), nullptr);  // no C
}

TEST(FuseResidualAdd, ShapeFunctionAndKernelRejectAMismatchedResidual) {
  TestGraph t;
  Value* x = t.Input("x", {3, 8});
  Value* r = t.Input("r", {3, 4});
  Node* n = t.g.AddNode("FusedMatMul", "fmm");
  n->domain = "kiln";
  n->opset = 1;
  n->inputs = {x, t.Const("w", {8, 8}), t.Const("b", {8}), r};
  n->attrs["kiln_activation"] = Attribute::String("None");
  n->outputs.push_back(t.g.AddValue("y"));
  t.Output(n->outputs[0]);
  ASSERT_TRUE(t.g.TopoSort().ok());
  InferOptions io;
  io.evaluator = cpu::MakeConstEvaluator();
  Status st = InferGraph(t.g, io);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("residual"), std::string::npos) << st.ToString();
}

// ResNet's bottleneck tail: conv -> Add(identity) -> Relu, and the downsampling block whose two branches are both
// convolutions. Each Add and its Relu go into the convolution: FusedConv(x, w, b, r; Relu).
TEST(FuseResidualAdd, ConvAddReluBecomesOneFusedConv) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat16}) {
    SCOPED_TRACE(DataTypeName(dt));
    TestGraph t;
    t.dt = dt;
    Value* x = t.Input("x", {2, 8, 6, 6});
    const std::map<std::string, Attribute> pad1 = {{"pads", Attribute::Ints({1, 1, 1, 1})}};
    Value* c1 = t.Op("Relu", "/b0/relu1", {t.Op("Conv", "/b0/conv1", {x, t.Const("w1", {8, 8, 1, 1}), t.Const("b1", {8})})});
    Value* c2 = t.Op("Conv", "/b0/conv2", {c1, t.Const("w2", {8, 8, 3, 3}), t.Const("b2", {8})}, pad1);
    Value* y0 = t.Op("Relu", "/b0/relu2", {t.Op("Add", "/b0/add", {c2, x})});
    // Downsampling block: both operands of the Add are convolutions (one without a bias).
    const std::map<std::string, Attribute> s2 = {{"strides", Attribute::Ints({2, 2})}};
    Value* main = t.Op("Conv", "/b1/conv", {y0, t.Const("w3", {16, 8, 1, 1}), t.Const("b3", {16})}, s2);
    Value* down = t.Op("Conv", "/b1/down", {y0, t.Const("w4", {16, 8, 1, 1})}, s2);
    t.Output(t.Op("Relu", "/b1/relu", {t.Op("Add", "/b1/add", {down, main})}));
    t.Finish();
    EXPECT_EQ(Apply(t, dt == DataType::kFloat16 ? 2e-3 : 1e-5), 2);
    EXPECT_EQ(t.Count("Add"), 0);
    EXPECT_EQ(t.Count("Relu"), 0);
    EXPECT_EQ(t.Count("FusedConv", 4), 2);
    EXPECT_EQ(t.Count("FusedConv", 3), 1);  // conv1 + Relu, no residual
    EXPECT_EQ(t.Count("Conv"), 1);          // one branch of the downsampling block is the residual
    for (const auto& n : t.g.nodes()) {
      if (n->op_type != "FusedConv" || n->inputs.size() != 4) continue;
      EXPECT_EQ(n->gets("kiln_activation", ""), "Relu");
      EXPECT_TRUE(n->name == "/b0/conv2" || n->name == "/b1/down" || n->name == "/b1/conv") << n->name;
    }
  }
}

TEST(FuseResidualAdd, ConvWithoutActivationAfterTheAdd) {
  TestGraph t;
  Value* x = t.Input("x", {1, 4, 5, 7});
  Value* c = t.Op("Conv", "/conv", {x, t.Const("w", {4, 4, 1, 3})}, {{"pads", Attribute::Ints({0, 1, 0, 1})}});
  Value* sum = t.Op("Add", "/add", {x, c});
  t.Output(t.Op("Relu", "/relu", {sum}));
  t.Output(t.Op("Sigmoid", "/sig", {sum}));  // the sum has two readers: it stays a value of its own
  t.Finish();
  EXPECT_EQ(Apply(t), 1);
  ASSERT_EQ(t.Count("FusedConv", 4), 1);
  for (const auto& n : t.g.nodes())
    if (n->op_type == "FusedConv") {
      EXPECT_EQ(n->input(2), nullptr);  // no bias
      EXPECT_EQ(n->gets("kiln_activation", ""), "None");
    }
  EXPECT_EQ(t.Count("Relu"), 1);
}

TEST(FuseResidualAdd, NotAfterAConvActivation) {
  TestGraph t;
  Value* x = t.Input("x", {1, 4, 5, 5});
  Value* c = t.Op("Relu", "/relu", {t.Op("Conv", "/conv", {x, t.Const("w", {4, 4, 1, 1}), t.Const("b", {4})})});
  t.Output(t.Op("Add", "/add", {c, x}));  // relu(conv) + x: the activation comes first
  t.Finish();
  EXPECT_EQ(Apply(t), 0);
  EXPECT_EQ(t.Count("FusedConv", 3), 1);
  EXPECT_EQ(t.Count("Add"), 1);
}

}  // namespace
}  // namespace kiln
