// Differential tests of the CUDA GridSample and AffineGrid layers (grid_layers.cpp, grid_sample.cu) against the CPU
// reference: every mode (opset 16's and 20's names) and padding mode, align_corners on and off, 1 to 3 spatial dims,
// grids reaching past [-1, 1] (padding, reflections folding more than once) and grids of exact halves (nearest's
// ties); X and grid of float32/float16/bfloat16/float64, also of different types; AffineGrid 2-D and 3-D with unit
// dims, the size as a constant and as a runtime input. Ranks the kernel does not sample are refused with a reason.
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

Tensor Int64s(const std::vector<int64_t>& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

// float32 1e-5, float64 1e-10; with a 16-bit type on either side, the reference runs on the float32 values.
::testing::AssertionResult Check(OneNode n, DataType x, DataType grid) {
  const bool low = x == DataType::kFloat16 || x == DataType::kBFloat16 || grid == DataType::kFloat16 ||
                   grid == DataType::kBFloat16;
  if (low) return n.ReferenceInFloat32().MatchesCpu(1e-2, 1e-2);
  if (x == DataType::kFloat64) return n.MatchesCpu(1e-10, 1e-10);
  return n.MatchesCpu(1e-5, 1e-5);
}

struct Geometry {
  Shape x, grid;
};

const std::vector<Geometry>& Geometries() {
  static const std::vector<Geometry> g = {
      {{2, 3, 5, 7}, {2, 4, 6, 2}},       {{1, 4, 16, 17}, {1, 33, 31, 2}}, {{2, 3, 9}, {2, 11, 1}},
      {{1, 2, 4, 5, 3}, {1, 3, 2, 4, 3}}, {{1, 1, 1, 6}, {1, 5, 3, 2}},
  };
  return g;
}

TEST(GpuGridSample, EveryModeAndPaddingMatchesTheCpuReference) {
  uint32_t seed = 500;
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1})
        for (const Geometry& g : Geometries())
          for (double reach : {1.3, 3.7}) {
            const DataType t = DataType::kFloat32;
            EXPECT_TRUE(Check(OneNode("GridSample")
                                  .Opset(20)
                                  .Input(Random(t, g.x, seed++, -2, 2))
                                  .Input(Random(t, g.grid, seed++, -reach, reach))
                                  .Attr("mode", Attribute::String(mode))
                                  .Attr("padding_mode", Attribute::String(pad))
                                  .Attr("align_corners", Attribute::Int(align)),
                              t, t))
                << mode << " " << pad << " align " << align << " X " << ShapeToString(g.x) << " grid reach "
                << reach;
          }
}

TEST(GpuGridSample, TypesAndOpset16Names) {
  uint32_t seed = 900;
  const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16, bf16 = DataType::kBFloat16,
                 f64 = DataType::kFloat64;
  const std::pair<DataType, DataType> types[] = {{f16, f16}, {bf16, bf16}, {f64, f64}, {f16, f32}, {f32, f16},
                                                 {f64, f32}};
  for (const auto& [xt, gt] : types)
    for (const char* mode : {"nearest", "bilinear", "bicubic"})
      for (const char* pad : {"zeros", "border", "reflection"})
        for (int64_t align : {0, 1}) {
          EXPECT_TRUE(Check(OneNode("GridSample")
                                .Opset(16)
                                .Input(Random(xt, {2, 3, 6, 5}, seed++, -2, 2))
                                .Input(Random(gt, {2, 7, 4, 2}, seed++, -1.6, 1.6))
                                .Attr("mode", Attribute::String(mode))
                                .Attr("padding_mode", Attribute::String(pad))
                                .Attr("align_corners", Attribute::Int(align)),
                            xt, gt))
              << DataTypeName(xt) << "/" << DataTypeName(gt) << " " << mode << " " << pad << " align " << align;
        }
  // Opset 16's default mode (bilinear) and opset 20's (linear), no attributes.
  for (int64_t opset : {16, 20})
    EXPECT_TRUE(OneNode("GridSample")
                    .Opset(opset)
                    .Input(Random(f32, {1, 2, 4, 4}, seed++, -2, 2))
                    .Input(Random(f32, {1, 3, 3, 2}, seed++, -1.2, 1.2))
                    .MatchesCpu(1e-5, 1e-5))
        << "opset " << opset;
}

TEST(GpuGridSample, ExactHalvesAndCorners) {
  // Grid values on the pixel grid and halfway between (nearest rounds ties to even), at and past the corners.
  std::vector<double> gv;
  for (double a : {-1.25, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25})
    for (double b : {-1.0, -0.5, 0.0, 0.5, 1.0, 1.5}) gv.push_back(a), gv.push_back(b);
  const Tensor grid = FromValues(DataType::kFloat32, {1, 11, 6, 2}, gv);
  uint32_t seed = 1300;
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1})
        for (const Shape& xs : {Shape{1, 2, 4, 4}, Shape{1, 1, 3, 5}})
          EXPECT_TRUE(OneNode("GridSample")
                          .Opset(20)
                          .Input(Random(DataType::kFloat32, xs, seed++, -2, 2))
                          .Input(grid)
                          .Attr("mode", Attribute::String(mode))
                          .Attr("padding_mode", Attribute::String(pad))
                          .Attr("align_corners", Attribute::Int(align))
                          .MatchesCpu(1e-5, 1e-5))
              << mode << " " << pad << " align " << align << " X " << ShapeToString(xs);
}

TEST(GpuGridSample, RefusesFourSpatialDims) {
  Graph g;
  Node* n = g.AddNode("GridSample", "sample0");
  n->opset = 20;
  Value* x = g.GetOrAddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = FromStatic({1, 1, 2, 2, 2, 2});
  x->has_shape = true;
  Value* grid = g.GetOrAddValue("grid");
  grid->dtype = DataType::kFloat32;
  grid->shape = FromStatic({1, 2, 2, 2, 2, 4});
  grid->has_shape = true;
  n->inputs = {x, grid};
  auto layer = cuda::CreateLayer(cuda::LayerSpec{*n, {}, {}}, "default");
  ASSERT_FALSE(layer.ok());
  EXPECT_NE(layer.status().message().find("sample0"), std::string::npos) << layer.status().ToString();
  EXPECT_NE(layer.status().message().find("4 spatial dims"), std::string::npos) << layer.status().ToString();
}

TEST(GpuAffineGrid, MatchesTheCpuReference) {
  uint32_t seed = 1700;
  const std::vector<Shape> sizes = {{2, 3, 5, 7}, {1, 1, 1, 4}, {3, 2, 6, 1}, {2, 1, 3, 4, 5}, {1, 2, 1, 1, 2}};
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64})
    for (const Shape& size : sizes)
      for (int64_t align : {0, 1})
        for (bool runtime_size : {false, true}) {
          const int64_t r = static_cast<int64_t>(size.size()) - 2;
          OneNode n("AffineGrid");
          n.Input(Random(t, {size[0], r, r + 1}, seed++, -1.5, 1.5));
          if (runtime_size) n.Input(Int64s(size));
          else n.Const(Int64s(size));
          n.Attr("align_corners", Attribute::Int(align));
          EXPECT_TRUE(Check(n, t, t)) << DataTypeName(t) << " size " << ShapeToString(size) << " align " << align
                                      << (runtime_size ? " (runtime size)" : "");
        }
}

}  // namespace
}  // namespace kiln::gputest
