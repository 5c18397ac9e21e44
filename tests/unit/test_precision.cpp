// Precision planning: which layers compute in FP16/BF16, the casts and converted constants that keep the graph
// well typed, parameters that stay float32, pinned layers, and I/O types at the engine boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backends/cpu/executor.h"
#include "plan/precision.h"
#include "ops/infer.h"

namespace kiln {
namespace {

// x[1,3,4,4] -> Add(c[4]) -> Relu -> Resize(scales 1,1,2,2) -> Softmax -> y
std::unique_ptr<Graph> MakeGraph() {
  auto g = std::make_unique<Graph>();
  g->opsets[""] = 21;
  Value* x = g->GetOrAddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = FromStatic({1, 3, 4, 4});
  x->has_shape = true;
  x->is_graph_input = true;
  g->inputs.push_back(x);
  Tensor c(DataType::kFloat32, {4});
  for (int i = 0; i < 4; ++i) c.SetFromDouble(i, 0.25 * i - 0.3);
  Value* cv = g->AddConstant("c", c);
  Tensor sc(DataType::kFloat32, {4});
  for (int i = 0; i < 4; ++i) sc.SetFromDouble(i, i < 2 ? 1.0 : 2.0);
  Value* scales = g->AddConstant("scales", sc);
  auto add = [&](const char* op, const char* name, std::vector<Value*> in, const char* out) {
    Node* n = g->AddNode(op, name);
    n->opset = 21;
    n->inputs = std::move(in);
    Value* o = g->GetOrAddValue(out);
    o->producer = n;
    n->outputs = {o};
    return n;
  };
  add("Add", "add", {x, cv}, "a");
  add("Relu", "relu", {g->FindValue("a")}, "r");
  add("Resize", "resize", {g->FindValue("r"), nullptr, scales}, "s");
  add("Softmax", "softmax", {g->FindValue("s")}, "y")->attrs["axis"] = Attribute::Int(-1);
  Value* y = g->FindValue("y");
  y->is_graph_output = true;
  g->outputs.push_back(y);
  EXPECT_TRUE(InferGraph(*g, InferOptions{}).ok());
  return g;
}

int Count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type == op;
  return n;
}

const Node* Find(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n->name == name) return n.get();
  return nullptr;
}

Status Reinfer(Graph& g) {
  for (Value* v : g.values())
    if (!v->is_const() && !v->is_graph_input) v->has_shape = false;
  KILN_RETURN_IF_ERROR(g.TopoSort());
  KILN_RETURN_IF_ERROR(InferGraph(g, InferOptions{}));
  return VerifyGraph(g);
}

TEST(Precision, Fp16LowersFloatLayersAndKeepsTheBoundaryFloat32) {
  auto g = MakeGraph();
  PrecisionOptions o;
  o.low = DataType::kFloat16;
  auto rep = AssignPrecision(*g, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(Reinfer(*g).ok());
  EXPECT_EQ(rep->lowered, 4);
  EXPECT_EQ(rep->casts_inserted, 2);       // x -> fp16 at the input, y -> fp32 at the output
  EXPECT_EQ(rep->constants_converted, 1);  // c; the Resize scales stay float32
  EXPECT_EQ(g->inputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(g->outputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(g->outputs[0]->name, "y");
  EXPECT_EQ(Find(*g, "relu")->outputs[0]->dtype, DataType::kFloat16);
  EXPECT_EQ(Find(*g, "resize")->inputs[2]->dtype, DataType::kFloat32);
  EXPECT_EQ(Find(*g, "add")->inputs[1]->dtype, DataType::kFloat16);
  EXPECT_EQ(Count(*g, "Cast"), 2);
}

TEST(Precision, LoweredGraphComputesTheSameValues) {
  auto ref = MakeGraph();
  auto g = MakeGraph();
  PrecisionOptions o;
  o.low = DataType::kFloat16;
  ASSERT_TRUE(AssignPrecision(*g, o).ok());
  ASSERT_TRUE(Reinfer(*g).ok());
  Tensor x(DataType::kFloat32, {1, 3, 4, 4});
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.SetFromDouble(i, u(rng));
  auto want = cpu::RunGraph(*ref, {{"x", x}});
  auto got = cpu::RunGraph(*g, {{"x", x}});
  ASSERT_TRUE(want.ok() && got.ok()) << (got.ok() ? want.status().ToString() : got.status().ToString());
  const Tensor& a = want->at("y");
  const Tensor& b = got->at("y");
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.GetAsDouble(i), b.GetAsDouble(i), 5e-3);
}

TEST(Precision, Fp16ConstantsSaturateAndLeaveTheSourceAlone) {
  // A small constant with out-of-range, non-finite and ordinary values, and a large one (converted on several
  // threads) with one out-of-range value near its end.
  for (const int64_t n : {int64_t{8}, int64_t{3} << 20}) {
    auto g = MakeGraph();
    const float special[8] = {-3.4028235e38f, 1e5f, 65504.f, -0.1f, std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 1.f / 3, -70000.f};
    Tensor big(DataType::kFloat32, {n});
    // Ordinary values, some small enough to become FP16 subnormals (or round to zero).
    for (int64_t i = 0; i < n; ++i)
      big.data<float>()[i] = i < 8 ? special[i] : static_cast<float>((i % 2001) - 1000) / 7 * (i % 3 ? 1.f : 1e-7f);
    if (n > 8) big.data<float>()[n - 3] = 1e9f;
    const Tensor original = big.Clone();
    g->FindValue("c")->const_value = big;  // precision planning reads the values only, not the Add's broadcast
    PrecisionOptions o;
    o.low = DataType::kFloat16;
    auto rep = AssignPrecision(*g, o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    EXPECT_EQ(rep->constants_clamped, 1);
    const Value* h = Find(*g, "add")->inputs[1];
    ASSERT_TRUE(h->is_const());
    ASSERT_EQ(h->const_value->dtype(), DataType::kFloat16);
    ASSERT_EQ(h->const_value->numel(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float want = original.data<float>()[i];
      const double got = h->const_value->GetAsDouble(i);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << i;
      } else if (std::isinf(want)) {
        EXPECT_EQ(got, static_cast<double>(want)) << i;
      } else if (std::fabs(want) > 65504.f) {
        EXPECT_EQ(got, want > 0 ? 65504.0 : -65504.0) << i;
      } else {  // bit-exact against the scalar round-to-nearest-even conversion (the vector path must agree)
        EXPECT_EQ(h->const_value->data<uint16_t>()[i], FloatToHalf(want)) << i << ": " << want;
      }
    }
    // The float32 source is not modified in place.
    EXPECT_EQ(std::memcmp(big.raw(), original.raw(), original.nbytes()), 0);
  }
}

TEST(Precision, PinnedLayerStaysFloat32) {
  auto g = MakeGraph();
  PrecisionOptions o;
  o.low = DataType::kFloat16;
  o.layer_precision["relu"] = DataType::kFloat32;
  auto rep = AssignPrecision(*g, o);
  ASSERT_TRUE(rep.ok());
  ASSERT_TRUE(Reinfer(*g).ok());
  EXPECT_EQ(Find(*g, "relu")->inputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(Find(*g, "relu")->outputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(Find(*g, "softmax")->outputs[0]->dtype, DataType::kFloat16);
  EXPECT_EQ(rep->kept_fp32, 1);
}

TEST(Precision, NodeWhoseKernelTakesNoReducedTypeStaysFloat32) {
  auto g = MakeGraph();
  PrecisionOptions o;
  o.low = DataType::kFloat16;
  std::vector<std::string> asked;
  // A backend whose Softmax kernel declares float32 only; every other kernel takes float16.
  o.kernel_takes = [&](const Node& n, DataType t) {
    asked.push_back(n.name);
    EXPECT_EQ(t, DataType::kFloat16);
    return n.op_type != "Softmax";
  };
  auto rep = AssignPrecision(*g, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(Reinfer(*g).ok());
  EXPECT_EQ(Find(*g, "softmax")->inputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(Find(*g, "softmax")->outputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(Find(*g, "relu")->outputs[0]->dtype, DataType::kFloat16);
  EXPECT_EQ(rep->kept_fp32, 1);
  EXPECT_EQ(rep->lowered, 3);
  bool said = false;
  for (const std::string& d : rep->details) said |= d.find("softmax") != std::string::npos &&
                                                   d.find("kernel takes no float16") != std::string::npos;
  EXPECT_TRUE(said) << ::testing::PrintToString(rep->details);
  EXPECT_EQ(asked.size(), 4u) << "every lowerable node is asked once";
}

// --precisionConstraints=obey (kOBEY_PRECISION_CONSTRAINTS): a --layerPrecisions entry the backend's kernel
// cannot honour is an error naming the layer; with prefer (the default) the layer stays float32.
TEST(Precision, ObeyedLayerPrecisionThatCannotBeHonouredFailsTheBuild) {
  for (bool obey : {false, true}) {
    auto g = MakeGraph();
    PrecisionOptions o;
    o.layer_precision["softmax"] = DataType::kFloat16;
    o.kernel_takes = [](const Node& n, DataType) { return n.op_type != "Softmax"; };
    o.obey_layer_precisions = obey;
    auto rep = AssignPrecision(*g, o);
    if (!obey) {
      ASSERT_TRUE(rep.ok()) << rep.status().ToString();
      continue;
    }
    ASSERT_FALSE(rep.ok());
    EXPECT_NE(rep.status().message().find("softmax"), std::string::npos) << rep.status().message();
    EXPECT_NE(rep.status().message().find("obey"), std::string::npos) << rep.status().message();
  }
}

TEST(Precision, OneLayerInBf16InAFloat32Engine) {
  auto g = MakeGraph();
  PrecisionOptions o;
  o.layer_precision["softmax"] = DataType::kBFloat16;
  ASSERT_TRUE(AssignPrecision(*g, o).ok());
  ASSERT_TRUE(Reinfer(*g).ok());
  EXPECT_EQ(Find(*g, "softmax")->inputs[0]->dtype, DataType::kBFloat16);
  EXPECT_EQ(Find(*g, "relu")->outputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(g->outputs[0]->dtype, DataType::kFloat32);
}

TEST(Precision, IOFormatsSetTheBoundaryTypes) {
  auto g = MakeGraph();
  PrecisionOptions o;
  o.low = DataType::kFloat16;
  o.io_types["x"] = DataType::kFloat16;
  o.io_types["y"] = DataType::kFloat16;
  auto rep = AssignPrecision(*g, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(Reinfer(*g).ok());
  EXPECT_EQ(g->inputs[0]->dtype, DataType::kFloat16);
  EXPECT_EQ(g->outputs[0]->dtype, DataType::kFloat16);
  EXPECT_EQ(Count(*g, "Cast"), 0);
}

TEST(Precision, RejectsNonFloatComputeTypes) {
  auto g = MakeGraph();
  PrecisionOptions o;
  o.layer_precision["relu"] = DataType::kInt8;
  auto rep = AssignPrecision(*g, o);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("relu"), std::string::npos);
}

}  // namespace
}  // namespace kiln
