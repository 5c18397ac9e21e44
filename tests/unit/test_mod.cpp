// Mod (opsets 10, 13): the CPU kernel against an independent reference in double (floored remainder for
// fmod=0, truncated for fmod=1) on every integer and float dtype with broadcasting and negative operands;
// x mod 0 and MIN mod -1 for integers; float inputs with fmod=0 and a bad fmod rejected naming the node;
// shape inference (types, broadcasting, sym_value); folding of shape arithmetic; the ONNX import path.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx_testing.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

struct ModNode : testing::OneNode {
  explicit ModNode(int64_t fmod, int64_t opset = 13) : testing::OneNode("Mod", 2, 1, opset) {
    n->attrs["fmod"] = Attribute::Int(fmod);
  }
};

// The remainder of a / b (b != 0) in double, exact for the values used (small integers, floats' own values):
// truncated (C's fmod) or floored (Python's %).
double RefMod(double a, double b, bool fmod) {
  if (fmod) return std::fmod(a, b);
  return a - std::floor(a / b) * b;
}

void ExpectMod(const Tensor& out, const Tensor& a, const Tensor& b, bool fmod) {
  for (int64_t i = 0; i < out.numel(); ++i) {
    const auto idx = testing::Unravel(i, out.shape());
    const double x = testing::BroadcastAt(a, idx), y = testing::BroadcastAt(b, idx);
    // x mod 0: NaN for floats, 0 for integers (the kernel's defined result).
    double want = IsFloatType(a.dtype()) ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    if (y != 0) want = RefMod(x, y, fmod);
    const double got = out.GetAsDouble(i);
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << x << " mod " << y << " at " << i;
    else ASSERT_EQ(got, want) << DataTypeName(a.dtype()) << " fmod=" << fmod << ": " << x << " mod " << y << " at " << i;
  }
}

TEST(Mod, IntegerSignsFollowTheDivisorOrTheDividend) {
  Tensor a = Tensor::FromInt64({-4, 7, 5, 4, -7, 8, -1, 0}, {8});
  Tensor b = Tensor::FromInt64({2, -3, 8, -2, 3, 5, 4, -5}, {8});
  ModNode floored(0), truncated(1);
  auto r = floored.Run({&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{0, -2, 5, 0, 2, 3, 3, 0}));  // Python's %
  r = truncated.Run({&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{0, 1, 5, 0, -1, 3, -1, 0}));  // C's fmod
}

TEST(Mod, EveryIntegerTypeWithBroadcastingMatchesTheReference) {
  std::mt19937 rng(5);
  const DataType types[] = {DataType::kInt8,  DataType::kInt16,  DataType::kInt32,  DataType::kInt64,
                            DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64};
  for (DataType dt : types) {
    const bool is_signed = IsSignedType(dt);
    const int64_t lo = is_signed ? -100 : 0, hi = 120;
    // [3,1,5] with [4,1] -> [3,4,5]; divisors include 0 (result 0) and, for signed types, -1.
    Tensor a = testing::RandomInts(rng, dt, {3, 1, 5}, lo, hi);
    Tensor b = testing::RandomInts(rng, dt, {4, 1}, is_signed ? -9 : 0, 9);
    b.SetFromDouble(0, 0);
    if (is_signed) b.SetFromDouble(1, -1);
    for (int64_t fmod : {0, 1}) {
      ModNode t(fmod);
      auto r = t.Run({&a, &b});
      ASSERT_TRUE(r.ok()) << DataTypeName(dt) << ": " << r.status().ToString();
      ASSERT_EQ((*r)[0].dtype(), dt);
      ASSERT_EQ((*r)[0].shape(), (std::vector<int64_t>{3, 4, 5}));
      ExpectMod((*r)[0], a, b, fmod != 0);
      // And the other way round (the dividend broadcasts).
      r = t.Run({&b, &a});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ExpectMod((*r)[0], b, a, fmod != 0);
    }
  }
}

TEST(Mod, IntegerEdgeCasesHaveDefinedResults) {
  // x mod 0 = 0 and MIN mod -1 = 0 (the C expression would trap); large magnitudes stay exact.
  const int64_t mn = std::numeric_limits<int64_t>::min(), mx = std::numeric_limits<int64_t>::max();
  Tensor a = Tensor::FromInt64({5, -5, mn, mn, mx, mn, mx}, {7});
  Tensor b = Tensor::FromInt64({0, 0, -1, 0, -2, 3, mn}, {7});
  ModNode floored(0), truncated(1);
  auto r = floored.Run({&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // mn mod 3 (floored): mn = -9223372036854775808 = 3 * -3074457345618258603 + 1; mx mod mn (floored) = -1.
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{0, 0, 0, 0, -1, 1, -1}));
  r = truncated.Run({&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].ToInt64Vector(), (std::vector<int64_t>{0, 0, 0, 0, 1, -2, mx}));

  Tensor c(DataType::kInt8, {2}), d(DataType::kInt8, {2});
  c.SetFromDouble(0, -128);
  c.SetFromDouble(1, -128);
  d.SetFromDouble(0, -1);
  d.SetFromDouble(1, 127);
  r = floored.Run({&c, &d});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].GetAsDouble(0), 0);
  EXPECT_EQ((*r)[0].GetAsDouble(1), 126);  // -128 = 127 * -2 + 126
}

TEST(Mod, FloatFmodOnEveryFloatType) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    Tensor a = testing::Random({2, 3, 7}, 21, -50, 50, dt);
    Tensor b = testing::Random({3, 1}, 22, -6, 6, dt);
    b.SetFromDouble(2, -0.75);
    Tensor z = testing::Random({1}, 23, 0.5, 2, dt);
    ModNode t(1);
    auto r = t.Run({&a, &b});
    ASSERT_TRUE(r.ok()) << DataTypeName(dt) << ": " << r.status().ToString();
    ASSERT_EQ((*r)[0].dtype(), dt);
    ExpectMod((*r)[0], a, b, true);  // fmod is exact in every format
    r = t.Run({&z, &a});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectMod((*r)[0], z, a, true);
  }
  // Signs follow the dividend; x mod 0 is NaN.
  Tensor a = Tensor::FromFloat({-5.5f, 5.5f, -5.5f, 5.5f, 3.f}, {5});
  Tensor b = Tensor::FromFloat({2.f, -2.f, -2.f, 2.f, 0.f}, {5});
  ModNode t(1);
  auto r = t.Run({&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto v = (*r)[0].ToFloatVector();
  EXPECT_EQ(v[0], -1.5f);
  EXPECT_EQ(v[1], 1.5f);
  EXPECT_EQ(v[2], -1.5f);
  EXPECT_EQ(v[3], 1.5f);
  EXPECT_TRUE(std::isnan(v[4]));
}

TEST(Mod, FloatWithFmodZeroAndBadAttributesAreErrorsNamingTheNode) {
  Tensor f = testing::Random({4}, 3), i = Tensor::FromInt64({1, 2, 3, 4}, {4});
  {
    ModNode t(0);  // fmod defaults to 0 too
    t.n->attrs.erase("fmod");
    auto r = t.Run({&f, &f});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("test_Mod"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find("Mod with float inputs requires fmod=1"), std::string::npos)
        << r.status().ToString();
  }
  {
    ModNode t(2);
    auto r = t.Run({&i, &i});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("fmod must be 0 or 1"), std::string::npos) << r.status().ToString();
  }
  {
    ModNode t(1);
    EXPECT_FALSE(t.Run({&f, &i}).ok());  // mixed types
    Tensor g = testing::Random({3}, 4);
    EXPECT_FALSE(t.Run({&f, &g}).ok());  // shapes do not broadcast
    EXPECT_FALSE(t.Run({&f, nullptr}).ok());
  }
}

TEST(Mod, ShapeInferenceBroadcastsAndCarriesSymValues) {
  ModNode t(0);
  TensorInfo a, b;
  a.dtype = b.dtype = DataType::kInt32;
  a.shape = {Dim::Symbol("batch"), Dim(1), Dim(64)};
  b.shape = {Dim::Symbol("seq"), Dim(1)};
  a.has_shape = b.has_shape = true;
  InferContext ctx{*t.n, {a, b}, {}};
  ctx.outputs.resize(1);
  ASSERT_TRUE(InferNode(ctx).ok());
  EXPECT_EQ(ShapeToString(ctx.out(0).shape), "[batch,seq,64]");
  EXPECT_EQ(ctx.out(0).dtype, DataType::kInt32);

  // Shape contents [batch, 10] mod [1, 4] -> [0, 2].
  TensorInfo shp, k;
  shp.dtype = k.dtype = DataType::kInt64;
  shp.shape = {Dim(2)};
  shp.has_shape = true;
  shp.sym_value = std::vector<Dim>{Dim::Symbol("batch"), Dim(10)};
  Tensor kv = Tensor::FromInt64({1, 4}, {2});
  k.shape = {Dim(2)};
  k.has_shape = true;
  k.value = &kv;
  InferContext sc{*t.n, {shp, k}, {}};
  sc.outputs.resize(1);
  ASSERT_TRUE(InferNode(sc).ok());
  ASSERT_TRUE(sc.out(0).sym_value.has_value());
  EXPECT_EQ((*sc.out(0).sym_value)[0].value, 0);
  EXPECT_EQ((*sc.out(0).sym_value)[1].value, 2);
}

TEST(Mod, ShapeArithmeticFoldsToConstants) {
  // x[6,10] -> Shape -> Mod([4, 3]) -> s ; the importer-style folding turns s into the constant [2, 1].
  testing::TestGraph tg;
  tg.drop_folded = true;
  Value* x = tg.Input("x", {6, 10});
  Value* s = tg.Op("Shape", "shape", {x});
  Value* m = tg.Op("Mod", "mod", {s, tg.Ints("k", {4, 3})});
  tg.Output(m);
  tg.Finish();
  ASSERT_TRUE(m->is_const());
  EXPECT_EQ(m->const_value->ToInt64Vector(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(tg.Count("Mod"), 0);
}

// Y = Mod(A, B) with int64 or float inputs of shape [2,3] and [3], written with the protobuf API and imported.
std::string ModModel(int elem_type, int64_t fmod, int64_t opset) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "mod");
  m.mutable_opset_import(0)->set_version(opset);
  auto vi = [&](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  vi(g->add_input(), "A", {2, 3});
  vi(g->add_input(), "B", {3});
  vi(g->add_output(), "Y", {2, 3});
  auto* n = testing::AddNode(g, "Mod", "the_mod", {"A", "B"}, {"Y"});
  if (fmod >= 0) testing::IntAttr(n, "fmod", fmod);
  return m.SerializeAsString();
}

TEST(Mod, ImportsAtOpsets10And13) {
  ImportOptions o;
  o.infer.evaluator = cpu::MakeConstEvaluator();
  for (int64_t opset : {10, 13}) {
    for (int64_t fmod : {-1, 0, 1}) {  // -1: attribute absent (default 0)
      auto g = ImportOnnxBytes(ModModel(onnx::TensorProto::INT64, fmod, opset), ".", "mod.onnx", o);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      Tensor a = Tensor::FromInt64({-7, 7, -7, 9, 0, 5}, {2, 3}), b = Tensor::FromInt64({3, -3, -3}, {3});
      auto out = cpu::RunGraph(**g, {{"A", a}, {"B", b}});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      const std::vector<int64_t> want = fmod == 1 ? std::vector<int64_t>{-1, 1, -1, 0, 0, 2}
                                                  : std::vector<int64_t>{2, -2, -1, 0, 0, -1};
      EXPECT_EQ(out->at("Y").ToInt64Vector(), want) << "opset " << opset << " fmod " << fmod;
    }
  }
  auto ok = ImportOnnxBytes(ModModel(onnx::TensorProto::FLOAT, 1, 13), ".", "mod.onnx", o);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
  auto bad = ImportOnnxBytes(ModModel(onnx::TensorProto::FLOAT, 0, 13), ".", "mod.onnx", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("the_mod"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("requires fmod=1"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace kiln
