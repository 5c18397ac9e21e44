// Linear-algebra family: MatMul, Gemm, Einsum kernels vs independent naive loops on random data with odd
// shapes; shape inference (symbolic batch dims) and error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

Tensor RandomTensor(std::vector<int64_t> shape, uint32_t seed, DataType dt = DataType::kFloat32) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.SetFromDouble(i, dt == DataType::kFloat32 || dt == DataType::kFloat64 || dt == DataType::kFloat16
                           ? u(rng)
                           : std::floor(u(rng) * 5));
  return t;
}

using testing::OneNode;

// Naive batched matmul with numpy broadcasting for rank >= 2 operands, in double.
std::vector<double> NaiveMatMul(const Tensor& a, const Tensor& b, std::vector<int64_t>& out_shape) {
  auto sa = a.shape(), sb = b.shape();
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const size_t r = std::max(sa.size(), sb.size()) - 2;
  std::vector<int64_t> batch(r);
  auto dimof = [&](const std::vector<int64_t>& s, size_t i) {
    const size_t br = s.size() - 2;
    return i < r - br ? int64_t{1} : s[i - (r - br)];
  };
  for (size_t i = 0; i < r; ++i) batch[i] = std::max(dimof(sa, i), dimof(sb, i));
  int64_t nb = 1;
  for (auto d : batch) nb *= d;
  std::vector<double> y(nb * m * n, 0.0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t rem = bi, ao = 0, bo = 0, astr = 1, bstr = 1;
    for (size_t i = r; i-- > 0;) {
      const int64_t idx = rem % batch[i];
      rem /= batch[i];
      const int64_t da = dimof(sa, i), db = dimof(sb, i);
      ao += (da == 1 ? 0 : idx) * astr;
      bo += (db == 1 ? 0 : idx) * bstr;
      astr *= da;
      bstr *= db;
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q)
          acc += a.GetAsDouble(ao * m * k + i * k + q) * b.GetAsDouble(bo * k * n + q * n + j);
        y[bi * m * n + i * n + j] = acc;
      }
  }
  out_shape = batch;
  if (!a1) out_shape.push_back(m);
  if (!b1) out_shape.push_back(n);
  return y;
}

void ExpectNear(const Tensor& t, const std::vector<double>& ref, double tol) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(ref.size()));
  for (int64_t i = 0; i < t.numel(); ++i) ASSERT_NEAR(t.GetAsDouble(i), ref[i], tol) << "element " << i;
}

TEST(MatMul, MatchesNaiveWithBroadcastAndVectors) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 5}, {5, 7}},       {{2, 1, 3, 5}, {4, 5, 6}}, {{5}, {5, 7}},       {{3, 5}, {5}},
      {{5}, {5}},             {{7, 3, 9}, {9, 4}},       {{1, 3, 9}, {2, 9, 4}}, {{2, 3, 1, 4}, {1, 3, 4, 2}},
      {{4, 17, 33}, {33, 1}}, {{0, 3}, {3, 2}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
      Tensor a = RandomTensor(sa, seed++, dt), b = RandomTensor(sb, seed++, dt);
      OneNode t("MatMul", 2);
      auto r = t.Run({&a, &b});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::vector<int64_t> shape;
      auto ref = NaiveMatMul(a, b, shape);
      EXPECT_EQ((*r)[0].shape(), shape);
      EXPECT_EQ((*r)[0].dtype(), dt);
      ExpectNear((*r)[0], ref, 1e-4);
    }
  }
}

TEST(MatMul, Float16ComputesInFloat) {
  Tensor a = RandomTensor({3, 8}, 11, DataType::kFloat16), b = RandomTensor({8, 5}, 12, DataType::kFloat16);
  OneNode t("MatMul", 2);
  auto r = t.Run({&a, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<int64_t> shape;
  ExpectNear((*r)[0], NaiveMatMul(a, b, shape), 1e-2);
}

TEST(MatMul, InnerDimMismatchIsAnError) {
  Tensor a = RandomTensor({3, 4}, 1), b = RandomTensor({5, 2}, 2);
  OneNode t("MatMul", 2);
  auto r = t.Run({&a, &b});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test_MatMul"), std::string::npos) << r.status().message();
}

TEST(MatMul, SymbolicBatchDimsStay) {
  OneNode t("MatMul", 2);
  InferContext ctx{*t.n, {}, {}};
  TensorInfo a{DataType::kFloat32, {Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(768)}, true};
  TensorInfo b{DataType::kFloat32, {Dim(768), Dim(3072)}, true};
  ctx.inputs = {a, b};
  ctx.outputs.resize(1);
  ASSERT_TRUE(InferNode(ctx).ok());
  EXPECT_EQ(ShapeToString(ctx.outputs[0].shape), "[batch,seq,3072]");
  ctx.inputs[1]->shape = {Dim(700), Dim(3072)};
  EXPECT_FALSE(InferNode(ctx).ok());
}

TEST(Gemm, AllAttributesAndBiasShapes) {
  std::mt19937 rng(5);
  const int64_t m = 7, n = 5, k = 9;
  const std::vector<std::vector<int64_t>> c_shapes = {{}, {n}, {m, 1}, {m, n}, {1, n}};
  int seed = 20;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int ci = -1; ci < static_cast<int>(c_shapes.size()); ++ci) {
        Tensor a = RandomTensor(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, seed++);
        Tensor b = RandomTensor(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, seed++);
        Tensor c = ci >= 0 ? RandomTensor(c_shapes[ci], seed++) : Tensor();
        OneNode t("Gemm", ci >= 0 ? 3 : 2);
        t.n->attrs["transA"] = Attribute::Int(ta);
        t.n->attrs["transB"] = Attribute::Int(tb);
        t.n->attrs["alpha"] = Attribute::Float(0.5f);
        t.n->attrs["beta"] = Attribute::Float(-2.f);
        std::vector<const Tensor*> ins{&a, &b};
        if (ci >= 0) ins.push_back(&c);
        auto r = t.Run(ins);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ASSERT_EQ((*r)[0].shape(), (std::vector<int64_t>{m, n}));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t q = 0; q < k; ++q)
              acc += a.GetAsDouble(ta ? q * m + i : i * k + q) * b.GetAsDouble(tb ? j * k + q : q * n + j);
            double ref = 0.5 * acc;
            if (ci >= 0) {
              const auto& cs = c_shapes[ci];
              const int64_t cr = cs.size() == 2 ? cs[0] : 1, cc = cs.empty() ? 1 : cs.back();
              ref += -2.0 * c.GetAsDouble((cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j));
            }
            ASSERT_NEAR((*r)[0].GetAsDouble(i * n + j), ref, 1e-4);
          }
      }
}

TEST(Gemm, BadAttributeTypeAndShapesAreErrors) {
  Tensor a = RandomTensor({3, 4}, 1), b = RandomTensor({4, 2}, 2), c = RandomTensor({3, 3}, 3);
  OneNode t("Gemm", 2);
  t.n->attrs["transA"] = Attribute::String("yes");
  EXPECT_FALSE(t.Run({&a, &b}).ok());
  OneNode t2("Gemm", 3);
  auto r = t2.Run({&a, &b, &c});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test_Gemm"), std::string::npos);
  Tensor a3 = RandomTensor({2, 3, 4}, 1);
  OneNode t3("Gemm", 2);
  EXPECT_FALSE(t3.Run({&a3, &b}).ok());
}

TEST(Einsum, GeneralEquations) {
  // matmul, batch matmul, transpose with ellipsis, diagonal, inner product, full sum, implicit output.
  Tensor a = RandomTensor({3, 4}, 1), b = RandomTensor({4, 5}, 2);
  Tensor ba = RandomTensor({2, 3, 4}, 3), bb = RandomTensor({2, 4, 5}, 4);
  Tensor sq = RandomTensor({2, 4, 4}, 5), v = RandomTensor({6}, 6), w = RandomTensor({6}, 7);
  auto run = [](const std::string& eq, std::vector<const Tensor*> ins) {
    OneNode t("Einsum", ins.size());
    t.n->attrs["equation"] = Attribute::String(eq);
    auto r = t.Run(ins);
    EXPECT_TRUE(r.ok()) << eq << ": " << r.status().ToString();
    return r.ok() ? (*r)[0] : Tensor();
  };
  std::vector<int64_t> shape;
  ExpectNear(run("ij,jk->ik", {&a, &b}), NaiveMatMul(a, b, shape), 1e-5);
  ExpectNear(run("ij,jk", {&a, &b}), NaiveMatMul(a, b, shape), 1e-5);
  ExpectNear(run("bij, bjk -> bik", {&ba, &bb}), NaiveMatMul(ba, bb, shape), 1e-5);
  Tensor tr = run("...ij->...ji", {&ba});
  ASSERT_EQ(tr.shape(), (std::vector<int64_t>{2, 4, 3}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(tr.GetAsDouble(n * 12 + j * 3 + i), ba.GetAsDouble(n * 12 + i * 4 + j));
  Tensor dg = run("...ii->...i", {&sq});
  ASSERT_EQ(dg.shape(), (std::vector<int64_t>{2, 4}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(dg.GetAsDouble(n * 4 + i), sq.GetAsDouble(n * 16 + i * 5));
  Tensor ip = run("i,i", {&v, &w});
  double ref = 0;
  for (int64_t i = 0; i < 6; ++i) ref += v.GetAsDouble(i) * w.GetAsDouble(i);
  ASSERT_EQ(ip.rank(), 0);
  EXPECT_NEAR(ip.GetAsDouble(0), ref, 1e-5);
  Tensor s = run("ij->", {&a});
  double sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i) sum += a.GetAsDouble(i);
  EXPECT_NEAR(s.GetAsDouble(0), sum, 1e-5);
  Tensor outer = run("i,j->ij", {&v, &w});
  EXPECT_EQ(outer.shape(), (std::vector<int64_t>{6, 6}));
  EXPECT_NEAR(outer.GetAsDouble(13), v.GetAsDouble(2) * w.GetAsDouble(1), 1e-6);
}

// Two-operand equations (GEMM fast path and the generic loop's fallbacks) vs a direct label loop.
TEST(Einsum, TwoOperandFormsMatchDirectSum) {
  struct Case {
    const char* eq;
    std::vector<int64_t> sa, sb;
    std::vector<int64_t> out;
  };
  // Labels: the direct sum below decodes each equation with a tiny interpreter over letters a..z.
  const std::vector<Case> cases = {
      {"bhqd,bhkd->bhqk", {2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 4, 6}},
      {"ij,jk->ki", {3, 4}, {4, 5}, {5, 3}},
      {"ij,jk->k", {3, 4}, {4, 5}, {5}},         // i summed over A only: generic loop
      {"ij,ij->ij", {3, 4}, {3, 4}, {3, 4}},     // elementwise product
      {"bij,jk->bkj", {2, 3, 4}, {4, 5}, {2, 5, 4}},
      {"ab,ca->bc", {1, 4}, {3, 1}, {4, 3}},     // size-1 label
  };
  uint32_t seed = 50;
  for (const auto& c : cases) {
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
      Tensor a = RandomTensor(c.sa, seed++, dt), b = RandomTensor(c.sb, seed++, dt);
      OneNode t("Einsum", 2);
      t.n->attrs["equation"] = Attribute::String(c.eq);
      auto r = t.Run({&a, &b});
      ASSERT_TRUE(r.ok()) << c.eq << ": " << r.status().ToString();
      ASSERT_EQ((*r)[0].shape(), c.out) << c.eq;
      const std::string eq = c.eq;
      const std::string ta = eq.substr(0, eq.find(',')), tb = eq.substr(eq.find(',') + 1, eq.find('-') - eq.find(',') - 1),
                        to = eq.substr(eq.find('>') + 1);
      std::map<char, int64_t> size;
      for (size_t i = 0; i < ta.size(); ++i) size[ta[i]] = c.sa[i];
      for (size_t i = 0; i < tb.size(); ++i) size[tb[i]] = c.sb[i];
      std::vector<char> labels;
      for (auto& [l, n] : size) labels.push_back(l);
      std::vector<double> ref(static_cast<size_t>((*r)[0].numel()), 0.0);
      int64_t total = 1;
      for (char l : labels) total *= size[l];
      for (int64_t f = 0; f < total; ++f) {
        std::map<char, int64_t> v;
        int64_t rem = f;
        for (size_t i = labels.size(); i-- > 0;) v[labels[i]] = rem % size[labels[i]], rem /= size[labels[i]];
        auto off = [&](const std::string& term, const std::vector<int64_t>& shape) {
          int64_t o = 0;
          for (size_t i = 0; i < term.size(); ++i) o = o * shape[i] + v[term[i]];
          return o;
        };
        ref[off(to, c.out)] += a.GetAsDouble(off(ta, c.sa)) * b.GetAsDouble(off(tb, c.sb));
      }
      ExpectNear((*r)[0], ref, 1e-4);
    }
  }
}

TEST(Einsum, BadEquationsAreErrors) {
  Tensor a = RandomTensor({3, 4}, 1), b = RandomTensor({5, 6}, 2);
  for (const char* eq : {"ij,jk->ik", "ijk->i", "ij->iz", "i$->i", "ij,jk,kl->il", "ij->ii"}) {
    OneNode t("Einsum", 2);
    t.n->attrs["equation"] = Attribute::String(eq);
    auto r = t.Run({&a, &b});
    EXPECT_FALSE(r.ok()) << eq;
  }
}

}  // namespace
}  // namespace kiln
