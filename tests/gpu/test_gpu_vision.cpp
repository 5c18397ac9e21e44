// Differential tests of the CUDA RoiAlign and DeformConv layers (vision_layers.cpp, roi_align.cu, deform_conv.cu)
// against the CPU reference. RoiAlign: avg and max, both coordinate modes (and opset 10's default), sampling ratios
// 0 to 3, boxes reaching past the map, inverted and empty boxes, spatial scales, int32 and int64 batch indices, X of
// every float type with float32 or matching rois. DeformConv: 1-D to 3-D, groups and offset groups, strides, pads,
// dilations, offsets sampling far outside, with and without bias and mask, more channels than a GEMM tile; float32
// and float64 tight, float16/bfloat16 against a float32 reference.
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

::testing::AssertionResult Check(OneNode n, DataType t, double tol32 = 1e-5) {
  if (t == DataType::kFloat32) return n.MatchesCpu(tol32, tol32);
  if (t == DataType::kFloat64) return n.MatchesCpu(1e-10, 1e-10);
  return n.ReferenceInFloat32().MatchesCpu(1e-2, 1e-2);
}

// num_rois boxes (x1, y1, x2, y2) in input-image coordinates (the map's size / scale): most inside, some reaching
// past the border, one inverted, one empty.
std::vector<double> Boxes(int64_t num_rois, int64_t h, int64_t w, double scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> v;
  const double H = static_cast<double>(h) / scale, W = static_cast<double>(w) / scale;
  for (int64_t r = 0; r < num_rois; ++r) {
    double x1 = -2.0 / scale + u(rng) * (W + 2.0 / scale), y1 = -2.0 / scale + u(rng) * (H + 2.0 / scale);
    double x2 = x1 + 0.2 + u(rng) * W * 0.8, y2 = y1 + 0.2 + u(rng) * H * 0.8;
    if (r == 1) std::swap(x1, x2);  // inverted
    if (r == 2) x2 = x1, y2 = y1;   // empty
    v.insert(v.end(), {x1, y1, x2, y2});
  }
  return v;
}

TEST(GpuRoiAlign, ModesAndGridsMatchTheCpuReference) {
  uint32_t seed = 20000;
  const std::vector<Shape> xs = {{2, 3, 10, 12}, {1, 5, 7, 7}, {3, 2, 1, 9}};
  for (const Shape& xs_shape : xs)
    for (const char* mode : {"avg", "max"})
      for (const char* ctm : {"half_pixel", "output_half_pixel"})
        for (int64_t sr : {0, 1, 2, 3})
          for (const auto& [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 4}, {7, 5}})
            for (double scale : {1.0, 0.25}) {
              const int64_t nr = 6;
              const DataType t = DataType::kFloat32;
              std::vector<double> idx;
              for (int64_t r = 0; r < nr; ++r) idx.push_back(static_cast<double>((r * 5 + seed) % xs_shape[0]));
              EXPECT_TRUE(Check(OneNode("RoiAlign")
                                    .Opset(16)
                                    .Input(Random(t, xs_shape, seed++, -2, 2))
                                    .Input(FromValues(t, {nr, 4}, Boxes(nr, xs_shape[2], xs_shape[3], scale, seed++)))
                                    .Input(FromValues(DataType::kInt64, {nr}, idx))
                                    .Attr("mode", Attribute::String(mode))
                                    .Attr("coordinate_transformation_mode", Attribute::String(ctm))
                                    .Attr("sampling_ratio", Attribute::Int(sr))
                                    .Attr("output_height", Attribute::Int(oh))
                                    .Attr("output_width", Attribute::Int(ow))
                                    .Attr("spatial_scale", Attribute::Float(static_cast<float>(scale))),
                                t))
                  << mode << " " << ctm << " sampling_ratio " << sr << " out " << oh << "x" << ow << " scale "
                  << scale << " X " << ShapeToString(xs_shape);
            }
}

TEST(GpuRoiAlign, TypesOpsetsAndIndexTypes) {
  uint32_t seed = 21000;
  const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16, bf16 = DataType::kBFloat16,
                 f64 = DataType::kFloat64;
  const std::pair<DataType, DataType> types[] = {{f16, f16}, {bf16, bf16}, {f64, f64}, {f16, f32}, {bf16, f32},
                                                 {f32, f64}};
  for (const auto& [xt, rt] : types)
    for (int64_t opset : {10, 16, 22})
      for (DataType it : {DataType::kInt32, DataType::kInt64})
        for (const char* mode : {"avg", "max"}) {
          if (opset < 22 && (xt == bf16 || rt == bf16)) continue;
          const int64_t nr = 5;
          OneNode n("RoiAlign");
          n.Opset(opset)
              .Input(Random(xt, {2, 4, 9, 11}, seed++, -2, 2))
              .Input(FromValues(rt, {nr, 4}, Boxes(nr, 9, 11, 0.5, seed++)))
              .Input(FromValues(it, {nr}, {1, 0, 1, 1, 0}))
              .Attr("mode", Attribute::String(mode))
              .Attr("output_height", Attribute::Int(3))
              .Attr("output_width", Attribute::Int(2))
              .Attr("spatial_scale", Attribute::Float(0.5f));
          const bool low = xt == f16 || xt == bf16 || rt == f16 || rt == bf16;
          EXPECT_TRUE(low ? n.ReferenceInFloat32().MatchesCpu(1e-2, 1e-2)
                          : (xt == f64 ? n.MatchesCpu(1e-10, 1e-10) : n.MatchesCpu(1e-5, 1e-5)))
              << DataTypeName(xt) << " rois " << DataTypeName(rt) << " opset " << opset << " "
              << DataTypeName(it) << " " << mode;
        }
  // No rois, and constant batch indices.
  EXPECT_TRUE(OneNode("RoiAlign")
                  .Input(Random(f32, {1, 3, 5, 5}, seed++))
                  .Input(Tensor(f32, {0, 4}))
                  .Input(Tensor(DataType::kInt64, {0}))
                  .MatchesCpu(1e-5, 1e-5));
  EXPECT_TRUE(OneNode("RoiAlign")
                  .Input(Random(f32, {2, 3, 5, 6}, seed++))
                  .Input(FromValues(f32, {2, 4}, {0.5, 1, 4, 4.5, 1, 0, 5, 3}))
                  .Const(FromValues(DataType::kInt64, {2}, {1, 0}))
                  .Attr("output_height", Attribute::Int(2))
                  .Attr("output_width", Attribute::Int(2))
                  .MatchesCpu(1e-5, 1e-5));
}

// ---- DeformConv ----

struct DeformCase {
  Shape x;          // [N, C, spatial...]
  int64_t m;        // output channels
  Shape kernel;
  int64_t group, offset_group;
  Shape strides, pads, dilations;  // empty: defaults
  bool bias, mask;
  double reach;  // offsets in [-reach, reach]
};

OneNode MakeDeform(const DeformCase& c, DataType t, uint32_t& seed) {
  const size_t nsp = c.kernel.size();
  Shape out_sp;
  int64_t kpoints = 1;
  for (size_t d = 0; d < nsp; ++d) {
    const int64_t s = c.strides.empty() ? 1 : c.strides[d], dl = c.dilations.empty() ? 1 : c.dilations[d];
    const int64_t pb = c.pads.empty() ? 0 : c.pads[d], pe = c.pads.empty() ? 0 : c.pads[d + nsp];
    out_sp.push_back((c.x[2 + d] + pb + pe - ((c.kernel[d] - 1) * dl + 1)) / s + 1);
    kpoints *= c.kernel[d];
  }
  Shape w = {c.m, c.x[1] / c.group};
  w.insert(w.end(), c.kernel.begin(), c.kernel.end());
  Shape off = {c.x[0], c.offset_group * kpoints * static_cast<int64_t>(nsp)};
  off.insert(off.end(), out_sp.begin(), out_sp.end());
  Shape mask = {c.x[0], c.offset_group * kpoints};
  mask.insert(mask.end(), out_sp.begin(), out_sp.end());
  OneNode n("DeformConv");
  n.Opset(22)
      .Input(Random(t, c.x, seed++, -1, 1))
      .Const(Random(t, w, seed++, -0.5, 0.5))
      .Input(Random(t, off, seed++, -c.reach, c.reach));
  if (c.bias || c.mask) {
    if (c.bias) n.Const(Random(t, {c.m}, seed++, -1, 1));
    else n.Omitted();
  }
  if (c.mask) n.Input(Random(t, mask, seed++, 0, 1));
  n.Attr("group", Attribute::Int(c.group)).Attr("offset_group", Attribute::Int(c.offset_group));
  if (!c.strides.empty()) n.Attr("strides", Attribute::Ints(c.strides));
  if (!c.pads.empty()) n.Attr("pads", Attribute::Ints(c.pads));
  if (!c.dilations.empty()) n.Attr("dilations", Attribute::Ints(c.dilations));
  return n;
}

std::string Describe(const DeformCase& c) {
  return "X " + ShapeToString(c.x) + " M " + std::to_string(c.m) + " kernel " + ShapeToString(c.kernel) + " group " +
         std::to_string(c.group) + " offset_group " + std::to_string(c.offset_group) + " strides " +
         ShapeToString(c.strides) + " pads " + ShapeToString(c.pads) + " dilations " + ShapeToString(c.dilations) +
         (c.bias ? " bias" : "") + (c.mask ? " mask" : "") + " reach " + std::to_string(c.reach);
}

const std::vector<DeformCase>& DeformCases() {
  static const std::vector<DeformCase> cases = {
      {{2, 4, 7, 8}, 6, {3, 3}, 2, 2, {1, 2}, {1, 1, 1, 1}, {}, true, true, 1.5},
      {{1, 3, 5, 5}, 2, {2, 2}, 1, 1, {}, {}, {}, false, false, 0.8},
      {{1, 3, 5, 5}, 2, {2, 2}, 1, 3, {}, {}, {}, false, true, 0.8},
      {{2, 2, 6, 6}, 4, {3, 3}, 1, 1, {}, {2, 1, 0, 2}, {2, 1}, true, false, 6.0},
      {{1, 3, 11}, 5, {4}, 1, 1, {}, {2, 1}, {2}, true, true, 2.0},
      {{1, 2, 4, 5, 6}, 3, {2, 2, 3}, 1, 2, {1, 1, 2}, {0, 1, 1, 1, 0, 1}, {}, true, true, 1.0},
      {{1, 40, 9, 9}, 33, {3, 3}, 1, 1, {}, {1, 1, 1, 1}, {}, true, true, 1.0},
      {{3, 6, 4, 3}, 9, {1, 1}, 3, 2, {}, {}, {}, true, false, 0.5},
  };
  return cases;
}

TEST(GpuDeformConv, MatchesTheCpuReference) {
  uint32_t seed = 22000;
  for (const DeformCase& c : DeformCases()) {
    const DataType t = DataType::kFloat32;
    EXPECT_TRUE(Check(MakeDeform(c, t, seed), t, 1e-4)) << Describe(c);
  }
}

TEST(GpuDeformConv, Types) {
  uint32_t seed = 23000;
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64})
    for (const DeformCase& c : DeformCases())
      EXPECT_TRUE(Check(MakeDeform(c, t, seed), t)) << DataTypeName(t) << " " << Describe(c);
}

}  // namespace
}  // namespace kiln::gputest
