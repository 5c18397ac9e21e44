// Convolution family: Conv / ConvTranspose / pooling kernels vs independent naive N-D loops on random data
// with odd shapes, groups, strides, dilations and pads; shape inference (symbolic batch) and error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/conv_scratch.h"
#include "backends/cpu/executor.h"
#include "ir/graph.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

Tensor Rand(std::vector<int64_t> shape, uint32_t seed, DataType dt = DataType::kFloat32) {
  return testing::Random<float>(std::move(shape), seed, -1, 1, dt);
}
using testing::OneNode;
using testing::Ravel;
using testing::Unravel;

struct ConvCase {
  std::vector<int64_t> x, w;  // X and W shapes
  int64_t group;
  std::vector<int64_t> strides, dil, pads;
  bool bias;
};

// Direct definition: y[n,m,o] = b[m] + sum_{c,k} x[n, g*cg + c, o*s - p + k*d] * w[m, c, k].
std::vector<double> NaiveConv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvCase& cc,
                              std::vector<int64_t>& yshape) {
  const size_t ns = cc.x.size() - 2;
  const int64_t m = cc.w[0], cg = cc.w[1], mg = m / cc.group;
  yshape = {cc.x[0], m};
  for (size_t d = 0; d < ns; ++d)
    yshape.push_back((cc.x[2 + d] + cc.pads[d] + cc.pads[ns + d] - (cc.w[2 + d] - 1) * cc.dil[d] - 1) / cc.strides[d] + 1);
  const std::vector<int64_t> ksh(cc.w.begin() + 2, cc.w.end());
  const int64_t ysz = NumElements(yshape), ksz = NumElements(ksh);
  std::vector<double> y(ysz);
  for (int64_t f = 0; f < ysz; ++f) {
    auto yi = Unravel(f, yshape);
    const int64_t n = yi[0], oc = yi[1], gi = oc / mg;
    double acc = b ? b->GetAsDouble(oc) : 0.0;
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t kf = 0; kf < ksz; ++kf) {
        auto k = Unravel(kf, ksh);
        std::vector<int64_t> xi{n, gi * cg + c};
        bool ok = true;
        for (size_t d = 0; d < ns; ++d) {
          const int64_t i = yi[2 + d] * cc.strides[d] - cc.pads[d] + k[d] * cc.dil[d];
          ok &= i >= 0 && i < cc.x[2 + d];
          xi.push_back(i);
        }
        if (!ok) continue;
        std::vector<int64_t> wi{oc, c};
        wi.insert(wi.end(), k.begin(), k.end());
        acc += x.GetAsDouble(Ravel(xi, cc.x)) * w.GetAsDouble(Ravel(wi, cc.w));
      }
    y[f] = acc;
  }
  return y;
}

void SetConvAttrs(OneNode& t, const ConvCase& cc) {
  t.n->attrs["group"] = Attribute::Int(cc.group);
  t.Ints("strides", cc.strides);
  t.Ints("dilations", cc.dil);
  t.Ints("pads", cc.pads);
}

TEST(Conv, MatchesDirectDefinition) {
  const std::vector<ConvCase> cases = {
      {{2, 3, 9, 11}, {4, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {{1, 4, 10, 7}, {6, 2, 3, 2}, 2, {2, 1}, {1, 2}, {0, 1, 2, 0}, false},
      {{1, 6, 8, 8}, {6, 1, 3, 3}, 6, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},   // depthwise
      {{1, 4, 7, 7}, {8, 1, 3, 3}, 4, {1, 1}, {2, 2}, {2, 2, 2, 2}, false},  // depthwise multiplier 2
      {{2, 5, 6, 5}, {3, 5, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},   // pointwise
      {{1, 3, 13}, {5, 3, 4}, 1, {3}, {2}, {1, 2}, true},                    // 1-D
      {{1, 2, 5, 6, 4}, {4, 1, 2, 3, 2}, 2, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}, true},  // 3-D
      {{1, 1, 6, 6}, {2, 1, 3, 3}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, false},  // single input channel
  };
  uint32_t seed = 100;
  for (const auto& cc : cases) {
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16}) {
      Tensor x = Rand(cc.x, seed++, dt), w = Rand(cc.w, seed++, dt), b = Rand({cc.w[0]}, seed++, dt);
      OneNode t("Conv", cc.bias ? 3 : 2);
      SetConvAttrs(t, cc);
      std::vector<const Tensor*> ins{&x, &w};
      if (cc.bias) ins.push_back(&b);
      auto r = t.Run(ins);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::vector<int64_t> ys;
      auto ref = NaiveConv(x, w, cc.bias ? &b : nullptr, cc, ys);
      ASSERT_EQ((*r)[0].shape(), ys);
      const double tol = dt == DataType::kFloat16 ? 3e-2 : 1e-4;
      for (int64_t i = 0; i < (*r)[0].numel(); ++i) ASSERT_NEAR((*r)[0].GetAsDouble(i), ref[i], tol) << i;
    }
  }
}

// With the scratch limits lowered, Conv goes through im2col a few input channels at a time (the GEMMs accumulate)
// and ConvTranspose a few output channels at a time; both still match the direct definitions, groups included.
TEST(Conv, ChunkedScratchMatchesTheDirectDefinition) {
  struct Restore {
    ~Restore() {
      cpu::ConvScratch().conv_col = int64_t{1} << 26;
      cpu::ConvScratch().transpose_col = int64_t{1} << 28;
    }
  } restore;
  // Conv: 2 groups of 5 input channels, 3x3 kernel, 9x7 output: one channel's rows are 9 * 63 = 567 elements; a
  // limit of 1200 takes two channels a chunk (3 chunks per group).
  cpu::ConvScratch().conv_col = 1200;
  const ConvCase cc{{2, 10, 9, 7}, {4, 5, 3, 3}, 2, {1, 1}, {1, 1}, {1, 1, 1, 1}, true};
  Tensor x = Rand(cc.x, 31), w = Rand(cc.w, 32), b = Rand({cc.w[0]}, 33);
  OneNode t("Conv", 3);
  SetConvAttrs(t, cc);
  auto r = t.Run({&x, &w, &b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<int64_t> ys;
  auto ref = NaiveConv(x, w, &b, cc, ys);
  ASSERT_EQ((*r)[0].shape(), ys);
  for (int64_t i = 0; i < (*r)[0].numel(); ++i) ASSERT_NEAR((*r)[0].GetAsDouble(i), ref[i], 1e-4) << i;

  // ConvTranspose, X [1, 4, 5, 6], W [4, 3, 2, 2] in 2 groups (6 output channels): one output channel's col rows are
  // 4 taps x 30 positions = 120 elements; a limit of 130 takes one channel a chunk.
  cpu::ConvScratch().transpose_col = 130;
  Tensor tx = Rand({1, 4, 5, 6}, 34), tw = Rand({4, 3, 2, 2}, 35);
  OneNode chunked("ConvTranspose", 2);
  chunked.n->attrs["group"] = Attribute::Int(2);
  chunked.Ints("strides", {2, 2});
  auto small = chunked.Run({&tx, &tw});
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  cpu::ConvScratch().transpose_col = int64_t{1} << 28;
  OneNode whole("ConvTranspose", 2);
  whole.n->attrs["group"] = Attribute::Int(2);
  whole.Ints("strides", {2, 2});
  auto big = whole.Run({&tx, &tw});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  ASSERT_EQ((*small)[0].shape(), (*big)[0].shape());
  for (int64_t i = 0; i < (*big)[0].numel(); ++i)
    ASSERT_NEAR((*small)[0].GetAsDouble(i), (*big)[0].GetAsDouble(i), 1e-5) << i;
}

TEST(Conv, AutoPadSameUpperAndLower) {
  Tensor x = Rand({1, 2, 7, 8}, 1), w = Rand({3, 2, 3, 4}, 2);
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    OneNode t("Conv", 2);
    t.n->attrs["auto_pad"] = Attribute::String(mode);
    t.Ints("strides", {2, 2});
    auto r = t.Run({&x, &w});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ((*r)[0].shape(), (std::vector<int64_t>{1, 3, 4, 4}));
    // total pad: H (4-1)*2+3-7 = 2 -> 1/1; W (4-1)*2+4-8 = 2 -> 1/1.
    ConvCase cc{{1, 2, 7, 8}, {3, 2, 3, 4}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, false};
    std::vector<int64_t> ys;
    auto ref = NaiveConv(x, w, nullptr, cc, ys);
    for (int64_t i = 0; i < (*r)[0].numel(); ++i) ASSERT_NEAR((*r)[0].GetAsDouble(i), ref[i], 1e-4);
  }
  // Odd total padding: SAME_UPPER puts the extra at the end, SAME_LOWER at the beginning.
  Tensor x2 = Rand({1, 1, 6}, 3), w2 = Rand({1, 1, 2}, 4);
  for (int upper = 0; upper < 2; ++upper) {
    OneNode t("Conv", 2);
    t.n->attrs["auto_pad"] = Attribute::String(upper ? "SAME_UPPER" : "SAME_LOWER");
    auto r = t.Run({&x2, &w2});
    ASSERT_TRUE(r.ok());
    ConvCase cc{{1, 1, 6}, {1, 1, 2}, 1, {1}, {1}, {upper ? 0 : 1, upper ? 1 : 0}, false};
    std::vector<int64_t> ys;
    auto ref = NaiveConv(x2, w2, nullptr, cc, ys);
    ASSERT_EQ((*r)[0].shape(), ys);
    for (int64_t i = 0; i < 6; ++i) ASSERT_NEAR((*r)[0].GetAsDouble(i), ref[i], 1e-5);
  }
}

TEST(Conv, ShapeErrorsNameTheNode) {
  Tensor x = Rand({1, 4, 5, 5}, 1), w = Rand({2, 3, 3, 3}, 2), w4 = Rand({3, 2, 3, 3}, 3);
  OneNode t("Conv", 2);
  auto r = t.Run({&x, &w});  // 4 channels vs 3
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test_Conv"), std::string::npos) << r.status().message();
  OneNode t2("Conv", 2);
  t2.n->attrs["group"] = Attribute::Int(2);
  EXPECT_FALSE(t2.Run({&x, &w4}).ok());  // 3 output channels not divisible by group 2
  Tensor x3 = Rand({4, 5}, 4);
  OneNode t3("Conv", 2);
  EXPECT_FALSE(t3.Run({&x3, &w}).ok());  // rank 2
  OneNode t4("Conv", 2);
  t4.n->attrs["strides"] = Attribute::String("2");
  Tensor w5 = Rand({2, 4, 3, 3}, 5);
  EXPECT_FALSE(t4.Run({&x, &w5}).ok());  // wrong attribute type
  OneNode t5("Conv", 2);
  t5.Ints("kernel_shape", {5, 5});
  EXPECT_FALSE(t5.Run({&x, &w5}).ok());  // kernel_shape disagrees with W
}

TEST(Conv, SymbolicBatchShape) {
  OneNode t("Conv", 2);
  t.Ints("strides", {2, 2});
  t.Ints("pads", {3, 3, 3, 3});
  InferContext ctx{*t.n, {}, {}};
  ctx.inputs.push_back(TensorInfo{DataType::kFloat32, {Dim::Symbol("N"), Dim(3), Dim(224), Dim(224)}, true});
  ctx.inputs.push_back(TensorInfo{DataType::kFloat32, {Dim(64), Dim(3), Dim(7), Dim(7)}, true});
  ctx.outputs.resize(1);
  ASSERT_TRUE(InferNode(ctx).ok());
  EXPECT_EQ(ShapeToString(ctx.outputs[0].shape), "[N,64,112,112]");
}

// Window geometry near int64's limits is refused with the node's name, never computed with overflow
// (a fuzzed engine once reached signed overflow in conv_geometry.cpp).
TEST(Conv, HugeWindowsAreErrorsNotOverflow) {
  auto infer = [](const char* op, const char* attr, std::vector<int64_t> v, int64_t spatial) {
    OneNode t(op, 2);
    t.Ints(attr, v);
    InferContext ctx{*t.n, {}, {}};
    ctx.inputs.push_back(TensorInfo{DataType::kFloat32, {Dim(1), Dim(1), Dim(spatial), Dim(4)}, true});
    ctx.inputs.push_back(TensorInfo{DataType::kFloat32, {Dim(1), Dim(1), Dim(1), Dim(1)}, true});
    ctx.outputs.resize(1);
    return InferNode(ctx);
  };
  const int64_t p62 = int64_t{1} << 62;
  Status s = infer("Conv", "pads", {p62, 0, p62, 0}, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pads"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("test_Conv"), std::string::npos) << s.message();
  EXPECT_FALSE(infer("Conv", "dilations", {p62, 1}, 4).ok());
  EXPECT_FALSE(infer("Conv", "strides", {1, 1}, int64_t{1} << 50).ok());  // spatial size past 2^40
  Status t = infer("ConvTranspose", "strides", {(int64_t{1} << 31) - 1, 1}, int64_t{1} << 40);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("2^40"), std::string::npos) << t.message();
  EXPECT_TRUE(infer("ConvTranspose", "strides", {1 << 20, 1}, 1 << 10).ok());  // 2^30: large, but fits
}

// Scatter definition: y[n, g*mg + m, i*s - p + k*d] += x[n, g*cg + c, i] * w[g*cg + c, m, k].
TEST(ConvTranspose, MatchesScatterDefinition) {
  struct Case {
    std::vector<int64_t> x, w;
    int64_t group;
    std::vector<int64_t> strides, dil, pads, outpad;
  };
  const std::vector<Case> cases = {
      {{1, 2, 4, 5}, {2, 3, 3, 3}, 1, {2, 2}, {1, 1}, {1, 0, 1, 0}, {1, 0}},
      {{2, 4, 3, 3}, {4, 2, 2, 3}, 2, {1, 3}, {2, 1}, {0, 1, 0, 1}, {0, 2}},
      {{1, 3, 7}, {3, 1, 4}, 3, {3}, {1}, {2, 1}, {1}},
  };
  uint32_t seed = 300;
  for (const auto& cc : cases) {
    Tensor x = Rand(cc.x, seed++), w = Rand(cc.w, seed++);
    const int64_t m = cc.w[1] * cc.group;
    Tensor b = Rand({m}, seed++);
    OneNode t("ConvTranspose", 3);
    t.n->attrs["group"] = Attribute::Int(cc.group);
    t.Ints("strides", cc.strides);
    t.Ints("dilations", cc.dil);
    t.Ints("pads", cc.pads);
    t.Ints("output_padding", cc.outpad);
    auto r = t.Run({&x, &w, &b});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const size_t ns = cc.x.size() - 2;
    std::vector<int64_t> ys{cc.x[0], m};
    for (size_t d = 0; d < ns; ++d)
      ys.push_back(cc.strides[d] * (cc.x[2 + d] - 1) + cc.outpad[d] + (cc.w[2 + d] - 1) * cc.dil[d] + 1 -
                   cc.pads[d] - cc.pads[ns + d]);
    ASSERT_EQ((*r)[0].shape(), ys);
    std::vector<double> ref(NumElements(ys));
    for (int64_t f = 0; f < NumElements(ys); ++f) ref[f] = b.GetAsDouble(Unravel(f, ys)[1]);
    const int64_t cg = cc.x[1] / cc.group, mg = cc.w[1];
    const std::vector<int64_t> ksh(cc.w.begin() + 2, cc.w.end());
    for (int64_t xf = 0; xf < x.numel(); ++xf) {
      auto xi = Unravel(xf, cc.x);
      const int64_t gi = xi[1] / cg;
      for (int64_t mm = 0; mm < mg; ++mm)
        for (int64_t kf = 0; kf < NumElements(ksh); ++kf) {
          auto k = Unravel(kf, ksh);
          std::vector<int64_t> yi{xi[0], gi * mg + mm};
          bool ok = true;
          for (size_t d = 0; d < ns; ++d) {
            const int64_t o = xi[2 + d] * cc.strides[d] - cc.pads[d] + k[d] * cc.dil[d];
            ok &= o >= 0 && o < ys[2 + d];
            yi.push_back(o);
          }
          if (!ok) continue;
          std::vector<int64_t> wi{xi[1], mm};
          wi.insert(wi.end(), k.begin(), k.end());
          ref[Ravel(yi, ys)] += x.GetAsDouble(xf) * w.GetAsDouble(Ravel(wi, cc.w));
        }
    }
    for (int64_t i = 0; i < (*r)[0].numel(); ++i) ASSERT_NEAR((*r)[0].GetAsDouble(i), ref[i], 1e-4) << i;
  }
}

TEST(ConvTranspose, OutputShapeAttribute) {
  Tensor x = Rand({1, 1, 3, 3}, 1), w = Rand({1, 2, 3, 3}, 2);
  OneNode t("ConvTranspose", 2);
  t.Ints("strides", {3, 2});
  t.Ints("output_shape", {10, 8});
  auto r = t.Run({&x, &w});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{1, 2, 10, 8}));
}

// Naive pooling over a 2-D plane set (rank 4 input), explicit pads, floor mode.
TEST(Pool, MaxAndAverageMatchNaive) {
  Tensor x = Rand({2, 3, 9, 8}, 7);
  const std::vector<int64_t> k{3, 2}, s{2, 1}, d{1, 2}, p{1, 0, 1, 1};
  const int64_t oh = (9 + 2 - 3) / 2 + 1, ow = (8 + 1 - 3) / 1 + 1;
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (int cip = 0; cip < 2; ++cip) {
      OneNode t(op, 1, std::string(op) == "MaxPool" ? 2 : 1);
      t.Ints("kernel_shape", k);
      t.Ints("strides", s);
      t.Ints("dilations", d);
      t.Ints("pads", p);
      t.n->attrs["count_include_pad"] = Attribute::Int(cip);
      auto r = t.Run({&x});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ((*r)[0].shape(), (std::vector<int64_t>{2, 3, oh, ow}));
      for (int64_t pl = 0; pl < 6; ++pl)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double mx = -1e30, sum = 0;
            int64_t cnt = 0, arg = -1;
            for (int64_t a = 0; a < 3; ++a)
              for (int64_t b = 0; b < 2; ++b) {
                const int64_t h = i * 2 - 1 + a, w = j - 0 + b * 2;
                if (h < 0 || h >= 9 || w < 0 || w >= 8) continue;
                const double v = x.GetAsDouble(pl * 72 + h * 8 + w);
                if (v > mx) mx = v, arg = pl * 72 + h * 8 + w;
                sum += v;
                ++cnt;
              }
            const int64_t yi = (pl * oh + i) * ow + j;
            if (std::string(op) == "MaxPool") {
              ASSERT_EQ((*r)[0].GetAsDouble(yi), mx);
              ASSERT_EQ((*r)[1].GetAsInt(yi), arg);
            } else {
              ASSERT_NEAR((*r)[0].GetAsDouble(yi), sum / (cip ? 6 : cnt), 1e-5);
            }
          }
    }
  }
}

TEST(Pool, GlobalPoolsAndCeilMode) {
  Tensor x = Rand({2, 3, 5, 4}, 9);
  OneNode ga("GlobalAveragePool", 1), gm("GlobalMaxPool", 1);
  auto ra = ga.Run({&x}), rm = gm.Run({&x});
  ASSERT_TRUE(ra.ok() && rm.ok());
  ASSERT_EQ((*ra)[0].shape(), (std::vector<int64_t>{2, 3, 1, 1}));
  for (int64_t pl = 0; pl < 6; ++pl) {
    double s = 0, m = -1e30;
    for (int64_t i = 0; i < 20; ++i) s += x.GetAsDouble(pl * 20 + i), m = std::max(m, x.GetAsDouble(pl * 20 + i));
    EXPECT_NEAR((*ra)[0].GetAsDouble(pl), s / 20, 1e-5);
    EXPECT_EQ((*rm)[0].GetAsDouble(pl), m);
  }
  Tensor y = Rand({1, 1, 2, 2}, 10);
  OneNode c("MaxPool", 1);
  c.Ints("kernel_shape", {1, 1});
  c.Ints("strides", {2, 2});
  c.n->attrs["ceil_mode"] = Attribute::Int(1);
  auto rc = c.Run({&y});
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ((*rc)[0].shape(), (std::vector<int64_t>{1, 1, 1, 1}));  // last window would start in padding
  OneNode bad("MaxPool", 1);
  EXPECT_FALSE(bad.Run({&y}).ok());  // kernel_shape is required
}

}  // namespace
}  // namespace kiln
