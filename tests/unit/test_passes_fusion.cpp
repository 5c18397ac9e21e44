// Recognition and fusion passes (recognize-gelu, recognize-layernorm, recognize-attention,
// fuse-bias-activation, fuse-pointwise) and the CPU kernels of the ops they create: each test builds a small
// graph with the Graph API, runs it on random inputs before and after the pass (rtol 1e-4), checks the
// rewrite count and resulting op types, and has a negative case where the pass must leave the graph alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/uniform_value.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::ExpectSameOutputs;
using testing::Random;

struct TestGraph : testing::TestGraph {
  TestGraph() {
    seed = 5;
    lo = -2;
    hi = 2;
  }
};

using PassPtr = Result<PassReport> (*)(Graph&, const PassOptions&);

// Runs the pass and the verifier, checks the outputs did not change; returns the rewrite count.
int Apply(TestGraph& t, PassPtr pass, double rtol = 1e-4, double atol = 1e-5) {
  auto before = t.Run();
  const size_t outputs = t.g.outputs.size();
  std::vector<std::string> names;
  for (const Value* o : t.g.outputs) names.push_back(o->name);
  PassOptions o;
  o.evaluator = cpu::MakeConstEvaluator();
  auto r = pass(t.g, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return -1;
  Status st = VerifyGraph(t.g);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << PrintGraph(t.g);
  EXPECT_EQ(r->details.size(), static_cast<size_t>(r->rewrites));
  EXPECT_EQ(t.g.outputs.size(), outputs);
  for (size_t i = 0; i < outputs; ++i) EXPECT_EQ(t.g.outputs[i]->name, names[i]);
  ExpectSameOutputs(before, t.Run(), rtol, atol);
  return r->rewrites;
}

// ---- recognize-gelu ----

TEST(RecognizeGelu, ErfFormsInEveryExporterOrder) {
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE(form);
    TestGraph t;
    Value* x = t.Op("Relu", "/pre/Relu", {t.Input("in", {3, 5, 7})});  // x has other readers too
    Value* d = form % 2 ? t.Op("Mul", "/act/Mul_d", {x, t.F(0.70710678f)}) : t.Op("Div", "/act/Div", {x, t.F(1.4142f)});
    Value* e = t.Op("Erf", "/act/Erf", {d});
    Value* a = form == 3 ? t.Op("Add", "/act/Add", {t.F(1.f), e}) : t.Op("Add", "/act/Add", {e, t.F(1.f)});
    Value* y;
    if (form == 0) y = t.Op("Mul", "/act/Mul_1", {t.Op("Mul", "/act/Mul", {x, a}), t.F(0.5f)});
    else if (form == 1) y = t.Op("Mul", "/act/Mul_1", {x, t.Op("Mul", "/act/Mul", {a, t.F(0.5f)})});
    else y = t.Op("Mul", "/act/Mul_1", {a, t.Op("Mul", "/act/Mul", {t.F(0.5f), x})});
    t.Output(t.Op("Add", "/post/Add", {y, x}));
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeGeluPass), 1);
    EXPECT_EQ(t.Count("Gelu"), 1);
    EXPECT_EQ(t.Count("Erf"), 0);
    EXPECT_EQ(t.Count("Mul"), 0);
    EXPECT_EQ(t.Find("Gelu")->gets("approximate", ""), "none");
    EXPECT_EQ(t.Find("Gelu")->name, "/act/Gelu");
  }
}

Value* GeluTanh(TestGraph& t, Value* x, bool pow) {
  Value* cube = pow ? t.Op("Pow", "/g/Pow", {x, t.F(3.f)})
                    : t.Op("Mul", "/g/Mul_c", {x, t.Op("Mul", "/g/Mul_sq", {x, x})});
  Value* c = t.Op("Mul", "/g/Mul_k", {t.F(0.044715f), cube});
  Value* s = t.Op("Add", "/g/Add", {x, c});
  Value* k = t.Op("Mul", "/g/Mul_s", {t.F(0.7978845608f), s});
  Value* one = t.Op("Add", "/g/Add_1", {t.F(1.f), t.Op("Tanh", "/g/Tanh", {k})});
  return t.Op("Mul", "/g/Mul_out", {t.Op("Mul", "/g/Mul_h", {t.F(0.5f), x}), one});
}

TEST(RecognizeGelu, TanhFormWithPowOrProducts) {
  for (bool pow : {true, false}) {
    TestGraph t;
    Value* x = t.Input("x", {4, 33});
    t.Output(GeluTanh(t, x, pow));
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeGeluPass), 1);
    ASSERT_EQ(t.g.nodes().size(), 1u);
    EXPECT_EQ(t.Find("Gelu")->gets("approximate", ""), "tanh");
    EXPECT_EQ(t.g.outputs[0]->name, "/g/Mul_out_out");
  }
}

TEST(RecognizeGelu, LeavesLookalikesAlone) {
  {  // wrong constant: x / 2
    TestGraph t;
    Value* x = t.Input("x", {6});
    Value* a = t.Op("Add", "add", {t.Op("Erf", "erf", {t.Op("Div", "div", {x, t.F(2.f)})}), t.F(1.f)});
    t.Output(t.Op("Mul", "m2", {t.Op("Mul", "m1", {x, a}), t.F(0.5f)}));
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeGeluPass), 0);
    EXPECT_EQ(t.Count("Erf"), 1);
  }
  {  // the erf result is also a graph output
    TestGraph t;
    Value* x = t.Input("x", {6});
    Value* e = t.Op("Erf", "erf", {t.Op("Div", "div", {x, t.F(1.41421356f)})});
    Value* a = t.Op("Add", "add", {e, t.F(1.f)});
    t.Output(t.Op("Mul", "m2", {t.Op("Mul", "m1", {x, a}), t.F(0.5f)}));
    t.Output(e);
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeGeluPass), 0);
    EXPECT_EQ(t.Count("Gelu"), 0);
  }
}

// ---- recognize-layernorm ----

Value* DecomposedLN(TestGraph& t, Value* x, int64_t c, bool pow_div, bool affine, int64_t axis = -1) {
  Value* mean = t.Op("ReduceMean", "/ln/ReduceMean", {x, t.Ints({axis})});
  Value* d = t.Op("Sub", "/ln/Sub", {x, mean});
  Value* sq = pow_div ? t.Op("Pow", "/ln/Pow", {d, t.F(2.f)}) : t.Op("Mul", "/ln/Mul_sq", {d, d});
  Value* var = t.Op("ReduceMean", "/ln/ReduceMean_1", {sq, t.Ints({axis})});
  Value* sd = t.Op("Sqrt", "/ln/Sqrt", {t.Op("Add", "/ln/Add", {var, t.F(1e-5f)})});
  Value* n = pow_div ? t.Op("Div", "/ln/Div", {d, sd}) : t.Op("Mul", "/ln/Mul_n", {t.Op("Reciprocal", "/ln/Rec", {sd}), d});
  if (!affine) return n;
  Value* gamma = t.Const("gamma", Random({c}, 3, 0.5, 1.5));
  Value* beta = t.Const("beta", Random({1, 1, c}, 4));
  return t.Op("Add", "/ln/Add_1", {beta, t.Op("Mul", "/ln/Mul", {n, gamma})});
}

TEST(RecognizeLayerNorm, PowDivWithScaleAndBias) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3, 10});
  t.Output(DecomposedLN(t, x, 10, true, true));
  t.Finish();
  EXPECT_EQ(Apply(t, RecognizeLayerNormPass), 1);
  ASSERT_EQ(t.g.nodes().size(), 1u);
  const Node* ln = t.Find("LayerNormalization");
  ASSERT_TRUE(ln);
  EXPECT_NEAR(ln->getf("epsilon", 0), 1e-5f, 1e-9);
  EXPECT_EQ(ln->geti("axis", 0), -1);
  EXPECT_EQ(ln->inputs[2]->const_value->rank(), 1);  // [1,1,C] bias flattened to [C]
}

TEST(RecognizeLayerNorm, MulSquareReciprocalWithoutAffine) {
  TestGraph t;
  Value* x = t.Input("x", {5, 17});
  t.Output(t.Op("Relu", "r", {DecomposedLN(t, x, 17, false, false)}));
  t.Finish();
  EXPECT_EQ(Apply(t, RecognizeLayerNormPass), 1);
  EXPECT_EQ(t.Count("LayerNormalization"), 1);
  EXPECT_EQ(t.g.nodes().size(), 2u);
  EXPECT_EQ(t.Count("ReduceMean"), 0);
}

TEST(RecognizeLayerNorm, NotOverAnotherAxis) {
  TestGraph t;
  Value* x = t.Input("x", {2, 6, 4});
  t.Output(DecomposedLN(t, x, 4, true, false, 1));
  t.Finish();
  EXPECT_EQ(Apply(t, RecognizeLayerNormPass), 0);
  EXPECT_EQ(t.Count("ReduceMean"), 2);
}

// RMS normalization as T5 (Pow, Div(1, Sqrt)), LLaMA (Pow, Reciprocal(Sqrt)) and others (Mul(x, x), Pow(s, -0.5),
// Div(x, Sqrt)) write it; with and without the scale.
TEST(RecognizeLayerNorm, RmsNormInEveryForm) {
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE(form);
    TestGraph t;
    Value* x = t.Input("x", {2, 3, 8});
    Value* sq = form == 2 ? t.Op("Mul", "sq", {x, x}) : t.Op("Pow", "sq", {x, t.F(2.f)});
    Value* var = t.Op("ReduceMean", "var", {sq, t.Const("axes", Tensor::FromInt64({-1}))}, {{"keepdims", Attribute::Int(1)}});
    Value* s = t.Op("Add", "eps", {var, t.F(1e-6f)});
    Value* n = nullptr;
    if (form == 0) n = t.Op("Mul", "norm", {x, t.Op("Div", "inv", {t.F(1.f), t.Op("Sqrt", "sqrt", {s})})});
    if (form == 1) n = t.Op("Mul", "norm", {t.Op("Reciprocal", "inv", {t.Op("Sqrt", "sqrt", {s})}), x});
    if (form == 2) n = t.Op("Mul", "norm", {x, t.Op("Pow", "inv", {s, t.F(-0.5f)})});
    if (form == 3) n = t.Op("Div", "norm", {x, t.Op("Sqrt", "sqrt", {s})});
    if (form != 3) n = t.Op("Mul", "scale", {t.Const("w", {8}), n});
    t.Output(t.Op("Relu", "after", {n}));
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeLayerNormPass), 1);
    const Node* rn = t.Find("RMSNormalization");
    ASSERT_TRUE(rn) << PrintGraph(t.g);
    EXPECT_EQ(t.g.nodes().size(), 2u);
    EXPECT_NEAR(rn->getf("epsilon", 0), 1e-6f, 1e-10);
    EXPECT_EQ(rn->inputs[1]->const_value->shape(), (std::vector<int64_t>{8}));
  }
}

TEST(RecognizeLayerNorm, RmsNormNotWhenTheSquareIsShared) {
  TestGraph t;
  Value* x = t.Input("x", {2, 8});
  Value* sq = t.Op("Pow", "sq", {x, t.F(2.f)});
  Value* var = t.Op("ReduceMean", "var", {sq, t.Const("axes", Tensor::FromInt64({-1}))}, {{"keepdims", Attribute::Int(1)}});
  t.Output(t.Op("Div", "norm", {x, t.Op("Sqrt", "sqrt", {t.Op("Add", "eps", {var, t.F(1e-6f)})})}));
  t.Output(sq);
  t.Finish();
  EXPECT_EQ(Apply(t, RecognizeLayerNormPass), 0);
}

// ---- recognize-attention ----

// q, k, v [B, H, S, D]; K^T by Transpose(k) (or from a [B, S, H, D] tensor like BERT's when `bert_k`).
struct AttnGraph {
  TestGraph t;
  Value *q, *k, *v;
  AttnGraph(int64_t b, int64_t h, int64_t s, int64_t d, bool bert_k) {
    q = t.Input("q", {b, h, s, d});
    v = t.Input("v", {b, h, s, d});
    if (bert_k) {
      Value* k4 = t.Input("k", {b, s, h, d});
      k = t.Op("Transpose", "/attn/Transpose_k", {k4}, {{"perm", Attribute::Ints({0, 2, 3, 1})}});
    } else {
      k = t.Op("Transpose", "/attn/Transpose_k", {t.Input("k", {b, h, s, d})},
               {{"perm", Attribute::Ints({0, 1, 3, 2})}});
    }
  }
};

TEST(RecognizeAttention, BertPatternDivAndAdditiveMask) {
  for (bool bert_k : {false, true}) {
    AttnGraph a(2, 3, 5, 4, bert_k);
    TestGraph& t = a.t;
    Value* mask = t.Input("mask", {2, 1, 1, 5}, DataType::kFloat32, -3, 0);
    Value* s = t.Op("MatMul", "/attn/MatMul", {a.q, a.k});
    s = t.Op("Div", "/attn/Div", {s, t.F(2.f)});
    s = t.Op("Add", "/attn/Add", {s, mask});
    Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
    t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, a.v}));
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeAttentionPass), bert_k ? 2 : 1);
    const Node* at = t.Find("Attention");
    ASSERT_TRUE(at);
    EXPECT_EQ(at->domain, "kiln");
    EXPECT_FLOAT_EQ(at->getf("scale", 0), 0.5f);
    EXPECT_EQ(at->geti("kiln_k_transposed", -1), 0);
    EXPECT_EQ(at->inputs.size(), 4u);
    EXPECT_EQ(t.Count("Softmax"), 0);
    // perm [0,1,3,2] composes to the identity (dropped); BERT's [0,2,3,1] becomes [0,2,1,3], a head split that
    // the attention absorbs (it reads K [B, S, H, D] through strides).
    EXPECT_EQ(t.Count("Transpose"), 0);
    EXPECT_EQ(at->gets("kiln_k_layout", ""), bert_k ? "BSHD" : "");
    if (bert_k) EXPECT_EQ(at->inputs[1]->name, "k");
  }
}

TEST(RecognizeAttention, VitScaleOnQueryNoMask) {
  AttnGraph a(1, 2, 7, 8, false);
  TestGraph& t = a.t;
  Value* qs = t.Op("Mul", "/attn/Mul", {a.q, t.F(0.35f)});
  Value* p = t.Op("Softmax", "/attn/Softmax", {t.Op("MatMul", "/attn/MatMul", {qs, a.k})}, {{"axis", Attribute::Int(3)}});
  t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, a.v}));
  t.Finish();
  EXPECT_EQ(Apply(t, RecognizeAttentionPass), 1);
  ASSERT_EQ(t.g.nodes().size(), 1u);
  EXPECT_NEAR(t.Find("Attention")->getf("scale", 0), 0.35f, 1e-7);
}

TEST(RecognizeAttention, Gpt2CausalWhereMaskAndSharedKTranspose) {
  AttnGraph a(2, 2, 6, 4, false);
  TestGraph& t = a.t;
  Tensor tri(DataType::kBool, {6, 6});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j <= i; ++j) tri.data<uint8_t>()[i * 6 + j] = 1;
  Value* keep = t.Const("keep", tri);
  Value* s = t.Op("Div", "/attn/Div", {t.Op("MatMul", "/attn/MatMul", {a.q, a.k}), t.F(2.f)});
  s = t.Op("Where", "/attn/Where", {keep, s, t.F(-3.4e38f)});
  Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
  t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, a.v}));
  t.Output(t.Op("Relu", "kt_reader", {a.k}));  // K^T has another reader: stays an input, kiln_k_transposed=1
  t.Finish();
  EXPECT_EQ(Apply(t, RecognizeAttentionPass), 1);
  const Node* at = t.Find("Attention");
  ASSERT_TRUE(at);
  EXPECT_EQ(at->geti("kiln_k_transposed", -1), 1);
  EXPECT_EQ(at->geti("kiln_keep_if_true", -1), 1);
  ASSERT_EQ(at->inputs.size(), 5u);
  EXPECT_EQ(at->inputs[3], nullptr);
  EXPECT_EQ(t.Count("Where"), 0);
}

// PyTorch's SDPA export (transformers 5): sqrt(scale) on Q and on K^T, an additive mask built with Where, and
// P = Where(IsNaN(P), 0, P) between the Softmax and the second MatMul. Row 0 of the mask is fully -inf, so the
// guard's zeros are exercised.
TEST(RecognizeAttention, SdpaExportWithTwoSidedScaleAndNanGuard) {
  AttnGraph a(1, 2, 5, 4, true);
  TestGraph& t = a.t;
  Tensor keep(DataType::kBool, {1, 1, 5, 5});
  for (int i = 1; i < 5; ++i)
    for (int j = 0; j < 5; ++j) keep.data<uint8_t>()[i * 5 + j] = j != 4;
  Value* keep_in = t.Input("keep", {1, 1, 5, 5}, DataType::kBool);  // an input, so the mask is not folded
  t.feeds["keep"] = keep;
  Value* mask = t.Op("Where", "/attn/Where", {keep_in, t.F(0.f), t.F(-INFINITY)});
  Value* q = t.Op("Mul", "/attn/Mul", {a.q, t.F(0.70710678f)});
  Value* k = t.Op("Mul", "/attn/Mul_1", {a.k, t.F(0.70710678f)});
  Value* s = t.Op("Add", "/attn/Add", {t.Op("MatMul", "/attn/MatMul", {q, k}), mask});
  Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
  Value* nan = t.Op("IsNaN", "/attn/IsNaN", {p});
  Value* guarded = t.Op("Where", "/attn/Where_1", {nan, t.F(0.f), p});
  t.Output(t.Op("MatMul", "/attn/MatMul_1", {guarded, a.v}));
  t.Finish();
  const auto before = t.Run();
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(before.begin()->second.data<float>()[0], 0.f);  // the fully masked row is zero, not NaN
  EXPECT_EQ(Apply(t, RecognizeAttentionPass), 2);  // + K's head split absorbed
  const Node* at = t.Find("Attention");
  ASSERT_TRUE(at);
  EXPECT_NEAR(at->getf("scale", 0), 0.5f, 1e-6);
  EXPECT_EQ(at->geti("kiln_nan_to_zero", 0), 1);
  EXPECT_EQ(t.Count("IsNaN"), 0);
  EXPECT_EQ(t.Count("Softmax"), 0);
}

// BERT's whole head split / merge: Q, K, V from [B, S, H, D] by Transpose [0,2,1,3] (K^T by [0,2,3,1]) and the
// output merged back by Transpose [0,2,1,3]; all four Transposes become kiln_*_layout = BSHD (rank 3 too).
TEST(RecognizeAttention, AbsorbsHeadSplitAndMergeTransposes) {
  for (int rank : {3, 4}) {
    SCOPED_TRACE(rank);
    TestGraph t;
    const std::vector<int64_t> bshd = rank == 4 ? std::vector<int64_t>{2, 5, 3, 8} : std::vector<int64_t>{5, 3, 8};
    const std::vector<int64_t> split = rank == 4 ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{1, 0, 2};
    const std::vector<int64_t> kt = rank == 4 ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{1, 2, 0};
    auto tp = [&](const char* name, Value* x, const std::vector<int64_t>& perm) {
      return t.Op("Transpose", name, {x}, {{"perm", Attribute::Ints(perm)}});
    };
    Value* q = tp("/attn/Transpose_q", t.Input("q", bshd), split);
    Value* k = tp("/attn/Transpose_k", t.Input("k", bshd), kt);
    Value* v = tp("/attn/Transpose_v", t.Input("v", bshd), split);
    Value* s = t.Op("Div", "/attn/Div", {t.Op("MatMul", "/attn/MatMul", {q, k}), t.F(2.f)});
    if (rank == 4) s = t.Op("Add", "/attn/Add", {s, t.Input("mask", {2, 1, 1, 5}, DataType::kFloat32, -3, 0)});
    Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
    Value* y = tp("/attn/Transpose_out", t.Op("MatMul", "/attn/MatMul_1", {p, v}), split);
    t.Output(t.Op("Relu", "after", {y}));
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeAttentionPass), 5);  // the attention + 4 Transposes
    EXPECT_EQ(t.Count("Transpose"), 0);
    const Node* at = t.Find("Attention");
    ASSERT_TRUE(at);
    for (const char* a : {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout", "kiln_out_layout"})
      EXPECT_EQ(at->gets(a, ""), "BSHD") << a;
    EXPECT_EQ(at->geti("kiln_k_transposed", -1), 0);
    EXPECT_EQ(at->inputs[0]->name, "q");
    EXPECT_EQ(at->inputs[1]->name, "k");
    EXPECT_EQ(at->inputs[2]->name, "v");
    EXPECT_EQ(t.Find("Relu")->inputs[0], at->outputs[0]);
  }
}

// Transposes that are read elsewhere, are graph outputs, or permute other axes stay.
TEST(RecognizeAttention, KeepsSharedOrOtherTransposes) {
  TestGraph t;
  auto tp = [&](const char* name, Value* x, const std::vector<int64_t>& perm) {
    return t.Op("Transpose", name, {x}, {{"perm", Attribute::Ints(perm)}});
  };
  Value* q = tp("/attn/Transpose_q", t.Input("q", {2, 5, 3, 8}), {0, 2, 1, 3});
  Value* k = tp("/attn/Transpose_k", t.Input("k", {2, 3, 5, 8}), {0, 1, 3, 2});  // K -> K^T: dropped
  Value* v = tp("/attn/Transpose_v", t.Input("v", {3, 2, 5, 8}), {1, 0, 2, 3});  // not a head swap
  Value* p = t.Op("Softmax", "/attn/Softmax", {t.Op("MatMul", "/attn/MatMul", {q, k})}, {{"axis", Attribute::Int(-1)}});
  Value* y = t.Op("MatMul", "/attn/MatMul_1", {p, v});
  t.Output(t.Op("Relu", "q_reader", {q}));  // Q's Transpose has another reader
  t.Output(tp("/attn/Transpose_out", y, {0, 2, 1, 3}));  // a graph output: the attention may write it as BSHD
  t.Finish();
  EXPECT_EQ(Apply(t, RecognizeAttentionPass), 2);
  const Node* at = t.Find("Attention");
  ASSERT_TRUE(at);
  EXPECT_EQ(at->gets("kiln_q_layout", ""), "");
  EXPECT_EQ(at->gets("kiln_v_layout", ""), "");
  EXPECT_EQ(at->gets("kiln_out_layout", ""), "BSHD");
  EXPECT_EQ(t.Count("Transpose"), 2);  // Q's and V's
}

TEST(RecognizeAttention, NotWhenProbabilitiesAreReadOrAxisIsNotLast) {
  for (int c = 0; c < 2; ++c) {
    AttnGraph a(1, 2, 4, 4, false);
    TestGraph& t = a.t;
    Value* p = t.Op("Softmax", "/attn/Softmax", {t.Op("MatMul", "/attn/MatMul", {a.q, a.k})},
                    {{"axis", Attribute::Int(c == 0 ? -1 : 2)}});
    t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, a.v}));
    if (c == 0) t.Output(p);
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeAttentionPass), 0);
    EXPECT_EQ(t.Count("Attention"), 0);
  }
}

// ---- simplify-attention-mask ----

// An attention recognized with a constant additive mask `mask` (and, when given, a constant keep mask).
struct MaskedAttn {
  AttnGraph a{2, 2, 5, 4, false};
  TestGraph& t = a.t;
  Node* Build(Tensor mask, const Tensor* keep = nullptr) {
    Value* s = t.Op("MatMul", "/attn/MatMul", {a.q, a.k});
    if (keep) s = t.Op("Where", "/attn/Where", {t.Const("keep", *keep), s, t.F(-1e9f)});
    s = t.Op("Add", "/attn/Add", {s, t.Const("mask", std::move(mask))});
    Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
    t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, a.v}));
    t.Finish();
    EXPECT_EQ(Apply(t, RecognizeAttentionPass), 1);
    return t.g.nodes().empty() ? nullptr : const_cast<Node*>(t.Find("Attention"));
  }
};

TEST(SimplifyAttentionMask, AllZeroAdditiveMaskIsDropped) {
  MaskedAttn m;
  Tensor zeros(DataType::kFloat32, {2, 1, 5, 5});
  zeros.data<float>()[3] = -0.f;
  Node* at = m.Build(zeros);
  ASSERT_TRUE(at);
  ASSERT_EQ(at->inputs.size(), 4u);
  EXPECT_EQ(Apply(m.t, SimplifyAttentionMaskPass), 1);
  EXPECT_EQ(at->inputs.size(), 3u);
}

// transformers' padding mask expanded to [B, 1, S, S]: the same row for every query; shrinks to [B, 1, 1, S]
// (batch rows differ, so axis 0 stays). A keep mask that keeps everything goes with its attributes.
TEST(SimplifyAttentionMask, RepeatedRowsShrinkAndAKeepAllMaskIsDropped) {
  MaskedAttn m;
  Tensor mask(DataType::kFloat32, {2, 1, 5, 5});
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) mask.data<float>()[(b * 5 + i) * 5 + j] = j >= 3 + b ? -10000.f : 0.f;
  Tensor keep(DataType::kBool, {5, 5});
  for (int i = 0; i < 25; ++i) keep.data<uint8_t>()[i] = 1;
  Node* at = m.Build(mask, &keep);
  ASSERT_TRUE(at);
  ASSERT_EQ(at->inputs.size(), 5u);
  EXPECT_EQ(Apply(m.t, SimplifyAttentionMaskPass), 1);
  ASSERT_EQ(at->inputs.size(), 4u);
  ASSERT_TRUE(at->inputs[3]->is_const());
  EXPECT_EQ(at->inputs[3]->const_value->shape(), (std::vector<int64_t>{2, 1, 1, 5}));
  EXPECT_FALSE(at->has_attr("kiln_mask_fill"));
  EXPECT_FALSE(at->has_attr("kiln_keep_if_true"));
}

// A causal keep mask and a mask whose rows differ stay as they are; a mask the same for both batches shrinks
// along the batch axis only.
TEST(SimplifyAttentionMask, LeavesVaryingMasks) {
  {
    MaskedAttn m;
    Tensor mask = Random({2, 1, 5, 5}, 9, -3, 0);
    Tensor tri(DataType::kBool, {5, 5});
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j <= i; ++j) tri.data<uint8_t>()[i * 5 + j] = 1;
    Node* at = m.Build(mask, &tri);
    ASSERT_TRUE(at);
    EXPECT_EQ(Apply(m.t, SimplifyAttentionMaskPass), 0);
    EXPECT_EQ(at->inputs.size(), 5u);
    EXPECT_EQ(at->inputs[3]->const_value->shape(), (std::vector<int64_t>{2, 1, 5, 5}));
  }
  {
    MaskedAttn m;
    Tensor row = Random({1, 1, 5, 5}, 10, -3, 0), mask(DataType::kFloat32, {2, 1, 5, 5});
    for (int b = 0; b < 2; ++b) std::memcpy(mask.data<float>() + b * 25, row.data<float>(), 25 * sizeof(float));
    Node* at = m.Build(mask);
    ASSERT_TRUE(at);
    EXPECT_EQ(Apply(m.t, SimplifyAttentionMaskPass), 1);
    EXPECT_EQ(at->inputs[3]->const_value->shape(), (std::vector<int64_t>{1, 1, 5, 5}));
  }
}

// transformers' mask chain over a symbolic sequence length, as a dynamic-shape build keeps it: Where(Expand(
// GreaterOrEqual(Range(0, S, 1) as [1, 1, S, 1], bound), [B, 1, S, S]), 0, -inf). With bound 0 every score is kept,
// so the additive mask is all zeros and goes, as the keep mask Where(that, scores, fill) does; with bound 1 the
// first row is masked and both stay.
TEST(SimplifyAttentionMask, UniformMasksFromTheSequenceLengthAreDropped) {
  for (int bound : {0, 1}) {
    for (bool keep_form : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "bound " << bound << (keep_form ? " keep mask" : " additive mask"));
      AttnGraph a(2, 2, 5, 4, false);
      TestGraph& t = a.t;
      Value* seq = t.Input("seq", {}, DataType::kInt64, 5, 5);  // the sequence length, unknown to the build
      Value* r = t.Op("Range", "/m/Range", {t.Const("start", Tensor::FromInt64({0}, {})), seq,
                                            t.Const("one", Tensor::FromInt64({1}, {}))});
      Value* r4 = t.Op("Unsqueeze", "/m/Unsqueeze", {r, t.Ints({0, 1, 3})});
      Value* ge = t.Op("GreaterOrEqual", "/m/GreaterOrEqual", {r4, t.Const("bound", Tensor::FromInt64({bound}, {}))});
      Value* keep = t.Op("Expand", "/m/Expand", {ge, t.Ints("shape", {2, 1, 5, 5})});
      Value* s = t.Op("MatMul", "/attn/MatMul", {a.q, a.k});
      if (keep_form) {
        s = t.Op("Where", "/attn/Where", {keep, s, t.F(-1e9f)});
      } else {
        Value* add = t.Op("Where", "/m/Where", {keep, t.F(0.f), t.F(-1e9f)});
        s = t.Op("Add", "/attn/Add", {s, add});
      }
      Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
      t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, a.v}));
      t.Finish();
      ASSERT_EQ(Apply(t, RecognizeAttentionPass), 1);
      Node* at = const_cast<Node*>(t.Find("Attention"));
      ASSERT_TRUE(at);
      const size_t before = at->inputs.size();
      ASSERT_EQ(before, keep_form ? 5u : 4u);
      EXPECT_EQ(Apply(t, SimplifyAttentionMaskPass), bound == 0 ? 1 : 0);
      EXPECT_EQ(at->inputs.size(), bound == 0 ? 3u : before);
    }
  }
}

// What UniformValue proves and what it leaves alone.
TEST(UniformValue, ProvesOnlyWhatTheProducersDecide) {
  TestGraph t;
  auto to = [](DataType d) { return std::map<std::string, Attribute>{{"to", Attribute::Int(static_cast<int64_t>(d))}}; };
  Value* x = t.Input("x", {3, 4});
  Value* n = t.Input("n", {}, DataType::kInt64, 6, 6);
  Value* dims = t.Input("dims", {2}, DataType::kInt64, 3, 4);
  Value* ones = t.Op("ConstantOfShape", "/ones", {dims}, {{"value", Attribute::TensorValue(Tensor::FromFloat({1.f}, {1}))}});
  Value* zeros = t.Op("ConstantOfShape", "/zeros", {dims});
  Value* r = t.Op("Range", "/r", {t.Const("s", Tensor::FromInt64({2}, {})), n, t.Const("d", Tensor::FromInt64({1}, {}))});
  Value* rdown = t.Op("Range", "/rdown", {t.Const("s2", Tensor::FromInt64({2}, {})), n,
                                          t.Const("d2", Tensor::FromInt64({-1}, {}))});
  Value* two = t.Const("two", Tensor::FromInt64({2}, {}));
  Value* three = t.Const("three", Tensor::FromInt64({3}, {}));
  Value* ge = t.Op("GreaterOrEqual", "/ge", {r, two});
  Value* gt = t.Op("Greater", "/gt", {r, two});
  Value* lt = t.Op("Less", "/lt", {r, two});
  Value* ge3 = t.Op("GreaterOrEqual", "/ge3", {r, three});
  Value* gedown = t.Op("GreaterOrEqual", "/gedown", {rdown, two});
  Value* any = t.Op("Greater", "/any", {x, t.F(0.f)});
  Value* yes = t.Op("Cast", "/yes", {ones}, to(DataType::kBool));
  Value* either = t.Op("Or", "/or", {any, yes});
  Value* both = t.Op("And", "/and", {any, yes});
  Value* no = t.Op("Not", "/not", {yes});
  Value* w = t.Op("Where", "/w", {any, zeros, t.F(0.f)});
  Value* w2 = t.Op("Where", "/w2", {any, zeros, ones});
  Value* w3 = t.Op("Where", "/w3", {yes, t.F(-3.f), x});
  Value* third = t.Op("Cast", "/third", {t.Op("Where", "/w4", {yes, t.F(0.3f), x})}, to(DataType::kFloat16));
  Value* neg = t.Op("Cast", "/neg", {w3}, to(DataType::kUInt8));
  Value* three_f = t.Op("Where", "/three_f", {yes, t.F(3.f), x});
  Value* int2 = t.Op("Cast", "/int2", {three_f}, to(DataType::kInt2));    // 3 is outside int2's [-2, 1]
  Value* uint8 = t.Op("Cast", "/uint8", {three_f}, to(DataType::kUInt8));  // exact
  // A Range cast to int32 may wrap (int64 steps of 1e9 pass 2^31): no lower bound through it; to int64 there is.
  Value* big = t.Op("Range", "/big", {t.Const("s3", Tensor::FromInt64({0}, {})), n, t.Const("d3", Tensor::FromInt64({1000000000}, {}))});
  Value* narrowed = t.Op("GreaterOrEqual", "/narrowed", {t.Op("Cast", "/to32", {big}, to(DataType::kInt32)),
                                                         t.Const("z32", Tensor(DataType::kInt32, {}))});
  Value* widened = t.Op("GreaterOrEqual", "/widened", {t.Op("Cast", "/to64", {t.Op("Cast", "/to32b", {big}, to(DataType::kInt32))}, to(DataType::kInt64)), two});
  Value* huge = t.Const("huge", Tensor::FromInt64({int64_t{1} << 53, (int64_t{1} << 53) + 1}, {2}));
  for (Value* v : {ge, gt, lt, ge3, gedown, either, both, no, w, w2, w3, third, neg, int2, uint8, narrowed, widened})
    t.Output(v);
  t.Finish();
  EXPECT_EQ(UniformValue(ones), 1.0);
  EXPECT_EQ(UniformValue(zeros), 0.0);
  EXPECT_EQ(UniformValue(x), std::nullopt);  // a graph input
  EXPECT_EQ(UniformValue(r), std::nullopt);  // a Range varies
  EXPECT_EQ(UniformValue(ge), 1.0);
  EXPECT_EQ(UniformValue(gt), std::nullopt);  // its first element equals 2
  EXPECT_EQ(UniformValue(lt), 0.0);
  EXPECT_EQ(UniformValue(ge3), std::nullopt);
  EXPECT_EQ(UniformValue(gedown), std::nullopt);  // a falling Range
  EXPECT_EQ(UniformValue(yes), 1.0);
  EXPECT_EQ(UniformValue(either), 1.0);
  EXPECT_EQ(UniformValue(both), std::nullopt);
  EXPECT_EQ(UniformValue(no), 0.0);
  EXPECT_EQ(UniformValue(w), 0.0);  // both branches zero
  EXPECT_EQ(UniformValue(w2), std::nullopt);
  EXPECT_EQ(UniformValue(w3), -3.0);
  EXPECT_EQ(UniformValue(third), std::nullopt);  // 0.3 is not exact in float16
  EXPECT_EQ(UniformValue(neg), std::nullopt);    // -3 wraps in an unsigned type
  EXPECT_EQ(UniformValue(int2), std::nullopt);
  EXPECT_EQ(UniformValue(uint8), 3.0);
  EXPECT_EQ(UniformValue(narrowed), std::nullopt);
  EXPECT_EQ(UniformValue(widened), std::nullopt);  // the int32 step between already wrapped
  EXPECT_EQ(UniformValue(huge), std::nullopt);     // 2^53 and 2^53 + 1 are one double
}

// ---- fuse-qkv-projection ----

// A BERT self-attention from x [2, 5, 16] (2 heads of 8): Q, K and V each Linear -> Reshape [2, 5, 2, 8] ->
// Transpose; `k_from` feeds the key projection (x, or another tensor).
Value* BertSelfAttention(TestGraph& t, Value* x, Value* k_from) {
  auto proj = [&](const std::string& name, Value* in) {
    Value* m = t.Op("MatMul", "/attn/" + name + "/MatMul", {in, t.Const(name + ".weight", {16, 16})});
    Value* y = t.Op("Add", "/attn/" + name + "/Add", {t.Const(name + ".bias", {16}), m});
    return t.Op("Reshape", "/attn/" + name + "/Reshape", {y, t.Const(name + ".shape", Tensor::FromInt64({2, 5, 2, 8}))});
  };
  auto tp = [&](const std::string& name, Value* v, std::vector<int64_t> perm) {
    return t.Op("Transpose", "/attn/Transpose_" + name, {v}, {{"perm", Attribute::Ints(std::move(perm))}});
  };
  Value* q = tp("q", proj("query", x), {0, 2, 1, 3});
  Value* k = tp("k", proj("key", k_from), {0, 2, 3, 1});
  Value* v = tp("v", proj("value", x), {0, 2, 1, 3});
  Value* s = t.Op("Div", "/attn/Div", {t.Op("MatMul", "/attn/MatMul", {q, k}), t.F(2.8284271f)});
  s = t.Op("Add", "/attn/Add", {s, t.Input("mask", {2, 1, 1, 5}, DataType::kFloat32, -3, 0)});
  Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
  Value* y = tp("out", t.Op("MatMul", "/attn/MatMul_1", {p, v}), {0, 2, 1, 3});
  return t.Op("Reshape", "/attn/Reshape_out", {y, t.Const("out.shape", Tensor::FromInt64({2, 5, 16}))});
}

TEST(FuseQkvProjection, OneGemmReadPackedByTheAttention) {
  TestGraph t;
  Value* x = t.Input("x", {2, 5, 16});
  t.Output(BertSelfAttention(t, x, x));
  t.Finish();
  EXPECT_EQ(Apply(t, FuseBiasActivationPass), 3);
  EXPECT_EQ(Apply(t, RecognizeAttentionPass), 5);
  EXPECT_EQ(Apply(t, FuseQkvProjectionPass), 1);
  EXPECT_EQ(t.Count("FusedMatMul"), 1);
  EXPECT_EQ(t.Count("Reshape"), 2);  // the packed view and the output's
  const Node* at = t.Find("Attention");
  ASSERT_TRUE(at);
  for (const char* a : {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout"}) EXPECT_EQ(at->gets(a, ""), "BS3HD") << a;
  EXPECT_EQ(at->inputs[0], at->inputs[1]);
  EXPECT_EQ(at->inputs[0], at->inputs[2]);
  EXPECT_EQ(ShapeToString(at->inputs[0]->shape), "[2,5,3,2,8]");
  const Node* mm = t.Find("FusedMatMul");
  EXPECT_EQ(mm->input(1)->const_value->shape(), (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(mm->input(2)->const_value->shape(), (std::vector<int64_t>{48}));
}

TEST(FuseQkvProjection, NotWhenKeyComesFromAnotherInput) {
  TestGraph t;
  Value* x = t.Input("x", {2, 5, 16});
  t.Output(BertSelfAttention(t, x, t.Input("memory", {2, 5, 16})));  // cross-attention
  t.Finish();
  EXPECT_EQ(Apply(t, FuseBiasActivationPass), 3);
  EXPECT_EQ(Apply(t, RecognizeAttentionPass), 5);
  EXPECT_EQ(Apply(t, FuseQkvProjectionPass), 0);
  EXPECT_EQ(t.Count("FusedMatMul"), 3);
}

// timm/torchvision ViT attention: qkv(x).reshape(B, S, 3, H, D).permute(2, 0, 3, 1, 4), split into Q, K, V by
// unbind (Split + Squeeze) or indexing (Gather); `tamper` makes one part unusable for packing.
Value* VitSelfAttention(TestGraph& t, Value* x, bool gather, int tamper) {
  Value* y = t.Op("MatMul", "/attn/qkv/MatMul", {x, t.Const("qkv.weight", {16, 48})});
  y = t.Op("Add", "/attn/qkv/Add", {y, t.Const("qkv.bias", {48})});
  Value* p = t.Op("Reshape", "/attn/Reshape", {y, t.Const("qkv.shape", Tensor::FromInt64({2, 5, 3, 2, 8}))});
  Value* tp = t.Op("Transpose", "/attn/Transpose", {p}, {{"perm", Attribute::Ints({2, 0, 3, 1, 4})}});
  Value* parts[3];
  if (gather) {
    for (int i = 0; i < 3; ++i) {
      const int64_t idx = tamper == 1 && i == 1 ? 2 : i;  // 1: K and V both read part 2
      parts[i] = t.Op("Gather", "/attn/Gather_" + std::to_string(i),
                      {tp, t.Const("idx" + std::to_string(i), Tensor::FromInt64({idx}, {}))},
                      {{"axis", Attribute::Int(0)}});
    }
  } else {
    Node* sp = t.OpNode("Split", "/attn/Split", {tp, t.Const("split", Tensor::FromInt64({1, 1, 1}))},
                        {{"axis", Attribute::Int(0)}}, 3);
    for (int i = 0; i < 3; ++i)
      parts[i] = t.Op("Squeeze", "/attn/Squeeze_" + std::to_string(i), {sp->outputs[i], t.Const("ax", Tensor::FromInt64({0}))});
  }
  if (tamper == 2) t.Output(parts[2]);  // V is also a graph output: the split must stay
  Value* k = t.Op("Transpose", "/attn/Transpose_k", {parts[1]}, {{"perm", Attribute::Ints({0, 1, 3, 2})}});
  Value* q = t.Op("Mul", "/attn/Mul", {parts[0], t.F(0.35f)});
  Value* pr = t.Op("Softmax", "/attn/Softmax", {t.Op("MatMul", "/attn/MatMul", {q, k})}, {{"axis", Attribute::Int(-1)}});
  Value* o = t.Op("Transpose", "/attn/Transpose_out", {t.Op("MatMul", "/attn/MatMul_1", {pr, parts[2]})},
                  {{"perm", Attribute::Ints({0, 2, 1, 3})}});
  return t.Op("Reshape", "/attn/Reshape_out", {o, t.Const("out.shape", Tensor::FromInt64({2, 5, 16}))});
}

TEST(FuseQkvProjection, ModelPackedQkvIsReadWithoutTheTransposeAndSplit) {
  for (bool gather : {false, true}) {
    SCOPED_TRACE(gather ? "gather" : "split");
    TestGraph t;
    t.Output(VitSelfAttention(t, t.Input("x", {2, 5, 16}), gather, 0));
    t.Finish();
    EXPECT_EQ(Apply(t, FuseBiasActivationPass), 1);
    EXPECT_GE(Apply(t, RecognizeAttentionPass), 1);
    EXPECT_EQ(Apply(t, FuseQkvProjectionPass), 1);
    const Node* at = t.Find("Attention");
    ASSERT_TRUE(at);
    for (const char* a : {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout"}) EXPECT_EQ(at->gets(a, ""), "BS3HD") << a;
    EXPECT_EQ(ShapeToString(at->inputs[0]->shape), "[2,5,3,2,8]");
    EXPECT_EQ(at->inputs[0], at->inputs[2]);
    EXPECT_EQ(t.Count("Transpose") + t.Count("Split") + t.Count("Squeeze") + t.Count("Gather"), 0);
  }
}

TEST(FuseQkvProjection, ModelPackedQkvLeftAloneWhenAPartIsUsedElsewhere) {
  for (int tamper : {1, 2}) {
    SCOPED_TRACE(tamper);
    TestGraph t;
    t.Output(VitSelfAttention(t, t.Input("x", {2, 5, 16}), true, tamper));
    t.Finish();
    Apply(t, FuseBiasActivationPass);
    Apply(t, RecognizeAttentionPass);
    EXPECT_EQ(Apply(t, FuseQkvProjectionPass), 0);
    EXPECT_EQ(t.Count("Gather"), 3);
  }
}

// Swin's shifted-window attention: the scores of all B * nW windows viewed as [B, nW, H, N, N] to add the window
// mask, then viewed back.
TEST(ExposeWindowAttention, MaskedWindowsBecomeOneAttention) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias and mask" : "mask only");
    TestGraph t;
    Value* q = t.Op("Mul", "/attn/Mul", {t.Input("q", {8, 2, 5, 4}), t.F(0.5f)});
    Value* k = t.Op("Transpose", "/attn/Transpose_k", {t.Input("k", {8, 2, 5, 4})},
                    {{"perm", Attribute::Ints({0, 1, 3, 2})}});
    Value* s = t.Op("MatMul", "/attn/MatMul", {q, k});
    if (bias) s = t.Op("Add", "/attn/Add_bias", {s, t.Const("bias", {1, 2, 5, 5})});
    s = t.Op("Reshape", "/attn/Reshape_w", {s, t.Const("w5", Tensor::FromInt64({2, 4, 2, 5, 5}))});
    s = t.Op("Add", "/attn/Add_mask", {s, t.Const("mask", {1, 4, 1, 5, 5}, -3, 0)});
    s = t.Op("Reshape", "/attn/Reshape_b", {s, t.Const("b4", Tensor::FromInt64({8, 2, 5, 5}))});
    Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
    Value* o = t.Op("MatMul", "/attn/MatMul_1", {p, t.Input("v", {8, 2, 5, 4})});
    o = t.Op("Transpose", "/attn/Transpose_o", {o}, {{"perm", Attribute::Ints({0, 2, 1, 3})}});
    t.Output(t.Op("Reshape", "/attn/Reshape_o", {o, t.Const("o3", Tensor::FromInt64({8, 5, 8}))}));
    t.Finish();
    EXPECT_EQ(Apply(t, ExposeWindowAttentionPass), 1);
    EXPECT_GE(Apply(t, RecognizeAttentionPass), 1);
    const Node* at = t.Find("Attention");
    ASSERT_TRUE(at) << PrintGraph(t.g);
    EXPECT_EQ(t.Count("Softmax") + t.Count("MatMul") + t.Count("Add"), 0);
    EXPECT_EQ(ShapeToString(at->inputs[0]->shape), "[2,4,2,5,4]");
    ASSERT_GE(at->inputs.size(), 4u);
    EXPECT_EQ(ShapeToString(at->inputs[3]->shape), bias ? "[1,4,2,5,5]" : "[1,4,1,5,5]");  // small: not over B
    EXPECT_EQ(at->gets("kiln_out_layout", ""), "BSHD");  // the head merge went into the attention
    EXPECT_NEAR(at->getf("scale", 0), 0.5f, 1e-7);
  }
}

// The same with Q, K and V unpacked from one projection (Swin's qkv Linear): after the window view, the attention
// still reads them packed, from a [B, nW, N, 3, H, D] view of the projection.
TEST(ExposeWindowAttention, PackedProjectionIsReadThroughTheWindowView) {
  TestGraph t;
  Value* y = t.Input("y", {8, 5, 24});
  Value* pk = t.Op("Reshape", "/attn/Reshape_qkv", {y, t.Const("p5", Tensor::FromInt64({8, 5, 3, 2, 4}))});
  Value* tp = t.Op("Transpose", "/attn/Transpose_qkv", {pk}, {{"perm", Attribute::Ints({2, 0, 3, 1, 4})}});
  Value* part[3];
  for (int i = 0; i < 3; ++i)
    part[i] = t.Op("Gather", "/attn/Gather_" + std::to_string(i),
                   {tp, t.Const("i" + std::to_string(i), Tensor::FromInt64({i}, {}))}, {{"axis", Attribute::Int(0)}});
  Value* q = t.Op("Mul", "/attn/Mul", {part[0], t.F(0.5f)});
  Value* k = t.Op("Transpose", "/attn/Transpose_k", {part[1]}, {{"perm", Attribute::Ints({0, 1, 3, 2})}});
  Value* s = t.Op("Add", "/attn/Add_bias", {t.Op("MatMul", "/attn/MatMul", {q, k}), t.Const("bias", {1, 2, 5, 5})});
  s = t.Op("Reshape", "/attn/Reshape_w", {s, t.Const("w5", Tensor::FromInt64({2, 4, 2, 5, 5}))});
  s = t.Op("Add", "/attn/Add_mask", {s, t.Const("mask", {1, 4, 1, 5, 5}, -3, 0)});
  s = t.Op("Reshape", "/attn/Reshape_b", {s, t.Const("b4", Tensor::FromInt64({8, 2, 5, 5}))});
  Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
  t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, part[2]}));
  t.Finish();
  EXPECT_EQ(Apply(t, ExposeWindowAttentionPass), 1);
  EXPECT_GE(Apply(t, RecognizeAttentionPass), 1);
  EXPECT_EQ(Apply(t, FuseQkvProjectionPass), 1);
  const Node* at = t.Find("Attention");
  ASSERT_TRUE(at) << PrintGraph(t.g);
  for (const char* a : {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout"}) EXPECT_EQ(at->gets(a, ""), "BS3HD") << a;
  EXPECT_EQ(ShapeToString(at->inputs[0]->shape), "[2,4,5,3,2,4]");
  EXPECT_EQ(t.Count("Gather") + t.Count("Transpose"), 0);
}

TEST(ExposeWindowAttention, NotWhenTheMaskVariesOverTheBatch) {
  TestGraph t;
  Value* s = t.Op("MatMul", "/attn/MatMul", {t.Input("q", {8, 2, 5, 4}), t.Input("kt", {8, 2, 4, 5})});
  s = t.Op("Reshape", "/attn/Reshape_w", {s, t.Const("w5", Tensor::FromInt64({2, 4, 2, 5, 5}))});
  s = t.Op("Add", "/attn/Add_mask", {s, t.Const("mask", {2, 4, 1, 5, 5}, -3, 0)});
  s = t.Op("Reshape", "/attn/Reshape_b", {s, t.Const("b4", Tensor::FromInt64({8, 2, 5, 5}))});
  Value* p = t.Op("Softmax", "/attn/Softmax", {s}, {{"axis", Attribute::Int(-1)}});
  t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, t.Input("v", {8, 2, 5, 4})}));
  t.Finish();
  EXPECT_EQ(Apply(t, ExposeWindowAttentionPass), 0);
}

// GPT-2's attention: one projection split in three along its last axis, each third viewed as [B, S, H, D]. `named`:
// y's batch and sequence are named (dynamic shapes) and the heads views copy them with 0.
void BuildSplitAttention(TestGraph& t, int64_t b, int64_t s, bool named) {
  Value* y = t.Input("y", {b, s, 24});
  if (named) y->shape = {Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(24)};
  Node* sp = t.OpNode("Split", "/attn/Split", {y, t.Const("split", Tensor::FromInt64({8, 8, 8}))},
                      {{"axis", Attribute::Int(2)}}, 3);
  const std::vector<int64_t> heads = named ? std::vector<int64_t>{0, 0, 2, 4} : std::vector<int64_t>{b, s, 2, 4};
  Value* parts[3];
  for (int i = 0; i < 3; ++i) {
    Value* v = t.Op("Reshape", "/attn/Reshape_" + std::to_string(i),
                    {sp->outputs[i], t.Const("hs" + std::to_string(i), Tensor::FromInt64(heads))});
    parts[i] = t.Op("Transpose", "/attn/Transpose_" + std::to_string(i), {v},
                    {{"perm", Attribute::Ints(i == 1 ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3})}});
  }
  Value* pr = t.Op("Softmax", "/attn/Softmax", {t.Op("Div", "/attn/Div", {t.Op("MatMul", "/attn/MatMul", {parts[0], parts[1]}), t.F(2.f)})},
                   {{"axis", Attribute::Int(-1)}});
  t.Output(t.Op("MatMul", "/attn/MatMul_1", {pr, parts[2]}));
  t.Finish();
}

TEST(FuseQkvProjection, LastAxisSplitIsReadPacked) {
  TestGraph t;
  BuildSplitAttention(t, 2, 5, false);
  EXPECT_GE(Apply(t, RecognizeAttentionPass), 1);
  EXPECT_EQ(Apply(t, FuseQkvProjectionPass), 1);
  const Node* at = t.Find("Attention");
  ASSERT_TRUE(at);
  for (const char* a : {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout"}) EXPECT_EQ(at->gets(a, ""), "BS3HD") << a;
  EXPECT_EQ(ShapeToString(at->inputs[0]->shape), "[2,5,3,2,4]");
  EXPECT_EQ(t.Count("Split") + t.Count("Transpose"), 0);
  EXPECT_EQ(t.Count("Reshape"), 1);
}

// The same with dynamic shapes: packed too, and the packed graph gives the same results at another batch and
// sequence.
TEST(FuseQkvProjection, LastAxisSplitIsReadPackedWithSymbolicShapes) {
  TestGraph t;
  BuildSplitAttention(t, 2, 5, true);
  EXPECT_GE(Apply(t, RecognizeAttentionPass), 1);
  EXPECT_EQ(Apply(t, FuseQkvProjectionPass), 1);
  const Node* at = t.Find("Attention");
  ASSERT_TRUE(at);
  EXPECT_EQ(ShapeToString(at->inputs[0]->shape), "[batch,seq,3,2,4]");
  EXPECT_EQ(t.Count("Split") + t.Count("Transpose"), 0);
  TestGraph other;
  BuildSplitAttention(other, 3, 4, true);
  auto want = other.Run();
  t.feeds = other.feeds;
  ExpectSameOutputs(want, t.Run());
}

// T5 / LLaMA: projections without a bias. An activation and a residual still fuse into the GEMM (over a zero bias),
// and Q, K, V still pack into one GEMM.
TEST(FuseBiaslessMatMul, ActivationResidualAndQkvFuseOverAZeroBias) {
  TestGraph t;
  Value* x = t.Input("x", {2, 5, 16});
  Value* h = t.Op("Relu", "/ffn/act", {t.Op("MatMul", "/ffn/wi", {x, t.Const("wi", {16, 32})})});
  Value* o = t.Op("MatMul", "/ffn/wo", {h, t.Const("wo", {32, 16})});
  t.Output(t.Op("Add", "/ffn/Add", {x, o}));
  t.Finish();
  EXPECT_EQ(Apply(t, FuseBiasActivationPass), 1);
  EXPECT_EQ(Apply(t, FuseResidualAddPass), 1);
  EXPECT_EQ(t.Count("FusedMatMul"), 2);
  EXPECT_EQ(t.Count("Relu") + t.Count("Add") + t.Count("MatMul"), 0);
  for (const auto& n : t.g.nodes()) {
    ASSERT_GE(n->inputs.size(), 3u);
    EXPECT_EQ(n->inputs[2]->const_value->GetAsDouble(0), 0.0);  // the zero bias
  }

  TestGraph a;
  Value* xa = a.Input("x", {2, 5, 16});
  auto proj = [&](const std::string& name) {
    Value* m = a.Op("MatMul", "/attn/" + name + "/MatMul", {xa, a.Const(name + ".weight", {16, 16})});
    Value* r = a.Op("Reshape", "/attn/" + name + "/Reshape", {m, a.Const(name + ".shape", Tensor::FromInt64({2, 5, 2, 8}))});
    return a.Op("Transpose", "/attn/" + name + "/Transpose", {r},
                {{"perm", Attribute::Ints(name == "k" ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3})}});
  };
  Value* q = proj("q");
  Value* k = proj("k");
  Value* v = proj("v");
  Value* p = a.Op("Softmax", "/attn/Softmax", {a.Op("MatMul", "/attn/MatMul", {q, k})}, {{"axis", Attribute::Int(-1)}});
  a.Output(a.Op("MatMul", "/attn/MatMul_1", {p, v}));
  a.Finish();
  EXPECT_GE(Apply(a, RecognizeAttentionPass), 1);
  EXPECT_EQ(Apply(a, FuseQkvProjectionPass), 1);
  EXPECT_EQ(a.Count("FusedMatMul"), 1);
  EXPECT_EQ(a.Count("MatMul"), 0);
  EXPECT_EQ(a.Find("FusedMatMul")->input(1)->const_value->shape(), (std::vector<int64_t>{16, 48}));
}

// A heads view that regroups the leading dims ([2, 6, 16] viewed as [3, 4, 2, 8]) is not a per-token head split: the
// packed view would copy x's [2, 6], so the projections stay apart.
TEST(FuseQkvProjection, NotWhenTheHeadsViewRegroupsTheLeadingDims) {
  TestGraph t;
  Value* x = t.Input("x", {2, 6, 16});
  auto proj = [&](const std::string& name) {
    Value* m = t.Op("MatMul", "/attn/" + name + "/MatMul", {x, t.Const(name + ".weight", {16, 16})});
    Value* r = t.Op("Reshape", "/attn/" + name + "/Reshape", {m, t.Const(name + ".shape", Tensor::FromInt64({3, 4, 2, 8}))});
    return t.Op("Transpose", "/attn/" + name + "/Transpose", {r},
                {{"perm", Attribute::Ints(name == "k" ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3})}});
  };
  Value* q = proj("q");
  Value* k = proj("k");
  Value* v = proj("v");
  Value* p = t.Op("Softmax", "/attn/Softmax", {t.Op("MatMul", "/attn/MatMul", {q, k})}, {{"axis", Attribute::Int(-1)}});
  t.Output(t.Op("MatMul", "/attn/MatMul_1", {p, v}));
  t.Finish();
  EXPECT_GE(Apply(t, RecognizeAttentionPass), 1);
  EXPECT_EQ(Apply(t, FuseQkvProjectionPass), 0);
  EXPECT_EQ(t.Count("MatMul"), 3);
}

// ---- fuse-bias-activation ----

TEST(FuseBiasActivation, ConvWithEachActivation) {
  const char* acts[] = {"Relu", "LeakyRelu", "Sigmoid", "Clip", "HardSigmoid", "SiLU", "Tanh"};
  for (const char* act : acts) {
    SCOPED_TRACE(act);
    TestGraph t;
    Value* x = t.Input("x", {2, 3, 7, 6});
    Value* w = t.Const("w", Random({5, 3, 3, 3}, 9, -0.5, 0.5));
    Value* b = t.Const("b", Random({5}, 10));
    Value* c = t.Op("Conv", "/conv1/Conv", {x, w, b}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
    Value* y;
    std::string a = act;
    if (a == "SiLU") y = t.Op("Mul", "/act/Mul", {c, t.Op("Sigmoid", "/act/Sigmoid", {c})});
    else if (a == "Clip") y = t.Op("Clip", "/act/Clip", {c, t.F(-0.5f), t.F(1.5f)});
    else if (a == "LeakyRelu") y = t.Op(a, "/act/" + a, {c}, {{"alpha", Attribute::Float(0.3f)}});
    else y = t.Op(a, "/act/" + a, {c});
    t.Output(y);
    t.Finish();
    EXPECT_EQ(Apply(t, FuseBiasActivationPass), 1);
    ASSERT_EQ(t.g.nodes().size(), 1u);
    const Node* f = t.Find("FusedConv");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->gets("kiln_activation", ""), a);
    EXPECT_EQ(f->name, "/conv1/Conv");
    EXPECT_EQ(f->getints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  }
}

TEST(FuseBiasActivation, GemmAndMatMulBiasGelu) {
  TestGraph t;
  Value* a = t.Input("a", {4, 6});
  Value* g = t.Op("Gemm", "/fc/Gemm", {a, t.Const("w", Random({5, 6}, 1)), t.Const("c", Random({5}, 2))},
                  {{"transB", Attribute::Int(1)}});
  t.Output(t.Op("LeakyRelu", "/fc/LeakyRelu", {g}));
  Value* x = t.Input("x", {2, 3, 6});
  Value* m = t.Op("MatMul", "/mlp/MatMul", {x, t.Const("w2", Random({6, 9}, 3))});
  Value* h = t.Op("Add", "/mlp/Add", {t.Const("b2", Random({9}, 4)), m});
  t.Output(t.Op("Gelu", "/mlp/Gelu", {h}));
  Value* m2 = t.Op("MatMul", "/proj/MatMul", {x, t.Const("w3", Random({6, 3}, 5))});
  t.Output(t.Op("Add", "/proj/Add", {m2, t.Const("b3", Random({1, 1, 3}, 6))}));
  t.Finish();
  EXPECT_EQ(Apply(t, FuseBiasActivationPass), 3);
  EXPECT_EQ(t.Count("FusedGemm"), 1);
  EXPECT_EQ(t.Count("FusedMatMul"), 2);
  EXPECT_EQ(t.g.nodes().size(), 3u);
}

TEST(FuseBiasActivation, NotWhenTheIntermediateIsReadOrBiasIsNotConstant) {
  TestGraph t;
  Value* x = t.Input("x", {1, 2, 5, 5});
  Value* c = t.Op("Conv", "conv", {x, t.Const("w", Random({2, 2, 1, 1}, 1))});
  t.Output(t.Op("Relu", "relu", {c}));
  t.Output(c);
  Value* a = t.Input("a", {3, 4});
  Value* r = t.Input("r", {3, 4});
  t.Output(t.Op("Add", "add", {t.Op("MatMul", "mm", {a, t.Const("w2", Random({4, 4}, 2))}), r}));
  t.Finish();
  EXPECT_EQ(Apply(t, FuseBiasActivationPass), 0);
  EXPECT_EQ(t.Count("Conv"), 1);
  EXPECT_EQ(t.Count("MatMul"), 1);
}

// ---- fuse-pointwise ----

TEST(FusePointwise, ChainWithBroadcastOperands) {
  TestGraph t;
  Value* x = t.Input("x", {3, 4, 7});
  Value* bias = t.Input("bias", {7});
  Value* y = t.Op("Mul", "m", {x, t.F(1.5f)});
  y = t.Op("Add", "a", {y, bias});
  y = t.Op("LeakyRelu", "lr", {y}, {{"alpha", Attribute::Float(0.2f)}});
  y = t.Op("Sigmoid", "s", {y});
  t.Output(t.Op("Sub", "sub", {y, t.Input("z", {3, 1, 7})}));
  t.Finish();
  EXPECT_EQ(Apply(t, FusePointwisePass), 1);
  ASSERT_EQ(t.g.nodes().size(), 1u);
  const Node* f = t.Find("FusedPointwise");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->attrs.at("kiln_ops").strings, (std::vector<std::string>{"Mul", "Add", "LeakyRelu", "Sigmoid", "Sub"}));
  EXPECT_EQ(f->inputs.size(), 4u);  // x, 1.5, bias, z
}

// A 20,000-node chain (issue 11: the pass removed the fused nodes one sweep of the graph at a time, 10.8 s for
// this chain where the build without the pass took 1.1 s) becomes one node with the whole program, and the many
// separate chains of a wide graph each become one node.
TEST(FusePointwise, LongChainsAndManyGroupsFuseInOnePass) {
  TestGraph t;
  Value* y = t.Input("x", {2, 3});
  const std::string ops[] = {"Relu", "Neg", "Abs", "Sigmoid"};
  for (int i = 0; i < 20000; ++i) y = t.Op(ops[i % 4], "n" + std::to_string(i), {y});
  t.Output(y);
  for (int c = 0; c < 2000; ++c) {  // 2,000 two-node chains beside it
    Value* z = t.Input("z" + std::to_string(c), {2, 3});
    t.Output(t.Op("Neg", "b" + std::to_string(c), {t.Op("Relu", "a" + std::to_string(c), {z})}));
  }
  t.Finish();
  PassOptions o;
  auto r = FusePointwisePass(t.g, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rewrites, 2001);
  ASSERT_EQ(t.g.nodes().size(), 2001u);
  ASSERT_TRUE(VerifyGraph(t.g).ok());
  size_t longest = 0;
  for (const auto& n : t.g.nodes()) longest = std::max(longest, n->attrs.at("kiln_ops").strings.size());
  EXPECT_EQ(longest, 20000u);
}

TEST(FusePointwise, TreeAndHalfPrecision) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat16}) {
    TestGraph t;
    Value* a = t.Input("a", {5, 9}, dt);
    Value* b = t.Input("b", {5, 9}, dt);
    Value* c = t.Input("c", {9}, dt);
    Value* y = t.Op("Add", "add", {t.Op("Mul", "mul", {a, b}), t.Op("Exp", "exp", {c})});
    // Exp(c) is [9], not the output's shape: it stays outside; Mul + Add + Tanh fuse.
    t.Output(t.Op("Tanh", "tanh", {y}));
    t.Finish();
    EXPECT_EQ(Apply(t, FusePointwisePass, dt == DataType::kFloat16 ? 2e-3 : 1e-4), 1);
    EXPECT_EQ(t.Count("FusedPointwise"), 1);
    EXPECT_EQ(t.Count("Exp"), 1);
    EXPECT_EQ(t.g.nodes().size(), 2u);
  }
}

TEST(FusePointwise, NotForSingleOpsOrSharedIntermediates) {
  TestGraph t;
  Value* x = t.Input("x", {4, 4});
  Value* r = t.Op("Relu", "relu", {x});
  t.Output(t.Op("Exp", "exp", {r}));
  t.Output(t.Op("Neg", "neg", {r}));  // r has two readers: each chain has a single op
  Value* i = t.Input("i", {4}, DataType::kInt64);
  t.Output(t.Op("Neg", "ineg", {t.Op("Abs", "iabs", {i})}));  // integer chains are not fused
  t.Finish();
  EXPECT_EQ(Apply(t, FusePointwisePass), 0);
  EXPECT_EQ(t.Count("FusedPointwise"), 0);
}

// ---- kernels on malformed nodes: errors, never crashes ----

TEST(FusedKernels, MalformedNodesGiveErrors) {
  Tensor x = Random({2, 3}, 1);
  {
    Node n;
    n.name = "pw";
    n.op_type = "FusedPointwise";
    n.domain = "kiln";
    n.outputs.push_back(nullptr);
    Attribute ops;
    ops.kind = Attribute::Kind::kStrings;
    ops.strings = {"Relu", "Bogus"};
    n.attrs["kiln_ops"] = ops;
    n.attrs["kiln_args"] = Attribute::Ints({0, 0, -1, -1});
    n.attrs["kiln_alpha"] = Attribute::Floats({0, 0});
    n.attrs["kiln_beta"] = Attribute::Floats({0, 0});
    auto r = cpu::EvaluateNode(n, {&x});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("Bogus"), std::string::npos);
    n.attrs["kiln_ops"].strings = {"Relu", "Add"};
    n.attrs["kiln_args"] = Attribute::Ints({0, 0, -1, -2});  // step 1 reads itself
    r = cpu::EvaluateNode(n, {&x});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("'pw'"), std::string::npos);
  }
  {
    Node n;
    n.name = "attn";
    n.op_type = "Attention";
    n.domain = "kiln";
    n.outputs.push_back(nullptr);
    Tensor q = Random({1, 4, 8}, 2), k = Random({1, 4, 6}, 3), v = Random({1, 4, 8}, 4);
    auto r = cpu::EvaluateNode(n, {&q, &k, &v});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("'attn'"), std::string::npos);
    // A packed (BS3HD) operand must be [.., S, 3, H, D]; the output cannot be packed.
    Tensor p = Random({1, 4, 2, 2, 8}, 5);
    n.attrs["kiln_q_layout"] = Attribute::String("BS3HD");
    r = cpu::EvaluateNode(n, {&p, &p, &p});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("BS3HD"), std::string::npos) << r.status().message();
    Tensor p3 = Random({1, 4, 3, 2, 8}, 6);
    for (const char* l : {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout"}) n.attrs[l] = Attribute::String("BS3HD");
    n.attrs["kiln_out_layout"] = Attribute::String("BS3HD");
    r = cpu::EvaluateNode(n, {&p3, &p3, &p3});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("kiln_out_layout"), std::string::npos) << r.status().message();
    n.attrs["kiln_out_layout"] = Attribute::String("BSHD");
    r = cpu::EvaluateNode(n, {&p3, &p3, &p3});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{1, 4, 2, 8}));
  }
  {
    Node n;
    n.name = "fc";
    n.op_type = "FusedMatMul";
    n.domain = "kiln";
    n.outputs.push_back(nullptr);
    n.attrs["kiln_activation"] = Attribute::String("Swish9");
    Tensor w = Random({3, 4}, 5), b = Random({4}, 6);
    auto r = cpu::EvaluateNode(n, {&x, &w, &b});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("Swish9"), std::string::npos);
  }
}

// Attention kernel vs a direct computation with broadcast batch dims, both masks and K given as K^T.
TEST(FusedKernels, AttentionMatchesDirectComputation) {
  const int64_t H = 3, S = 5, T = 7, D = 4, DV = 6;
  Tensor q = Random({2, H, S, D}, 1), kt = Random({1, H, D, T}, 2), v = Random({2, 1, T, DV}, 3);
  Tensor mask = Random({2, 1, 1, T}, 4, -2, 0), keep(DataType::kBool, {S, T});
  for (int64_t i = 0; i < S * T; ++i) keep.data<uint8_t>()[i] = (i * 7) % 3 != 0;
  for (int64_t i = 0; i < S; ++i) keep.data<uint8_t>()[i * T] = 1;
  Node n;
  n.name = "attn";
  n.op_type = "Attention";
  n.domain = "kiln";
  n.outputs.push_back(nullptr);
  n.attrs["scale"] = Attribute::Float(0.7f);
  n.attrs["kiln_k_transposed"] = Attribute::Int(1);
  n.attrs["kiln_mask_fill"] = Attribute::Float(-1e9f);
  auto r = cpu::EvaluateNode(n, {&q, &kt, &v, &mask, &keep});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& y = (*r)[0];
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, H, S, DV}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> s(T);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q.data<float>()[((b * H + h) * S + i) * D + d] * kt.data<float>()[(h * D + d) * T + j];
          s[j] = dot * 0.7 + mask.data<float>()[b * T + j];
          if (!keep.data<uint8_t>()[i * T + j]) s[j] = -1e9;
          mx = std::max(mx, s[j]);
        }
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int64_t c = 0; c < DV; ++c) {
          double o = 0;
          for (int64_t j = 0; j < T; ++j) o += s[j] / sum * v.data<float>()[(b * T + j) * DV + c];
          EXPECT_NEAR(y.data<float>()[((b * H + h) * S + i) * DV + c], o, 1e-5 + 1e-4 * std::fabs(o));
        }
      }
}

}  // namespace
}  // namespace kiln
