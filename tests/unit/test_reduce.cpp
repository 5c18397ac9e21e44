// Reduction family: Reduce*, ArgMax/ArgMin, TopK, CumSum, Softmax/LogSoftmax kernels vs independent naive
// computations on random data with odd shapes; symbolic shape inference; converters; error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "ops/op_def.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

Tensor RandomTensor(std::vector<int64_t> shape, uint32_t seed, DataType dt = DataType::kFloat32, double lo = -2,
                    double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, IsFloatType(dt) ? u(rng) : std::floor(u(rng)));
  return t;
}

struct OneNode : testing::OneNode {
  OneNode(const std::string& op, size_t ins, size_t outs = 1, int64_t opset = 18)
      : testing::OneNode(op, ins, outs, opset) {}
};
using testing::Unravel;

// Naive reduction: visits every input element and folds it into its output slot (in double).
std::vector<double> NaiveReduce(const Tensor& x, const std::vector<int64_t>& axes, const std::string& op,
                                std::vector<int64_t>& out_shape, bool keepdims) {
  const auto& s = x.shape();
  std::vector<bool> red(s.size(), axes.empty());
  for (int64_t a : axes) red[a < 0 ? a + s.size() : a] = true;
  std::vector<int64_t> kept;
  out_shape.clear();
  for (size_t d = 0; d < s.size(); ++d) {
    if (!red[d]) kept.push_back(s[d]);
    if (!red[d]) out_shape.push_back(s[d]);
    else if (keepdims) out_shape.push_back(1);
  }
  const int64_t nout = std::accumulate(kept.begin(), kept.end(), int64_t{1}, std::multiplies<>());
  std::vector<std::vector<double>> groups(nout);
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto idx = Unravel(i, s);
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d)
      if (!red[d]) o = o * s[d] + idx[d];
    groups[o].push_back(x.GetAsDouble(i));
  }
  std::vector<double> r;
  for (const auto& g : groups) {
    double v = 0;
    if (op == "ReduceSum") for (double e : g) v += e;
    else if (op == "ReduceMean") { for (double e : g) v += e; v /= g.size(); }
    else if (op == "ReduceMax") v = g.empty() ? -INFINITY : *std::max_element(g.begin(), g.end());
    else if (op == "ReduceMin") v = g.empty() ? INFINITY : *std::min_element(g.begin(), g.end());
    else if (op == "ReduceProd") { v = 1; for (double e : g) v *= e; }
    else if (op == "ReduceL1") for (double e : g) v += std::fabs(e);
    else if (op == "ReduceL2") { for (double e : g) v += e * e; v = std::sqrt(v); }
    else if (op == "ReduceSumSquare") for (double e : g) v += e * e;
    else if (op == "ReduceLogSum") { for (double e : g) v += e; v = std::log(v); }
    else if (op == "ReduceLogSumExp") { for (double e : g) v += std::exp(e); v = std::log(v); }
    r.push_back(v);
  }
  return r;
}

void ExpectNear(const Tensor& t, const std::vector<double>& ref, double rtol, double atol = 1e-6) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(ref.size()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.GetAsDouble(i);
    if (std::isinf(ref[i])) {
      EXPECT_EQ(v, ref[i]) << "at " << i;
    } else {
      EXPECT_NEAR(v, ref[i], atol + rtol * std::fabs(ref[i])) << "at " << i;
    }
  }
}

const char* kReduceOps[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                            "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};

TEST(Reduce, AllOpsRandomAxesMatchNaive) {
  std::mt19937 rng(7);
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 5}, {2, 3, 5}, {3, 1, 4, 5}, {2, 3, 1, 7, 3}};
  for (const char* op : kReduceOps) {
    for (size_t si = 0; si < shapes.size(); ++si) {
      const auto& shape = shapes[si];
      const int64_t rank = shape.size();
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<int64_t> axes;
        for (int64_t d = 0; d < rank; ++d)
          if (rng() % 2) axes.push_back(rng() % 2 ? d : d - rank);
        const bool keep = rng() % 2;
        const bool positive = std::string(op) == "ReduceLogSum" || std::string(op) == "ReduceProd";
        Tensor x = RandomTensor(shape, 100 + si * 10 + trial, DataType::kFloat32, positive ? 0.5 : -2,
                                positive ? 1.5 : 2);
        OneNode t(op, 2);
        t.n->attrs["keepdims"] = Attribute::Int(keep);
        Tensor a = Tensor::FromInt64(axes);
        auto r = t.Run({&x, &a});
        ASSERT_TRUE(r.ok()) << op << ": " << r.status().ToString();
        std::vector<int64_t> want_shape;
        auto ref = NaiveReduce(x, axes, op, want_shape, keep);
        EXPECT_EQ((*r)[0].shape(), want_shape) << op;
        ExpectNear((*r)[0], ref, 1e-5);
      }
    }
  }
}

TEST(Reduce, MissingAxesReducesAllAndNoopKeepsInput) {
  Tensor x = RandomTensor({3, 4, 5}, 1);
  OneNode t("ReduceSum", 1);
  t.n->attrs["keepdims"] = Attribute::Int(0);
  auto r = t.Run({&x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<int64_t> s;
  ExpectNear((*r)[0], NaiveReduce(x, {}, "ReduceSum", s, false), 1e-6);
  EXPECT_EQ((*r)[0].rank(), 0);

  OneNode t2("ReduceMean", 2);
  t2.n->attrs["noop_with_empty_axes"] = Attribute::Int(1);
  Tensor empty = Tensor::FromInt64({}, {0});
  auto r2 = t2.Run({&x, &empty});
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ((*r2)[0].shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ((*r2)[0].GetAsDouble(i), x.GetAsDouble(i));
}

TEST(Reduce, EmptySetGivesIdentity) {
  Tensor x(DataType::kFloat32, {2, 0, 3});
  Tensor axes = Tensor::FromInt64({1});
  const std::pair<const char*, double> cases[] = {{"ReduceSum", 0},        {"ReduceProd", 1},
                                                  {"ReduceMin", INFINITY}, {"ReduceMax", -INFINITY},
                                                  {"ReduceL2", 0},         {"ReduceLogSumExp", -INFINITY}};
  for (auto [op, want] : cases) {
    OneNode t(op, 2);
    auto r = t.Run({&x, &axes});
    ASSERT_TRUE(r.ok()) << op << ": " << r.status().ToString();
    EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{2, 1, 3}));
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ((*r)[0].GetAsDouble(i), want) << op;
  }
  // A zero-sized kept dim gives an empty output.
  Tensor axes2 = Tensor::FromInt64({2});
  OneNode t("ReduceSum", 2);
  auto r = t.Run({&x, &axes2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{2, 0, 1}));
}

TEST(Reduce, OtherDtypes) {
  Tensor xi = RandomTensor({4, 6}, 3, DataType::kInt32, -9, 9);
  Tensor axes = Tensor::FromInt64({1});
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare"}) {
    OneNode t(op, 2);
    auto r = t.Run({&xi, &axes});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)[0].dtype(), DataType::kInt32);
    std::vector<int64_t> s;
    ExpectNear((*r)[0], NaiveReduce(xi, {1}, op, s, true), 0, 0);
  }
  Tensor xh = RandomTensor({5, 33}, 4, DataType::kFloat16);
  OneNode t("ReduceMean", 2);
  auto r = t.Run({&xh, &axes});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].dtype(), DataType::kFloat16);
  std::vector<int64_t> s;
  ExpectNear((*r)[0], NaiveReduce(xh, {1}, "ReduceMean", s, true), 2e-3, 2e-3);

  Tensor xb(DataType::kBool, {2, 3});
  xb.data<bool>()[1] = true;
  OneNode tb("ReduceMax", 2);
  auto rb = tb.Run({&xb, &axes});
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ((*rb)[0].GetAsInt(0), 1);
  EXPECT_EQ((*rb)[0].GetAsInt(1), 0);
}

TEST(Reduce, ErrorsNameTheNode) {
  Tensor x = RandomTensor({3, 4}, 5);
  Tensor bad_axes = Tensor::FromInt64({2});
  OneNode t("ReduceSum", 2);
  auto r = t.Run({&x, &bad_axes});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test_ReduceSum"), std::string::npos);
  Tensor dup = Tensor::FromInt64({1, -1});
  EXPECT_FALSE(t.Run({&x, &dup}).ok());
  OneNode t2("ReduceMax", 2);
  t2.n->attrs["keepdims"] = Attribute::String("yes");
  Tensor axes = Tensor::FromInt64({0});
  auto r2 = t2.Run({&x, &axes});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("keepdims"), std::string::npos);
  Tensor fl = Tensor::FromFloat({0.f}, {1});
  EXPECT_FALSE(t.Run({&x, &fl}).ok());  // axes must be int64
}

InferContext MakeCtx(const Node& n, std::vector<std::optional<TensorInfo>> ins) {
  InferContext ctx{n, std::move(ins), {}};
  ctx.outputs.resize(n.outputs.size());
  return ctx;
}

TensorInfo Info(DataType t, Shape s, const Tensor* v = nullptr) {
  TensorInfo i;
  i.dtype = t;
  i.shape = std::move(s);
  i.has_shape = true;
  i.value = v;
  return i;
}

TEST(ReduceShape, KeepsSymbolicDims) {
  OneNode t("ReduceMean", 2);
  t.n->attrs["keepdims"] = Attribute::Int(0);
  Tensor axes = Tensor::FromInt64({-1});
  auto ctx = MakeCtx(*t.n, {Info(DataType::kFloat32, {Dim::Symbol("batch"), Dim::Symbol("seq"), 768}),
                            Info(DataType::kInt64, {1}, &axes)});
  ASSERT_TRUE(InferNode(ctx).ok());
  ASSERT_EQ(ctx.outputs[0].shape.size(), 2u);
  EXPECT_EQ(ctx.outputs[0].shape[0].sym, "batch");
  EXPECT_EQ(ctx.outputs[0].shape[1].sym, "seq");

  // Axes known only at run time: keepdims keeps the rank.
  OneNode t2("ReduceSum", 2);
  auto ctx2 = MakeCtx(*t2.n, {Info(DataType::kFloat32, {Dim::Symbol("b"), 1, 5}), Info(DataType::kInt64, {1})});
  ASSERT_TRUE(InferNode(ctx2).ok());
  ASSERT_TRUE(ctx2.outputs[0].has_shape);
  EXPECT_EQ(ctx2.outputs[0].shape.size(), 3u);
  EXPECT_TRUE(ctx2.outputs[0].shape[1].known());

  OneNode t3("ArgMax", 1);
  t3.n->attrs["axis"] = Attribute::Int(1);
  t3.n->attrs["keepdims"] = Attribute::Int(0);
  auto ctx3 = MakeCtx(*t3.n, {Info(DataType::kFloat32, {Dim::Symbol("b"), 10})});
  ASSERT_TRUE(InferNode(ctx3).ok());
  EXPECT_EQ(ctx3.outputs[0].dtype, DataType::kInt64);
  ASSERT_EQ(ctx3.outputs[0].shape.size(), 1u);
  EXPECT_EQ(ctx3.outputs[0].shape[0].sym, "b");

  OneNode t4("TopK", 2, 2);
  Tensor k = Tensor::FromInt64({3});
  auto ctx4 = MakeCtx(*t4.n, {Info(DataType::kFloat32, {Dim::Symbol("b"), 10}), Info(DataType::kInt64, {1}, &k)});
  ASSERT_TRUE(InferNode(ctx4).ok());
  EXPECT_EQ(ctx4.outputs[1].dtype, DataType::kInt64);
  EXPECT_EQ(ctx4.outputs[0].shape[1].value, 3);
  EXPECT_EQ(ctx4.outputs[0].shape[0].sym, "b");

  Tensor k20 = Tensor::FromInt64({20});
  auto ctx5 = MakeCtx(*t4.n, {Info(DataType::kFloat32, {2, 10}), Info(DataType::kInt64, {1}, &k20)});
  EXPECT_FALSE(InferNode(ctx5).ok());
}

TEST(ReduceShape, ProdOfSymbolicShapeTensorKeepsSymbols) {
  OneNode t("ReduceProd", 2);
  t.n->attrs["keepdims"] = Attribute::Int(0);
  Tensor axes = Tensor::FromInt64({0});
  TensorInfo shape_in = Info(DataType::kInt64, {3});
  shape_in.sym_value = std::vector<Dim>{Dim::Symbol("batch"), Dim(4), Dim(5)};
  auto ctx = MakeCtx(*t.n, {shape_in, Info(DataType::kInt64, {1}, &axes)});
  ASSERT_TRUE(InferNode(ctx).ok());
  EXPECT_TRUE(ctx.outputs[0].shape.empty());
  ASSERT_TRUE(ctx.outputs[0].sym_value.has_value());
  ASSERT_EQ(ctx.outputs[0].sym_value->size(), 1u);
  EXPECT_TRUE((*ctx.outputs[0].sym_value)[0].symbolic());
  EXPECT_NE((*ctx.outputs[0].sym_value)[0].sym.find("batch"), std::string::npos);
}

TEST(ArgMaxMin, TiesAndSelectLastIndex) {
  Tensor x = Tensor::FromFloat({1, 3, 3, 0, 2, 2, 0, 0, 5, 5, 5, 1}, {3, 4});
  struct Case {
    const char* op;
    int64_t last;
    std::vector<int64_t> want;
  };
  for (const Case& c : {Case{"ArgMax", 0, {1, 0, 0}}, Case{"ArgMax", 1, {2, 1, 2}}, Case{"ArgMin", 0, {3, 2, 3}},
                        Case{"ArgMin", 1, {3, 3, 3}}}) {
    OneNode t(c.op, 1);
    t.n->attrs["axis"] = Attribute::Int(-1);
    t.n->attrs["keepdims"] = Attribute::Int(0);
    t.n->attrs["select_last_index"] = Attribute::Int(c.last);
    auto r = t.Run({&x});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)[0].ToInt64Vector(), c.want) << c.op << " last=" << c.last;
  }
}

TEST(ArgMaxMin, RandomMiddleAxis) {
  Tensor x = RandomTensor({3, 7, 5}, 11);
  OneNode t("ArgMin", 1);
  t.n->attrs["axis"] = Attribute::Int(1);
  auto r = t.Run({&x});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{3, 1, 5}));
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 5; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < 7; ++k)
        if (x.GetAsDouble(o * 35 + k * 5 + i) < x.GetAsDouble(o * 35 + best * 5 + i)) best = k;
      EXPECT_EQ((*r)[0].GetAsInt(o * 5 + i), best);
    }
}

TEST(TopK, MatchesStableSortOnRandomData) {
  for (int64_t largest : {0, 1}) {
    Tensor x = RandomTensor({4, 9, 3}, 21 + largest, DataType::kFloat32, -3, 3);
    // Repeat some values to exercise ties.
    for (int64_t i = 0; i < x.numel(); i += 4) x.SetFromDouble(i, 1.0);
    OneNode t("TopK", 2, 2);
    t.n->attrs["axis"] = Attribute::Int(1);
    t.n->attrs["largest"] = Attribute::Int(largest);
    Tensor k = Tensor::FromInt64({5});
    auto r = t.Run({&x, &k});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Tensor& v = (*r)[0];
    const Tensor& ix = (*r)[1];
    EXPECT_EQ(v.shape(), (std::vector<int64_t>{4, 5, 3}));
    for (int64_t o = 0; o < 4; ++o)
      for (int64_t i = 0; i < 3; ++i) {
        std::vector<int64_t> order(9);
        std::iota(order.begin(), order.end(), 0);
        auto val = [&](int64_t q) { return x.GetAsDouble(o * 27 + q * 3 + i); };
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return largest ? val(a) > val(b) : val(a) < val(b); });
        for (int64_t j = 0; j < 5; ++j) {
          EXPECT_EQ(ix.GetAsInt(o * 15 + j * 3 + i), order[j]);
          EXPECT_EQ(v.GetAsDouble(o * 15 + j * 3 + i), val(order[j]));
        }
      }
  }
}

TEST(TopK, Errors) {
  Tensor x = RandomTensor({2, 3}, 1);
  Tensor k = Tensor::FromInt64({4});
  OneNode t("TopK", 2, 2);
  EXPECT_FALSE(t.Run({&x, &k}).ok());
  Tensor kneg = Tensor::FromInt64({-1});
  EXPECT_FALSE(t.Run({&x, &kneg}).ok());
}

TEST(CumSum, AllModesMatchNaive) {
  Tensor x = RandomTensor({3, 4, 5}, 31, DataType::kFloat64);
  for (int64_t axis : {0, 1, -1})
    for (int64_t excl : {0, 1})
      for (int64_t rev : {0, 1}) {
        OneNode t("CumSum", 2);
        t.n->attrs["exclusive"] = Attribute::Int(excl);
        t.n->attrs["reverse"] = Attribute::Int(rev);
        Tensor a(DataType::kInt32, {});
        a.data<int32_t>()[0] = static_cast<int32_t>(axis);
        auto r = t.Run({&x, &a});
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        const int64_t ax = axis < 0 ? axis + 3 : axis;
        const auto s = x.shape();
        std::vector<double> ref(x.numel());
        for (int64_t i = 0; i < x.numel(); ++i) {
          auto idx = Unravel(i, s);
          double acc = 0;
          for (int64_t q = 0; q < s[ax]; ++q) {
            const bool take = rev ? (excl ? q > idx[ax] : q >= idx[ax]) : (excl ? q < idx[ax] : q <= idx[ax]);
            if (!take) continue;
            auto j = idx;
            j[ax] = q;
            ref[i] += x.GetAsDouble((j[0] * s[1] + j[1]) * s[2] + j[2]);
          }
          (void)acc;
        }
        ExpectNear((*r)[0], ref, 1e-12);
      }
}

std::vector<double> NaiveSoftmax(const Tensor& x, int64_t axis, bool flatten, bool log) {
  const auto s = x.shape();
  const int64_t rank = s.size();
  if (axis < 0) axis += rank;
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= s[d];
    else if (d == axis || flatten) n *= s[d];
    else inner *= s[d];
  }
  std::vector<double> y(x.numel());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0, m = -INFINITY;
      for (int64_t r = 0; r < n; ++r) m = std::max(m, x.GetAsDouble((o * n + r) * inner + i));
      for (int64_t r = 0; r < n; ++r) sum += std::exp(x.GetAsDouble((o * n + r) * inner + i) - m);
      for (int64_t r = 0; r < n; ++r) {
        const double v = x.GetAsDouble((o * n + r) * inner + i);
        y[(o * n + r) * inner + i] = log ? v - m - std::log(sum) : std::exp(v - m) / sum;
      }
    }
  return y;
}

TEST(Softmax, AxesAndLegacyFlattenMatchNaive) {
  Tensor x = RandomTensor({3, 4, 5}, 41, DataType::kFloat32, -20, 20);
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (int64_t axis : {0, 1, 2, -1})
      for (int64_t flatten : {0, 1}) {
        OneNode t(op, 1);
        t.n->attrs["axis"] = Attribute::Int(axis);
        if (flatten) t.n->attrs["kiln_flatten_2d"] = Attribute::Int(1);
        auto r = t.Run({&x});
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ExpectNear((*r)[0], NaiveSoftmax(x, axis, flatten, std::string(op) == "LogSoftmax"), 1e-5, 1e-6);
      }
  Tensor xh = RandomTensor({2, 130}, 42, DataType::kFloat16);
  OneNode t("Softmax", 1);
  t.n->attrs["axis"] = Attribute::Int(-1);
  auto r = t.Run({&xh});
  ASSERT_TRUE(r.ok());
  ExpectNear((*r)[0], NaiveSoftmax(xh, -1, false, false), 5e-3, 1e-4);
}

TEST(Softmax, RejectsIntegerInputAndBadAxis) {
  Tensor xi(DataType::kInt32, {2, 3});
  OneNode t("Softmax", 1);
  EXPECT_FALSE(t.Run({&xi}).ok());
  Tensor x = RandomTensor({2, 3}, 1);
  t.n->attrs["axis"] = Attribute::Int(2);
  auto r = t.Run({&x});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test_Softmax"), std::string::npos);
}

// ---- converters ----
TEST(ReduceConverters, AttributeFormsBecomeInputs) {
  Graph g;
  Node* n = g.AddNode("ReduceMean", "rm");
  n->inputs.push_back(g.AddValue("x"));
  n->outputs.push_back(g.AddValue("y"));
  n->attrs["axes"] = Attribute::Ints({1, 2});
  const OpDef* sup = FindOp(kOnnxDomain, "ReduceMean");
  ASSERT_NE(sup, nullptr);
  ConvertContext c{g, *n, 13};
  ASSERT_TRUE(sup->convert(c).ok());
  EXPECT_FALSE(n->has_attr("axes"));
  ASSERT_NE(n->input(1), nullptr);
  EXPECT_EQ(n->input(1)->const_value->ToInt64Vector(), (std::vector<int64_t>{1, 2}));

  Node* s = g.AddNode("Softmax", "sm");
  s->inputs.push_back(g.AddValue("x2"));
  s->outputs.push_back(g.AddValue("y2"));
  ConvertContext c2{g, *s, 11};
  ASSERT_TRUE(FindOp(kOnnxDomain, "Softmax")->convert(c2).ok());
  EXPECT_EQ(s->geti("axis", -5), 1);
  EXPECT_EQ(s->geti("kiln_flatten_2d", 0), 1);

  Node* k = g.AddNode("TopK", "tk");
  k->inputs.push_back(g.AddValue("x3"));
  k->attrs["k"] = Attribute::Int(2);
  ConvertContext c3{g, *k, 9};
  ASSERT_TRUE(FindOp(kOnnxDomain, "TopK")->convert(c3).ok());
  ASSERT_NE(k->input(1), nullptr);
  EXPECT_EQ(k->input(1)->const_value->ToInt64Vector(), (std::vector<int64_t>{2}));
}

}  // namespace
}  // namespace kiln
