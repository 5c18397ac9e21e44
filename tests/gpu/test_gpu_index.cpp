// Differential GPU tests of the index family: Gather, GatherElements, GatherND, ScatterElements, ScatterND,
// OneHot, NonZero, NonMaxSuppression, Resize.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using A = Attribute;
constexpr DataType kF32 = DataType::kFloat32, kF16 = DataType::kFloat16, kBF16 = DataType::kBFloat16;
constexpr DataType kI64 = DataType::kInt64, kI32 = DataType::kInt32, kI8 = DataType::kInt8, kU8 = DataType::kUInt8;
constexpr DataType kBool = DataType::kBool;

// Random indices in [-dim, dim - 1] (negative ones included).
Tensor Indices(DataType t, const std::vector<int64_t>& shape, int64_t dim, uint32_t seed) {
  return Random(t, shape, seed, -static_cast<double>(dim), static_cast<double>(dim) - 1);
}

int64_t NumElements(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// ---- Gather ----

TEST(GpuIndex, GatherEveryAxisAndIndexType) {
  const std::vector<int64_t> ds = {5, 7, 33};
  uint32_t seed = 1;
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    const int64_t dim = ds[(axis + 3) % 3];
    for (DataType it : {kI64, kI32}) {
      for (auto is : std::vector<std::vector<int64_t>>{{4}, {2, 3}, {}, {1}}) {
        EXPECT_TRUE(OneNode("Gather").Input(Random(kF32, ds, seed++)).Input(Indices(it, is, dim, seed++))
                        .Attr("axis", A::Int(axis)).MatchesCpu(0, 0))
            << "axis " << axis << " indices rank " << is.size();
      }
    }
  }
}

TEST(GpuIndex, GatherDtypesAndRowSizes) {
  uint32_t seed = 10;
  for (DataType dt : {kF32, kF16, kBF16, kI64, kI32, kI8, kU8, kBool}) {
    for (auto ds : std::vector<std::vector<int64_t>>{{9}, {6, 1}, {6, 3}, {11, 8}, {3, 5, 64}, {2, 3, 4, 5, 7}}) {
      EXPECT_TRUE(OneNode("Gather").Input(Random(dt, ds, seed++, -5, 5)).Input(Indices(kI64, {3, 2}, ds[0], seed++))
                      .MatchesCpu(0, 0))
          << DataTypeName(dt) << " " << ds.size();
    }
  }
}

TEST(GpuIndex, GatherEmbeddingLookup) {
  // BERT/GPT-2 style: [vocab, hidden] table, [batch, seq] token ids (the vectorized row-copy path).
  for (DataType dt : {kF32, kF16, kBF16}) {
    EXPECT_TRUE(OneNode("Gather").Const(Random(dt, {1000, 768}, 3)).Input(Random(kI64, {2, 37}, 4, 0, 999))
                    .MatchesCpu(0, 0));
    EXPECT_TRUE(OneNode("Gather").Const(Random(dt, {1000, 771}, 5)).Input(Random(kI32, {3, 5}, 6, 0, 999))
                    .MatchesCpu(0, 0));
  }
  // Constant indices (validated on the host) and a zero-sized gather.
  EXPECT_TRUE(OneNode("Gather").Input(Random(kF32, {4, 40}, 7)).Const(FromValues(kI64, {3}, {0, -1, 2}))
                  .Attr("axis", A::Int(0)).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("Gather").Input(Random(kF32, {4, 40}, 8)).Input(Tensor(kI64, {0})).MatchesCpu(0, 0));
}

TEST(GpuIndex, GatherOneLongRow) {
  // ViT's packed QKV split: a scalar index along the outer axis copies one row of megabytes, which the kernel
  // splits over many blocks (odd lengths: a partial last chunk, 2-byte and 16-byte units).
  for (DataType dt : {kF16, kF32}) {
    EXPECT_TRUE(OneNode("Gather").Input(Random(dt, {3, 197, 5, 768}, 9)).Const(FromValues(kI64, {}, {2}))
                    .Attr("axis", A::Int(0)).MatchesCpu(0, 0));
    EXPECT_TRUE(OneNode("Gather").Input(Random(dt, {3, 101, 3, 77}, 10)).Const(FromValues(kI64, {}, {-2}))
                    .Attr("axis", A::Int(0)).MatchesCpu(0, 0));
    EXPECT_TRUE(OneNode("Gather").Input(Random(dt, {2, 3, 4099}, 11)).Const(FromValues(kI64, {2}, {1, 0}))
                    .Attr("axis", A::Int(1)).MatchesCpu(0, 0));
  }
}

// ---- GatherElements / ScatterElements ----

TEST(GpuIndex, GatherElements) {
  uint32_t seed = 20;
  struct Case {
    std::vector<int64_t> ds, is;
    int64_t axis;
  };
  for (const Case& c : std::vector<Case>{{{7}, {12}, 0},
                                         {{4, 5}, {4, 9}, 1},
                                         {{4, 5, 6}, {3, 5, 6}, 0},
                                         {{4, 5, 6}, {2, 3, 11}, -1},
                                         {{2, 3, 4, 5, 6}, {2, 3, 7, 5, 6}, 2}}) {
    const int64_t dim = c.ds[(c.axis + c.ds.size()) % c.ds.size()];
    for (DataType dt : {kF32, kF16, kI64, kI8}) {
      for (DataType it : {kI64, kI32}) {
        EXPECT_TRUE(OneNode("GatherElements").Input(Random(dt, c.ds, seed++, -9, 9))
                        .Input(Indices(it, c.is, dim, seed++)).Attr("axis", A::Int(c.axis)).MatchesCpu(0, 0))
            << DataTypeName(dt) << " rank " << c.ds.size();
      }
    }
  }
}

// Indices of shape `is` along `axis` that are distinct within each line (a scatter without duplicates).
Tensor DistinctIndices(const std::vector<int64_t>& is, int64_t axis, int64_t dim, uint32_t seed) {
  Tensor t(kI64, is);
  std::mt19937 rng(seed);
  int64_t inner = 1;
  for (size_t d = axis + 1; d < is.size(); ++d) inner *= is[d];
  const int64_t len = is[axis], outer = NumElements(is) / (len * inner);
  std::vector<int64_t> perm(dim);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t j = 0; j < len; ++j) {
        const int64_t v = perm[j] - ((j % 2) ? dim : 0);  // some negative
        t.SetFromDouble((o * len + j) * inner + i, static_cast<double>(v));
      }
    }
  return t;
}

TEST(GpuIndex, ScatterElementsNoneAndReductions) {
  uint32_t seed = 40;
  struct Case {
    std::vector<int64_t> ds, is;
    int64_t axis;
  };
  for (const Case& c : std::vector<Case>{{{9}, {5}, 0}, {{4, 7}, {3, 5}, 1}, {{6, 5, 4}, {4, 5, 3}, 0},
                                         {{2, 3, 4, 5, 6}, {2, 2, 4, 5, 3}, -1}}) {
    const int64_t axis = (c.axis + c.ds.size()) % c.ds.size();
    for (DataType dt : {kF32, kF16, kBF16, kI32, kI64, kI8, kU8}) {
      EXPECT_TRUE(OneNode("ScatterElements").Input(Random(dt, c.ds, seed++, -9, 9))
                      .Input(DistinctIndices(c.is, axis, c.ds[axis], seed++))
                      .Input(Random(dt, c.is, seed++, -9, 9)).Attr("axis", A::Int(c.axis)).MatchesCpu(0, 0))
          << "none " << DataTypeName(dt);
    }
    for (const char* red : {"add", "mul", "max", "min"}) {
      // Duplicated indices: the reduction combines them (in any order).
      EXPECT_TRUE(OneNode("ScatterElements").Input(Random(kF32, c.ds, seed++, 0.5, 1.5))
                      .Input(Indices(kI64, c.is, c.ds[axis], seed++)).Input(Random(kF32, c.is, seed++, 0.5, 1.5))
                      .Attr("axis", A::Int(c.axis)).Attr("reduction", A::String(red)).MatchesCpu(1e-5, 1e-5))
          << red << " float32";
      for (DataType dt : {kI32, kI64, kI8, kU8}) {
        EXPECT_TRUE(OneNode("ScatterElements").Input(Random(dt, c.ds, seed++, 0, 3))
                        .Input(Indices(kI32, c.is, c.ds[axis], seed++)).Input(Random(dt, c.is, seed++, 0, 3))
                        .Attr("axis", A::Int(c.axis)).Attr("reduction", A::String(red)).MatchesCpu(0, 0))
            << red << " " << DataTypeName(dt);
      }
      for (DataType dt : {kF16, kBF16}) {
        EXPECT_TRUE(OneNode("ScatterElements").Input(Random(dt, c.ds, seed++, 0.5, 1.5))
                        .Input(Indices(kI64, c.is, c.ds[axis], seed++)).Input(Random(dt, c.is, seed++, 0.5, 1.5))
                        .Attr("axis", A::Int(c.axis)).Attr("reduction", A::String(red)).ReferenceInFloat32()
                        .MatchesCpu(3e-2, 3e-2))
            << red << " " << DataTypeName(dt);
      }
    }
  }
  // bool: add/max are or, mul/min are and. 30 bytes: the one-thread path; 32 bytes: the atomic path.
  for (const char* red : {"add", "mul", "max", "min"}) {
    for (int64_t cols : {6, 8}) {
      EXPECT_TRUE(OneNode("ScatterElements").Input(Random(kBool, {5, cols}, 90)).Input(Indices(kI64, {5, 4}, cols, 91))
                      .Input(Random(kBool, {5, 4}, 92)).Attr("axis", A::Int(1)).Attr("reduction", A::String(red))
                      .MatchesCpu(0, 0))
          << red << " bool";
    }
  }
}

// ---- GatherND / ScatterND ----

TEST(GpuIndex, GatherND) {
  uint32_t seed = 60;
  struct Case {
    std::vector<int64_t> ds, is;
    int64_t b;
  };
  for (const Case& c : std::vector<Case>{{{7}, {5, 1}, 0},
                                         {{4, 5}, {3, 2}, 0},
                                         {{4, 5, 6}, {2, 3, 1}, 0},
                                         {{4, 5, 6}, {7, 2}, 0},
                                         {{2, 3, 4, 5}, {2, 6, 2}, 1},
                                         {{2, 3, 4, 64}, {2, 3, 5, 1}, 2},
                                         {{2, 3, 4, 5, 6}, {2, 3, 3}, 1}}) {
    // Index component j lies in [-dim, dim) of data axis b + j.
    Tensor idx(kI64, c.is);
    std::mt19937 rng(seed++);
    const int64_t k = c.is.back();
    for (int64_t e = 0; e < idx.numel(); ++e) {
      const int64_t dim = c.ds[c.b + e % k];
      idx.SetFromDouble(e, static_cast<double>(std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng)));
    }
    for (DataType dt : {kF32, kF16, kI64, kU8}) {
      EXPECT_TRUE(OneNode("GatherND").Input(Random(dt, c.ds, seed++, -9, 9)).Input(idx)
                      .Attr("batch_dims", A::Int(c.b)).MatchesCpu(0, 0))
          << DataTypeName(dt) << " data rank " << c.ds.size() << " b " << c.b;
    }
  }
}

TEST(GpuIndex, ScatterND) {
  uint32_t seed = 80;
  // k = 1: distinct rows (reduction none); k = 2; k = 3 (element-wise).
  EXPECT_TRUE(OneNode("ScatterND").Input(Random(kF32, {6, 5, 4}, seed++)).Input(FromValues(kI64, {3, 1}, {4, -6, 2}))
                  .Input(Random(kF32, {3, 5, 4}, seed++)).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("ScatterND").Input(Random(kF16, {6, 5, 33}, seed++))
                  .Input(FromValues(kI64, {2, 2, 2}, {0, 0, 5, 4, -1, 3, 2, -5}))
                  .Input(Random(kF16, {2, 2, 33}, seed++))
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("ScatterND").Input(Random(kI64, {3, 4, 5}, seed++, -9, 9))
                  .Input(FromValues(kI64, {4, 3}, {0, 0, 0, 2, 3, 4, 1, -1, 2, -3, 0, 1}))
                  .Input(Random(kI64, {4}, seed++, -9, 9)).MatchesCpu(0, 0));
  for (const char* red : {"add", "mul", "max", "min"}) {
    // Duplicated index rows.
    Tensor idx = FromValues(kI64, {5, 2}, {1, 2, 0, 0, 1, 2, 3, -1, 1, 2});
    EXPECT_TRUE(OneNode("ScatterND").Input(Random(kF32, {4, 3, 7}, seed++, 0.5, 1.5)).Input(idx)
                    .Input(Random(kF32, {5, 7}, seed++, 0.5, 1.5)).Attr("reduction", A::String(red))
                    .MatchesCpu(1e-5, 1e-5))
        << red;
    EXPECT_TRUE(OneNode("ScatterND").Input(Random(kI32, {4, 3, 7}, seed++, -4, 4)).Input(idx)
                    .Input(Random(kI32, {5, 7}, seed++, -4, 4)).Attr("reduction", A::String(red)).MatchesCpu(0, 0))
        << red << " int32";
    EXPECT_TRUE(OneNode("ScatterND").Input(Random(kBF16, {4, 3, 7}, seed++, 0.5, 1.5)).Input(idx)
                    .Input(Random(kBF16, {5, 7}, seed++, 0.5, 1.5)).Attr("reduction", A::String(red))
                    .ReferenceInFloat32().MatchesCpu(3e-2, 3e-2))
        << red << " bfloat16";
  }
}

// ---- OneHot ----

TEST(GpuIndex, OneHot) {
  uint32_t seed = 100;
  for (int64_t axis : {-1, 0, 1, 2}) {
    // Indices in [-depth - 2, depth + 2]: some out of range (all-off rows).
    EXPECT_TRUE(OneNode("OneHot").Input(Random(kI64, {3, 4}, seed++, -9, 9)).Const(FromValues(kI64, {}, {7}))
                    .Const(FromValues(kF32, {2}, {0.25, 2.5})).Attr("axis", A::Int(axis)).MatchesCpu(0, 0))
        << "axis " << axis;
  }
  EXPECT_TRUE(OneNode("OneHot").Input(Random(kI32, {33}, seed++, -40, 40)).Const(FromValues(kI32, {1}, {37}))
                  .Const(FromValues(kI32, {2}, {-1, 5})).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("OneHot").Input(Random(kF32, {2, 3, 5}, seed++, -6, 6)).Const(FromValues(kF32, {}, {5}))
                  .Const(FromValues(kF16, {2}, {0, 1})).Attr("axis", A::Int(1)).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("OneHot").Input(Random(kU8, {1000}, seed++, 0, 12)).Const(FromValues(kI64, {}, {10}))
                  .Const(FromValues(kI64, {2}, {3, 9})).MatchesCpu(0, 0));
}

// ---- NonZero ----

Tensor Sparse(DataType dt, const std::vector<int64_t>& shape, uint32_t seed) {
  Tensor t = Random(dt, shape, seed, -2, 2);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i)
    if (rng() % 2) t.SetFromDouble(i, 0);
  return t;
}

TEST(GpuIndex, NonZero) {
  uint32_t seed = 120;
  for (auto shape : std::vector<std::vector<int64_t>>{{1}, {7}, {5, 33}, {3, 4, 5}, {2, 3, 1, 4, 5}, {1100}}) {
    for (DataType dt : {kF32, kF16, kBF16, kI64, kI32, kI8, kU8, kBool}) {
      EXPECT_TRUE(OneNode("NonZero").Input(Sparse(dt, shape, seed++)).MatchesCpu(0, 0))
          << DataTypeName(dt) << " rank " << shape.size();
    }
  }
  EXPECT_TRUE(OneNode("NonZero").Input(Tensor(kF32, {4, 5})).MatchesCpu(0, 0));  // all zeros
  EXPECT_TRUE(OneNode("NonZero").Input(Tensor(kF32, {0, 5})).MatchesCpu(0, 0));  // empty
  EXPECT_TRUE(OneNode("NonZero").Input(FromValues(kF32, {}, {3})).MatchesCpu(0, 0));  // scalar
  EXPECT_TRUE(OneNode("NonZero").Input(Random(kF32, {300, 301}, seed++, 0.5, 1)).MatchesCpu(0, 0));  // dense
}

// ---- NonMaxSuppression ----

// [batch, n, 4] corner boxes (any diagonal) or [cx, cy, w, h] boxes, clustered so that many overlap.
Tensor Boxes(int64_t batch, int64_t n, bool center, uint32_t seed) {
  Tensor t(kF32, {batch, n, 4});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pos(0.f, 4.f), size(0.5f, 2.f);
  for (int64_t i = 0; i < batch * n; ++i) {
    const float x = pos(rng), y = pos(rng), w = size(rng), h = size(rng);
    const float v[4] = {center ? x : y, center ? y : x, center ? w : y + (rng() % 2 ? h : -h),
                        center ? h : x + (rng() % 2 ? w : -w)};
    for (int k = 0; k < 4; ++k) t.SetFromDouble(i * 4 + k, v[k]);
  }
  return t;
}

TEST(GpuIndex, NonMaxSuppression) {
  uint32_t seed = 140;
  for (bool center : {false, true}) {
    for (auto [batch, classes, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {1, 1, 7},
                                                                                         {2, 3, 50}, {1, 4, 600}}) {
      for (int64_t max_out : {1, 5, 1000}) {
        OneNode node("NonMaxSuppression");
        node.Input(Boxes(batch, n, center, seed++)).Input(Random(kF32, {batch, classes, n}, seed++, 0, 1))
            .Const(FromValues(kI64, {1}, {static_cast<double>(max_out)})).Const(FromValues(kF32, {1}, {0.4}))
            .Attr("center_point_box", A::Int(center ? 1 : 0));
        EXPECT_TRUE(node.MatchesCpu(0, 0)) << "no score threshold, n " << n << " max " << max_out;
        OneNode with_thr("NonMaxSuppression");
        with_thr.Input(Boxes(batch, n, center, seed++)).Input(Random(kF32, {batch, classes, n}, seed++, 0, 1))
            .Const(FromValues(kI64, {1}, {static_cast<double>(max_out)})).Const(FromValues(kF32, {1}, {0.5}))
            .Const(FromValues(kF32, {1}, {0.3})).Attr("center_point_box", A::Int(center ? 1 : 0));
        EXPECT_TRUE(with_thr.MatchesCpu(0, 0)) << "score threshold, n " << n << " max " << max_out;
      }
    }
  }
  // Half-precision inputs (the reference runs on their float32 copies, which are the same values), and an omitted
  // max_output_boxes_per_class (nothing selected).
  EXPECT_TRUE(OneNode("NonMaxSuppression").Input(CastTensor(Boxes(2, 40, false, 200), kF16))
                  .Input(Random(kF16, {2, 3, 40}, 201, 0, 1)).Const(FromValues(kI64, {1}, {10}))
                  .Const(FromValues(kF32, {1}, {0.5})).ReferenceInFloat32().MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("NonMaxSuppression").Input(Boxes(1, 10, false, 202)).Input(Random(kF32, {1, 2, 10}, 203, 0, 1))
                  .MatchesCpu(0, 0));
}

// ---- Resize ----

OneNode ResizeScales(const Tensor& x, const std::vector<double>& scales) {
  OneNode n("Resize");
  n.Input(x).Omitted().Const(FromValues(kF32, {static_cast<int64_t>(scales.size())}, scales));
  return n;
}

OneNode ResizeSizes(const Tensor& x, const std::vector<double>& sizes) {
  OneNode n("Resize");
  n.Input(x).Omitted().Omitted().Const(FromValues(kI64, {static_cast<int64_t>(sizes.size())}, sizes));
  return n;
}

TEST(GpuIndex, ResizeNearestUpsampleFastPath) {
  // YOLO: Upsample x2 (asymmetric + floor), and the default half_pixel + round_prefer_floor which maps the same.
  for (DataType dt : {kF32, kF16, kBF16, kI8, kI64}) {
    EXPECT_TRUE(ResizeScales(Random(dt, {1, 3, 7, 9}, 1, -5, 5), {1, 1, 2, 2})
                    .Attr("mode", A::String("nearest")).Attr("coordinate_transformation_mode", A::String("asymmetric"))
                    .Attr("nearest_mode", A::String("floor")).MatchesCpu(0, 0))
        << DataTypeName(dt);
    EXPECT_TRUE(ResizeScales(Random(dt, {2, 5, 13, 20}, 2, -5, 5), {1, 1, 2, 3}).MatchesCpu(0, 0)) << DataTypeName(dt);
  }
  EXPECT_TRUE(ResizeScales(Random(kF32, {33}, 3), {4}).MatchesCpu(0, 0));
  EXPECT_TRUE(ResizeSizes(Random(kF32, {1, 16, 20, 20}, 4), {1, 16, 40, 40}).MatchesCpu(0, 0));
}

TEST(GpuIndex, ResizeNearestModes) {
  uint32_t seed = 20;
  for (const char* ctm : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"}) {
    for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      for (auto sc : std::vector<std::vector<double>>{{1, 1, 0.5, 0.6}, {1, 2, 1.7, 3.1}, {1, 1, 1, 0.13}}) {
        EXPECT_TRUE(ResizeScales(Random(kF32, {2, 3, 11, 16}, seed++), sc)
                        .Attr("coordinate_transformation_mode", A::String(ctm)).Attr("nearest_mode", A::String(nm))
                        .MatchesCpu(0, 0))
            << ctm << " " << nm << " " << sc[2];
      }
    }
  }
  EXPECT_TRUE(ResizeSizes(Random(kU8, {3, 7, 5}, seed++, 0, 255), {5, 13, 1}).MatchesCpu(0, 0));
  // Only some axes (the axes attribute).
  EXPECT_TRUE(ResizeScales(Random(kF32, {2, 3, 9, 10}, seed++), {1.5, 0.7})
                  .Attr("axes", A::Ints({-1, 2})).MatchesCpu(0, 0));
}

TEST(GpuIndex, ResizeLinearAndCubic) {
  uint32_t seed = 40;
  for (const char* mode : {"linear", "cubic"}) {
    for (const char* ctm : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                            "half_pixel_symmetric"}) {
      for (auto sc : std::vector<std::vector<double>>{{1, 1, 2, 2}, {1, 1, 0.5, 0.75}, {1, 1, 1.3, 2.9}}) {
        EXPECT_TRUE(ResizeScales(Random(kF32, {2, 3, 9, 16}, seed++), sc).Attr("mode", A::String(mode))
                        .Attr("coordinate_transformation_mode", A::String(ctm)).MatchesCpu(2e-5, 2e-5))
            << mode << " " << ctm << " " << sc[2];
      }
    }
    for (DataType dt : {kF16, kBF16}) {
      EXPECT_TRUE(ResizeScales(Random(dt, {1, 4, 13, 7}, seed++), {1, 1, 2.5, 0.6}).Attr("mode", A::String(mode))
                      .ReferenceInFloat32().MatchesCpu(2e-2, 2e-2))
          << mode << " " << DataTypeName(dt);
    }
    EXPECT_TRUE(ResizeSizes(Random(kF32, {1, 2, 10, 12}, seed++), {1, 2, 23, 5}).Attr("mode", A::String(mode))
                    .MatchesCpu(2e-5, 2e-5));
    // Cubic options, antialias, exclude_outside.
    EXPECT_TRUE(ResizeScales(Random(kF32, {1, 2, 17, 19}, seed++), {1, 1, 0.4, 0.3}).Attr("mode", A::String(mode))
                    .Attr("antialias", A::Int(1)).MatchesCpu(2e-5, 2e-5))
        << mode << " antialias";
    EXPECT_TRUE(ResizeScales(Random(kF32, {1, 2, 8, 9}, seed++), {1, 1, 1.8, 0.7}).Attr("mode", A::String(mode))
                    .Attr("exclude_outside", A::Int(1)).Attr("cubic_coeff_a", A::Float(-0.5f)).MatchesCpu(2e-5, 2e-5))
        << mode << " exclude_outside";
  }
  // Trilinear on a rank-5 tensor, and a rank-1 resize.
  EXPECT_TRUE(ResizeScales(Random(kF32, {1, 2, 3, 4, 5}, seed++), {1, 1, 2, 1.5, 0.5}).Attr("mode", A::String("linear"))
                  .MatchesCpu(2e-5, 2e-5));
  EXPECT_TRUE(ResizeScales(Random(kF32, {1001}, seed++), {0.37}).Attr("mode", A::String("linear"))
                  .MatchesCpu(2e-5, 2e-5));
}

TEST(GpuIndex, ResizeTfCropAndResize) {
  uint32_t seed = 60;
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    OneNode n("Resize");
    n.Input(Random(kF32, {1, 2, 10, 12}, seed++))
        .Const(FromValues(kF32, {8}, {0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3}))
        .Const(FromValues(kF32, {4}, {1, 1, 1.6, 0.8}))
        .Attr("mode", A::String(mode)).Attr("coordinate_transformation_mode", A::String("tf_crop_and_resize"))
        .Attr("extrapolation_value", A::Float(7.5f));
    EXPECT_TRUE(n.MatchesCpu(2e-5, 2e-5)) << mode;
  }
}

// Model-sized cases: GPT-2 embedding rows, YOLO upsampling and NMS, bilinear upsampling, big NonZero and ScatterND.
TEST(GpuIndex, ModelSizedShapes) {
  EXPECT_TRUE(OneNode("Gather").Const(Random(kF16, {30000, 128}, 1)).Input(Random(kI64, {4, 512}, 2, 0, 29999))
                  .MatchesCpu(0, 0));
  EXPECT_TRUE(ResizeScales(Random(kF16, {2, 64, 40, 40}, 3), {1, 1, 2, 2}).Attr("mode", A::String("nearest"))
                  .Attr("coordinate_transformation_mode", A::String("asymmetric"))
                  .Attr("nearest_mode", A::String("floor")).MatchesCpu(0, 0));
  EXPECT_TRUE(ResizeScales(Random(kF32, {1, 8, 60, 80}, 4), {1, 1, 2, 2}).Attr("mode", A::String("linear"))
                  .Attr("coordinate_transformation_mode", A::String("align_corners")).MatchesCpu(2e-5, 2e-5));
  EXPECT_TRUE(OneNode("NonZero").Input(Sparse(kF32, {1 << 20}, 5)).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("NonMaxSuppression").Input(Boxes(1, 1000, true, 6)).Input(Random(kF32, {1, 80, 1000}, 7, 0, 1))
                  .Const(FromValues(kI64, {1}, {100})).Const(FromValues(kF32, {1}, {0.5}))
                  .Const(FromValues(kF32, {1}, {0.3})).Attr("center_point_box", A::Int(1)).MatchesCpu(0, 0));
  EXPECT_TRUE(OneNode("ScatterND").Input(Random(kF32, {1000, 64}, 8)).Input(Random(kI64, {5000, 1}, 9, -1000, 999))
                  .Input(Random(kF32, {5000, 64}, 10)).Attr("reduction", A::String("add")).MatchesCpu(1e-4, 1e-4));
}

}  // namespace
}  // namespace kiln::gputest
