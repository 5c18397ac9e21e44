// Differential tests of the CUDA ReverseSequence, CenterCropPad, MaxUnpool and Col2Im layers (rearrange_layers.cpp,
// rearrange.cu, the Pad kernel) against the CPU reference: both batch/time layouts, lengths 0 to the full sequence;
// crops and pads of odd and even differences on chosen axes (negative ones too); unpooling with overlapping windows
// (indices named twice: the last one wins), pads, 3-D, output shapes larger and smaller than the unpooled one;
// Col2Im in 1 to 3 spatial dims with strides, dilations and pads; moved types exact, summed floats to 1e-5.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

Tensor Int64s(const std::vector<int64_t>& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

const DataType kMoved[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt64,
                           DataType::kInt8,    DataType::kBool,    DataType::kFloat64};

// ---- ReverseSequence ----

TEST(GpuReverseSequence, MatchesTheCpuReference) {
  uint32_t seed = 10;
  struct Case {
    Shape shape;
    int64_t batch_axis, time_axis;
  };
  const std::vector<Case> cases = {
      {{5, 4, 3}, 1, 0}, {{4, 6}, 0, 1}, {{3, 2, 4, 5}, 1, 0}, {{2, 7, 1, 9}, 0, 1}, {{1, 1}, 1, 0}, {{6, 3}, 1, 0}};
  for (DataType t : kMoved)
    for (const Case& c : cases) {
      const int64_t batch = c.shape[static_cast<size_t>(c.batch_axis)];
      const int64_t steps = c.shape[static_cast<size_t>(c.time_axis)];
      std::mt19937 rng(seed);
      std::vector<int64_t> lens(static_cast<size_t>(batch));
      for (auto& l : lens) l = static_cast<int64_t>(rng() % static_cast<uint32_t>(steps + 1));
      lens[0] = steps;  // the whole sequence, and (below) an empty one
      if (batch > 1) lens[1] = 0;
      EXPECT_TRUE(OneNode("ReverseSequence")
                      .Input(Random(t, c.shape, seed++, -50, 50))
                      .Input(Int64s(lens))
                      .Attr("batch_axis", Attribute::Int(c.batch_axis))
                      .Attr("time_axis", Attribute::Int(c.time_axis))
                      .MatchesCpu(0, 0))
          << DataTypeName(t) << " " << ShapeToString(c.shape) << " batch_axis " << c.batch_axis;
    }
}

// ---- CenterCropPad ----

TEST(GpuCenterCropPad, MatchesTheCpuReference) {
  uint32_t seed = 50;
  struct Case {
    Shape shape;
    std::vector<int64_t> target;
    std::vector<int64_t> axes;  // empty: every axis
  };
  const std::vector<Case> cases = {
      {{20, 10, 3}, {10, 7, 3}, {}},         {{10, 7, 3}, {20, 10, 3}, {}},       {{20, 8, 3}, {10, 10, 3}, {}},
      {{3, 20, 8}, {10, 9}, {1, 2}},         {{20, 8, 3}, {10, 9}, {0, 1}},       {{20, 8, 3}, {10, 9}, {-3, -2}},
      {{7}, {4}, {}},                        {{4}, {7}, {}},                      {{2, 3, 5, 4, 6}, {4, 2}, {4, 1}},
      {{3, 5}, {0, 5}, {}},                  {{5, 6, 7}, {5, 6, 7}, {}},
  };
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt32, DataType::kUInt8, DataType::kInt64})
    for (const Case& c : cases) {
      OneNode n("CenterCropPad");
      n.Input(Random(t, c.shape, seed++, -100, 100)).Const(Int64s(c.target));
      if (!c.axes.empty()) n.Attr("axes", Attribute::Ints(c.axes));
      EXPECT_TRUE(n.MatchesCpu(0, 0)) << DataTypeName(t) << " " << ShapeToString(c.shape) << " to "
                                      << ShapeToString(c.target);
    }
  // The target shape as a runtime input (known on the host when the layer runs).
  EXPECT_TRUE(OneNode("CenterCropPad")
                  .Input(Random(DataType::kFloat32, {9, 6}, 7))
                  .Input(Int64s({4, 11}))
                  .MatchesCpu(0, 0));
}

// ---- MaxUnpool ----

// Indices into the unpooled [N, C, spatial...]: each pooled position picks a random element of its window, so
// overlapping windows (stride < kernel) name some elements twice.
Tensor PoolIndices(const Shape& pooled, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                   const std::vector<int64_t>& pads, const Shape& unpooled, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(DataType::kInt64, pooled);
  const size_t r = kernel.size();
  int64_t volume = 1;
  for (int64_t d : unpooled) volume *= d;
  for (int64_t i = 0; i < t.numel(); ++i) {
    std::vector<int64_t> idx(pooled.size());
    for (size_t d = pooled.size(), rest = static_cast<size_t>(i); d-- > 0;) {
      idx[d] = static_cast<int64_t>(rest % static_cast<size_t>(pooled[d]));
      rest /= static_cast<size_t>(pooled[d]);
    }
    int64_t flat = idx[0] * unpooled[1] + idx[1];
    for (size_t d = 0; d < r; ++d) {
      int64_t pos = idx[2 + d] * strides[d] - pads[d] + static_cast<int64_t>(rng() % kernel[d]);
      pos = std::min(std::max<int64_t>(pos, 0), unpooled[2 + d] - 1);
      flat = flat * unpooled[2 + d] + pos;
    }
    t.data<int64_t>()[i] = std::min(flat, volume - 1);
  }
  return t;
}

TEST(GpuMaxUnpool, MatchesTheCpuReference) {
  uint32_t seed = 80;
  struct Case {
    Shape pooled;
    std::vector<int64_t> kernel, strides, pads;
    Shape output_shape;  // empty: inferred
  };
  const std::vector<Case> cases = {
      {{1, 1, 2, 2}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {}},
      {{1, 1, 2, 2}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1, 5, 5}},
      {{2, 3, 5, 7}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {}},             // overlapping windows
      {{2, 3, 5, 7}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {}},             // pads
      {{2, 3, 5, 7}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {2, 3, 9, 15}},  // smaller in one dim, larger in the other
      {{1, 2, 3, 4, 5}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}, {}},
      {{3, 4, 17}, {3}, {1}, {0, 0}, {}},
  };
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt32, DataType::kUInt8, DataType::kFloat64})
    for (const Case& c : cases) {
      const size_t r = c.kernel.size();
      Shape unpooled = {c.pooled[0], c.pooled[1]};
      for (size_t d = 0; d < r; ++d)
        unpooled.push_back((c.pooled[2 + d] - 1) * c.strides[d] + c.kernel[d] - c.pads[d] - c.pads[d + r]);
      OneNode n("MaxUnpool");
      n.Input(Random(t, c.pooled, seed++, -100, 100))
          .Input(PoolIndices(c.pooled, c.kernel, c.strides, c.pads, unpooled, seed++))
          .Attr("kernel_shape", Attribute::Ints(c.kernel))
          .Attr("strides", Attribute::Ints(c.strides))
          .Attr("pads", Attribute::Ints(c.pads));
      if (!c.output_shape.empty()) n.Const(Int64s(c.output_shape));
      EXPECT_TRUE(n.MatchesCpu(0, 0)) << DataTypeName(t) << " " << ShapeToString(c.pooled) << " output "
                                      << ShapeToString(c.output_shape);
    }
  // Many inputs naming few elements: the last index naming an element gives its value, as on the CPU.
  Tensor idx(DataType::kInt64, {1, 2, 4, 4});
  for (int64_t i = 0; i < idx.numel(); ++i) idx.data<int64_t>()[i] = (i * 7) % 5;
  EXPECT_TRUE(OneNode("MaxUnpool")
                  .Input(Random(DataType::kFloat32, {1, 2, 4, 4}, 3))
                  .Input(idx)
                  .Attr("kernel_shape", Attribute::Ints({2, 2}))
                  .Attr("strides", Attribute::Ints({2, 2}))
                  .MatchesCpu(0, 0));
}

// ---- Col2Im ----

TEST(GpuCol2Im, MatchesTheCpuReference) {
  uint32_t seed = 120;
  struct Case {
    int64_t n, c;
    std::vector<int64_t> image, block, strides, dilations, pads;  // empty: defaults
  };
  const std::vector<Case> cases = {
      {1, 1, {5, 5}, {1, 5}, {}, {}, {}},
      {2, 3, {5, 5}, {2, 2}, {}, {}, {}},
      {2, 2, {6, 7}, {3, 2}, {2, 2}, {}, {}},
      {1, 3, {9, 8}, {2, 3}, {1, 2}, {2, 1}, {1, 0, 1, 2}},
      {2, 2, {11}, {3}, {2}, {}, {1, 1}},
      {1, 2, {4, 5, 3}, {2, 2, 2}, {}, {}, {}},
      {3, 1, {7, 6}, {3, 3}, {2, 1}, {2, 2}, {2, 1, 2, 1}},
  };
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kFloat64, DataType::kInt32})
    for (const Case& c : cases) {
      const size_t r = c.image.size();
      const auto def = [&](const std::vector<int64_t>& v, int64_t x, size_t k) {
        return v.empty() ? std::vector<int64_t>(k, x) : v;
      };
      const auto strides = def(c.strides, 1, r), dil = def(c.dilations, 1, r), pads = def(c.pads, 0, 2 * r);
      int64_t block_volume = 1, positions = 1;
      for (size_t d = 0; d < r; ++d) {
        block_volume *= c.block[d];
        positions *= (c.image[d] + pads[d] + pads[d + r] - (dil[d] * (c.block[d] - 1) + 1)) / strides[d] + 1;
      }
      OneNode n("Col2Im");
      n.Input(Random(t, {c.n, c.c * block_volume, positions}, seed++, -4, 4))
          .Const(Int64s(c.image))
          .Const(Int64s(c.block));
      if (!c.strides.empty()) n.Attr("strides", Attribute::Ints(c.strides));
      if (!c.dilations.empty()) n.Attr("dilations", Attribute::Ints(c.dilations));
      if (!c.pads.empty()) n.Attr("pads", Attribute::Ints(c.pads));
      ::testing::AssertionResult r1 = t == DataType::kFloat16 ? n.ReferenceInFloat32().MatchesCpu(1e-2, 1e-2)
                                      : t == DataType::kFloat32 ? n.MatchesCpu(1e-5, 1e-5)
                                                                : n.MatchesCpu(0, 0);
      EXPECT_TRUE(r1) << DataTypeName(t) << " image " << ShapeToString(c.image) << " block "
                      << ShapeToString(c.block);
    }
}

}  // namespace
}  // namespace kiln::gputest
