// kiln.Reformat's CUDA layer (reformat.cu) against the CPU reference: the channels-last kernel (NCHW -> NHWC with
// at most 16 channels, padded with zeros, vector stores) and the general one (any permutation, rank up to 8 after
// merging). Both round as Cast does, so every result is compared exactly.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;
const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16, bf16 = DataType::kBFloat16;

::testing::AssertionResult Reformat(const Shape& shape, DataType from, DataType to, const Shape& perm, int64_t pad,
                                    uint32_t seed = 1) {
  OneNode n("Reformat", "kiln");
  n.Input(Random(from, shape, seed, -4, 4));
  n.Attr("to", Attribute::Int(static_cast<int64_t>(to)));
  n.Attr("perm", Attribute::Ints(perm));
  if (pad) n.Attr("kiln_pad_last", Attribute::Int(pad));
  return n.MatchesCpu(0, 0);
}

std::string Name(const Shape& s, DataType from, DataType to, const Shape& perm, int64_t pad) {
  return fmt::format("{} {} -> {} perm [{}] pad {}", ShapeToString(s), DataTypeName(from), DataTypeName(to),
                     fmt::join(perm, ","), pad);
}

TEST(GpuReformat, ChannelsLastMatchesCpu) {
  const Shape nhwc = {0, 2, 3, 1};
  const std::pair<DataType, DataType> types[] = {{f32, f16}, {f32, bf16}, {f16, f16}, {f32, f32}, {bf16, f16}, {f16, f32}};
  for (const auto& [from, to] : types)
    for (int64_t c : {1, 3})
      for (int64_t pad : {int64_t{0}, int64_t{4}, int64_t{8}, int64_t{16}}) {
        const Shape s = {3, c, 17, 13};
        SCOPED_TRACE(Name(s, from, to, nhwc, pad));
        EXPECT_TRUE(Reformat(s, from, to, nhwc, pad));
      }
  // Channel counts the vector stores do not cover (a padded size of 6: one value at a time), 16 channels, one image.
  for (const auto& [s, pad] : {std::pair<Shape, int64_t>{{2, 5, 7, 9}, 6}, {{2, 5, 7, 9}, 8}, {{2, 16, 5, 3}, 0},
                               {{1, 3, 31, 1}, 4}, {{4, 3, 1, 1}, 8}}) {
    SCOPED_TRACE(Name(s, f32, f16, nhwc, pad));
    EXPECT_TRUE(Reformat(s, f32, f16, nhwc, pad, 5));
  }
}

TEST(GpuReformat, ImageNetStemSizes) {
  for (int64_t pad : {4, 8}) {
    SCOPED_TRACE(pad);
    EXPECT_TRUE(Reformat({8, 3, 224, 224}, f32, f16, {0, 2, 3, 1}, pad, 3));
  }
  EXPECT_TRUE(Reformat({2, 3, 8, 64, 64}, f32, f16, {0, 2, 3, 4, 1}, 8, 4));  // NCDHW -> NDHWC merges D, H, W
}

TEST(GpuReformat, GeneralPathMatchesCpu) {
  struct Case {
    Shape shape;
    DataType from, to;
    Shape perm;
    int64_t pad;
  };
  const Case cases[] = {
      {{5, 6, 7}, f32, f16, {2, 0, 1}, 0},
      {{5, 6, 7}, f16, f32, {2, 0, 1}, 9},
      {{5, 6, 7}, bf16, bf16, {1, 0, 2}, 8},
      {{2, 3, 5, 7}, f32, bf16, {3, 1, 0, 2}, 6},
      {{2, 20, 5, 7}, f32, f16, {0, 2, 3, 1}, 24},          // more channels than the channels-last kernel takes
      {{2, 3, 4, 5, 6}, f32, f16, {4, 1, 3, 0, 2}, 8},      // rank 5
      {{2, 3, 4, 5, 6}, f16, bf16, {0, 4, 2, 3, 1}, 0},
      {{9, 33}, f32, f16, {0, 1}, 40},                      // rows padded, no transpose
      {{31}, f32, f16, {0}, 32},
      {{2, 2, 2, 2, 2, 2, 2, 2, 2, 3}, f32, f16, {1, 0, 2, 3, 4, 5, 6, 7, 9, 8}, 4},  // rank 10: merges to 5 dims
  };
  uint32_t seed = 11;
  for (const Case& c : cases) {
    SCOPED_TRACE(Name(c.shape, c.from, c.to, c.perm, c.pad));
    EXPECT_TRUE(Reformat(c.shape, c.from, c.to, c.perm, c.pad, seed++));
  }
}

}  // namespace
}  // namespace kiln::gputest
