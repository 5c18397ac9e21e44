// Cleanup passes (eliminate-identity, fold-constants, fold-reshape-transpose-chains, eliminate-cse,
// fold-batchnorm, eliminate-dead-code) on small graphs built with the Graph API: each test runs the graph on
// random inputs with the CPU reference backend before and after the pass (rtol 1e-4), checks that the
// rewrite happened (node counts, op types) and that it did not happen where it must not.
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

using testing::ExpectSameOutputs;
using testing::Random;

// A graph under construction plus random feeds (in [-1, 1)) for its inputs; Op returns the node.
struct TestGraph : testing::TestGraph {
  TestGraph() { drop_folded = true; }
  Node* Op(const std::string& op, const std::string& name, std::vector<Value*> ins, size_t outs = 1,
           int64_t opset = 17) {
    return OpNode(op, name, std::move(ins), {}, outs, "", opset);
  }
};

// Runs `pass` (then the verifier) and checks the outputs did not change. Returns the report.
PassReport Apply(TestGraph& t, Result<PassReport> (*pass)(Graph&, const PassOptions&)) {
  auto before = t.Run();
  PassOptions o;
  o.evaluator = cpu::MakeConstEvaluator();
  auto r = pass(t.g, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  Status st = VerifyGraph(t.g);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << PrintGraph(t.g);
  if (r->rewrites > 0) EXPECT_FALSE(r->details.empty());
  ExpectSameOutputs(before, t.Run());
  return *r;
}

bool DetailsMention(const PassReport& r, const std::string& s) {
  for (const auto& d : r.details)
    if (d.find(s) != std::string::npos) return true;
  return false;
}

// ---- eliminate-identity ----

TEST(EliminateIdentity, RemovesNoOpsAndKeepsGraphOutputNames) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3, 5});
  Node* id1 = t.Op("Identity", "id1", {x});
  Node* relu = t.Op("Relu", "relu", {t.Out(id1)});
  Node* drop = t.Op("Dropout", "drop", {t.Out(relu)}, 1, 13);
  Node* cast = t.Op("Cast", "cast", {t.Out(drop)});
  cast->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat32));
  Node* rs = t.Op("Reshape", "rs", {t.Out(cast), t.Ints("shape", {2, 3, 5})});
  Node* sq = t.Op("Unsqueeze", "unsq", {t.Out(rs), t.Ints("axes", {0})});  // changes the shape: kept
  Node* sig = t.Op("Sigmoid", "sig", {t.Out(sq)});
  Node* id2 = t.Op("Identity", "id2", {t.Out(sig)});  // writes a graph output; Sigmoid can write it directly
  t.Output(t.Out(id2));
  Node* id3 = t.Op("Identity", "id3", {x});  // graph input -> graph output: must stay
  t.Output(t.Out(id3));
  Node* cast2 = t.Op("Cast", "cast2", {t.Out(relu)});  // a real conversion: kept
  cast2->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat64));
  t.Output(t.Out(cast2));
  t.Finish();

  PassReport r = Apply(t, EliminateIdentityPass);
  EXPECT_EQ(r.rewrites, 5);  // id1, drop, cast, rs, id2
  EXPECT_EQ(r.details.size(), 5u);
  EXPECT_TRUE(DetailsMention(r, "id2"));
  Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.Count("Identity"), 1);  // id3 only
  EXPECT_TRUE(t.Has("id3"));
  EXPECT_EQ(t.Count("Dropout"), 0);
  EXPECT_EQ(t.Count("Reshape"), 0);
  EXPECT_EQ(t.Count("Unsqueeze"), 1);
  EXPECT_EQ(t.Count("Cast"), 1);
  EXPECT_EQ(t.g.outputs[0]->name, "id2_out");
  EXPECT_EQ(t.g.outputs[0]->producer->name, "sig");
  EXPECT_EQ(t.g.nodes().size(), 5u);  // relu, unsq, sig, id3, cast2
}

// Copies that move nothing (Swin's pad to a window multiple and crop back when the size already fits) go; the same
// ops that move elements stay: a real Pad, a reversing Slice, a Slice that crops.
TEST(EliminateIdentity, RemovesCopiesThatMoveNothing) {
  TestGraph t;
  Value* x = t.Input("x", {2, 6, 5, 4});
  Node* pad0 = t.Op("Pad", "pad0", {x, t.Ints("pads0", {0, 0, 0, 0, 0, 0, 0, 0})}, 1, 18);
  Node* sl = t.Op("Slice", "whole", {t.Out(pad0), t.Ints("st", {0, 0}), t.Ints("en", {6, INT64_MAX}),
                                     t.Ints("ax", {1, 2})});
  Node* sl2 = t.Op("Slice", "whole_step", {t.Out(sl), t.Ints("st2", {0}), t.Ints("en2", {4}), t.Ints("ax2", {3}),
                                           t.Ints("sp2", {1})});
  Node* ex = t.Op("Expand", "expand", {t.Out(sl2), t.Ints("es", {2, 1, 5, 4})});
  Node* cat = t.Op("Concat", "cat1", {t.Out(ex)});
  cat->attrs["axis"] = Attribute::Int(1);
  Node* tile = t.Op("Tile", "tile", {t.Out(cat), t.Ints("reps", {1, 1, 1, 1})});
  Node* relu = t.Op("Relu", "relu", {t.Out(tile)});
  t.Output(t.Out(relu));
  Node* rev = t.Op("Slice", "reverse", {x, t.Ints("rst", {-1}), t.Ints("ren", {INT64_MIN}), t.Ints("rax", {1}),
                                        t.Ints("rsp", {-1})});  // same shape, reversed: kept
  t.Output(t.Out(t.Op("Neg", "neg", {t.Out(rev)})));
  Node* crop = t.Op("Slice", "crop", {x, t.Ints("cst", {1}), t.Ints("cen", {6}), t.Ints("cax", {1})});  // kept
  Node* pad1 = t.Op("Pad", "pad1", {t.Out(crop), t.Ints("pads1", {0, 1, 0, 0, 0, 0, 0, 0})}, 1, 18);  // kept
  t.Output(t.Out(t.Op("Abs", "abs", {t.Out(pad1)})));
  t.Finish();
  PassReport r = Apply(t, EliminateIdentityPass);
  EXPECT_EQ(r.rewrites, 6);  // pad0, whole, whole_step, expand, cat1, tile
  Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.Named("relu")->inputs[0], x);
  EXPECT_TRUE(t.Has("reverse"));
  EXPECT_TRUE(t.Has("crop"));
  EXPECT_TRUE(t.Has("pad1"));
  EXPECT_EQ(t.Count("Expand") + t.Count("Tile") + t.Count("Concat"), 0);
}

TEST(EliminateIdentity, KeepsDropoutWhoseMaskIsUsedOrInTraining) {
  TestGraph t;
  Value* x = t.Input("x", {4, 6});
  Node* d1 = t.Op("Dropout", "d1", {x}, 2, 13);
  t.Output(t.Out(d1, 1));  // the mask is a graph output
  Node* relu = t.Op("Relu", "relu", {t.Out(d1)});
  t.Output(t.Out(relu));
  Tensor ratio = Tensor::Scalar(DataType::kFloat32, 0.5);
  Tensor no = Tensor::Scalar(DataType::kBool, 0);
  Node* d2 = t.Op("Dropout", "d2", {t.Out(relu), t.Const("ratio", ratio), t.Const("train", no)}, 1, 13);
  Node* neg = t.Op("Neg", "neg", {t.Out(d2)});
  t.Output(t.Out(neg));
  t.Finish();
  PassReport r = Apply(t, EliminateIdentityPass);
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_TRUE(DetailsMention(r, "d2"));
  EXPECT_FALSE(DetailsMention(r, "d1"));
  Apply(t, EliminateDeadCodePass);
  EXPECT_TRUE(t.Has("d1"));
  EXPECT_FALSE(t.Has("d2"));
}

// ---- fold-constants ----

TEST(FoldConstants, FoldsConstantSubgraphsLeftByEarlierPasses) {
  TestGraph t;
  Value* x = t.Input("x", {3, 5});
  Value* w = t.Const("w", Random({4, 5}, 3));
  Node* tr = t.Op("Transpose", "wt", {w});
  tr->attrs["perm"] = Attribute::Ints({1, 0});
  Node* sc = t.Op("Mul", "wscale", {t.Out(tr), t.Const("two", Tensor::Scalar(DataType::kFloat32, 2))});
  Node* mm = t.Op("MatMul", "mm", {x, t.Out(sc)});
  t.Output(t.Out(mm));
  t.Finish(/*fold=*/false);  // as if an earlier pass had just exposed the constants
  ASSERT_EQ(t.g.nodes().size(), 3u);
  PassReport r = Apply(t, FoldConstantsPass);
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_TRUE(DetailsMention(r, "wt"));
  EXPECT_TRUE(DetailsMention(r, "wscale"));
  ASSERT_EQ(t.g.nodes().size(), 1u);
  EXPECT_EQ(t.g.nodes()[0]->op_type, "MatMul");
  EXPECT_TRUE(t.g.nodes()[0]->inputs[1]->is_const());
  EXPECT_EQ(t.g.nodes()[0]->inputs[1]->const_value->shape(), (std::vector<int64_t>{5, 4}));
}

TEST(FoldConstants, ConstantGraphOutputAndNoEvaluator) {
  TestGraph t;
  Value* x = t.Input("x", {2});
  Node* c = t.Op("Add", "cadd", {t.Const("a", Random({2}, 4)), t.Const("b", Random({2}, 5))});
  t.Output(t.Out(c));
  Node* n = t.Op("Neg", "neg", {x});
  t.Output(t.Out(n));
  t.Finish(false);
  PassOptions none;  // no evaluator: nothing folded, no failure
  auto r0 = FoldConstantsPass(t.g, none);
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(r0->rewrites, 0);
  PassReport r = Apply(t, FoldConstantsPass);
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_TRUE(t.g.outputs[0]->is_const());
  EXPECT_EQ(t.g.outputs[0]->name, "cadd_out");
  EXPECT_EQ(t.g.nodes().size(), 1u);
}

// ---- fold-reshape-transpose-chains ----

TEST(FoldReshapeTranspose, CollapsesReshapeChains) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3, 4, 5});
  Node* r1 = t.Op("Reshape", "r1", {x, t.Ints("s1", {6, 20})});
  Node* r2 = t.Op("Flatten", "r2", {t.Out(r1)});
  r2->attrs["axis"] = Attribute::Int(0);
  Node* r3 = t.Op("Reshape", "r3", {t.Out(r2), t.Ints("s3", {-1, 5, 4})});
  Node* relu = t.Op("Relu", "relu", {t.Out(r3)});
  t.Output(t.Out(relu));
  // A chain back to the input's shape disappears.
  Node* u = t.Op("Unsqueeze", "u", {x, t.Ints("axes", {0})});
  Node* sq = t.Op("Squeeze", "sq", {t.Out(u), t.Ints("axes0", {0})});
  Node* neg = t.Op("Neg", "neg", {t.Out(sq)});
  t.Output(t.Out(neg));
  t.Finish();
  PassReport r = Apply(t, FoldReshapeTransposeChainsPass);
  EXPECT_EQ(r.rewrites, 3);  // r2 <- r1, r3 <- r2, sq removed
  EXPECT_TRUE(DetailsMention(r, "r3"));
  Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.Count("Reshape"), 1);
  EXPECT_EQ(t.Count("Flatten") + t.Count("Squeeze") + t.Count("Unsqueeze"), 0);
  EXPECT_EQ(t.g.nodes().size(), 3u);
  for (const auto& n : t.g.nodes())
    if (n->op_type == "Reshape") {
      EXPECT_EQ(n->inputs[0], x);
      EXPECT_EQ(n->inputs[1]->const_value->ToInt64Vector(), (std::vector<int64_t>{6, 5, 4}));
    }
}

// ---- gather-concatenated-slices ----

// torch.roll(x, 2, dim=1) as exported: Concat(x[:, -2:], x[:, :-2]); and a three-piece variant with a step.
TEST(GatherConcatenatedSlices, RollsAndPiecesBecomeOneGather) {
  TestGraph t;
  Value* x = t.Input("x", {2, 7, 3});
  Node* a = t.Op("Slice", "tail", {x, t.Ints("s0", {-2}), t.Ints("e0", {INT64_MAX}), t.Ints("a0", {1})});
  Node* b = t.Op("Slice", "head", {x, t.Ints("s1", {0}), t.Ints("e1", {-2}), t.Ints("a1", {1})});
  Node* roll = t.Op("Concat", "roll", {t.Out(a), t.Out(b)});
  roll->attrs["axis"] = Attribute::Int(-2);
  t.Output(t.Out(t.Op("Relu", "relu", {t.Out(roll)})));
  // Slices along another axis than the Concat's, and slices another node reads too: left alone.
  Node* e = t.Op("Slice", "cols", {x, t.Ints("s4", {0}), t.Ints("e4", {2}), t.Ints("a4", {2})});
  Node* other = t.Op("Concat", "other_axis", {t.Out(e), t.Out(e)});
  other->attrs["axis"] = Attribute::Int(1);
  t.Output(t.Out(other));
  Node* f = t.Op("Slice", "shared", {x, t.Ints("s5", {1}), t.Ints("e5", {3}), t.Ints("a5", {1})});
  Node* g = t.Op("Slice", "rest", {x, t.Ints("s6", {3}), t.Ints("e6", {7}), t.Ints("a6", {1})});
  Node* cat2 = t.Op("Concat", "cat_shared", {t.Out(f), t.Out(g)});
  cat2->attrs["axis"] = Attribute::Int(1);
  t.Output(t.Out(cat2));
  t.Output(t.Out(t.Op("Abs", "abs", {t.Out(f)})));
  t.Finish();
  PassReport r = Apply(t, GatherConcatenatedSlicesPass);
  EXPECT_EQ(r.rewrites, 1);
  Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.Count("Gather"), 1);
  EXPECT_EQ(t.Named("roll")->op_type, "Gather");
  EXPECT_EQ(t.Named("roll")->inputs[1]->const_value->ToInt64Vector(), (std::vector<int64_t>{5, 6, 0, 1, 2, 3, 4}));
  EXPECT_TRUE(t.Has("other_axis"));
  EXPECT_TRUE(t.Has("cat_shared"));
}

TEST(GatherConcatenatedSlices, StepsAndNegativeStepsGiveTheirIndices) {
  TestGraph t;
  Value* x = t.Input("x", {2, 7, 3});
  Node* c = t.Op("Slice", "evens", {x, t.Ints("s2", {0}), t.Ints("e2", {7}), t.Ints("a2", {1}), t.Ints("p2", {2})});
  Node* d = t.Op("Slice", "back", {x, t.Ints("s3", {-1}), t.Ints("e3", {INT64_MIN}), t.Ints("a3", {1}), t.Ints("p3", {-3})});
  Node* pieces = t.Op("Concat", "pieces", {t.Out(c), t.Out(d)});
  pieces->attrs["axis"] = Attribute::Int(1);
  t.Output(t.Out(t.Op("Neg", "neg", {t.Out(pieces)})));
  t.Finish();
  PassReport r = Apply(t, GatherConcatenatedSlicesPass);
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(t.Named("pieces")->inputs[1]->const_value->ToInt64Vector(), (std::vector<int64_t>{0, 2, 4, 6, 6, 3, 0}));
}

// Steps far past the axis (INT64_MAX / INT64_MIN) take one element, without overflow in the index arithmetic.
TEST(GatherConcatenatedSlices, HugeStepsTakeOneElement) {
  TestGraph t;
  Value* x = t.Input("x", {2, 7});
  Node* a = t.Op("Slice", "a", {x, t.Ints("s0", {1}), t.Ints("e0", {7}), t.Ints("a0", {1}), t.Ints("p0", {INT64_MAX})});
  Node* b = t.Op("Slice", "b", {x, t.Ints("s1", {-1}), t.Ints("e1", {INT64_MIN}), t.Ints("a1", {1}),
                                t.Ints("p1", {INT64_MIN})});
  Node* cat = t.Op("Concat", "cat", {t.Out(a), t.Out(b)});
  cat->attrs["axis"] = Attribute::Int(1);
  t.Output(t.Out(cat));
  t.Finish();
  PassReport r = Apply(t, GatherConcatenatedSlicesPass);
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(t.Named("cat")->inputs[1]->const_value->ToInt64Vector(), (std::vector<int64_t>{1, 6}));
}

// ---- unflatten-gemm ----

// GPT-2's Conv1D: view(-1, K) -> Gemm(x, W, b) -> view(.., N); with the input's heads merged by the first view, with
// transB and without a bias.
TEST(UnflattenGemm, FlattenedGemmsBecomeMatMulAndAdd) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3, 8});
  Node* r1 = t.Op("Reshape", "r1", {x, t.Ints("s1", {6, 8})});
  Node* gm = t.Op("Gemm", "fc", {t.Out(r1), t.Const("w", Random({8, 5}, 3)), t.Const("b", Random({5}, 4))});
  Node* r2 = t.Op("Reshape", "r2", {t.Out(gm), t.Ints("s2", {2, 3, 5})});
  t.Output(t.Out(t.Op("Relu", "relu", {t.Out(r2)})));
  Value* h = t.Input("h", {2, 3, 2, 4});  // [.., H, D] merged into K = 8
  Node* r3 = t.Op("Reshape", "r3", {h, t.Ints("s3", {6, 8})});
  Node* gm2 = t.Op("Gemm", "proj", {t.Out(r3), t.Const("w2", Random({5, 8}, 5))});
  gm2->attrs["transB"] = Attribute::Int(1);
  Node* r4 = t.Op("Reshape", "r4", {t.Out(gm2), t.Ints("s4", {2, 3, 5})});
  t.Output(t.Out(r4));
  Node* gm3 = t.Op("Gemm", "scaled", {t.Out(t.Op("Reshape", "r5", {x, t.Ints("s5", {6, 8})})), t.Const("w3", Random({8, 5}, 6))});
  gm3->attrs["alpha"] = Attribute::Float(0.5f);  // left alone
  t.Output(t.Out(t.Op("Reshape", "r6", {t.Out(gm3), t.Ints("s6", {2, 3, 5})})));
  t.Finish();
  PassReport r = Apply(t, UnflattenGemmPass);
  EXPECT_EQ(r.rewrites, 2);
  Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.Named("fc")->op_type, "MatMul");
  EXPECT_EQ(t.Named("fc")->inputs[0], x);
  EXPECT_EQ(t.Named("r2")->op_type, "Add");
  EXPECT_EQ(t.Named("proj")->op_type, "MatMul");
  EXPECT_EQ(ShapeToString(t.Named("proj")->inputs[0]->shape), "[2,3,8]");
  EXPECT_EQ(t.Named("proj")->inputs[1]->const_value->shape(), (std::vector<int64_t>{8, 5}));
  EXPECT_FALSE(t.Has("r4"));  // no bias: the MatMul writes the output
  EXPECT_EQ(t.Named("scaled")->op_type, "Gemm");
}

// Unsqueeze(Gather(shape, i)): dim i of a Shape output as a 1-element tensor, as exporters build reshape targets.
Value* ShapeDim(TestGraph& t, Value* shape, int64_t i) {
  Value* g = t.Out(t.Op("Gather", "gather" + std::to_string(i), {shape, t.Const("i" + std::to_string(i),
                                                                      Tensor::FromInt64({i}, {}))}));
  return t.Out(t.Op("Unsqueeze", "unsq" + std::to_string(i), {g, t.Ints("ax" + std::to_string(i), {0})}));
}

// The same Conv1D with dynamic shapes: x [batch, seq, 8] and h [batch, seq, 2, 4] named, the restoring views' targets
// computed from Shape(x) at run time. The products are unflattened; h's view becomes [0, 0, 8] (the named dims copied),
// and the rewritten graph gives the same results at another batch and sequence.
void BuildSymbolicConv1D(TestGraph& t, int64_t b, int64_t s) {
  Value* x = t.Input("x", {b, s, 8});
  x->shape = {Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(8)};
  Value* h = t.Input("h", {b, s, 2, 4});
  h->shape = {Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(2), Dim(4)};
  Value* shape = t.Out(t.Op("Shape", "shape", {x}));
  Value* bd = ShapeDim(t, shape, 0);
  Value* sd = ShapeDim(t, shape, 1);
  auto target = [&](const std::string& name) {
    Node* c = t.Op("Concat", name, {bd, sd, t.Ints(name + "_n", {5})});
    c->attrs["axis"] = Attribute::Int(0);
    return t.Out(c);
  };
  Node* r1 = t.Op("Reshape", "r1", {x, t.Ints("s1", {-1, 8})});
  Node* gm = t.Op("Gemm", "fc", {t.Out(r1), t.Const("w", Random({8, 5}, 3)), t.Const("b", Random({5}, 4))});
  Node* r2 = t.Op("Reshape", "r2", {t.Out(gm), target("t2")});
  t.Output(t.Out(t.Op("Relu", "relu", {t.Out(r2)})));
  Node* r3 = t.Op("Reshape", "r3", {h, t.Ints("s3", {-1, 8})});
  Node* gm2 = t.Op("Gemm", "proj", {t.Out(r3), t.Const("w2", Random({8, 5}, 5)), t.Const("b2", Random({5}, 6))});
  t.Output(t.Out(t.Op("Reshape", "r4", {t.Out(gm2), target("t4")})));
  t.Finish();
}

TEST(UnflattenGemm, SymbolicShapesUnflattenToo) {
  TestGraph t;
  BuildSymbolicConv1D(t, 2, 3);
  PassReport r = Apply(t, UnflattenGemmPass);
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_EQ(t.Named("fc")->op_type, "MatMul");
  EXPECT_EQ(t.Named("proj")->op_type, "MatMul");
  EXPECT_EQ(ShapeToString(t.Named("proj")->inputs[0]->shape), "[batch,seq,8]");
  EXPECT_EQ(t.Named("r3")->inputs[1]->const_value->ToInt64Vector(), (std::vector<int64_t>{0, 0, 8}));
  TestGraph other;
  BuildSymbolicConv1D(other, 3, 5);
  auto want = other.Run();
  t.feeds = other.feeds;
  ExpectSameOutputs(want, t.Run());
}

// ---- simplify-shape-inputs ----

// x: [batch, seq, 24] (symbolic), Reshapes whose targets are computed from Shape(x) as exporters write them.
void BuildShapeChains(TestGraph& t, int64_t b, int64_t s) {
  Value* x = t.Input("x", {b, s, 24});
  x->shape = {Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(24)};
  Value* shape = t.Out(t.Op("Shape", "shape", {x}));
  Value* bd = ShapeDim(t, shape, 0);
  Value* sd = ShapeDim(t, shape, 1);
  auto concat = [&](const std::string& name, std::vector<Value*> parts) {
    Node* c = t.Op("Concat", name, std::move(parts));
    c->attrs["axis"] = Attribute::Int(0);
    return t.Out(c);
  };
  // [batch, seq, 4, 6]: the heads split (0, 0, 4, 6).
  Node* heads = t.Op("Reshape", "heads", {x, concat("cat_heads", {bd, sd, t.Ints("hd", {4, 6})})});
  t.Output(t.Out(t.Op("Relu", "relu", {t.Out(heads)})));
  // [batch*seq, 24]: the rows flattened (-1, 24).
  Value* rows = t.Out(t.Op("Mul", "rows", {bd, sd}));
  Node* flat = t.Op("Reshape", "flat", {x, concat("cat_flat", {rows, t.Ints("w", {24})})});
  t.Output(t.Out(t.Op("Neg", "neg", {t.Out(flat)})));
  // [seq, batch, 24]: two dims neither known nor in place; left alone.
  Node* swap = t.Op("Reshape", "swap", {x, concat("cat_swap", {sd, bd, t.Ints("w2", {24})})});
  t.Output(t.Out(t.Op("Abs", "abs", {t.Out(swap)})));
  // allowzero = 1: left alone.
  Node* az = t.Op("Reshape", "az", {x, concat("cat_az", {bd, sd, t.Ints("hd2", {6, 4})})}, 1, 14);
  az->attrs["allowzero"] = Attribute::Int(1);
  t.Output(t.Out(t.Op("Sigmoid", "sig", {t.Out(az)})));
  t.Finish();
}

TEST(SimplifyShapeInputs, RunTimeTargetsBecomeConstantsAtEveryShape) {
  TestGraph t;
  BuildShapeChains(t, 2, 5);
  ASSERT_EQ(t.Count("Shape"), 1);
  PassReport r = Apply(t, SimplifyShapeInputsPass);
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_TRUE(DetailsMention(r, "heads"));
  EXPECT_TRUE(DetailsMention(r, "flat"));
  EXPECT_EQ(t.Named("heads")->inputs[1]->const_value->ToInt64Vector(), (std::vector<int64_t>{0, 0, 4, 6}));
  EXPECT_EQ(t.Named("flat")->inputs[1]->const_value->ToInt64Vector(), (std::vector<int64_t>{-1, 24}));
  EXPECT_FALSE(t.Named("swap")->inputs[1]->is_const());
  EXPECT_FALSE(t.Named("az")->inputs[1]->is_const());
  EXPECT_FALSE(t.Has("cat_heads"));  // the chains no one reads are gone; the shared Shape stays for swap and az
  EXPECT_FALSE(t.Has("cat_flat"));
  EXPECT_FALSE(t.Has("rows"));
  EXPECT_TRUE(t.Has("shape"));
  // The same graph at another batch and sequence: the constant targets hold there too.
  TestGraph other;
  BuildShapeChains(other, 3, 7);
  auto want = other.Run();
  t.feeds = other.feeds;
  ExpectSameOutputs(want, t.Run());
}

// A Shape of an intermediate (T5 takes its key length from the transposed K) reads the graph input's shape instead,
// so that the intermediate keeps its consumers alone; the results stay the same at other shapes.
void BuildShapeOfIntermediate(TestGraph& t, int64_t b, int64_t s) {
  Value* x = t.Input("x", {b, s, 4});
  x->shape = {Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(4)};
  Node* tr = t.Op("Transpose", "kt", {x});
  tr->attrs["perm"] = Attribute::Ints({0, 2, 1});
  t.Output(t.Out(t.Op("Relu", "relu", {t.Out(tr)})));
  Node* sh = t.Op("Shape", "len", {t.Out(tr)}, 1, 15);
  sh->attrs["start"] = Attribute::Int(1);  // [4, seq]
  Node* cs = t.Op("ConstantOfShape", "zeros", {t.Out(sh)});
  t.Output(t.Out(cs));
  t.Finish();
}

TEST(SimplifyShapeInputs, ShapeOfAnIntermediateReadsTheInputsShape) {
  TestGraph t;
  BuildShapeOfIntermediate(t, 2, 5);
  PassReport r = Apply(t, SimplifyShapeInputsPass);
  EXPECT_EQ(r.rewrites, 1);
  EXPECT_EQ(t.Named("len")->op_type, "Concat");
  int readers = 0;
  for (const auto& n : t.g.nodes())
    for (const Value* in : n->inputs) readers += in == t.Named("kt")->outputs[0];
  EXPECT_EQ(readers, 1);  // the Relu alone
  TestGraph other;
  BuildShapeOfIntermediate(other, 3, 7);
  auto want = other.Run();
  t.feeds = other.feeds;
  ExpectSameOutputs(want, t.Run());
}

TEST(FoldReshapeTranspose, KeepsChainsWhoseIntermediateHasOtherReaders) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3, 4});
  Node* r1 = t.Op("Reshape", "r1", {x, t.Ints("s1", {6, 4})});
  Node* r2 = t.Op("Reshape", "r2", {t.Out(r1), t.Ints("s2", {24})});
  Node* relu = t.Op("Relu", "relu", {t.Out(r1)});  // second reader of r1's output
  t.Output(t.Out(r2));
  t.Output(t.Out(relu));
  Node* t1 = t.Op("Transpose", "t1", {x});
  t1->attrs["perm"] = Attribute::Ints({1, 0, 2});
  Node* t2 = t.Op("Transpose", "t2", {t.Out(t1)});
  t2->attrs["perm"] = Attribute::Ints({2, 1, 0});
  t.Output(t.Out(t1));  // the intermediate is a graph output
  t.Output(t.Out(t2));
  t.Finish();
  PassReport r = Apply(t, FoldReshapeTransposeChainsPass);
  EXPECT_EQ(r.rewrites, 0);
  EXPECT_EQ(t.Out(r2)->producer->inputs[0], t.Out(r1));
  EXPECT_EQ(t2->inputs[0], t.Out(t1));
}

TEST(FoldReshapeTranspose, ComposesTransposesAndDropsIdentityPerms) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3, 4, 5});
  Node* a = t.Op("Transpose", "a", {x});
  a->attrs["perm"] = Attribute::Ints({0, 2, 3, 1});
  Node* b = t.Op("Transpose", "b", {t.Out(a)});
  b->attrs["perm"] = Attribute::Ints({0, 3, 1, 2});  // a then b is the identity
  Node* e = t.Op("Exp", "e", {t.Out(b)});
  t.Output(t.Out(e));
  Node* c = t.Op("Transpose", "c", {x});
  c->attrs["perm"] = Attribute::Ints({1, 0, 2, 3});
  Node* d = t.Op("Transpose", "d", {t.Out(c)});  // default perm: reverse
  t.Output(t.Out(d));
  Node* i = t.Op("Transpose", "i", {x});
  i->attrs["perm"] = Attribute::Ints({0, 1, 2, 3});
  Node* s = t.Op("Neg", "s", {t.Out(i)});
  t.Output(t.Out(s));
  t.Finish();
  PassReport r = Apply(t, FoldReshapeTransposeChainsPass);
  EXPECT_EQ(r.rewrites, 3);
  Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.Count("Transpose"), 1);  // d only
  EXPECT_FALSE(t.Has("a"));
  EXPECT_FALSE(t.Has("b"));
  EXPECT_FALSE(t.Has("c"));
  EXPECT_FALSE(t.Has("i"));
  EXPECT_EQ(d->inputs[0], x);
  // c = (1,0,2,3), d = reverse (3,2,1,0): composed p[j] = c[d[j]] = (3,2,0,1).
  EXPECT_EQ(d->getints("perm"), (std::vector<int64_t>{3, 2, 0, 1}));
}

// ---- eliminate-common-subexpressions ----

TEST(EliminateCse, MergesNodesAndEqualConstants) {
  TestGraph t;
  Value* x = t.Input("x", {3, 7});
  Node* r1 = t.Op("Relu", "r1", {x});
  Node* r2 = t.Op("Relu", "r2", {x});
  Tensor c = Random({7}, 21);
  Node* a1 = t.Op("Add", "a1", {t.Out(r1), t.Const("c1", c.Clone())});
  Node* a2 = t.Op("Add", "a2", {t.Out(r2), t.Const("c2", c.Clone())});  // same after merging r2 and c2
  Node* m = t.Op("Mul", "m", {t.Out(a1), t.Out(a2)});
  Node* l1 = t.Op("LeakyRelu", "l1", {t.Out(m)});
  l1->attrs["alpha"] = Attribute::Float(0.1f);
  Node* l2 = t.Op("LeakyRelu", "l2", {t.Out(m)});
  l2->attrs["alpha"] = Attribute::Float(0.2f);  // other attribute: kept
  Node* s = t.Op("Sub", "s", {t.Out(l1), t.Out(l2)});
  t.Output(t.Out(s));
  Node* r3 = t.Op("Relu", "r3", {x});  // a duplicate that writes a graph output: kept
  t.Output(t.Out(r3));
  t.Finish();
  PassReport r = Apply(t, EliminateCommonSubexpressionsPass);
  EXPECT_EQ(r.rewrites, 3);  // c2 -> c1, r2 -> r1, a2 -> a1
  EXPECT_TRUE(DetailsMention(r, "merged r2 into r1"));
  EXPECT_TRUE(DetailsMention(r, "merged a2 into a1"));
  EXPECT_EQ(m->inputs[0], m->inputs[1]);
  Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.Count("Relu"), 2);
  EXPECT_EQ(t.Count("Add"), 1);
  EXPECT_EQ(t.Count("LeakyRelu"), 2);
  // Deterministic: a second run finds nothing more.
  PassReport again = Apply(t, EliminateCommonSubexpressionsPass);
  EXPECT_EQ(again.rewrites, 0);
}

// ---- fold-batchnorm ----

Node* AddBatchNorm(TestGraph& t, const std::string& name, Value* in, int64_t c, uint32_t seed) {
  Node* bn = t.Op("BatchNormalization", name,
                  {in, t.Const(name + "_s", Random({c}, seed, 0.5, 1.5)), t.Const(name + "_b", Random({c}, seed + 1)),
                   t.Const(name + "_m", Random({c}, seed + 2)), t.Const(name + "_v", Random({c}, seed + 3, 0.2, 2))},
                  1, 15);
  bn->attrs["epsilon"] = Attribute::Float(1e-3f);
  return bn;
}

TEST(FoldBatchNorm, FoldsIntoConvWithAndWithoutBiasAndGroups) {
  TestGraph t;
  Value* x = t.Input("x", {2, 6, 9, 7});
  Node* c1 = t.Op("Conv", "conv1", {x, t.Const("w1", Random({8, 6, 3, 3}, 1)), t.Const("b1", Random({8}, 2))});
  c1->attrs["pads"] = Attribute::Ints({1, 1, 1, 1});
  Node* bn1 = AddBatchNorm(t, "bn1", t.Out(c1), 8, 10);
  Node* relu = t.Op("Relu", "relu1", {t.Out(bn1)});
  Node* c2 = t.Op("Conv", "conv2", {t.Out(relu), t.Const("w2", Random({4, 2, 3, 1}, 3))});  // group 4, no bias
  c2->attrs["group"] = Attribute::Int(4);
  c2->attrs["strides"] = Attribute::Ints({2, 1});
  Node* bn2 = AddBatchNorm(t, "bn2", t.Out(c2), 4, 20);
  t.Output(t.Out(bn2));  // the BN output is a graph output: it keeps its name
  t.Finish();
  PassReport r = Apply(t, FoldBatchNormPass);
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_TRUE(DetailsMention(r, "folded bn1 into conv1"));
  EXPECT_TRUE(DetailsMention(r, "folded bn2 into conv2"));
  EXPECT_EQ(t.Count("BatchNormalization"), 0);
  EXPECT_EQ(t.g.outputs[0]->name, "bn2_out");
  EXPECT_EQ(t.g.outputs[0]->producer, c2);
  EXPECT_TRUE(c2->input(2) && c2->input(2)->is_const());
  Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.g.nodes().size(), 3u);
}

TEST(FoldBatchNorm, FoldsIntoGemmForms) {
  struct Case {
    bool trans_b;
    std::vector<int64_t> c_shape;  // empty: no C
    float alpha, beta;
  };
  for (const Case& k : {Case{true, {4}, 1.f, 1.f}, Case{false, {}, 1.f, 1.f}, Case{false, {5, 1}, 2.f, 0.5f},
                        Case{true, {5, 4}, 0.7f, 1.5f}, Case{true, {}, 1.f, 0.f}}) {
    TestGraph t;
    Value* x = t.Input("x", {5, 7});
    std::vector<Value*> ins = {x, t.Const("B", Random(k.trans_b ? std::vector<int64_t>{4, 7} : std::vector<int64_t>{7, 4}, 1))};
    if (!k.c_shape.empty()) ins.push_back(t.Const("C", Random(k.c_shape, 2)));
    Node* gemm = t.Op("Gemm", "gemm", ins);
    gemm->attrs["transB"] = Attribute::Int(k.trans_b);
    gemm->attrs["alpha"] = Attribute::Float(k.alpha);
    gemm->attrs["beta"] = Attribute::Float(k.beta);
    Node* bn = AddBatchNorm(t, "bn", t.Out(gemm), 4, 30);
    Node* th = t.Op("Tanh", "tanh", {t.Out(bn)});
    t.Output(t.Out(th));
    t.Finish();
    PassReport r = Apply(t, FoldBatchNormPass);
    EXPECT_EQ(r.rewrites, 1) << "transB " << k.trans_b << " C rank " << k.c_shape.size();
    EXPECT_EQ(t.Count("BatchNormalization"), 0);
    EXPECT_EQ(th->inputs[0]->producer, gemm);
  }
}

// DenseNet's pre-activation BN over a concatenation has no Conv or Gemm before it: it becomes a per-channel Mul and
// Add (which fuse-pointwise and the layout pass can take), in every rank.
TEST(FoldBatchNorm, UnfoldableBecomesPerChannelMulAdd) {
  TestGraph t;
  Value* a = t.Input("a", {2, 3, 4, 5});
  Value* b = t.Input("b", {2, 2, 4, 5});
  Node* cat = t.Op("Concat", "cat", {a, b});
  cat->attrs["axis"] = Attribute::Int(1);
  Node* bn = AddBatchNorm(t, "bn", t.Out(cat), 5, 7);
  t.Output(t.Out(t.Op("Relu", "relu", {t.Out(bn)})));
  Node* bn2 = AddBatchNorm(t, "bn2", t.Input("v", {3, 4}), 4, 9);  // rank 2: [N, C]
  t.Output(t.Out(bn2));
  t.Finish();
  PassReport r = Apply(t, FoldBatchNormPass);
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_EQ(t.Count("BatchNormalization"), 0);
  EXPECT_EQ(t.Count("Mul"), 2);
  EXPECT_EQ(t.Count("Add"), 2);
  EXPECT_EQ(t.Named("bn")->inputs[1]->const_value->shape(), (std::vector<int64_t>{5, 1, 1}));
  EXPECT_EQ(t.Named("bn2")->inputs[1]->const_value->shape(), (std::vector<int64_t>{4}));
}

TEST(FoldBatchNorm, NotFoldedWhereItMustNotBe) {
  TestGraph t;
  Value* x = t.Input("x", {1, 3, 5, 5});
  // The Conv output has a second reader.
  Node* c1 = t.Op("Conv", "conv1", {x, t.Const("w1", Random({4, 3, 1, 1}, 1))});
  Node* bn1 = AddBatchNorm(t, "bn1", t.Out(c1), 4, 10);
  Node* relu = t.Op("Relu", "relu", {t.Out(c1)});
  Node* add = t.Op("Add", "add", {t.Out(bn1), t.Out(relu)});
  t.Output(t.Out(add));
  // The Conv output is itself a graph output.
  Node* c2 = t.Op("Conv", "conv2", {x, t.Const("w2", Random({4, 3, 1, 1}, 2))});
  t.Output(t.Out(c2));
  Node* bn2 = AddBatchNorm(t, "bn2", t.Out(c2), 4, 20);
  t.Output(t.Out(bn2));
  // The weights are not constant.
  Value* w3 = t.Input("w3", {4, 3, 1, 1});
  Node* c3 = t.Op("Conv", "conv3", {x, w3});
  Node* bn3 = AddBatchNorm(t, "bn3", t.Out(c3), 4, 30);
  t.Output(t.Out(bn3));
  // Something in between the Conv and the BN.
  Node* c4 = t.Op("Conv", "conv4", {x, t.Const("w4", Random({4, 3, 1, 1}, 4))});
  Node* r4 = t.Op("Relu", "relu4", {t.Out(c4)});
  Node* bn4 = AddBatchNorm(t, "bn4", t.Out(r4), 4, 40);
  t.Output(t.Out(bn4));
  t.Finish();
  PassReport r = Apply(t, FoldBatchNormPass);
  // None folds into its Conv (the weights stay); each becomes a per-channel Mul and Add instead.
  EXPECT_EQ(r.rewrites, 4);
  for (const auto& d : r.details) EXPECT_EQ(d.find("folded"), std::string::npos) << d;
  EXPECT_EQ(t.Count("BatchNormalization"), 0);
  EXPECT_EQ(t.Named("conv1")->inputs[1]->name, "w1");
  EXPECT_EQ(t.Named("conv2")->inputs[1]->name, "w2");
  EXPECT_EQ(t.Named("conv4")->inputs[1]->name, "w4");
  EXPECT_EQ(t.Count("Mul"), 4);
}

// ---- eliminate-dead-code ----

TEST(EliminateDeadCode, RemovesUnreachableNodesAndUnusedConstants) {
  TestGraph t;
  Value* x = t.Input("x", {4});
  Node* r = t.Op("Relu", "relu", {x});
  t.Output(t.Out(r));
  Node* s = t.Op("Sigmoid", "sig", {x});
  Node* a = t.Op("Add", "unused_add", {t.Out(s), t.Const("k", Random({4}, 9))});
  (void)a;
  Value* orphan = t.Const("orphan", Random({16}, 8));
  t.Finish();
  ASSERT_EQ(t.g.nodes().size(), 3u);
  PassReport rep = Apply(t, EliminateDeadCodePass);
  EXPECT_EQ(t.g.nodes().size(), 1u);
  EXPECT_TRUE(t.Has("relu"));
  EXPECT_TRUE(DetailsMention(rep, "unused_add"));
  EXPECT_TRUE(DetailsMention(rep, "sig"));
  EXPECT_FALSE(orphan->is_const());
  EXPECT_FALSE(t.g.FindValue("k")->is_const());
  EXPECT_EQ(rep.rewrites, 4);  // 2 nodes + 2 constants
}

// ---- all cleanup passes in their order, with the verifier after each ----

TEST(CleanupPasses, RunInOrderOnAMixedGraph) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3, 8, 8});
  Node* id = t.Op("Identity", "id", {x});
  Node* conv = t.Op("Conv", "conv", {t.Out(id), t.Const("w", Random({5, 3, 3, 3}, 1))});
  Node* bn = AddBatchNorm(t, "bn", t.Out(conv), 5, 50);
  Node* r1 = t.Op("Relu", "r1", {t.Out(bn)});
  Node* r2 = t.Op("Relu", "r2", {t.Out(bn)});
  Node* rs1 = t.Op("Reshape", "rs1", {t.Out(r1), t.Ints("s1", {2, 5, 36})});
  Node* rs2 = t.Op("Reshape", "rs2", {t.Out(rs1), t.Ints("s2", {10, 36})});
  Node* fl = t.Op("Flatten", "fl", {t.Out(r2)});
  Node* rs3 = t.Op("Reshape", "rs3", {t.Out(fl), t.Ints("s3", {10, 36})});
  Node* sum = t.Op("Add", "sum", {t.Out(rs2), t.Out(rs3)});
  t.Output(t.Out(sum));
  t.Finish();
  auto before = t.Run();
  PassOptions o;
  o.evaluator = cpu::MakeConstEvaluator();
  // The cleanup passes in the order of passes.cpp (called directly: the fusion passes live elsewhere).
  const std::vector<std::pair<const char*, Result<PassReport> (*)(Graph&, const PassOptions&)>> passes = {
      {"eliminate-identity", EliminateIdentityPass},
      {"fold-constants", FoldConstantsPass},
      {"fold-reshape-transpose-chains", FoldReshapeTransposeChainsPass},
      {"eliminate-common-subexpressions", EliminateCommonSubexpressionsPass},
      {"fold-batchnorm", FoldBatchNormPass},
      {"eliminate-dead-code", EliminateDeadCodePass}};
  int total = 0;
  for (const auto& [name, pass] : passes) {
    auto r = pass(t.g, o);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    total += r->rewrites;
    Status st = VerifyGraph(t.g);
    ASSERT_TRUE(st.ok()) << "after " << name << ": " << st.ToString();
  }
  EXPECT_GT(total, 0);
  ExpectSameOutputs(before, t.Run());
  EXPECT_EQ(t.Count("BatchNormalization"), 0);
  EXPECT_EQ(t.Count("Identity"), 0);
  EXPECT_EQ(t.Count("Relu"), 1);  // r2 merged into r1
  EXPECT_EQ(t.Count("Flatten"), 0);
  EXPECT_EQ(t.Count("Reshape"), 1);  // rs1 -> rs2 and fl -> rs3 collapse, then rs3 merges into rs2
  EXPECT_EQ(t.g.nodes().size(), 4u);  // conv, r1, rs2, sum
}

// ---- malformed nodes: every pass leaves what it cannot understand alone, without failing or crashing ----

TEST(CleanupPasses, MalformedNodesAreLeftAlone) {
  TestGraph t;
  Value* x = t.Input("x", {2, 3});
  Node* t1 = t.Op("Transpose", "t1", {x});
  t1->attrs["perm"] = Attribute::String("01");  // wrong attribute type
  Node* t2 = t.Op("Transpose", "t2", {t.Out(t1)});
  t2->attrs["perm"] = Attribute::Ints({0, 0});  // not a permutation
  Node* cast = t.Op("Cast", "cast", {t.Out(t2)});
  cast->attrs["to"] = Attribute::String("float");
  Node* rs = t.Op("Reshape", "rs", {t.Out(cast)});  // no shape input
  Node* rs2 = t.Op("Reshape", "rs2", {t.Out(rs), t.Ints("bad", {0, -1, -1})});
  Node* bn = t.Op("BatchNormalization", "bn", {t.Out(rs2), x});  // too few inputs
  bn->attrs["epsilon"] = Attribute::String("tiny");
  Node* drop = t.Op("Dropout", "drop", {nullptr});
  Node* gemm = t.Op("Gemm", "gemm", {t.Out(bn), t.Const("b", Random({3}, 1))});  // rank-1 B
  Node* bn2 = t.Op("BatchNormalization", "bn2", {t.Out(gemm), t.Const("s", Random({3}, 2)), t.Const("bb", Random({3}, 3)),
                                                 t.Const("m", Random({3}, 4)), t.Const("v", Random({3}, 5))});
  t.Output(t.Out(bn2));
  t.Output(t.Out(drop));
  ASSERT_TRUE(t.g.TopoSort().ok());  // no shape inference: types and shapes unknown
  PassOptions o;
  o.evaluator = cpu::MakeConstEvaluator();
  for (auto* pass : {EliminateIdentityPass, FoldConstantsPass, FoldReshapeTransposeChainsPass,
                     EliminateCommonSubexpressionsPass, FoldBatchNormPass}) {
    auto r = pass(t.g, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->rewrites, 0);
  }
  EXPECT_EQ(t.g.nodes().size(), 9u);
  auto r = EliminateDeadCodePass(t.g, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(VerifyGraph(t.g).ok());
}

}  // namespace
}  // namespace kiln
