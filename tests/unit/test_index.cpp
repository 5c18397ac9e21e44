// Tests of the index op family (Gather*, Scatter*, OneHot, NonZero, NonMaxSuppression): shape functions and
// CPU kernels, differential against naive index arithmetic on random data with odd shapes; out-of-range
// indices and bad attributes must be errors naming the node; symbolic contents flow through Gather.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "backends/cpu/executor.h"
#include "ops/op_def.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

std::mt19937 stream(4321);  // this file's random draws
int64_t RandInt(int64_t lo, int64_t hi) { return testing::RandInt(stream, lo, hi); }

Tensor RandomTensor(DataType t, const std::vector<int64_t>& shape) {
  return testing::RandomInts(stream, t, shape, -50, 50);
}
std::vector<int64_t> RandomShape(int64_t rank, int64_t lo = 1, int64_t hi = 5) {
  std::vector<int64_t> s(rank);
  for (auto& d : s) d = RandInt(lo, hi);
  return s;
}
using testing::ExpectEqualTensor;
using testing::Ravel;
using testing::Unravel;
// Index tensor of `shape` with values in [-dim, dim) (negative half the time), int32 or int64.
Tensor RandomIndices(DataType t, const std::vector<int64_t>& shape, int64_t dim) {
  return testing::RandomInts(stream, t, shape, -dim, dim - 1);
}
int64_t Wrap(int64_t v, int64_t dim) { return v < 0 ? v + dim : v; }

struct OneNode : testing::OneNode {
  OneNode(const std::string& op, size_t ins, size_t outs = 1) : testing::OneNode(op, ins, outs, 21, "idx_node") {}
};

void ExpectErrorNamingNode(const Result<std::vector<Tensor>>& r) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("idx_node"), std::string::npos) << r.status().ToString();
}

const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kInt8, DataType::kInt64,
                           DataType::kFloat64, DataType::kUInt8};

TEST(IndexOps, GatherMatchesNaive) {
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t r = RandInt(1, 4);
    auto ds = RandomShape(r);
    const int64_t axis = RandInt(-r, r - 1), a = Wrap(axis, r);
    auto is = RandomShape(RandInt(0, 2));  // rank 0: scalar indices
    const DataType t = kTypes[trial % 6];
    Tensor data = RandomTensor(t, ds);
    Tensor ind = RandomIndices(trial % 2 ? DataType::kInt32 : DataType::kInt64, is, ds[a]);
    OneNode on("Gather", 2);
    on.n->attrs["axis"] = Attribute::Int(axis);
    auto res = on.Run({&data, &ind});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    std::vector<int64_t> os(ds.begin(), ds.begin() + a);
    os.insert(os.end(), is.begin(), is.end());
    os.insert(os.end(), ds.begin() + a + 1, ds.end());
    Tensor want(t, os);
    const int64_t q = static_cast<int64_t>(is.size());
    for (int64_t i = 0; i < want.numel(); ++i) {
      auto oi = Unravel(i, os);
      std::vector<int64_t> ii(oi.begin() + a, oi.begin() + a + q);
      std::vector<int64_t> di(oi.begin(), oi.begin() + a);
      di.push_back(Wrap(ind.GetAsInt(Ravel(ii, is)), ds[a]));
      di.insert(di.end(), oi.begin() + a + q, oi.end());
      want.SetFromDouble(i, data.GetAsDouble(Ravel(di, ds)));
    }
    ExpectEqualTensor((*res)[0], want);
  }
}

TEST(IndexOps, GatherOutOfRangeIsAnError) {
  Tensor data = RandomTensor(DataType::kFloat32, {3, 4});
  for (int64_t bad : {3, -4, 100}) {
    Tensor ind = Tensor::FromInt64({0, bad});
    OneNode on("Gather", 2);
    ExpectErrorNamingNode(on.Run({&data, &ind}));
  }
  Tensor ind = Tensor::FromInt64({0});
  OneNode bad_axis("Gather", 2);
  bad_axis.n->attrs["axis"] = Attribute::Int(2);
  ExpectErrorNamingNode(bad_axis.Run({&data, &ind}));
  OneNode bad_type("Gather", 2);
  bad_type.n->attrs["axis"] = Attribute::String("zero");
  ExpectErrorNamingNode(bad_type.Run({&data, &ind}));
  Tensor float_ind = Tensor::FromFloat({0.f}, {1});
  OneNode float_idx("Gather", 2);
  ExpectErrorNamingNode(float_idx.Run({&data, &float_ind}));
}

TEST(IndexOps, GatherPropagatesSymbolicShapeValues) {
  Graph g;
  Node* n = g.AddNode("Gather", "idx_node");
  InferContext ctx{*n, {}, {}};
  TensorInfo data;
  data.dtype = DataType::kInt64;
  data.shape = {Dim(4)};
  data.has_shape = true;
  data.sym_value = std::vector<Dim>{Dim::Symbol("batch"), Dim(3), Dim::Symbol("h"), Dim(7)};
  Tensor ind = Tensor::FromInt64({0, -2});
  TensorInfo idx;
  idx.dtype = DataType::kInt64;
  idx.shape = {Dim(2)};
  idx.has_shape = true;
  idx.value = &ind;
  ctx.inputs = {data, idx};
  ctx.outputs.resize(1);
  ASSERT_TRUE(InferNode(ctx).ok());
  ASSERT_TRUE(ctx.outputs[0].sym_value.has_value());
  ASSERT_EQ(ctx.outputs[0].sym_value->size(), 2u);
  EXPECT_EQ((*ctx.outputs[0].sym_value)[0].ToString(), "batch");
  EXPECT_EQ((*ctx.outputs[0].sym_value)[1].ToString(), "h");

  // Scalar index -> rank-0 output holding one symbolic value.
  Tensor scalar = Tensor::FromInt64({3}, {});
  idx.shape = {};
  idx.value = &scalar;
  ctx.inputs = {data, idx};
  ctx.outputs.assign(1, TensorInfo{});
  ASSERT_TRUE(InferNode(ctx).ok());
  EXPECT_TRUE(ctx.outputs[0].shape.empty());
  ASSERT_TRUE(ctx.outputs[0].sym_value.has_value());
  EXPECT_EQ((*ctx.outputs[0].sym_value)[0].value, 7);

  // Out of range at build time is an error too.
  Tensor bad = Tensor::FromInt64({4});
  idx.shape = {Dim(1)};
  idx.value = &bad;
  ctx.inputs = {data, idx};
  ctx.outputs.assign(1, TensorInfo{});
  EXPECT_FALSE(InferNode(ctx).ok());
}

TEST(IndexOps, ShapeGatherChainKeepsSymbolsThroughInferGraph) {
  Graph g;
  Value* x = g.GetOrAddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = {Dim::Symbol("batch"), Dim(3), Dim::Symbol("h"), Dim(5)};
  x->has_shape = true;
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Node* shape = g.AddNode("Shape", "shape_node");
  shape->inputs = {x};
  shape->outputs = {g.GetOrAddValue("s")};
  Node* gather = g.AddNode("Gather", "idx_node");
  gather->inputs = {shape->outputs[0], g.AddConstant("i", Tensor::FromInt64({-2, 0, 1}))};
  gather->outputs = {g.GetOrAddValue("dims")};
  Node* last = g.AddNode("Gather", "idx_node2");
  last->inputs = {shape->outputs[0], g.AddConstant("j", Tensor::FromInt64({3}, {}))};
  last->outputs = {g.GetOrAddValue("w")};
  InferOptions opts;
  opts.evaluator = cpu::MakeConstEvaluator();
  Status st = InferGraph(g, opts);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const Value* dims = gather->outputs[0];
  ASSERT_TRUE(dims->sym_value.has_value());
  ASSERT_EQ(dims->sym_value->size(), 3u);
  EXPECT_EQ((*dims->sym_value)[0].ToString(), "h");
  EXPECT_EQ((*dims->sym_value)[1].ToString(), "batch");
  EXPECT_EQ((*dims->sym_value)[2].value, 3);
  EXPECT_FALSE(dims->is_const());
  // A gathered element that is fully known becomes a constant scalar.
  const Value* w = last->outputs[0];
  ASSERT_TRUE(w->is_const());
  EXPECT_EQ(w->const_value->rank(), 0);
  EXPECT_EQ(w->const_value->GetAsInt(0), 5);
}

TEST(IndexOps, GatherElementsMatchesNaive) {
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t r = RandInt(1, 4);
    auto ds = RandomShape(r);
    const int64_t axis = RandInt(-r, r - 1), a = Wrap(axis, r);
    std::vector<int64_t> is(r);
    for (int64_t d = 0; d < r; ++d) is[d] = d == a ? RandInt(1, 6) : RandInt(1, ds[d]);
    const DataType t = kTypes[trial % 6];
    Tensor data = RandomTensor(t, ds);
    Tensor ind = RandomIndices(trial % 2 ? DataType::kInt32 : DataType::kInt64, is, ds[a]);
    OneNode on("GatherElements", 2);
    on.n->attrs["axis"] = Attribute::Int(axis);
    auto res = on.Run({&data, &ind});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    Tensor want(t, is);
    for (int64_t i = 0; i < want.numel(); ++i) {
      auto c = Unravel(i, is);
      c[a] = Wrap(ind.GetAsInt(i), ds[a]);
      want.SetFromDouble(i, data.GetAsDouble(Ravel(c, ds)));
    }
    ExpectEqualTensor((*res)[0], want);
  }
  Tensor data = RandomTensor(DataType::kFloat32, {2, 3});
  Tensor ind = Tensor::FromInt64({0, 3}, {1, 2});
  OneNode on("GatherElements", 2);
  on.n->attrs["axis"] = Attribute::Int(1);
  ExpectErrorNamingNode(on.Run({&data, &ind}));
}

TEST(IndexOps, GatherNDMatchesNaive) {
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t r = RandInt(1, 4);
    auto ds = RandomShape(r);
    const int64_t b = RandInt(0, r - 1);
    const int64_t k = RandInt(1, r - b);
    std::vector<int64_t> is(ds.begin(), ds.begin() + b);
    for (int64_t m = RandInt(0, 2); m > 0; --m) is.push_back(RandInt(1, 4));
    is.push_back(k);
    Tensor data = RandomTensor(kTypes[trial % 6], ds);
    Tensor ind(DataType::kInt64, is);
    for (int64_t i = 0; i < ind.numel(); ++i) {
      const int64_t j = b + i % k;
      ind.SetFromDouble(i, static_cast<double>(RandInt(-ds[j], ds[j] - 1)));
    }
    OneNode on("GatherND", 2);
    on.n->attrs["batch_dims"] = Attribute::Int(b);
    auto res = on.Run({&data, &ind});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    std::vector<int64_t> os(is.begin(), is.end() - 1);
    os.insert(os.end(), ds.begin() + b + k, ds.end());
    Tensor want(data.dtype(), os);
    const int64_t q = static_cast<int64_t>(is.size());
    for (int64_t i = 0; i < want.numel(); ++i) {
      auto oi = Unravel(i, os);
      std::vector<int64_t> irow(oi.begin(), oi.begin() + (q - 1));
      std::vector<int64_t> di(oi.begin(), oi.begin() + b);
      for (int64_t j = 0; j < k; ++j) {
        irow.push_back(j);
        di.push_back(Wrap(ind.GetAsInt(Ravel(irow, is)), ds[b + j]));
        irow.pop_back();
      }
      di.insert(di.end(), oi.begin() + (q - 1), oi.end());
      want.SetFromDouble(i, data.GetAsDouble(Ravel(di, ds)));
    }
    ExpectEqualTensor((*res)[0], want);
  }
  Tensor data = RandomTensor(DataType::kFloat32, {2, 3});
  Tensor ind = Tensor::FromInt64({1, 3}, {1, 2});
  OneNode on("GatherND", 2);
  ExpectErrorNamingNode(on.Run({&data, &ind}));
}

double Reduce(const std::string& red, double a, double b) {
  if (red == "add") return a + b;
  if (red == "mul") return a * b;
  if (red == "max") return std::max(a, b);
  if (red == "min") return std::min(a, b);
  return b;
}

TEST(IndexOps, ScatterNDMatchesNaive) {
  const char* reds[] = {"none", "add", "mul", "max", "min"};
  int checked = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const std::string red = reds[trial % 5];
    const int64_t r = RandInt(1, 4);
    auto ds = RandomShape(r, 2, 5);
    const int64_t k = RandInt(1, r);
    std::vector<int64_t> is = RandomShape(RandInt(0, 2), 1, 3);
    is.push_back(k);
    Tensor data = RandomTensor(trial % 2 ? DataType::kFloat32 : DataType::kInt32, ds);
    Tensor ind(DataType::kInt64, is);
    // Distinct rows for "none" (duplicates are undefined there); any rows with a reduction.
    const int64_t rows = ind.numel() / k;
    std::vector<std::vector<int64_t>> used;
    for (int64_t row = 0; row < rows; ++row) {
      std::vector<int64_t> c(k);
      do {
        for (int64_t j = 0; j < k; ++j) c[j] = RandInt(0, ds[j] - 1);
      } while (red == "none" && std::find(used.begin(), used.end(), c) != used.end() &&
               static_cast<int64_t>(used.size()) < NumElements(std::vector<int64_t>(ds.begin(), ds.begin() + k)));
      used.push_back(c);
      for (int64_t j = 0; j < k; ++j) ind.SetFromDouble(row * k + j, static_cast<double>(c[j] - (RandInt(0, 1) ? ds[j] : 0)));
    }
    if (red == "none" && static_cast<int64_t>(used.size()) > NumElements(std::vector<int64_t>(ds.begin(), ds.begin() + k)))
      continue;
    std::vector<int64_t> us(is.begin(), is.end() - 1);
    us.insert(us.end(), ds.begin() + k, ds.end());
    Tensor upd = RandomTensor(data.dtype(), us);
    OneNode on("ScatterND", 3);
    on.n->attrs["reduction"] = Attribute::String(red);
    auto res = on.Run({&data, &ind, &upd});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    Tensor want = data.Clone();
    const int64_t slice = NumElements(std::vector<int64_t>(ds.begin() + k, ds.end()));
    for (int64_t row = 0; row < rows; ++row) {
      std::vector<int64_t> c(used[row]);
      c.resize(r, 0);
      const int64_t base = Ravel(c, ds);
      for (int64_t e = 0; e < slice; ++e)
        want.SetFromDouble(base + e, Reduce(red, want.GetAsDouble(base + e), upd.GetAsDouble(row * slice + e)));
    }
    ExpectEqualTensor((*res)[0], want);
    ++checked;
  }
  EXPECT_GE(checked, 20);
  Tensor data = RandomTensor(DataType::kFloat32, {4});
  Tensor ind = Tensor::FromInt64({4}, {1, 1});
  Tensor upd = RandomTensor(DataType::kFloat32, {1});
  OneNode on("ScatterND", 3);
  ExpectErrorNamingNode(on.Run({&data, &ind, &upd}));
  OneNode bad_red("ScatterND", 3);
  bad_red.n->attrs["reduction"] = Attribute::String("avg");
  Tensor ok_ind = Tensor::FromInt64({1}, {1, 1});
  ExpectErrorNamingNode(bad_red.Run({&data, &ok_ind, &upd}));
}

TEST(IndexOps, ScatterElementsMatchesNaive) {
  const char* reds[] = {"none", "add", "mul", "max", "min"};
  for (int trial = 0; trial < 30; ++trial) {
    const std::string red = reds[trial % 5];
    const int64_t r = RandInt(1, 3);
    auto ds = RandomShape(r, 2, 5);
    const int64_t axis = RandInt(-r, r - 1), a = Wrap(axis, r);
    std::vector<int64_t> is(r);
    for (int64_t d = 0; d < r; ++d) is[d] = RandInt(1, ds[d]);
    Tensor data = RandomTensor(trial % 2 ? DataType::kFloat32 : DataType::kInt64, ds);
    Tensor ind(DataType::kInt64, is);
    Tensor upd = RandomTensor(data.dtype(), is);
    // "none": a permutation prefix along the axis keeps targets distinct.
    std::vector<int64_t> perm(ds[a]);
    for (int64_t i = 0; i < ds[a]; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), stream);
    for (int64_t i = 0; i < ind.numel(); ++i) {
      const int64_t v = red == "none" ? perm[Unravel(i, is)[a]] : RandInt(0, ds[a] - 1);
      ind.SetFromDouble(i, static_cast<double>(RandInt(0, 1) ? v - ds[a] : v));
    }
    OneNode on("ScatterElements", 3);
    on.n->attrs["axis"] = Attribute::Int(axis);
    on.n->attrs["reduction"] = Attribute::String(red);
    auto res = on.Run({&data, &ind, &upd});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    Tensor want = data.Clone();
    for (int64_t i = 0; i < ind.numel(); ++i) {
      auto c = Unravel(i, is);
      c[a] = Wrap(ind.GetAsInt(i), ds[a]);
      const int64_t o = Ravel(c, ds);
      want.SetFromDouble(o, Reduce(red, want.GetAsDouble(o), upd.GetAsDouble(i)));
    }
    ExpectEqualTensor((*res)[0], want);
  }
  Tensor data = RandomTensor(DataType::kFloat32, {3});
  Tensor ind = Tensor::FromInt64({-4});
  Tensor upd = RandomTensor(DataType::kFloat32, {1});
  OneNode on("ScatterElements", 3);
  ExpectErrorNamingNode(on.Run({&data, &ind, &upd}));
}

TEST(IndexOps, ScatterConvertsToScatterElements) {
  Graph g;
  Node* n = g.AddNode("Scatter", "idx_node");
  ConvertContext c{g, *n, 10};
  const OpDef* s = FindOp(kOnnxDomain, "Scatter");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->convert);
  ASSERT_TRUE(s->convert(c).ok());
  EXPECT_EQ(n->op_type, "ScatterElements");
}

TEST(IndexOps, OneHotMatchesNaive) {
  for (int trial = 0; trial < 20; ++trial) {
    auto is = RandomShape(RandInt(0, 3));
    const int64_t depth = RandInt(1, 6);
    const int64_t q = static_cast<int64_t>(is.size());
    const int64_t axis = RandInt(-q - 1, q), a = Wrap(axis, q + 1);
    Tensor ind(trial % 2 ? DataType::kFloat32 : DataType::kInt64, is);
    for (int64_t i = 0; i < ind.numel(); ++i) ind.SetFromDouble(i, static_cast<double>(RandInt(-depth - 2, depth + 1)));
    Tensor dep = Tensor::Scalar(DataType::kInt32, static_cast<double>(depth));
    Tensor vals = Tensor::FromFloat({-1.5f, 4.f}, {2});
    OneNode on("OneHot", 3);
    on.n->attrs["axis"] = Attribute::Int(axis);
    auto res = on.Run({&ind, &dep, &vals});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    std::vector<int64_t> os = is;
    os.insert(os.begin() + a, depth);
    Tensor want(DataType::kFloat32, os);
    for (int64_t i = 0; i < want.numel(); ++i) {
      auto oi = Unravel(i, os);
      const int64_t d = oi[a];
      oi.erase(oi.begin() + a);
      int64_t v = ind.GetAsInt(Ravel(oi, is));
      if (v < 0) v += depth;
      want.SetFromDouble(i, v == d ? 4.0 : -1.5);
    }
    ExpectEqualTensor((*res)[0], want);
  }
  Tensor ind = Tensor::FromInt64({1, 2});
  Tensor huge = Tensor::FromInt64({int64_t{1} << 40}, {});
  Tensor vals2 = Tensor::FromFloat({0.f, 1.f}, {2});
  OneNode too_big("OneHot", 3);
  ExpectErrorNamingNode(too_big.Run({&ind, &huge, &vals2}));
  Tensor dep = Tensor::FromInt64({0}, {});
  Tensor vals = Tensor::FromFloat({0.f, 1.f}, {2});
  OneNode on("OneHot", 3);
  ExpectErrorNamingNode(on.Run({&ind, &dep, &vals}));
}

TEST(IndexOps, NonZeroMatchesNaive) {
  for (int trial = 0; trial < 20; ++trial) {
    auto s = RandomShape(RandInt(0, 4), 1, 4);
    Tensor x(trial % 2 ? DataType::kFloat32 : DataType::kBool, s);
    for (int64_t i = 0; i < x.numel(); ++i) x.SetFromDouble(i, RandInt(0, 2) == 0 ? 1.0 : 0.0);
    OneNode on("NonZero", 1);
    auto res = on.Run({&x});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    const Tensor& got = (*res)[0];
    std::vector<int64_t> nz;
    for (int64_t i = 0; i < x.numel(); ++i)
      if (x.GetAsDouble(i) != 0) nz.push_back(i);
    const int64_t rows = s.empty() ? 1 : static_cast<int64_t>(s.size());
    const int64_t cnt = static_cast<int64_t>(nz.size());
    ASSERT_EQ(got.shape(), (std::vector<int64_t>{rows, cnt}));
    for (int64_t c = 0; c < cnt; ++c) {
      auto idx = s.empty() ? std::vector<int64_t>{0} : Unravel(nz[c], s);
      for (int64_t d = 0; d < rows; ++d) ASSERT_EQ(got.GetAsInt(d * cnt + c), idx[d]);
    }
  }
}

TEST(IndexOps, NonMaxSuppressionSuppressesOverlaps) {
  // Six boxes (ONNX's suppress_by_IOU example) in two batches, corner and center formats.
  const std::vector<float> corners = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f,
                                      0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101};
  const std::vector<float> sc = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};
  for (int center = 0; center < 2; ++center) {
    std::vector<float> b = corners;
    if (center)
      for (size_t i = 0; i < b.size(); i += 4) {
        const float y0 = b[i], x0 = b[i + 1], y1 = b[i + 2], x1 = b[i + 3];
        b[i] = (x0 + x1) / 2, b[i + 1] = (y0 + y1) / 2, b[i + 2] = x1 - x0, b[i + 3] = y1 - y0;
      }
    std::vector<float> b2 = b;
    b2.insert(b2.end(), b.begin(), b.end());
    std::vector<float> s2 = sc;
    s2.insert(s2.end(), sc.begin(), sc.end());
    Tensor boxes = Tensor::FromFloat(b2, {2, 6, 4});
    Tensor scores = Tensor::FromFloat(s2, {2, 1, 6});
    Tensor maxo = Tensor::FromInt64({3}, {1});
    Tensor iou = Tensor::FromFloat({0.5f}, {1});
    Tensor sthr = Tensor::FromFloat({0.0f}, {1});
    OneNode on("NonMaxSuppression", 5);
    on.n->attrs["center_point_box"] = Attribute::Int(center);
    auto res = on.Run({&boxes, &scores, &maxo, &iou, &sthr});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    const Tensor& got = (*res)[0];
    const std::vector<int64_t> want = {0, 0, 3, 0, 0, 0, 0, 0, 5, 1, 0, 3, 1, 0, 0, 1, 0, 5};
    ASSERT_EQ(got.shape(), (std::vector<int64_t>{6, 3}));
    for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(got.GetAsInt(i), want[i]) << "at " << i;
  }
  // A score threshold above every score leaves nothing.
  Tensor boxes = Tensor::FromFloat(corners, {1, 6, 4});
  Tensor scores = Tensor::FromFloat(sc, {1, 1, 6});
  Tensor maxo = Tensor::FromInt64({10}, {1});
  Tensor iou = Tensor::FromFloat({0.5f}, {1});
  Tensor sthr = Tensor::FromFloat({0.99f}, {1});
  OneNode on("NonMaxSuppression", 5);
  auto res = on.Run({&boxes, &scores, &maxo, &iou, &sthr});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ((*res)[0].shape(), (std::vector<int64_t>{0, 3}));
  // Mismatched box counts are an error.
  Tensor bad_scores = Tensor::FromFloat({0.5f, 0.5f}, {1, 1, 2});
  OneNode bad("NonMaxSuppression", 5);
  ExpectErrorNamingNode(bad.Run({&boxes, &bad_scores, &maxo, &iou, &sthr}));
}

}  // namespace
}  // namespace kiln
