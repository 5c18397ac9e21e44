// Differential tests of the CUDA LRN and MeanVarianceNormalization layers (lrn_mvn_layers.cpp, lrn_mvn.cu) against
// the CPU reference: ranks 3 to 5, odd shapes, every window size against the channel count (even, odd, 1, larger
// than C), attribute values, the axes MVN normalizes over (default, last, all, alternating, with unit dims), groups
// large enough to be split in chunks, inputs far from zero mean; float32 and float64 tight, float16/bfloat16
// against a float32 reference.
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64};

// float32 1e-5, float64 1e-10, the 16-bit types 1e-2 against the reference on their (exact) float32 values.
::testing::AssertionResult Check(OneNode n, DataType t) {
  if (t == DataType::kFloat32) return n.MatchesCpu(1e-5, 1e-5);
  if (t == DataType::kFloat64) return n.MatchesCpu(1e-10, 1e-10);
  return n.ReferenceInFloat32().MatchesCpu(1e-2, 1e-2);
}

TEST(GpuLrn, MatchesTheCpuReference) {
  uint32_t seed = 100;
  const std::vector<Shape> shapes = {{2, 5, 7, 9}, {1, 3, 11}, {2, 16, 3, 4, 5}, {3, 1, 6, 5}, {1, 37, 33, 1}};
  for (DataType t : kTypes)
    for (const Shape& s : shapes)
      for (int64_t size : {1, 2, 3, 5, 8, 41}) {
        EXPECT_TRUE(Check(OneNode("LRN").Input(Random(t, s, seed++, -3, 3)).Attr("size", Attribute::Int(size)), t))
            << DataTypeName(t) << " " << ShapeToString(s) << " size " << size;
        EXPECT_TRUE(Check(OneNode("LRN")
                              .Input(Random(t, s, seed++, -3, 3))
                              .Attr("size", Attribute::Int(size))
                              .Attr("alpha", Attribute::Float(0.37f))
                              .Attr("beta", Attribute::Float(0.9f))
                              .Attr("bias", Attribute::Float(2.5f)),
                          t))
            << DataTypeName(t) << " " << ShapeToString(s) << " size " << size << " (attributes set)";
      }
  // No elements.
  EXPECT_TRUE(OneNode("LRN").Input(Random(DataType::kFloat32, {0, 4, 3}, 1)).Attr("size", Attribute::Int(3))
                  .MatchesCpu(1e-5, 1e-5));
}

TEST(GpuLrn, RefusesASizeBelowOne) {
  Graph g;
  Node* n = g.AddNode("LRN", "lrn0");
  n->inputs = {g.AddConstant("x", Random(DataType::kFloat32, {1, 3, 4}, 1))};
  n->attrs["size"] = Attribute::Int(0);
  auto layer = cuda::CreateLayer(cuda::LayerSpec{*n, {}, {}}, "default");
  ASSERT_FALSE(layer.ok());
  EXPECT_NE(layer.status().message().find("lrn0"), std::string::npos) << layer.status().ToString();
  EXPECT_NE(layer.status().message().find("size must be at least 1"), std::string::npos) << layer.status().ToString();
}

TEST(GpuMvn, MatchesTheCpuReference) {
  uint32_t seed = 300;
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;  // empty: the default (0, 2, 3)
  };
  const std::vector<Case> cases = {
      {{2, 3, 5, 7}, {}},           {{2, 3, 5, 7}, {1}},          {{2, 3, 5, 7}, {2, 3}},
      {{2, 3, 5, 7}, {0, 1, 2, 3}}, {{2, 3, 5, 7}, {-1}},         {{2, 3, 4, 5, 6}, {0, 2, 4}},
      {{3, 17, 9}, {1}},            {{1, 4, 1, 9}, {0, 2, 3}},    {{4, 1, 1, 1}, {}},
      {{2, 2048, 3}, {2}},          {{1, 2, 300001}, {0, 2}},     {{5, 3, 1031}, {0, 2}},
      {{2, 3, 5, 7}, {3, 1, 3}},
  };
  for (DataType t : kTypes)
    for (const Case& c : cases) {
      OneNode n("MeanVarianceNormalization");
      n.Input(Random(t, c.shape, seed++, -2, 3));
      if (!c.axes.empty()) n.Attr("axes", Attribute::Ints(c.axes));
      EXPECT_TRUE(Check(n, t)) << DataTypeName(t) << " " << ShapeToString(c.shape) << " axes "
                               << ShapeToString(c.axes);
    }
  // A mean far from zero (the variance is a small difference of large sums; both sides keep them in double). The
  // difference loses about five digits (mean^2 / variance ~ 1e5), so float64 is held to 1e-8 here (H200: 5e-10 seen).
  EXPECT_TRUE(Check(OneNode("MeanVarianceNormalization").Input(Random(DataType::kFloat32, {2, 3, 40, 50}, seed++, 100, 101)),
                    DataType::kFloat32));
  EXPECT_TRUE(OneNode("MeanVarianceNormalization")
                  .Input(Random(DataType::kFloat64, {2, 3, 40, 50}, seed++, 100, 101))
                  .MatchesCpu(1e-8, 1e-8));
}

}  // namespace
}  // namespace kiln::gputest
