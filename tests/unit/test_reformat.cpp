// kiln.Reformat (ops/fused_ops.h) and the plan step that makes it (plan/fuse_reformats.h): the CPU kernel against
// Cast, Transpose and Pad run one after the other; the rewrite of the reformats that precision and layout planning
// leave at a conv net's input, checked against the original graph on the CPU; chains it must leave alone; and the
// cuda backend's plan of an FP16 conv net, made on the CPU (the backend object answers Prefers without a GPU).
// CPU only.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "backends/factory.h"
#include "kiln/logger.h"
#include "ops/infer.h"
#include "plan/fuse_reformats.h"
#include "plan/layout.h"
#include "runtime/builder_plan.h"
#include "testing.h"

namespace kiln {
namespace {

using Attrs = std::map<std::string, Attribute>;

// One node run on the CPU (shape inference, then its kernel).
Tensor RunOne(const std::string& op, const std::string& domain, std::vector<const Tensor*> ins, Attrs attrs) {
  testing::OneNode one(op, ins.size(), 1, op == "Reformat" ? 1 : 18);
  one.n->domain = domain;
  one.n->attrs = std::move(attrs);
  auto r = one.Run(ins);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? (*r)[0] : Tensor();
}

// Cast, Transpose and (where pad_last > 0) Pad of the last axis, as three nodes.
Tensor Composed(const Tensor& x, DataType to, const std::vector<int64_t>& perm, int64_t pad_last) {
  Tensor y = RunOne("Cast", "", {&x}, {{"to", Attribute::Int(static_cast<int64_t>(to))}});
  y = RunOne("Transpose", "", {&y}, {{"perm", Attribute::Ints(perm)}});
  if (pad_last == 0) return y;
  std::vector<int64_t> pads(2 * perm.size(), 0);
  pads.back() = pad_last - y.shape().back();
  const Tensor p = Tensor::FromInt64(pads);
  return RunOne("Pad", "", {&y, &p}, {});
}

Attrs ReformatAttrs(DataType to, const std::vector<int64_t>& perm, int64_t pad_last) {
  Attrs a = {{"to", Attribute::Int(static_cast<int64_t>(to))}, {"perm", Attribute::Ints(perm)}};
  if (pad_last) a["kiln_pad_last"] = Attribute::Int(pad_last);
  return a;
}

TEST(Reformat, CpuKernelMatchesCastTransposePad) {
  struct Case {
    std::vector<int64_t> shape;
    DataType from, to;
    std::vector<int64_t> perm;
    int64_t pad_last;
  };
  const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16, bf16 = DataType::kBFloat16;
  const Case cases[] = {
      {{2, 3, 5, 7}, f32, f16, {0, 2, 3, 1}, 4},      // an RGB stem's input, padded to 4 channels
      {{2, 3, 5, 7}, f32, f16, {0, 2, 3, 1}, 8},      // ... to 8
      {{2, 3, 5, 7}, f32, f32, {0, 2, 3, 1}, 4},      // no cast (TF32 engines)
      {{2, 3, 5, 7}, f32, f16, {0, 2, 3, 1}, 0},      // no pad
      {{1, 1, 3, 2}, f32, bf16, {0, 2, 3, 1}, 8},     // one channel
      {{2, 3, 5, 7}, f32, bf16, {3, 1, 0, 2}, 6},     // another permutation
      {{4, 5, 6}, f16, f32, {2, 0, 1}, 0},            // rank 3, widening
      {{2, 3, 4, 3, 5}, f32, f16, {0, 2, 3, 4, 1}, 8},  // NCDHW -> NDHWC
      {{3, 5}, DataType::kFloat64, f32, {1, 0}, 4},
      {{2, 0, 3}, f32, f16, {2, 1, 0}, 4},            // empty
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} {} -> {} perm [{}] pad {}", ShapeToString(c.shape), DataTypeName(c.from),
                             DataTypeName(c.to), fmt::join(c.perm, ","), c.pad_last));
    const Tensor x = testing::Random(c.shape, seed++, -3, 3, c.from);
    const Tensor want = Composed(x, c.to, c.perm, c.pad_last);
    const Tensor got = RunOne("Reformat", "kiln", {&x}, ReformatAttrs(c.to, c.perm, c.pad_last));
    testing::ExpectEqualTensor(got, want);
  }
}

TEST(Reformat, DefaultsAndErrorsNameTheNode) {
  const Tensor x = testing::Random({2, 3, 4}, 7);
  // No attributes: the identity.
  testing::ExpectEqualTensor(RunOne("Reformat", "kiln", {&x}, {}), x);
  auto fails = [&](const Tensor& in, Attrs a, const std::string& what) {
    testing::OneNode one("Reformat", 1, 1, 1, "my_reformat");
    one.n->domain = "kiln";
    one.n->attrs = std::move(a);
    auto r = one.Run({&in});
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.status().message().find("my_reformat"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().ToString();
  };
  fails(x, {{"perm", Attribute::Ints({0, 0, 1})}}, "not a permutation");
  fails(x, {{"perm", Attribute::Ints({0, 1})}}, "not a permutation");
  fails(x, {{"kiln_pad_last", Attribute::Int(3)}}, "more than kiln_pad_last 3");
  fails(x, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kInt32))}}, "float32 to int32");
}

using testing::Reinfer;

// x float32 [2, 3, 9, 11] -> Cast float16 (as precision planning puts it) -> Conv 3x3 (3 -> 8) -> Relu.
// `cast_also_read`: the Cast's output is a graph output too.
struct StemNet : testing::TestGraph {
  explicit StemNet(bool cast_also_read = false) {
    dt = DataType::kFloat16;
    Value* x = Input("x", {2, 3, 9, 11}, DataType::kFloat32);
    Value* x16 = Op("Cast", "kiln_cast_0_x", {x}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat16))}});
    Value* y = Op("Conv", "conv", {x16, Const("w", {8, 3, 3, 3}, -0.5, 0.5), Const("b", {8})},
                  {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
    Output(Op("Relu", "relu", {y}));
    if (cast_also_read) Output(x16);
    Finish();
  }
  int Reformats() const { return Count("Reformat"); }
};

TEST(Reformat, LayoutReformatsOfAConvStemBecomeOneNode) {
  for (int64_t pad : {4, 8}) {
    SCOPED_TRACE(pad);
    StemNet net;
    const auto before = net.Run();
    LayoutOptions lo;
    lo.pad_channels = pad;
    auto lr = AssignLayout(net.g, lo);
    ASSERT_TRUE(lr.ok()) << lr.status().ToString();
    ASSERT_EQ(lr->channels_padded, 1);
    Reinfer(net.g);
    ASSERT_EQ(net.Count("Cast") + net.Count("Transpose") + net.Count("Pad"), 4);  // and the Transpose back
    const ReformatFusions f = FuseReformats(net.g, [](const Node&) { return true; });
    EXPECT_EQ(f.merged, 1);
    EXPECT_EQ(f.nodes_removed, 3);
    ASSERT_EQ(f.details.size(), 1u);
    Reinfer(net.g);
    SCOPED_TRACE(PrintGraph(net.g));
    ASSERT_EQ(net.Reformats(), 1);
    EXPECT_EQ(net.Count("Cast") + net.Count("Pad"), 0);
    EXPECT_EQ(net.Count("Transpose"), 1);  // the conv's NHWC output back to NCHW for the graph output
    const Node* r = net.Find("Reformat");
    EXPECT_EQ(r->domain, "kiln");
    EXPECT_EQ(r->inputs[0]->name, "x");
    EXPECT_EQ(r->geti("to", 0), static_cast<int64_t>(DataType::kFloat16));
    EXPECT_EQ(r->getints("perm"), (std::vector<int64_t>{0, 2, 3, 1}));
    EXPECT_EQ(r->geti("kiln_pad_last", 0), pad);
    EXPECT_EQ(ShapeToString(r->outputs[0]->shape), ShapeToString(Shape{2, 9, 11, pad}));
    testing::ExpectSameOutputs(before, net.Run(), 0, 0);  // the same arithmetic: bit-identical
  }
}

TEST(Reformat, TwoOfThreeWhereTheThirdCannotJoin) {
  {  // the Cast's output is also a graph output: the Cast stays, Transpose -> Pad merge
    StemNet net(/*cast_also_read=*/true);
    const auto before = net.Run();
    ASSERT_TRUE(AssignLayout(net.g, LayoutOptions{}).ok());
    Reinfer(net.g);
    const ReformatFusions f = FuseReformats(net.g, [](const Node&) { return true; });
    EXPECT_EQ(f.merged, 1);
    EXPECT_EQ(f.nodes_removed, 2);
    Reinfer(net.g);
    SCOPED_TRACE(PrintGraph(net.g));
    ASSERT_EQ(net.Reformats(), 1);
    EXPECT_EQ(net.Count("Cast"), 1);
    EXPECT_EQ(net.Find("Reformat")->inputs[0]->name, net.Find("Cast")->outputs[0]->name);
    testing::ExpectSameOutputs(before, net.Run(), 0, 0);
  }
  {  // no padding (pad_channels off): Cast -> Transpose merge
    StemNet net;
    LayoutOptions lo;
    lo.pad_channels = 0;
    ASSERT_TRUE(AssignLayout(net.g, lo).ok());
    Reinfer(net.g);
    EXPECT_EQ(FuseReformats(net.g, [](const Node&) { return true; }).merged, 1);
    Reinfer(net.g);
    EXPECT_EQ(net.Count("Cast"), 0);
    EXPECT_FALSE(net.Find("Reformat")->has_attr("kiln_pad_last"));
  }
}

// x -> Cast -> Transpose -> Pad (`pads`, `value`) -> Relu, with the Cast's output also read by a second Relu where
// `cast_read_twice`.
struct Chain : testing::TestGraph {
  Chain(std::vector<int64_t> pads, float value, bool cast_read_twice) {
    Value* x = Input("x", {1, 3, 4, 5});
    Value* c = Op("Cast", "cast", {x}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat16))}});
    Value* t = Op("Transpose", "transpose", {c}, {{"perm", Attribute::Ints({0, 2, 3, 1})}});
    Value* p = Op("Pad", "pad", {t, Ints("pads", pads), g.AddConstant("v", Tensor::Scalar(DataType::kFloat16, value))});
    Output(Op("Relu", "relu", {p}));
    if (cast_read_twice) Output(Op("Relu", "relu2", {c}));
    Finish();
  }
};

TEST(Reformat, LeavesOtherChainsAlone) {
  const std::vector<int64_t> last = {0, 0, 0, 0, 0, 0, 0, 5}, inner = {0, 0, 0, 0, 0, 0, 2, 5},
                             front = {0, 0, 0, 1, 0, 0, 0, 0};
  {  // the Cast read twice and a Pad that pads another axis: nothing to merge (a Transpose alone saves nothing)
    Chain c(inner, 0.f, true);
    EXPECT_EQ(FuseReformats(c.g, [](const Node&) { return true; }).merged, 0);
    EXPECT_EQ(c.Count("Reformat"), 0);
  }
  const std::vector<std::pair<std::vector<int64_t>, float>> others = {{last, 1.f}, {last, -0.f}, {front, 0.f},
                                                                      {inner, 0.f}};
  for (const auto& [pads, value] : others) {
    Chain c(pads, value, false);  // a Pad that is not zeros at the end of the last axis: Cast -> Transpose only
    const auto before = c.Run();
    const ReformatFusions f = FuseReformats(c.g, [](const Node&) { return true; });
    EXPECT_EQ(f.merged, 1);
    EXPECT_EQ(f.nodes_removed, 2);
    Reinfer(c.g);
    EXPECT_EQ(c.Count("Pad"), 1);
    testing::ExpectSameOutputs(before, c.Run(), 0, 0);
  }
  {  // zeros at the end of the last axis: all three
    Chain c(last, 0.f, false);
    const auto before = c.Run();
    EXPECT_EQ(FuseReformats(c.g, [](const Node&) { return true; }).nodes_removed, 3);
    Reinfer(c.g);
    testing::ExpectSameOutputs(before, c.Run(), 0, 0);
  }
  {  // a negative pad (a crop) at the end of the last axis: not zeros added, so Cast -> Transpose only
    Chain c({0, 0, 0, 0, 0, 0, 0, -1}, 0.f, false);
    const auto before = c.Run();
    EXPECT_EQ(FuseReformats(c.g, [](const Node&) { return true; }).nodes_removed, 2);
    Reinfer(c.g);
    EXPECT_EQ(c.Count("Pad"), 1);
    testing::ExpectSameOutputs(before, c.Run(), 0, 0);
  }
  for (int64_t axis : {3, -1, 2}) {  // opset 18's axes input: the last axis (by either index) merges, another not
    SCOPED_TRACE(axis);
    testing::TestGraph t;
    Value* x = t.Input("x", {1, 3, 4, 5});
    Value* c = t.Op("Cast", "cast", {x}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat16))}});
    Value* tr = t.Op("Transpose", "transpose", {c}, {{"perm", Attribute::Ints({0, 2, 3, 1})}});
    Value* p = t.Op("Pad", "pad", {tr, t.Ints("pads", {0, 5}), t.g.AddConstant("v", Tensor::Scalar(DataType::kFloat16, 0.f)),
                                   t.Ints("axes", {axis})});
    t.Output(t.Op("Relu", "relu", {p}));
    t.Finish();
    const auto before = t.Run();
    EXPECT_EQ(FuseReformats(t.g, [](const Node&) { return true; }).nodes_removed, axis == 2 ? 2 : 3);
    Reinfer(t.g);
    testing::ExpectSameOutputs(before, t.Run(), 0, 0);
  }
  {  // a backend without the kernel: nothing
    Chain c(last, 0.f, false);
    EXPECT_EQ(FuseReformats(c.g, [](const Node&) { return false; }).merged, 0);
    EXPECT_EQ(c.Count("Cast") + c.Count("Transpose") + c.Count("Pad"), 3);
  }
}

class QuietLogger : public ILogger {
 public:
  void log(Severity, const char*) noexcept override {}
};

// The builder's planning steps for the cuda backend on an FP16 conv net: its input reformats are one kiln.Reformat.
TEST(Reformat, CudaFp16PlanOfAConvNetUsesIt) {
  auto cuda = FindBackend("cuda");
  if (!cuda.ok()) GTEST_SKIP() << "this build has no cuda backend: " << cuda.status().ToString();
  testing::TestGraph net;
  Value* x = net.Input("x", {2, 3, 16, 16});
  Value* y = net.Op("Conv", "conv", {x, net.Const("w", {8, 3, 3, 3}, -0.5, 0.5), net.Const("b", {8})},
                    {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  net.Output(net.Op("Relu", "relu", {y}));
  net.Finish();
  const auto before = net.Run();
  BuilderConfig cfg;
  cfg.setFlag(BuilderFlag::kFP16);
  BuildReport rep;
  QuietLogger logger;
  ASSERT_TRUE(PlanPrecision(net.g, cfg, **cuda, rep, logger).ok());
  Reinfer(net.g);
  ASSERT_TRUE(PlanLayout(net.g, cfg, rep, logger).ok());
  Reinfer(net.g);
  auto merged = PlanReformats(net.g, **cuda, rep, logger);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  Reinfer(net.g);
  SCOPED_TRACE(PrintGraph(net.g));
  // In: Cast -> Transpose -> Pad, one node. Out: the Cast back to float32 (which runs channels-last) and the
  // Transpose to NCHW stay: the cuda backend's Reformat kernel for that permutation is no faster than they are.
  EXPECT_EQ(*merged, 1);
  EXPECT_EQ(rep.fusions["reformats_merged"], 1);
  EXPECT_EQ(net.Count("Pad"), 0);
  EXPECT_EQ(net.Count("Cast") + net.Count("Transpose"), 2);
  const Node* in = net.g.nodes().front().get();
  ASSERT_EQ(in->op_type, "Reformat");
  EXPECT_EQ(in->inputs[0]->name, "x");
  EXPECT_EQ(in->outputs[0]->dtype, DataType::kFloat16);
  EXPECT_EQ(ShapeToString(in->outputs[0]->shape), "[2,16,16,4]");
  testing::ExpectSameOutputs(before, net.Run(), 2e-2, 2e-2);
  // A backend that prefers every Reformat merges the output side too.
  EXPECT_EQ(FuseReformats(net.g, [](const Node&) { return true; }).merged, 1);
  Reinfer(net.g);
  EXPECT_EQ(net.Count("Cast") + net.Count("Transpose"), 0);
  const Node* out = net.g.nodes().back().get();
  ASSERT_EQ(out->op_type, "Reformat");
  EXPECT_EQ(out->getints("perm"), (std::vector<int64_t>{0, 3, 1, 2}));
  EXPECT_EQ(out->outputs[0]->dtype, DataType::kFloat32);
  testing::ExpectSameOutputs(before, net.Run(), 2e-2, 2e-2);
}

}  // namespace
}  // namespace kiln
