// Tests of Resize (and Upsample's rewrite to Resize): the CPU kernel against a direct, non-separable 2-D
// evaluation of the ONNX formulas on random NCHW data with odd sizes; symbolic output shapes; error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/executor.h"
#include "ops/op_def.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

std::mt19937 stream(777);  // this file's random draws
int64_t RandInt(int64_t lo, int64_t hi) { return testing::RandInt(stream, lo, hi); }

struct OneNode : testing::OneNode {
  explicit OneNode(size_t ins, const std::string& op = "Resize") : testing::OneNode(op, ins, 1, 19, "rs_node") {}
};

Tensor RandomFloat(std::vector<int64_t> shape) {
  Tensor x(DataType::kFloat32, std::move(shape));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.SetFromDouble(i, u(stream));
  return x;
}

// Source coordinate per the ONNX Resize definition (scale = out/in given as a float scale here).
double Coord(const std::string& ctm, int64_t x, int64_t in, int64_t out, double s) {
  if (ctm == "asymmetric") return x / s;
  if (ctm == "align_corners") return out == 1 ? 0.0 : x * (in - 1.0) / (out - 1.0);
  return (x + 0.5) / s - 0.5;  // half_pixel
}
double Cubic(double x, double A) {
  x = std::fabs(x);
  if (x <= 1) return (A + 2) * x * x * x - (A + 3) * x * x + 1;
  if (x < 2) return A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
  return 0;
}
// 1-D weights of source pixel `i` for coordinate c (linear or cubic), edge-clamped by the caller.
double Weight(const std::string& mode, double c, int64_t i) {
  const double d = static_cast<double>(i) - c;
  if (mode == "linear") return std::max(0.0, 1 - std::fabs(d));
  return Cubic(d, -0.75);
}

// Direct evaluation on an [N, C, H, W] tensor resized in H and W with integer output sizes.
Tensor Naive(const Tensor& x, int64_t oh, int64_t ow, double sh, double sw, const std::string& mode,
             const std::string& ctm) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  Tensor y(DataType::kFloat32, {N, C, oh, ow});
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const double cy = Coord(ctm, oy, H, oh, sh), cx = Coord(ctm, ox, W, ow, sw);
        double v = 0;
        if (mode == "nearest") {  // round_prefer_floor, or floor with asymmetric (Upsample)
          auto rnd = [&](double c) {
            const double f = std::floor(c);
            return ctm == "asymmetric" ? f : (c - f > 0.5 ? f + 1 : f);
          };
          const int64_t iy = std::clamp<int64_t>(static_cast<int64_t>(rnd(cy)), 0, H - 1);
          const int64_t ix = std::clamp<int64_t>(static_cast<int64_t>(rnd(cx)), 0, W - 1);
          v = x.GetAsDouble((p * H + iy) * W + ix);
        } else {
          const int64_t y0 = static_cast<int64_t>(std::floor(cy)), x0 = static_cast<int64_t>(std::floor(cx));
          for (int64_t iy = y0 - 2; iy <= y0 + 3; ++iy)
            for (int64_t ix = x0 - 2; ix <= x0 + 3; ++ix) {
              const double w = Weight(mode, cy, iy) * Weight(mode, cx, ix);
              if (w == 0) continue;
              const int64_t cyi = std::clamp<int64_t>(iy, 0, H - 1), cxi = std::clamp<int64_t>(ix, 0, W - 1);
              v += w * x.GetAsDouble((p * H + cyi) * W + cxi);
            }
        }
        y.SetFromDouble((p * oh + oy) * ow + ox, v);
      }
  return y;
}

void ExpectNear(const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape()) << ShapeToString(got.shape()) << " vs " << ShapeToString(want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_NEAR(got.GetAsDouble(i), want.GetAsDouble(i), tol) << "at " << i;
}

TEST(ResizeOp, MatchesDirectEvaluationWithScales) {
  const char* modes[] = {"nearest", "linear", "cubic"};
  const char* ctms[] = {"half_pixel", "asymmetric", "align_corners"};
  const float scales[] = {2.f, 0.5f, 1.5f, 3.f, 0.75f};
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const std::string mode = modes[trial % 3], ctm = ctms[(trial / 3) % 3];
    Tensor x = RandomFloat({RandInt(1, 2), RandInt(1, 3), RandInt(1, 9), RandInt(1, 9)});
    const float sh = scales[RandInt(0, 4)], sw = scales[RandInt(0, 4)];
    const int64_t oh = static_cast<int64_t>(std::floor(sh * x.dim(2))), ow = static_cast<int64_t>(std::floor(sw * x.dim(3)));
    if (oh == 0 || ow == 0) continue;
    if (ctm == "align_corners" && (std::floor(sh * x.dim(2)) != sh * x.dim(2) || std::floor(sw * x.dim(3)) != sw * x.dim(3)))
      continue;  // ONNX's align_corners uses the fractional output length there; compare on exact sizes only
    if (mode == "nearest" && ctm == "asymmetric") continue;  // covered by the Upsample test (floor rounding)
    Tensor sc = Tensor::FromFloat({1.f, 1.f, sh, sw}, {4});
    OneNode on(3);
    on.n->attrs["mode"] = Attribute::String(mode);
    on.n->attrs["coordinate_transformation_mode"] = Attribute::String(ctm);
    auto res = on.Run({&x, nullptr, &sc});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ExpectNear((*res)[0], Naive(x, oh, ow, sh, sw, mode, ctm), 1e-5);
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(ResizeOp, MatchesDirectEvaluationWithSizesAndAxes) {
  for (int trial = 0; trial < 12; ++trial) {
    const std::string mode = trial % 2 ? "linear" : "cubic";
    Tensor x = RandomFloat({1, 2, RandInt(2, 7), RandInt(2, 7)});
    const int64_t oh = RandInt(1, 11), ow = RandInt(1, 11);
    Tensor sizes = Tensor::FromInt64({oh, ow});
    OneNode on(4);
    on.n->attrs["mode"] = Attribute::String(mode);
    on.n->attrs["axes"] = Attribute::Ints({2, -1});
    auto res = on.Run({&x, nullptr, nullptr, &sizes});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    const double sh = static_cast<double>(oh) / x.dim(2), sw = static_cast<double>(ow) / x.dim(3);
    ExpectNear((*res)[0], Naive(x, oh, ow, sh, sw, mode, "half_pixel"), 1e-5);
  }
}

TEST(ResizeOp, UpsampleBecomesResizeWithFloorNearest) {
  for (int opset : {7, 9}) {
    OneNode on(opset == 7 ? 1 : 2, "Upsample");
    on.n->opset = opset;
    Tensor x = RandomFloat({2, 3, 5, 7});
    Tensor sc = Tensor::FromFloat({1.f, 1.f, 2.f, 3.f}, {4});
    if (opset == 7) on.n->attrs["scales"] = Attribute::Floats({1.f, 1.f, 2.f, 3.f});
    else on.n->inputs[1] = on.g.AddConstant("scales", sc);
    on.n->attrs["mode"] = Attribute::String("nearest");
    ConvertContext c{on.g, *on.n, opset};
    const OpDef* s = FindOp(kOnnxDomain, "Upsample");
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->convert(c).ok());
    EXPECT_EQ(on.n->op_type, "Resize");
    ASSERT_GE(on.n->inputs.size(), 3u);
    ASSERT_NE(on.n->inputs[2], nullptr);
    ASSERT_TRUE(on.n->inputs[2]->is_const());
    auto res = on.Run({&x, nullptr, &*on.n->inputs[2]->const_value});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ExpectNear((*res)[0], Naive(x, 10, 21, 2.0, 3.0, "nearest", "asymmetric"), 0);
  }
}

TEST(ResizeOp, Resize10MovesScalesToSlotTwo) {
  OneNode on(2);
  on.n->opset = 10;
  Value* sc = on.g.AddConstant("scales", Tensor::FromFloat({1.f, 1.f, 2.f, 2.f}, {4}));
  on.n->inputs[1] = sc;
  ConvertContext c{on.g, *on.n, 10};
  ASSERT_TRUE(FindOp(kOnnxDomain, "Resize")->convert(c).ok());
  ASSERT_EQ(on.n->inputs.size(), 3u);
  EXPECT_EQ(on.n->inputs[1], nullptr);
  EXPECT_EQ(on.n->inputs[2], sc);
  EXPECT_EQ(on.n->gets("coordinate_transformation_mode", ""), "asymmetric");
}

TEST(ResizeOp, NearestIntegerTypesAndExtrapolation) {
  Tensor x(DataType::kUInt8, {1, 1, 3, 3});
  for (int64_t i = 0; i < 9; ++i) x.SetFromDouble(i, static_cast<double>(i * 10));
  Tensor sc = Tensor::FromFloat({1.f, 1.f, 2.f, 2.f}, {4});
  OneNode on(3);
  on.n->attrs["coordinate_transformation_mode"] = Attribute::String("asymmetric");
  on.n->attrs["nearest_mode"] = Attribute::String("floor");
  auto res = on.Run({&x, nullptr, &sc});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const Tensor& y = (*res)[0];
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, 1, 6, 6}));
  for (int64_t oy = 0; oy < 6; ++oy)
    for (int64_t ox = 0; ox < 6; ++ox) EXPECT_EQ(y.GetAsInt(oy * 6 + ox), ((oy / 2) * 3 + ox / 2) * 10);

  // tf_crop_and_resize: outside the input takes the extrapolation value.
  Tensor xf = RandomFloat({1, 1, 4, 4});
  Tensor roi = Tensor::FromFloat({0.f, 0.f, -0.5f, 0.5f, 1.f, 1.f, 0.5f, 1.5f}, {8});
  Tensor sizes = Tensor::FromInt64({1, 1, 3, 3});
  OneNode crop(4);
  crop.n->attrs["mode"] = Attribute::String("linear");
  crop.n->attrs["coordinate_transformation_mode"] = Attribute::String("tf_crop_and_resize");
  crop.n->attrs["extrapolation_value"] = Attribute::Float(9.f);
  auto rc = crop.Run({&xf, &roi, nullptr, &sizes});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  // Row 0 maps to y = -1.5 (outside); column 2 maps to x = 4.5 (outside).
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ((*rc)[0].GetAsDouble(i), 9.0);
  EXPECT_EQ((*rc)[0].GetAsDouble(3 + 2), 9.0);
  EXPECT_NE((*rc)[0].GetAsDouble(3 + 0), 9.0);
}

TEST(ResizeOp, SymbolicShapes) {
  Graph g;
  Node* n = g.AddNode("Resize", "rs_node");
  InferContext ctx{*n, {}, {}};
  TensorInfo x;
  x.dtype = DataType::kFloat32;
  x.shape = {Dim::Symbol("batch"), Dim(256), Dim::Symbol("h"), Dim(20)};
  x.has_shape = true;
  Tensor sc = Tensor::FromFloat({1.f, 1.f, 2.f, 2.f}, {4});
  TensorInfo s;
  s.dtype = DataType::kFloat32;
  s.shape = {Dim(4)};
  s.has_shape = true;
  s.value = &sc;
  ctx.inputs = {x, std::nullopt, s};
  ctx.outputs.resize(1);
  ASSERT_TRUE(InferNode(ctx).ok());
  const Shape& o = ctx.outputs[0].shape;
  ASSERT_EQ(o.size(), 4u);
  EXPECT_EQ(o[0].ToString(), "batch");
  EXPECT_EQ(o[1].value, 256);
  EXPECT_TRUE(o[2].symbolic()) << o[2].ToString();
  EXPECT_EQ(o[3].value, 40);
}

TEST(ResizeOp, BadInputsAreErrors) {
  Tensor x = RandomFloat({1, 1, 4, 4});
  Tensor sc = Tensor::FromFloat({1.f, 1.f, 2.f, 2.f}, {4});
  Tensor short_sc = Tensor::FromFloat({2.f, 2.f}, {2});
  Tensor neg_sc = Tensor::FromFloat({1.f, 1.f, -2.f, 2.f}, {4});
  Tensor sizes = Tensor::FromInt64({1, 1, 8, 8});
  auto expect_err = [](OneNode& on, std::vector<const Tensor*> ins) {
    auto r = on.Run(ins);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("rs_node"), std::string::npos) << r.status().ToString();
  };
  { OneNode on(4); expect_err(on, {&x, nullptr, &sc, &sizes}); }   // both scales and sizes
  { OneNode on(3); expect_err(on, {&x, nullptr, nullptr}); }       // neither
  { OneNode on(3); expect_err(on, {&x, nullptr, &short_sc}); }    // wrong count
  { OneNode on(3); expect_err(on, {&x, nullptr, &neg_sc}); }      // negative scale
  { OneNode on(3); on.n->attrs["mode"] = Attribute::String("bicubic"); expect_err(on, {&x, nullptr, &sc}); }
  { OneNode on(3); on.n->attrs["mode"] = Attribute::Int(1); expect_err(on, {&x, nullptr, &sc}); }
  { OneNode on(3); on.n->attrs["axes"] = Attribute::Ints({2, 2}); expect_err(on, {&x, nullptr, &short_sc}); }
  Tensor huge = Tensor::FromInt64({1, 1, int64_t{1} << 31, int64_t{1} << 31});
  { OneNode on(4); expect_err(on, {&x, nullptr, nullptr, &huge}); }  // absurd output size
  { OneNode on(4); on.n->attrs["coordinate_transformation_mode"] = Attribute::String("tf_crop_and_resize");
    expect_err(on, {&x, nullptr, nullptr, &sizes}); }  // crop without roi
}

}  // namespace
}  // namespace kiln
