// Tests of the data-movement op family (shape functions, converters' canonical form, CPU kernels):
// differential tests against naive index arithmetic on random data with odd shapes, error paths, and
// symbolic shape propagation through Shape -> Concat -> Reshape chains.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "backends/cpu/executor.h"
#include "ops/families.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

std::mt19937 stream(1234);  // this file's random draws
int64_t RandInt(int64_t lo, int64_t hi) { return testing::RandInt(stream, lo, hi); }
Tensor RandomTensor(DataType t, std::vector<int64_t> shape) {
  return testing::RandomInts(stream, t, std::move(shape), -100, 100);
}
using testing::ExpectEqualTensor;
using testing::Ravel;
using testing::Unravel;

// One node named n0 in its own graph, run through the CPU executor (shape inference + kernel).
struct OneNode : testing::OneNode {
  OneNode(const std::string& op, size_t ins, size_t outs = 1, int64_t opset = 21)
      : testing::OneNode(op, ins, outs, opset, "n0") {}
};

TEST(TensorOps, TransposeMatchesNaive) {
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t r = RandInt(1, 5);
    std::vector<int64_t> shape(r), perm(r);
    for (auto& d : shape) d = RandInt(1, 7);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), stream);
    const DataType t = trial % 3 == 0 ? DataType::kInt8 : (trial % 3 == 1 ? DataType::kFloat32 : DataType::kFloat16);
    Tensor x = RandomTensor(t, shape);
    OneNode on("Transpose", 1);
    on.n->attrs["perm"] = Attribute::Ints(perm);
    auto r0 = on.Run({&x});
    ASSERT_TRUE(r0.ok()) << r0.status().ToString();
    std::vector<int64_t> oshape;
    for (int64_t p : perm) oshape.push_back(shape[p]);
    Tensor want(t, oshape);
    for (int64_t i = 0; i < want.numel(); ++i) {
      auto oi = Unravel(i, oshape);
      std::vector<int64_t> xi(r);
      for (int64_t d = 0; d < r; ++d) xi[perm[d]] = oi[d];
      want.SetFromDouble(i, x.GetAsDouble(Ravel(xi, shape)));
    }
    ExpectEqualTensor((*r0)[0], want);
  }
}

// Larger odd shapes take the tiled transpose path (tiles of 32 with ragged edges) for every element size.
TEST(TensorOps, TiledTransposeMatchesNaive) {
  struct Case {
    std::vector<int64_t> shape, perm;
  } cases[] = {{{3, 37, 45}, {0, 2, 1}}, {{2, 19, 9, 33}, {0, 2, 3, 1}}, {{70, 9}, {1, 0}}, {{5, 8, 65}, {2, 1, 0}}};
  for (const auto& cs : cases) {
    for (DataType t : {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64}) {
      Tensor x = RandomTensor(t, cs.shape);
      OneNode on("Transpose", 1);
      on.n->attrs["perm"] = Attribute::Ints(cs.perm);
      auto r0 = on.Run({&x});
      ASSERT_TRUE(r0.ok()) << r0.status().ToString();
      std::vector<int64_t> oshape;
      for (int64_t p : cs.perm) oshape.push_back(cs.shape[p]);
      Tensor want(t, oshape);
      for (int64_t i = 0; i < want.numel(); ++i) {
        auto oi = Unravel(i, oshape);
        std::vector<int64_t> xi(oi.size());
        for (size_t d = 0; d < oi.size(); ++d) xi[cs.perm[d]] = oi[d];
        want.SetFromDouble(i, x.GetAsDouble(Ravel(xi, cs.shape)));
      }
      ExpectEqualTensor((*r0)[0], want);
    }
  }
}

TEST(TensorOps, SliceMatchesNaive) {
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t r = RandInt(1, 4);
    std::vector<int64_t> shape(r);
    for (auto& d : shape) d = RandInt(1, 9);
    Tensor x = RandomTensor(DataType::kFloat32, shape);
    std::vector<int64_t> starts, ends, axes, steps;
    for (int64_t d = 0; d < r; ++d) {
      if (RandInt(0, 3) == 0) continue;
      axes.push_back(RandInt(0, 1) ? d : d - r);
      starts.push_back(RandInt(-12, 12));
      ends.push_back(RandInt(0, 5) == 0 ? INT64_MAX : RandInt(-12, 12));
      int64_t s = RandInt(-3, 3);
      steps.push_back(s == 0 ? 1 : s);
    }
    Tensor ts = Tensor::FromInt64(starts), te = Tensor::FromInt64(ends), ta = Tensor::FromInt64(axes),
           tp = Tensor::FromInt64(steps);
    OneNode on("Slice", 5);
    auto r0 = on.Run({&x, &ts, &te, &ta, &tp});
    ASSERT_TRUE(r0.ok()) << r0.status().ToString();
    // Naive: list the taken indices of every axis.
    std::vector<std::vector<int64_t>> take(r);
    for (int64_t d = 0; d < r; ++d)
      for (int64_t i = 0; i < shape[d]; ++i) take[d].push_back(i);
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t d = axes[k] < 0 ? axes[k] + r : axes[k], n = shape[d];
      int64_t s = starts[k] < 0 ? starts[k] + n : starts[k];
      int64_t e = ends[k] == INT64_MAX ? n : (ends[k] < 0 ? ends[k] + n : ends[k]);
      take[d].clear();
      if (steps[k] > 0) {
        s = std::clamp<int64_t>(s, 0, n);
        e = std::clamp<int64_t>(e, 0, n);
        for (int64_t i = s; i < e; i += steps[k]) take[d].push_back(i);
      } else {
        s = std::clamp<int64_t>(s, 0, n - 1);
        e = std::clamp<int64_t>(e, -1, n - 1);
        for (int64_t i = s; i > e; i += steps[k]) take[d].push_back(i);
      }
    }
    std::vector<int64_t> oshape;
    for (auto& t : take) oshape.push_back(static_cast<int64_t>(t.size()));
    Tensor want(DataType::kFloat32, oshape);
    for (int64_t i = 0; i < want.numel(); ++i) {
      auto oi = Unravel(i, oshape);
      for (int64_t d = 0; d < r; ++d) oi[d] = take[d][oi[d]];
      want.SetFromDouble(i, x.GetAsDouble(Ravel(oi, shape)));
    }
    ExpectEqualTensor((*r0)[0], want);
  }
}

TEST(TensorOps, ConcatAndSplitRoundTrip) {
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t r = RandInt(1, 4), axis = RandInt(0, r - 1);
    std::vector<int64_t> shape(r);
    for (auto& d : shape) d = RandInt(1, 6);
    const int parts = static_cast<int>(RandInt(1, 4));
    std::vector<Tensor> xs;
    std::vector<const Tensor*> ins;
    std::vector<int64_t> sizes;
    for (int p = 0; p < parts; ++p) {
      auto s = shape;
      s[axis] = RandInt(0, 5);
      sizes.push_back(s[axis]);
      xs.push_back(RandomTensor(DataType::kInt32, s));
    }
    for (auto& x : xs) ins.push_back(&x);
    OneNode cat("Concat", parts);
    cat.n->attrs["axis"] = Attribute::Int(axis - (trial % 2 ? r : 0));
    auto rc = cat.Run(ins);
    ASSERT_TRUE(rc.ok()) << rc.status().ToString();
    const Tensor& y = (*rc)[0];
    // Naive check of the concatenation.
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto yi = Unravel(i, y.shape());
      int p = 0;
      while (yi[axis] >= sizes[p]) yi[axis] -= sizes[p++];
      ASSERT_EQ(y.GetAsDouble(i), xs[p].GetAsDouble(Ravel(yi, xs[p].shape())));
    }
    Tensor split = Tensor::FromInt64(sizes);
    OneNode sp("Split", 2, parts);
    sp.n->attrs["axis"] = Attribute::Int(axis);
    auto rs = sp.Run({&y, &split});
    ASSERT_TRUE(rs.ok()) << rs.status().ToString();
    for (int p = 0; p < parts; ++p) ExpectEqualTensor((*rs)[p], xs[p]);
  }
}

TEST(TensorOps, SplitUnevenNumOutputs) {
  Tensor x = RandomTensor(DataType::kFloat32, {7, 3});
  OneNode sp("Split", 1, 3, 18);
  sp.n->attrs["num_outputs"] = Attribute::Int(3);
  auto rs = sp.Run({&x});
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  EXPECT_EQ((*rs)[0].shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ((*rs)[2].shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ((*rs)[2].GetAsDouble(2), x.GetAsDouble(20));
}

// numpy.pad semantics, written independently (reflection by repeated folding).
int64_t NaivePadIndex(int64_t i, int64_t n, const std::string& mode) {
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : n - 1;
  if (mode == "wrap") {
    while (i < 0) i += n;
    return i % n;
  }
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

TEST(TensorOps, PadAllModesMatchNaive) {
  for (const std::string mode : {"constant", "reflect", "edge", "wrap"}) {
    for (int trial = 0; trial < 15; ++trial) {
      const int64_t r = RandInt(1, 3);
      std::vector<int64_t> shape(r), pads(2 * r);
      for (auto& d : shape) d = RandInt(2, 5);
      for (int64_t d = 0; d < 2 * r; ++d) {
        const int64_t lim = mode == "reflect" ? shape[d % r] - 1 : 4;
        pads[d] = RandInt(mode == "constant" ? -1 : 0, lim);
      }
      Tensor x = RandomTensor(DataType::kFloat32, shape), p = Tensor::FromInt64(pads);
      Tensor v = Tensor::Scalar(DataType::kFloat32, 7.5);
      OneNode on("Pad", 3);
      on.n->attrs["mode"] = Attribute::String(mode);
      auto r0 = on.Run({&x, &p, &v});
      ASSERT_TRUE(r0.ok()) << r0.status().ToString();
      std::vector<int64_t> oshape(r);
      for (int64_t d = 0; d < r; ++d) oshape[d] = shape[d] + pads[d] + pads[r + d];
      Tensor want(DataType::kFloat32, oshape);
      for (int64_t i = 0; i < want.numel(); ++i) {
        auto oi = Unravel(i, oshape);
        bool constant = false;
        for (int64_t d = 0; d < r; ++d) {
          oi[d] = NaivePadIndex(oi[d] - pads[d], shape[d], mode);
          constant = constant || oi[d] < 0;
        }
        want.SetFromDouble(i, constant ? 7.5 : x.GetAsDouble(Ravel(oi, shape)));
      }
      ExpectEqualTensor((*r0)[0], want);
    }
  }
}

TEST(TensorOps, PadAxesInput) {
  Tensor x = RandomTensor(DataType::kInt64, {2, 3});
  Tensor p = Tensor::FromInt64({1, 2}), axes = Tensor::FromInt64({-1});
  OneNode on("Pad", 4);
  auto r0 = on.Run({&x, &p, nullptr, &axes});
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  EXPECT_EQ((*r0)[0].shape(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ((*r0)[0].GetAsInt(0), 0);
  EXPECT_EQ((*r0)[0].GetAsInt(1), x.GetAsInt(0));
}

TEST(TensorOps, TileAndExpandMatchNaive) {
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t r = RandInt(1, 4);
    std::vector<int64_t> shape(r), reps(r), big(r);
    for (int64_t d = 0; d < r; ++d) {
      shape[d] = RandInt(1, 4);
      reps[d] = RandInt(0, 3);
      big[d] = RandInt(0, 1) ? shape[d] : RandInt(1, 4);
      if (RandInt(0, 1)) shape[d] = 1;
    }
    Tensor x = RandomTensor(DataType::kFloat64, shape), tr = Tensor::FromInt64(reps);
    OneNode tile("Tile", 2);
    auto rt = tile.Run({&x, &tr});
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    const Tensor& y = (*rt)[0];
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto yi = Unravel(i, y.shape());
      for (int64_t d = 0; d < r; ++d) yi[d] %= shape[d];
      ASSERT_EQ(y.GetAsDouble(i), x.GetAsDouble(Ravel(yi, shape)));
    }
    // Expand to a shape of one more dim.
    std::vector<int64_t> target = big;
    target.insert(target.begin(), 2);
    for (int64_t d = 0; d < r; ++d)
      if (shape[d] != 1) target[d + 1] = shape[d];
    Tensor ts = Tensor::FromInt64(target);
    OneNode ex("Expand", 2);
    auto re = ex.Run({&x, &ts});
    ASSERT_TRUE(re.ok()) << re.status().ToString();
    const Tensor& z = (*re)[0];
    ASSERT_EQ(z.shape(), target);
    for (int64_t i = 0; i < z.numel(); ++i) {
      auto zi = Unravel(i, target);
      std::vector<int64_t> xi(r);
      for (int64_t d = 0; d < r; ++d) xi[d] = shape[d] == 1 ? 0 : zi[d + 1];
      ASSERT_EQ(z.GetAsDouble(i), x.GetAsDouble(Ravel(xi, shape)));
    }
  }
}

TEST(TensorOps, DepthToSpaceModesAndInverse) {
  for (const std::string mode : {"DCR", "CRD"}) {
    const int64_t b = 2, N = 2, C = 3, H = 3, W = 5;
    Tensor x = RandomTensor(DataType::kFloat32, {N, C * b * b, H, W});
    OneNode d2s("DepthToSpace", 1);
    d2s.n->attrs["blocksize"] = Attribute::Int(b);
    d2s.n->attrs["mode"] = Attribute::String(mode);
    auto r0 = d2s.Run({&x});
    ASSERT_TRUE(r0.ok()) << r0.status().ToString();
    const Tensor& y = (*r0)[0];
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{N, C, H * b, W * b}));
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto yi = Unravel(i, y.shape());
      const int64_t b1 = yi[2] % b, b2 = yi[3] % b;
      const int64_t ch = mode == "DCR" ? (b1 * b + b2) * C + yi[1] : yi[1] * b * b + b1 * b + b2;
      ASSERT_EQ(y.GetAsDouble(i), x.GetAsDouble(Ravel({yi[0], ch, yi[2] / b, yi[3] / b}, x.shape())));
    }
    // SpaceToDepth of the same mode inverts it (DCR, the default; CRD since opset 28)
    OneNode s2d("SpaceToDepth", 1);
    s2d.n->attrs["blocksize"] = Attribute::Int(b);
    if (mode == "CRD") s2d.n->attrs["mode"] = Attribute::String(mode);
    auto r1 = s2d.Run({&y});
    ASSERT_TRUE(r1.ok()) << r1.status().ToString();
    ExpectEqualTensor((*r1)[0], x);
  }
}

TEST(TensorOps, ReshapeFamilySharesBuffer) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4});
  Tensor s = Tensor::FromInt64({0, -1, 2});
  OneNode on("Reshape", 2);
  auto r0 = on.Run({&x, &s});
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  EXPECT_EQ((*r0)[0].shape(), (std::vector<int64_t>{2, 6, 2}));
  EXPECT_EQ((*r0)[0].raw(), x.raw());

  Tensor z = RandomTensor(DataType::kFloat32, {0, 3});
  Tensor sz = Tensor::FromInt64({3, 0});
  OneNode az("Reshape", 2);
  az.n->attrs["allowzero"] = Attribute::Int(1);
  auto r1 = az.Run({&z, &sz});
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ((*r1)[0].shape(), (std::vector<int64_t>{3, 0}));

  OneNode fl("Flatten", 1);
  fl.n->attrs["axis"] = Attribute::Int(-1);
  auto r2 = fl.Run({&x});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r2)[0].shape(), (std::vector<int64_t>{6, 4}));

  Tensor ax = Tensor::FromInt64({0, -1});
  OneNode un("Unsqueeze", 2);
  auto r3 = un.Run({&x, &ax});
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ((*r3)[0].shape(), (std::vector<int64_t>{1, 2, 3, 4, 1}));
  OneNode sq("Squeeze", 1);
  auto r4 = sq.Run({&(*r3)[0]});
  ASSERT_TRUE(r4.ok());
  EXPECT_EQ((*r4)[0].shape(), x.shape());
}

TEST(TensorOps, TriluMatchesNaive) {
  for (int upper = 0; upper < 2; ++upper) {
    for (int64_t k = -4; k <= 4; ++k) {
      Tensor x = RandomTensor(DataType::kInt64, {2, 3, 5});
      Tensor tk = Tensor::FromInt64({k}, {});
      OneNode on("Trilu", 2);
      on.n->attrs["upper"] = Attribute::Int(upper);
      auto r0 = on.Run({&x, &tk});
      ASSERT_TRUE(r0.ok()) << r0.status().ToString();
      for (int64_t i = 0; i < x.numel(); ++i) {
        auto xi = Unravel(i, x.shape());
        const bool keep = upper ? xi[2] - xi[1] >= k : xi[2] - xi[1] <= k;
        ASSERT_EQ((*r0)[0].GetAsInt(i), keep ? x.GetAsInt(i) : 0);
      }
    }
  }
}

TEST(TensorOps, RangeConstantOfShapeShapeSize) {
  Tensor a = Tensor::Scalar(DataType::kInt32, 10), b = Tensor::Scalar(DataType::kInt32, -3),
         d = Tensor::Scalar(DataType::kInt32, -4);
  OneNode rg("Range", 3);
  auto r0 = rg.Run({&a, &b, &d});
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  ASSERT_EQ((*r0)[0].shape(), (std::vector<int64_t>{4}));
  EXPECT_EQ((*r0)[0].GetAsInt(3), -2);

  Tensor s = Tensor::FromInt64({2, 3});
  OneNode cs("ConstantOfShape", 1);
  cs.n->attrs["value"] = Attribute::TensorValue(Tensor::Scalar(DataType::kInt32, 5).Reshaped({1}));
  auto r1 = cs.Run({&s});
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ((*r1)[0].dtype(), DataType::kInt32);
  EXPECT_EQ((*r1)[0].GetAsInt(5), 5);

  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4, 5});
  OneNode sh("Shape", 1);
  sh.n->attrs["start"] = Attribute::Int(-3);
  sh.n->attrs["end"] = Attribute::Int(-1);
  auto r2 = sh.Run({&x});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r2)[0].ToInt64Vector(), (std::vector<int64_t>{3, 4}));
  OneNode sz("Size", 1);
  auto r3 = sz.Run({&x});
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ((*r3)[0].GetAsInt(0), 120);
}

TEST(TensorOps, DropoutInferenceIsIdentity) {
  Tensor x = RandomTensor(DataType::kFloat32, {3, 4});
  Tensor ratio = Tensor::Scalar(DataType::kFloat32, 0.3);
  OneNode on("Dropout", 2, 2);
  auto r0 = on.Run({&x, &ratio});
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  ExpectEqualTensor((*r0)[0], x);
  EXPECT_EQ((*r0)[1].dtype(), DataType::kBool);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ((*r0)[1].GetAsInt(i), 1);
}

TEST(TensorOps, ErrorsNameTheNode) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3});
  {
    OneNode on("Transpose", 1);
    on.n->attrs["perm"] = Attribute::String("oops");
    auto r = on.Run({&x});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("n0"), std::string::npos);
  }
  {
    OneNode on("Transpose", 1);
    on.n->attrs["perm"] = Attribute::Ints({0, 0});
    EXPECT_FALSE(on.Run({&x}).ok());
  }
  {
    Tensor s = Tensor::FromInt64({4, -1});
    OneNode on("Reshape", 2);
    auto r = on.Run({&x, &s});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("n0"), std::string::npos);
  }
  {
    Tensor st = Tensor::FromInt64({0}), en = Tensor::FromInt64({2}), ax = Tensor::FromInt64({0}),
           sp = Tensor::FromInt64({0});
    OneNode on("Slice", 5);
    EXPECT_FALSE(on.Run({&x, &st, &en, &ax, &sp}).ok());
  }
  {
    Tensor y = RandomTensor(DataType::kFloat32, {2, 4});
    OneNode on("Concat", 2);
    on.n->attrs["axis"] = Attribute::Int(0);
    EXPECT_FALSE(on.Run({&x, &y}).ok());
    on.n->attrs["axis"] = Attribute::Int(5);
    EXPECT_FALSE(on.Run({&x, &y}).ok());
  }
  {
    Tensor p = Tensor::FromInt64({1, 1, 1});
    OneNode on("Pad", 2);
    EXPECT_FALSE(on.Run({&x, &p}).ok());
  }
  {
    OneNode on("Squeeze", 2);
    Tensor ax = Tensor::FromInt64({1});
    EXPECT_FALSE(on.Run({&x, &ax}).ok());
  }
  {
    OneNode on("DepthToSpace", 1);
    on.n->attrs["blocksize"] = Attribute::Int(2);
    EXPECT_FALSE(on.Run({&x}).ok());  // rank 2
  }
  {
    OneNode on("Split", 2, 2);
    Tensor y = RandomTensor(DataType::kFloat32, {2}), split = Tensor::FromInt64({1, 2});
    EXPECT_FALSE(on.Run({&y, &split}).ok());  // sizes sum to 3, the axis has 2
  }
}

// Shape(x)[0:2] ++ [12, 64] -> Reshape gives [batch, seq, 12, 64]; with a -1 the inferred dim cancels symbols.
TEST(TensorOps, SymbolicShapePropagation) {
  Graph g;
  g.opsets[""] = 17;
  Value* x = g.GetOrAddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = {Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(768)};
  x->has_shape = true;
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Node* sh = g.AddNode("Shape", "shape");
  sh->inputs = {x};
  sh->outputs = {g.GetOrAddValue("s")};
  sh->attrs["end"] = Attribute::Int(2);
  Value* tail = g.AddConstant("tail", Tensor::FromInt64({12, 64}));
  Node* cat = g.AddNode("Concat", "cat");
  cat->attrs["axis"] = Attribute::Int(0);
  cat->inputs = {sh->outputs[0], tail};
  cat->outputs = {g.GetOrAddValue("target")};
  Node* rs = g.AddNode("Reshape", "reshape");
  rs->inputs = {x, cat->outputs[0]};
  rs->outputs = {g.GetOrAddValue("y")};
  // Reshape to [batch, -1, 64] with a constant shape built from Shape(x)[0:1] and [-1, 64].
  Node* sh0 = g.AddNode("Shape", "shape0");
  sh0->inputs = {x};
  sh0->outputs = {g.GetOrAddValue("b")};
  sh0->attrs["end"] = Attribute::Int(1);
  Value* tail2 = g.AddConstant("tail2", Tensor::FromInt64({-1, 64}));
  Node* cat2 = g.AddNode("Concat", "cat2");
  cat2->attrs["axis"] = Attribute::Int(0);
  cat2->inputs = {sh0->outputs[0], tail2};
  cat2->outputs = {g.GetOrAddValue("target2")};
  Node* rs2 = g.AddNode("Reshape", "reshape2");
  rs2->inputs = {x, cat2->outputs[0]};
  rs2->outputs = {g.GetOrAddValue("y2")};
  // ConstantOfShape of Shape(x) and Slice of the shape tensor.
  Node* full = g.AddNode("Shape", "shape_full");
  full->inputs = {x};
  full->outputs = {g.GetOrAddValue("sf")};
  Value* st = g.AddConstant("st", Tensor::FromInt64({1}));
  Value* en = g.AddConstant("en", Tensor::FromInt64({INT64_MAX}));
  Node* sl = g.AddNode("Slice", "slice");
  sl->inputs = {full->outputs[0], st, en};
  sl->outputs = {g.GetOrAddValue("sl")};
  Node* cs = g.AddNode("ConstantOfShape", "cos");
  cs->inputs = {sl->outputs[0]};
  cs->outputs = {g.GetOrAddValue("ones")};
  // Range(0, Shape(x)[1], 1): torch.arange(x.size(1)), the position ids of GPT-2 and LLaMA exports.
  Node* g1 = g.AddNode("Gather", "gather_seq");
  g1->inputs = {full->outputs[0], g.AddConstant("one", Tensor::FromInt64({1}, {}))};
  g1->outputs = {g.GetOrAddValue("seq_len")};
  Node* rg = g.AddNode("Range", "range");
  rg->inputs = {g.AddConstant("zero", Tensor::FromInt64({0}, {})), g1->outputs[0],
                g.AddConstant("step", Tensor::FromInt64({1}, {}))};
  rg->outputs = {g.GetOrAddValue("positions")};
  Node* rg2 = g.AddNode("Range", "range_from_2");  // another start: the length is not the symbol
  rg2->inputs = {g.AddConstant("two", Tensor::FromInt64({2}, {})), g1->outputs[0],
                 g.AddConstant("step2", Tensor::FromInt64({1}, {}))};
  rg2->outputs = {g.GetOrAddValue("positions2")};
  for (Value* v : {rs->outputs[0], rs2->outputs[0], cs->outputs[0], rg->outputs[0], rg2->outputs[0]}) {
    v->is_graph_output = true;
    g.outputs.push_back(v);
  }
  ASSERT_TRUE(g.TopoSort().ok());
  InferOptions opts;
  opts.evaluator = cpu::MakeConstEvaluator();
  Status st_inf = InferGraph(g, opts);
  ASSERT_TRUE(st_inf.ok()) << st_inf.ToString();
  EXPECT_EQ(ShapeToString(rs->outputs[0]->shape), "[batch,seq,12,64]");
  const Shape& y2 = rs2->outputs[0]->shape;
  ASSERT_EQ(y2.size(), 3u);
  EXPECT_EQ(y2[0].ToString(), "batch");
  EXPECT_TRUE(y2[1].symbolic()) << ShapeToString(y2);
  EXPECT_NE(y2[1].sym.find("seq"), std::string::npos);
  EXPECT_EQ(ShapeToString(cs->outputs[0]->shape), "[seq,768]");
  EXPECT_EQ(ShapeToString(rg->outputs[0]->shape), "[seq]");
  EXPECT_EQ(ShapeToString(rg2->outputs[0]->shape), "[?]");
}

// A graph of int64 input x [batch, seq] (opset 17) that tests add nodes to (one output each) and mark outputs of.
struct SymbolicGraph {
  Graph g;
  Value* x = nullptr;
  SymbolicGraph() {
    g.opsets[""] = 17;
    x = Input("x", DataType::kInt64, {Dim::Symbol("batch"), Dim::Symbol("seq")});
  }
  Value* Input(const char* name, DataType t, Shape shape) {
    Value* v = g.GetOrAddValue(name);
    v->dtype = t;
    v->shape = std::move(shape);
    v->has_shape = true;
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  }
  Node* node(const char* op, const char* name, std::vector<Value*> ins) {
    Node* n = g.AddNode(op, name);
    n->inputs = std::move(ins);
    n->outputs = {g.GetOrAddValue(std::string(name) + "_out")};
    return n;
  }
  void out(Node* n) {
    n->outputs[0]->is_graph_output = true;
    g.outputs.push_back(n->outputs[0]);
  }
};

// torch's expand(batch, seq) with -1 handling, as transformers' token type ids export: Where(Equal(shape, -1), 1,
// shape). A dim is never -1, so the Equal is known (all false) and the Expand keeps the symbols.
TEST(TensorOps, ExpandWithMinusOneHandlingKeepsSymbols) {
  SymbolicGraph sg;
  Graph& g = sg.g;
  Value* x = sg.x;
  auto node = [&](const char* op, const char* name, std::vector<Value*> ins) { return sg.node(op, name, ins); };
  Node* sh = node("Shape", "shape", {x});
  Node* eq = node("Equal", "eq", {sh->outputs[0], g.AddConstant("minus1", Tensor::FromInt64({-1}, {}))});
  Node* wh = node("Where", "where", {eq->outputs[0], g.AddConstant("ones", Tensor::FromInt64({1, 1})), sh->outputs[0]});
  Node* ex = node("Expand", "expand", {g.AddConstant("ids", Tensor::FromInt64({0}, {1, 1})), wh->outputs[0]});
  sg.out(ex);
  // A difference of dims may be negative (-1 at some shapes): its Equal with -1 stays unknown.
  Node* sub = node("Sub", "sub", {sh->outputs[0], g.AddConstant("five", Tensor::FromInt64({5}, {}))});
  Node* eq2 = node("Equal", "eq2", {sub->outputs[0], g.AddConstant("minus1b", Tensor::FromInt64({-1}, {}))});
  sg.out(eq2);
  ASSERT_TRUE(g.TopoSort().ok());
  InferOptions opts;
  opts.evaluator = cpu::MakeConstEvaluator();
  ASSERT_TRUE(InferGraph(g, opts).ok());
  EXPECT_FALSE(eq2->outputs[0]->is_const());
  ASSERT_TRUE(eq->outputs[0]->is_const());
  EXPECT_EQ(eq->outputs[0]->const_value->GetAsInt(0), 0);
  EXPECT_EQ(eq->outputs[0]->const_value->GetAsInt(1), 0);
  EXPECT_EQ(ShapeToString(ex->outputs[0]->shape), "[batch,seq]");
}

// transformers 5's causal-mask expand: Concat(batch, -1, seq, seq) -> Equal(.., -1) -> Where(.., 1, ..) -> Expand.
// The -1 inside the symbolic contents is kept ("#-1"), so the Equal is known ([0, 1, 0, 0]) and the Expand's shape
// is [batch, 1, seq, seq]; a Reshape whose symbolic target holds -1 infers that dim; the "#-1" never reaches a shape.
TEST(TensorOps, MinusOneInsideSymbolicContents) {
  EXPECT_EQ(ContentDim(-1).ToString(), "#-1");
  EXPECT_EQ(ContentValue(ContentDim(-7)), std::optional<int64_t>(-7));
  EXPECT_EQ(ContentValue(Dim(5)), std::optional<int64_t>(5));
  EXPECT_FALSE(ContentValue(Dim::Symbol("seq")).has_value());
  EXPECT_FALSE(ContentValue(Dim::Symbol("#x")).has_value());
  EXPECT_TRUE(IsNegativeContent(ContentDim(-1)));
  EXPECT_FALSE(NonNegativeDim(ContentDim(-1)));
  SymbolicGraph sg;
  Graph& g = sg.g;
  Value* x = sg.x;
  auto node = [&](const char* op, const char* name, std::vector<Value*> ins) { return sg.node(op, name, ins); };
  auto out = [&](Node* n) { sg.out(n); };
  Node* sh = node("Shape", "shape", {x});
  Node* b = node("Gather", "b", {sh->outputs[0], g.AddConstant("i0", Tensor::FromInt64({0}, {1}))});
  Node* s = node("Gather", "s", {sh->outputs[0], g.AddConstant("i1", Tensor::FromInt64({1}, {1}))});
  Node* cat = node("Concat", "cat", {b->outputs[0], g.AddConstant("m1", Tensor::FromInt64({-1}, {1})), s->outputs[0],
                                     s->outputs[0]});
  cat->attrs["axis"] = Attribute::Int(0);
  Node* eq = node("Equal", "eq", {cat->outputs[0], g.AddConstant("minus1", Tensor::FromInt64({-1, -1, -1, -1}))});
  Node* wh = node("Where", "where", {eq->outputs[0], g.AddConstant("ones", Tensor::FromInt64({1, 1, 1, 1})),
                                     cat->outputs[0]});
  Node* ex = node("Expand", "expand", {g.AddConstant("mask", Tensor::FromInt64({0}, {1, 1, 1, 1})), wh->outputs[0]});
  out(ex);
  // Reshape(x, [batch, -1]) with the target known only symbolically: the -1 is inferred.
  Node* tgt = node("Concat", "tgt", {b->outputs[0], g.AddConstant("m1b", Tensor::FromInt64({-1}, {1}))});
  tgt->attrs["axis"] = Attribute::Int(0);
  Node* rs = node("Reshape", "reshape", {x, tgt->outputs[0]});
  out(rs);
  // The contents read as a shape (Expand straight from the Concat): the -1 is an unknown dim there, as a constant's.
  Node* ex2 = node("Expand", "expand2", {g.AddConstant("mask2", Tensor::FromInt64({0}, {1, 1, 1, 1})), cat->outputs[0]});
  out(ex2);
  // Integer arithmetic on such contents: Mul([batch, -1], [1, 1]) is [batch, -1], still a Reshape target.
  Node* mul = node("Mul", "mul", {tgt->outputs[0], g.AddConstant("ones2", Tensor::FromInt64({1, 1}))});
  Node* rs2 = node("Reshape", "reshape2", {x, mul->outputs[0]});
  out(rs2);
  // A dimension a model named "#3" is a name, not the integer 3: Shape of it is not a constant.
  Value* z = sg.Input("z", DataType::kFloat32, {Dim::Symbol("#3"), Dim(4)});
  Node* zs = node("Shape", "zshape", {z});
  out(zs);
  ASSERT_TRUE(g.TopoSort().ok());
  InferOptions opts;
  opts.evaluator = cpu::MakeConstEvaluator();
  Status st = InferGraph(g, opts);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ShapeToString(rs2->outputs[0]->shape), "[batch,seq]");
  EXPECT_FALSE(zs->outputs[0]->is_const());
  ASSERT_TRUE(zs->outputs[0]->sym_value.has_value());
  EXPECT_TRUE((*zs->outputs[0]->sym_value)[0].unknown());
  ASSERT_TRUE(cat->outputs[0]->sym_value.has_value());
  EXPECT_EQ(ShapeToString(*cat->outputs[0]->sym_value), "[batch,#-1,seq,seq]");
  ASSERT_TRUE(eq->outputs[0]->is_const());
  EXPECT_EQ(eq->outputs[0]->const_value->ToInt64Vector(), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(ShapeToString(ex->outputs[0]->shape), "[batch,1,seq,seq]");
  EXPECT_EQ(ShapeToString(rs->outputs[0]->shape), "[batch,seq]");
  for (const Dim& d : ex2->outputs[0]->shape) EXPECT_FALSE(IsNegativeContent(d)) << ShapeToString(ex2->outputs[0]->shape);
}

}  // namespace
}  // namespace kiln
