// Normalization family: BatchNormalization (inference, training_mode, spatial=0), InstanceNormalization,
// LayerNormalization (axes, broadcast Scale, Mean/InvStdDev), GroupNormalization (per-channel and
// per-group scale) vs naive double-precision loops on random odd shapes; error paths.
#include <gtest/gtest.h>

#include <cmath>
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
  return testing::Random(std::move(shape), seed, lo, hi, dt);
}

struct OneNode : testing::OneNode {
  OneNode(const std::string& op, size_t ins, size_t outs = 1, int64_t opset = 18)
      : testing::OneNode(op, ins, outs, opset) {}
};

void ExpectNear(const Tensor& t, const std::vector<double>& ref, double tol) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(ref.size()));
  for (int64_t i = 0; i < t.numel(); ++i)
    EXPECT_NEAR(t.GetAsDouble(i), ref[i], tol * (1 + std::fabs(ref[i]))) << "at " << i;
}

// Mean and variance over [begin, begin + count) with stride 1 (double).
std::pair<double, double> Stats(const Tensor& x, int64_t begin, int64_t count, int64_t stride = 1) {
  double m = 0, v = 0;
  for (int64_t i = 0; i < count; ++i) m += x.GetAsDouble(begin + i * stride);
  m /= count;
  for (int64_t i = 0; i < count; ++i) v += std::pow(x.GetAsDouble(begin + i * stride) - m, 2);
  return {m, v / count};
}

TEST(BatchNorm, InferenceMatchesNaive) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16}) {
    Tensor x = RandomTensor({2, 5, 3, 7}, 1, dt);
    Tensor s = RandomTensor({5}, 2, dt), b = RandomTensor({5}, 3, dt), m = RandomTensor({5}, 4, dt);
    Tensor v = RandomTensor({5}, 5, dt, 0.1, 2);
    OneNode t("BatchNormalization", 5, 1, 15);
    t.n->attrs["epsilon"] = Attribute::Float(1e-3f);
    auto r = t.Run({&x, &s, &b, &m, &v});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<double> ref(x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t c = (i / 21) % 5;
      ref[i] = s.GetAsDouble(c) * (x.GetAsDouble(i) - m.GetAsDouble(c)) / std::sqrt(v.GetAsDouble(c) + 1e-3) +
               b.GetAsDouble(c);
    }
    ExpectNear((*r)[0], ref, dt == DataType::kFloat16 ? 4e-3 : 1e-5);
  }
}

TEST(BatchNorm, TrainingModeUsesBatchStatistics) {
  Tensor x = RandomTensor({3, 4, 5}, 6);
  Tensor s = RandomTensor({4}, 7), b = RandomTensor({4}, 8), m = RandomTensor({4}, 9);
  Tensor v = RandomTensor({4}, 10, DataType::kFloat32, 0.5, 1.5);
  OneNode t("BatchNormalization", 5, 3, 15);
  t.n->attrs["training_mode"] = Attribute::Int(1);
  t.n->attrs["momentum"] = Attribute::Float(0.8f);
  auto r = t.Run({&x, &s, &b, &m, &v});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<double> ref(x.numel()), rm(4), rv(4);
  for (int64_t c = 0; c < 4; ++c) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 5; ++i) mean += x.GetAsDouble((n * 4 + c) * 5 + i) / 15;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 5; ++i) var += std::pow(x.GetAsDouble((n * 4 + c) * 5 + i) - mean, 2) / 15;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t k = (n * 4 + c) * 5 + i;
        ref[k] = s.GetAsDouble(c) * (x.GetAsDouble(k) - mean) / std::sqrt(var + 1e-5) + b.GetAsDouble(c);
      }
    rm[c] = m.GetAsDouble(c) * 0.8 + mean * 0.2;
    rv[c] = v.GetAsDouble(c) * 0.8 + var * 0.2;
  }
  ExpectNear((*r)[0], ref, 1e-5);
  ExpectNear((*r)[1], rm, 1e-5);
  ExpectNear((*r)[2], rv, 1e-5);
}

TEST(BatchNorm, SpatialZeroIsPerActivation) {
  Tensor x = RandomTensor({2, 3, 4}, 11);
  Tensor s = RandomTensor({3, 4}, 12), b = RandomTensor({3, 4}, 13), m = RandomTensor({3, 4}, 14);
  Tensor v = RandomTensor({3, 4}, 15, DataType::kFloat32, 0.5, 1.5);
  OneNode t("BatchNormalization", 5, 1, 7);
  t.n->attrs["spatial"] = Attribute::Int(0);
  auto r = t.Run({&x, &s, &b, &m, &v});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<double> ref(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t p = i % 12;
    ref[i] = s.GetAsDouble(p) * (x.GetAsDouble(i) - m.GetAsDouble(p)) / std::sqrt(v.GetAsDouble(p) + 1e-5) +
             b.GetAsDouble(p);
  }
  ExpectNear((*r)[0], ref, 1e-5);
}

TEST(BatchNorm, Errors) {
  Tensor x = RandomTensor({2, 3, 4}, 1);
  Tensor p3 = RandomTensor({3}, 2, DataType::kFloat32, 0.5, 1), p4 = RandomTensor({4}, 3);
  OneNode t("BatchNormalization", 5, 1, 15);
  auto r = t.Run({&x, &p4, &p3, &p3, &p3});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test_BatchNormalization"), std::string::npos);
  // Training outputs before opset 14 are refused with a clear message.
  OneNode t2("BatchNormalization", 5, 5, 9);
  auto r2 = t2.Run({&x, &p3, &p3, &p3, &p3});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("training"), std::string::npos);
  OneNode t3("BatchNormalization", 5, 1, 15);
  t3.n->attrs["epsilon"] = Attribute::String("small");
  EXPECT_FALSE(t3.Run({&x, &p3, &p3, &p3, &p3}).ok());
  Tensor x1 = RandomTensor({3}, 4);
  EXPECT_FALSE(t.Run({&x1, &p3, &p3, &p3, &p3}).ok());
}

TEST(InstanceNorm, MatchesNaive) {
  Tensor x = RandomTensor({2, 3, 5, 7}, 21);
  Tensor s = RandomTensor({3}, 22), b = RandomTensor({3}, 23);
  OneNode t("InstanceNormalization", 3, 1, 6);
  t.n->attrs["epsilon"] = Attribute::Float(1e-2f);
  auto r = t.Run({&x, &s, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<double> ref(x.numel());
  for (int64_t plane = 0; plane < 6; ++plane) {
    auto [m, v] = Stats(x, plane * 35, 35);
    for (int64_t i = 0; i < 35; ++i)
      ref[plane * 35 + i] = s.GetAsDouble(plane % 3) * (x.GetAsDouble(plane * 35 + i) - m) / std::sqrt(v + 1e-2) +
                            b.GetAsDouble(plane % 3);
  }
  ExpectNear((*r)[0], ref, 1e-5);
  Tensor bad = RandomTensor({4}, 1);
  EXPECT_FALSE(t.Run({&x, &bad, &b}).ok());
}

TEST(LayerNorm, AxesAndOutputsMatchNaive) {
  Tensor x = RandomTensor({2, 3, 5, 7}, 31);
  for (int64_t axis : {0, 1, 2, 3, -1, -2}) {
    const int64_t a = axis < 0 ? axis + 4 : axis;
    std::vector<int64_t> norm(x.shape().begin() + a, x.shape().end());
    Tensor s = RandomTensor(norm, 32), b = RandomTensor(norm, 33);
    OneNode t("LayerNormalization", 3, 3, 17);
    t.n->attrs["axis"] = Attribute::Int(axis);
    t.n->attrs["epsilon"] = Attribute::Float(1e-3f);
    auto r = t.Run({&x, &s, &b});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const int64_t cols = s.numel(), rows = x.numel() / cols;
    std::vector<double> ref(x.numel()), mean(rows), inv(rows);
    for (int64_t row = 0; row < rows; ++row) {
      auto [m, v] = Stats(x, row * cols, cols);
      mean[row] = m;
      inv[row] = 1 / std::sqrt(v + 1e-3);
      for (int64_t j = 0; j < cols; ++j)
        ref[row * cols + j] = (x.GetAsDouble(row * cols + j) - m) * inv[row] * s.GetAsDouble(j) + b.GetAsDouble(j);
    }
    ExpectNear((*r)[0], ref, 1e-5);
    ExpectNear((*r)[1], mean, 1e-5);
    ExpectNear((*r)[2], inv, 1e-5);
    std::vector<int64_t> stat_shape = x.shape();
    for (int64_t d = a; d < 4; ++d) stat_shape[d] = 1;
    EXPECT_EQ((*r)[1].shape(), stat_shape);
    EXPECT_EQ((*r)[2].dtype(), DataType::kFloat32);
  }
}

TEST(LayerNorm, BroadcastScaleNoBiasAndBf16) {
  Tensor x = RandomTensor({4, 3, 6}, 41, DataType::kBFloat16);
  Tensor s = RandomTensor({1, 6}, 42, DataType::kBFloat16);
  OneNode t("LayerNormalization", 2, 1, 17);
  t.n->attrs["axis"] = Attribute::Int(1);
  auto r = t.Run({&x, &s});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<double> ref(x.numel());
  for (int64_t row = 0; row < 4; ++row) {
    auto [m, v] = Stats(x, row * 18, 18);
    for (int64_t j = 0; j < 18; ++j)
      ref[row * 18 + j] = (x.GetAsDouble(row * 18 + j) - m) / std::sqrt(v + 1e-5) * s.GetAsDouble(j % 6);
  }
  ExpectNear((*r)[0], ref, 2e-2);
  Tensor bad = RandomTensor({5}, 43, DataType::kBFloat16);
  auto r2 = t.Run({&x, &bad});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("test_LayerNormalization"), std::string::npos);
}

TEST(GroupNorm, PerChannelAndPerGroupScale) {
  Tensor x = RandomTensor({2, 6, 3, 5}, 51);
  for (int64_t per_group : {0, 1}) {
    const int64_t G = 3, C = 6, inner = 15, P = per_group ? G : C;
    Tensor s = RandomTensor({P}, 52), b = RandomTensor({P}, 53);
    OneNode t("GroupNormalization", 3, 1, per_group ? 18 : 21);
    t.n->attrs["num_groups"] = Attribute::Int(G);
    if (per_group) t.n->attrs["kiln_scale_per_group"] = Attribute::Int(1);
    auto r = t.Run({&x, &s, &b});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<double> ref(x.numel());
    const int64_t gsize = C / G * inner;
    for (int64_t ng = 0; ng < 2 * G; ++ng) {
      auto [m, v] = Stats(x, ng * gsize, gsize);
      for (int64_t i = 0; i < gsize; ++i) {
        const int64_t c = (ng % G) * (C / G) + i / inner, p = per_group ? ng % G : c;
        ref[ng * gsize + i] = (x.GetAsDouble(ng * gsize + i) - m) / std::sqrt(v + 1e-5) * s.GetAsDouble(p) +
                              b.GetAsDouble(p);
      }
    }
    ExpectNear((*r)[0], ref, 1e-5);
  }
}

TEST(GroupNorm, ConverterMarksOpset18AndErrors) {
  Graph g;
  Node* n = g.AddNode("GroupNormalization", "gn");
  n->attrs["num_groups"] = Attribute::Int(2);
  ConvertContext c{g, *n, 18};
  ASSERT_TRUE(FindOp(kOnnxDomain, "GroupNormalization")->convert(c).ok());
  EXPECT_EQ(n->geti("kiln_scale_per_group", 0), 1);

  Tensor x = RandomTensor({1, 4, 2}, 1);
  Tensor s = RandomTensor({4}, 2);
  OneNode t("GroupNormalization", 3, 1, 21);
  t.n->attrs["num_groups"] = Attribute::Int(3);  // 4 channels do not split into 3 groups
  auto r = t.Run({&x, &s, &s});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("num_groups"), std::string::npos);
  OneNode t2("GroupNormalization", 3, 1, 21);
  EXPECT_FALSE(t2.Run({&x, &s, &s}).ok());  // num_groups missing
}

}  // namespace
}  // namespace kiln
