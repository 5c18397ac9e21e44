// Differential tests of the CUDA kiln.Attention layers (tactics attn.simt and attn.mma) against the CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <cstdio>

#include "backends/cuda/attention_kernels.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

constexpr const char* kSimt = "attn.simt";
constexpr const char* kMma = "attn.mma";
const DataType kLowFloats[] = {DataType::kFloat16, DataType::kBFloat16};
const char* const kMmaWarps[] = {"attn.mma.w1", "attn.mma.w2", "attn.mma.w4", "attn.mma.w8"};  // forced block sizes

// [.., a, b, c] -> [.., b, a, c]: the physical shape of a logical operand given in the "BSHD" layout.
std::vector<int64_t> SwapHead(std::vector<int64_t> s) {
  std::swap(s[s.size() - 3], s[s.size() - 2]);
  return s;
}

// One Attention case. K's shape is given as [.., Sk, d] and transposed to [.., d, Sk] when k_transposed. Shapes
// are logical; a *_bshd operand is fed (the output produced) with axes -3 and -2 swapped, as kiln_*_layout=BSHD.
struct Attn {
  bool q_bshd = false, k_bshd = false, v_bshd = false, out_bshd = false;
  DataType dt = DataType::kFloat32;
  std::vector<int64_t> q, k, v;
  bool k_transposed = false;
  float scale = -1.f;  // < 0: 1 / sqrt(d)
  std::optional<Tensor> mask, keep;
  float fill = 0.f;
  bool keep_if_true = true, where_first = false, nan_to_zero = false;
  uint32_t seed = 1;
  std::string tactic = kSimt;
  // kiln_q_*: the output written quantized (plan/fold_quantized_casts.cpp).
  std::optional<DataType> q_out;
  float q_scale = 0.01f;
  int64_t q_zero_point = 0;

  ::testing::AssertionResult Check() const {
    OneNode n("Attention", "kiln");
    std::vector<int64_t> ks = k;
    if (k_transposed) std::swap(ks[ks.size() - 1], ks[ks.size() - 2]);
    n.Input(Random(dt, q_bshd ? SwapHead(q) : q, seed, -2, 2))
        .Input(Random(dt, k_bshd ? SwapHead(ks) : ks, seed + 1, -2, 2))
        .Input(Random(dt, v_bshd ? SwapHead(v) : v, seed + 2));
    if (q_bshd) n.Attr("kiln_q_layout", Attribute::String("BSHD"));
    if (k_bshd) n.Attr("kiln_k_layout", Attribute::String("BSHD"));
    if (v_bshd) n.Attr("kiln_v_layout", Attribute::String("BSHD"));
    if (out_bshd) n.Attr("kiln_out_layout", Attribute::String("BSHD"));
    if (mask) n.Input(*mask);
    else if (keep) n.Omitted();
    if (keep) n.Input(*keep);
    const float s = scale >= 0 ? scale : 1.f / std::sqrt(static_cast<float>(q.back()));
    n.Attr("scale", Attribute::Float(s)).Attr("kiln_k_transposed", Attribute::Int(k_transposed ? 1 : 0));
    if (keep) {
      n.Attr("kiln_mask_fill", Attribute::Float(fill))
          .Attr("kiln_keep_if_true", Attribute::Int(keep_if_true ? 1 : 0))
          .Attr("kiln_where_first", Attribute::Int(where_first ? 1 : 0));
    }
    if (nan_to_zero) n.Attr("kiln_nan_to_zero", Attribute::Int(1));
    n.Tactic(tactic);
    if (q_out) {
      // The CPU computes in the storage type as the GPU does (Y rounded to it, then quantized); the kernels' sums
      // and exponentials differ from the CPU's in the last bits, which moves a few codes by one step.
      n.Attr("kiln_q_type", Attribute::Int(static_cast<int64_t>(*q_out)))
          .Attr("kiln_q_scale", Attribute::Float(q_scale))
          .Attr("kiln_q_zero_point", Attribute::Int(q_zero_point))
          .IntegersOneOff(0.05);
      // Float8 by value: near zero its codes resolve far finer than the kernels' agreement (about 1e-3 of Y for
      // float16, 4e-3 for bfloat16); elsewhere within a step (1/8) and a half.
      if (*q_out == DataType::kFloat8E4M3FN)
        return n.Float8ByValue().MatchesCpu((dt == DataType::kBFloat16 ? 8e-3 : 2e-3) / q_scale, 0.19);
      return n.MatchesCpu(0, 0);
    }
    if (dt != DataType::kFloat32) n.ReferenceInFloat32();
    const double tol = dt == DataType::kFloat32 ? 1e-4 : 2e-2;
    return n.MatchesCpu(tol, tol);
  }
};

std::string Name(const Attn& a) {
  return std::string(DataTypeName(a.dt)) + " " + a.tactic + " Q" + ShapeToString(a.q) + " K" + ShapeToString(a.k) +
         " V" + ShapeToString(a.v) + (a.k_transposed ? " K^T" : "") + (a.q_bshd ? " q:BSHD" : "") +
         (a.k_bshd ? " k:BSHD" : "") + (a.v_bshd ? " v:BSHD" : "") + (a.out_bshd ? " out:BSHD" : "");
}

// Every (low float type, tactic) pair plus float32 on SIMT.
std::vector<std::pair<DataType, std::string>> AllConfigs() {
  std::vector<std::pair<DataType, std::string>> r = {{DataType::kFloat32, kSimt}};
  for (DataType t : kLowFloats) {
    r.push_back({t, kSimt});
    r.push_back({t, kMma});
  }
  return r;
}

// BERT-style additive mask [b, 1, 1, sk]: 0 for the first len[b] keys, -10000 after.
Tensor PaddingMask(DataType dt, const std::vector<int64_t>& lens, int64_t sk) {
  const int64_t b = static_cast<int64_t>(lens.size());
  std::vector<double> vals(b * sk);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < sk; ++j) vals[i * sk + j] = j < lens[i] ? 0.0 : -10000.0;
  return FromValues(dt, {b, 1, 1, sk}, vals);
}

// Bool keep mask [1, 1, sq, sk]: keep(i, j) = j <= i + shift (causal when shift = sk - sq).
Tensor CausalKeep(int64_t sq, int64_t sk, int64_t shift) {
  std::vector<double> vals(sq * sk);
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) vals[i * sk + j] = j <= i + shift ? 1.0 : 0.0;
  return FromValues(DataType::kBool, {1, 1, sq, sk}, vals);
}

// Q, K and V packed in one [B, S, 3, H, D] tensor (kiln_*_layout = BS3HD, as fuse-qkv-projection makes them),
// the output BSHD, with and without BERT's padding mask.
TEST(GpuAttention, PackedQkvBs3hd) {
  struct Case {
    int64_t b, s, h, d;
  };
  for (const Case c : {Case{2, 77, 3, 64}, Case{1, 130, 2, 32}, Case{4, 128, 12, 64}})
    for (const auto& [dt, tactic] : AllConfigs())
      for (bool masked : {false, true}) {
        OneNode n("Attention", "kiln");
        const Tensor packed = Random(dt, {c.b, c.s, 3, c.h, c.d}, 7, -2, 2);
        n.Input(packed).Input(packed).Input(packed);
        for (const char* l : {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout"}) n.Attr(l, Attribute::String("BS3HD"));
        n.Attr("kiln_out_layout", Attribute::String("BSHD"));
        std::vector<int64_t> lens(c.b);
        for (int64_t i = 0; i < c.b; ++i) lens[i] = c.s - 5 * i;
        if (masked) n.Input(PaddingMask(dt, lens, c.s));
        n.Attr("scale", Attribute::Float(1.f / std::sqrt(static_cast<float>(c.d)))).Tactic(tactic);
        if (dt != DataType::kFloat32) n.ReferenceInFloat32();
        const double tol = dt == DataType::kFloat32 ? 1e-4 : 2e-2;
        EXPECT_TRUE(n.MatchesCpu(tol, tol)) << DataTypeName(dt) << " " << tactic << " " << c.b << "x" << c.s << "x3x"
                                            << c.h << "x" << c.d << (masked ? " masked" : "");
      }
}

// Swin's shifted windows as expose-window-attention and fuse-qkv-projection leave them: Q, K, V packed
// [B, nW, N, 3, H, D] (two batch dims), the relative-position bias and window mask as one additive constant
// [1, nW, H, N, N] broadcast over B, the output BSHD.
TEST(GpuAttention, WindowBatchPackedWithPerWindowMask) {
  struct Case {
    int64_t b, nw, n, h, d;
  };
  for (const Case c : {Case{2, 4, 49, 3, 32}, Case{3, 16, 49, 6, 32}, Case{1, 5, 17, 2, 64}})
    for (const auto& [dt, tactic] : AllConfigs()) {
      OneNode n("Attention", "kiln");
      const Tensor packed = Random(dt, {c.b, c.nw, c.n, 3, c.h, c.d}, 11, -2, 2);
      n.Input(packed).Input(packed).Input(packed).Input(Random(dt, {1, c.nw, c.h, c.n, c.n}, 12, -4, 1));
      for (const char* l : {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout"}) n.Attr(l, Attribute::String("BS3HD"));
      n.Attr("kiln_out_layout", Attribute::String("BSHD"));
      n.Attr("scale", Attribute::Float(1.f / std::sqrt(static_cast<float>(c.d)))).Tactic(tactic);
      if (dt != DataType::kFloat32) n.ReferenceInFloat32();
      const double tol = dt == DataType::kFloat32 ? 1e-4 : 2e-2;
      EXPECT_TRUE(n.MatchesCpu(tol, tol)) << DataTypeName(dt) << " " << tactic << " " << c.b << "x" << c.nw << "x"
                                          << c.n << "x3x" << c.h << "x" << c.d;
    }
}

TEST(GpuAttention, Float32SequenceLengthsAndHeadSizes) {
  for (int64_t s : {1, 7, 77, 128, 197})
    for (int64_t d : {32, 64, 80, 128, 17, 100, 256}) {
      Attn a;
      a.q = a.k = a.v = {2, 3, s, d};
      a.seed = static_cast<uint32_t>(s * 1000 + d);
      EXPECT_TRUE(a.Check()) << Name(a);
    }
  Attn big;
  big.q = big.k = big.v = {1, 2, 1000, 64};
  EXPECT_TRUE(big.Check()) << Name(big);
}

TEST(GpuAttention, HalfAndBFloat16EveryTactic) {
  for (DataType dt : kLowFloats)
    for (const char* tactic : {kSimt, kMma})
      for (int64_t s : {1, 7, 77, 128, 197})
        for (int64_t d : {32, 64, 80, 96, 128}) {
          Attn a;
          a.dt = dt;
          a.tactic = tactic;
          a.q = a.k = a.v = {2, 3, s, d};
          a.seed = static_cast<uint32_t>(s * 1000 + d);
          EXPECT_TRUE(a.Check()) << Name(a);
        }
}

TEST(GpuAttention, LongSequencesAndOtherHeadSizes) {
  for (auto [dt, tactic] : AllConfigs()) {
    Attn a;
    a.dt = dt;
    a.tactic = tactic;
    a.q = a.k = a.v = {1, 2, 1000, 64};
    EXPECT_TRUE(a.Check()) << Name(a);
    // Head sizes the tensor-core kernel does not take (the mma layer runs them on the SIMT kernel).
    for (int64_t d : {8, 48, 200, 256}) {
      a.q = a.k = a.v = {2, 2, 33, d};
      EXPECT_TRUE(a.Check()) << Name(a);
    }
  }
}

TEST(GpuAttention, CrossLengthsAndValueHeadSize) {
  for (auto [dt, tactic] : AllConfigs()) {
    Attn a;
    a.dt = dt;
    a.tactic = tactic;
    a.q = {2, 5, 33, 64};
    a.k = {2, 5, 70, 64};
    a.v = {2, 5, 70, 64};
    EXPECT_TRUE(a.Check()) << Name(a);
    a.q = {3, 130, 32};
    a.k = {3, 9, 32};
    a.v = {3, 9, 32};
    EXPECT_TRUE(a.Check()) << Name(a);
    a.q = {2, 5, 33, 48};
    a.k = {2, 5, 70, 48};
    a.v = {2, 5, 70, 24};  // dv != d
    EXPECT_TRUE(a.Check()) << Name(a);
  }
}

TEST(GpuAttention, RanksAndBroadcastBatchDims) {
  for (auto [dt, tactic] : AllConfigs()) {
    Attn a;
    a.dt = dt;
    a.tactic = tactic;
    a.q = {7, 64};  // rank 2: no batch dims
    a.k = {9, 64};
    a.v = {9, 64};
    EXPECT_TRUE(a.Check()) << Name(a);
    a.q = {4, 19, 32};  // rank 3
    a.k = a.v = {4, 23, 32};
    EXPECT_TRUE(a.Check()) << Name(a);
    a.q = {2, 1, 4, 19, 32};  // rank 5, batch dims broadcast to [2, 3, 4]
    a.k = {1, 3, 4, 23, 32};
    a.v = {3, 1, 23, 32};
    EXPECT_TRUE(a.Check()) << Name(a);
    a.q = {2, 3, 17, 64};  // shared K/V across the batch (rank 2 K and V)
    a.k = a.v = {40, 64};
    EXPECT_TRUE(a.Check()) << Name(a);
    a.q = {1, 17, 64};  // one query stack against many K/V
    a.k = a.v = {5, 40, 64};
    EXPECT_TRUE(a.Check()) << Name(a);
  }
}

TEST(GpuAttention, KTransposed) {
  for (auto [dt, tactic] : AllConfigs())
    for (int64_t s : {1, 7, 77, 197}) {
      Attn a;
      a.dt = dt;
      a.tactic = tactic;
      a.k_transposed = true;
      a.q = {2, 3, s, 64};
      a.k = a.v = {2, 3, s + 3, 64};
      EXPECT_TRUE(a.Check()) << Name(a);
      a.q = {2, 1, s, 80};  // broadcast batch dims with K^T
      a.k = a.v = {1, 3, s, 80};
      EXPECT_TRUE(a.Check()) << Name(a);
    }
}

TEST(GpuAttention, AdditiveMasks) {
  for (auto [dt, tactic] : AllConfigs()) {
    Attn a;
    a.dt = dt;
    a.tactic = tactic;
    a.q = a.k = a.v = {3, 4, 77, 64};
    a.mask = PaddingMask(dt, {77, 30, 1}, 77);  // BERT: [b, 1, 1, sk]
    EXPECT_TRUE(a.Check()) << Name(a) << " padding mask";
    a.mask = Random(dt, {3, 4, 77, 77}, 11, -3, 3);  // full mask
    EXPECT_TRUE(a.Check()) << Name(a) << " full mask";
    a.mask = Random(dt, {77, 77}, 12, -3, 3);  // [sq, sk]
    EXPECT_TRUE(a.Check()) << Name(a) << " [sq, sk] mask";
    a.mask = Random(dt, {1, 4, 1, 77}, 13, -3, 3);  // per head and key
    EXPECT_TRUE(a.Check()) << Name(a) << " [1, h, 1, sk] mask";
    a.mask = Random(dt, {77, 1}, 14, -3, 3);  // per query row
    EXPECT_TRUE(a.Check()) << Name(a) << " [sq, 1] mask";
    a.mask = Random(dt, {1}, 15, -3, 3);  // one value
    EXPECT_TRUE(a.Check()) << Name(a) << " [1] mask";
    a.q = {2, 3, 130, 32};  // more than one row block and key tile
    a.k = a.v = {2, 3, 150, 32};
    a.mask = Random(dt, {2, 1, 130, 150}, 16, -3, 3);
    EXPECT_TRUE(a.Check()) << Name(a) << " [b, 1, sq, sk] mask";
  }
}

TEST(GpuAttention, KeepMasks) {
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [dt, tactic] : AllConfigs())
    for (int64_t s : {7, 77, 130}) {
      Attn a;
      a.dt = dt;
      a.tactic = tactic;
      a.q = a.k = a.v = {2, 3, s, 64};
      a.keep = CausalKeep(s, s, 0);  // GPT-2: Where(causal, S, -inf)
      a.fill = -inf;
      EXPECT_TRUE(a.Check()) << Name(a) << " causal -inf";
      a.fill = -10000.f;
      EXPECT_TRUE(a.Check()) << Name(a) << " causal -1e4";
      a.fill = std::numeric_limits<float>::lowest();
      EXPECT_TRUE(a.Check()) << Name(a) << " causal lowest";
      a.keep_if_true = false;  // Where(cond, fill, S)
      a.keep = CausalKeep(s, s, -1);  // cond = j < i: keeps the upper triangle with the diagonal
      a.fill = -inf;
      EXPECT_TRUE(a.Check()) << Name(a) << " keep if false";
      a.keep_if_true = true;
      a.keep = Random(DataType::kBool, {2, 1, s, s}, 21);  // random keep mask per batch
      a.fill = -10000.f;
      EXPECT_TRUE(a.Check()) << Name(a) << " random keep";
      // Both masks, in both orders.
      a.keep = CausalKeep(s, s, 0);
      a.mask = Random(dt, {2, 1, 1, s}, 22, -3, 3);
      a.fill = -100.f;
      a.where_first = false;
      EXPECT_TRUE(a.Check()) << Name(a) << " add then where";
      a.where_first = true;
      EXPECT_TRUE(a.Check()) << Name(a) << " where then add";
      // Cached keys: sk > sq, causal with an offset.
      a.mask.reset();
      a.where_first = false;
      a.q = {2, 3, s, 64};
      a.k = a.v = {2, 3, s + 5, 64};
      a.keep = CausalKeep(s, s + 5, 5);
      a.fill = -inf;
      EXPECT_TRUE(a.Check()) << Name(a) << " causal with past keys";
    }
}

TEST(GpuAttention, FullyMaskedRows) {
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [dt, tactic] : AllConfigs()) {
    Attn a;
    a.dt = dt;
    a.tactic = tactic;
    a.q = a.k = a.v = {2, 2, 19, 64};
    a.keep = CausalKeep(19, 19, -3);  // rows 0..2 keep nothing
    a.fill = -inf;
    EXPECT_TRUE(a.Check()) << Name(a) << " NaN rows";
    a.nan_to_zero = true;
    EXPECT_TRUE(a.Check()) << Name(a) << " NaN guard: zero rows";
    a.fill = -10000.f;  // finite fill: uniform weights
    a.nan_to_zero = false;
    EXPECT_TRUE(a.Check()) << Name(a) << " finite fill";
    // An additive -inf mask over whole rows.
    a.keep.reset();
    std::vector<double> vals(19 * 19, 0.0);
    for (int64_t j = 0; j < 19; ++j) vals[4 * 19 + j] = -inf;
    for (int64_t i = 0; i < 19; ++i) vals[i * 19 + 18] = -inf;
    a.mask = FromValues(dt, {19, 19}, vals);
    EXPECT_TRUE(a.Check()) << Name(a) << " additive -inf row";
    a.nan_to_zero = true;
    EXPECT_TRUE(a.Check()) << Name(a) << " additive -inf row, NaN guard";
  }
}

TEST(GpuAttention, BertBaseShapes) {
  for (auto [dt, tactic] : AllConfigs())
    for (int64_t b : {1, 8}) {
      Attn a;
      a.dt = dt;
      a.tactic = tactic;
      a.q = a.k = a.v = {b, 12, 128, 64};
      std::vector<int64_t> lens;
      for (int64_t i = 0; i < b; ++i) lens.push_back(128 - 13 * i);
      a.mask = PaddingMask(dt, lens, 128);
      EXPECT_TRUE(a.Check()) << Name(a);
    }
}

// The head split / merge absorbed into the operands' layouts (kiln_*_layout = BSHD), alone and together, with
// masks, K^T, several row blocks and key tiles, and every tactic.
TEST(GpuAttention, BshdLayouts) {
  for (auto [dt, tactic] : AllConfigs())
    for (int combo = 1; combo < 16; ++combo) {
      Attn a;
      a.dt = dt;
      a.tactic = tactic;
      a.q_bshd = combo & 1;
      a.k_bshd = combo & 2;
      a.v_bshd = combo & 4;
      a.out_bshd = combo & 8;
      a.q = a.k = a.v = {2, 3, 77, 64};
      a.mask = PaddingMask(dt, {77, 30}, 77);
      a.seed = static_cast<uint32_t>(combo);
      EXPECT_TRUE(a.Check()) << Name(a);
      a.mask.reset();
      a.q = {1, 2, 130, 80};  // cross lengths, two row blocks, three key tiles
      a.k = a.v = {1, 2, 150, 80};
      EXPECT_TRUE(a.Check()) << Name(a);
      a.q = {3, 33, 32};  // rank 3: [S, H, D] for [H, S, D]
      a.k = a.v = {3, 9, 32};
      EXPECT_TRUE(a.Check()) << Name(a);
    }
  for (auto [dt, tactic] : AllConfigs()) {
    Attn a;  // K^T with BSHD Q/V/out; broadcast batch dims
    a.dt = dt;
    a.tactic = tactic;
    a.k_transposed = true;
    a.q_bshd = a.v_bshd = a.out_bshd = true;
    a.q = {2, 3, 19, 64};
    a.k = a.v = {2, 3, 70, 64};
    EXPECT_TRUE(a.Check()) << Name(a);
    a.k_transposed = false;
    a.k_bshd = true;
    a.q = {2, 1, 4, 19, 32};
    a.k = {1, 3, 4, 23, 32};
    a.v = {3, 4, 23, 32};
    EXPECT_TRUE(a.Check()) << Name(a);
  }
}

// The tensor-core kernel with each block size forced (1, 2, 4, 8 warps), odd sizes, masks and layouts.
TEST(GpuAttention, MmaBlockSizes) {
  const float inf = std::numeric_limits<float>::infinity();
  for (DataType dt : kLowFloats)
    for (const char* tactic : kMmaWarps)
      for (int64_t d : {32, 64, 80, 96, 128}) {
        Attn a;
        a.dt = dt;
        a.tactic = tactic;
        a.q = {2, 2, 45, d};
        a.k = a.v = {2, 2, 131, d};
        a.seed = static_cast<uint32_t>(d);
        EXPECT_TRUE(a.Check()) << Name(a);
        a.q = a.k = a.v = {2, 3, 128, d};
        a.q_bshd = a.k_bshd = a.v_bshd = a.out_bshd = true;
        a.mask = PaddingMask(dt, {128, 57}, 128);
        EXPECT_TRUE(a.Check()) << Name(a) << " padding mask";
        a.mask.reset();
        a.keep = CausalKeep(128, 128, 0);
        a.fill = -inf;
        EXPECT_TRUE(a.Check()) << Name(a) << " causal";
        a.q = a.k = a.v = {1, 1, 1, d};  // one row, one key
        a.keep.reset();
        EXPECT_TRUE(a.Check()) << Name(a) << " 1x1";
        a.q = {1, 1, 3, d};
        a.k = a.v = {1, 1, 0, d};
        EXPECT_TRUE(a.Check()) << Name(a) << " no keys";
      }
}

// Masks constant over the query rows (none, [b, 1, 1, sk], [1, h, 1, sk], bool keep [b, 1, 1, sk]): the tensor-core
// kernel applies them per key from shared memory. Odd lengths (one and several key tiles, partial row blocks),
// both mask orders, fully masked rows, every block size.
TEST(GpuAttention, MmaPerKeyMasks) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::string> tactics = {kMma};
  for (const char* t : kMmaWarps) tactics.push_back(t);
  for (DataType dt : kLowFloats)
    for (const std::string& tactic : tactics)
      for (auto [sq, sk] : {std::pair<int64_t, int64_t>{77, 77}, {130, 130}, {45, 130}, {130, 9}, {33, 300}}) {
        const std::string where = " sq " + std::to_string(sq) + " sk " + std::to_string(sk);
        Attn a;
        a.dt = dt;
        a.tactic = tactic;
        a.q = {2, 3, sq, 64};
        a.k = a.v = {2, 3, sk, 64};
        a.seed = static_cast<uint32_t>(sq * 7 + sk);
        EXPECT_TRUE(a.Check()) << Name(a) << where << " no mask";
        a.q_bshd = a.k_bshd = a.v_bshd = a.out_bshd = true;
        a.mask = PaddingMask(dt, {sk, sk / 2 + 1}, sk);
        EXPECT_TRUE(a.Check()) << Name(a) << where << " padding mask";
        a.mask = Random(dt, {1, 3, 1, sk}, 31, -3, 3);
        EXPECT_TRUE(a.Check()) << Name(a) << where << " [1, h, 1, sk] mask";
        a.mask.reset();
        a.keep = Random(DataType::kBool, {2, 1, 1, sk}, 32);
        a.fill = -10000.f;
        EXPECT_TRUE(a.Check()) << Name(a) << where << " keep [b, 1, 1, sk]";
        a.keep_if_true = false;
        a.fill = -inf;
        EXPECT_TRUE(a.Check()) << Name(a) << where << " keep if false";
        a.keep_if_true = true;
        a.mask = Random(dt, {2, 1, 1, sk}, 33, -3, 3);
        a.fill = -100.f;
        EXPECT_TRUE(a.Check()) << Name(a) << where << " add then where";
        a.where_first = true;
        EXPECT_TRUE(a.Check()) << Name(a) << where << " where then add";
        a.where_first = false;
        // Batch 1 keeps no key: NaN rows, or zeros with the guard; batch 0 keeps its first key only.
        std::vector<double> keep(2 * sk, 0.0);
        keep[0] = 1.0;
        a.mask.reset();
        a.keep = FromValues(DataType::kBool, {2, 1, 1, sk}, keep);
        a.fill = -inf;
        EXPECT_TRUE(a.Check()) << Name(a) << where << " NaN rows";
        a.nan_to_zero = true;
        EXPECT_TRUE(a.Check()) << Name(a) << where << " NaN guard";
        a.keep.reset();
        std::vector<double> add(2 * sk, 0.0);
        for (int64_t j = 0; j < sk; ++j) add[sk + j] = -inf;
        a.mask = FromValues(dt, {2, 1, 1, sk}, add);
        EXPECT_TRUE(a.Check()) << Name(a) << where << " additive -inf, NaN guard";
      }
  // Other head sizes with a padding mask, BSHD.
  for (DataType dt : kLowFloats)
    for (const std::string& tactic : tactics)
      for (int64_t d : {32, 80, 96, 128}) {
        Attn a;
        a.dt = dt;
        a.tactic = tactic;
        a.q = a.k = a.v = {2, 3, 130, d};
        a.q_bshd = a.k_bshd = a.v_bshd = a.out_bshd = true;
        a.mask = PaddingMask(dt, {130, 70}, 130);
        a.seed = static_cast<uint32_t>(d);
        EXPECT_TRUE(a.Check()) << Name(a) << " padding mask";
      }
}

// BERT-base at batch 32 (the shape the tensor-core kernel is tuned for): [32, 128, 12, 64] BSHD Q/K/V/output with
// the [32, 1, 1, 128] padding mask, then without a mask; every block size.
TEST(GpuAttention, BertBaseBatch32Bshd) {
  std::vector<std::string> tactics = {kMma};
  for (const char* t : kMmaWarps) tactics.push_back(t);
  for (DataType dt : kLowFloats)
    for (const std::string& tactic : tactics) {
      if (dt == DataType::kBFloat16 && tactic != kMma) continue;
      Attn a;
      a.dt = dt;
      a.tactic = tactic;
      a.q = a.k = a.v = {32, 12, 128, 64};
      a.q_bshd = a.k_bshd = a.v_bshd = a.out_bshd = true;
      std::vector<int64_t> lens;
      for (int64_t i = 0; i < 32; ++i) lens.push_back(128 - 4 * i);
      a.mask = PaddingMask(dt, lens, 128);
      EXPECT_TRUE(a.Check()) << Name(a) << " padding mask";
      a.mask.reset();
      EXPECT_TRUE(a.Check()) << Name(a) << " no mask";
    }
}

// Timing of each tactic at BERT-base shapes (B x 12 heads x 128 x 64, float16, with and without the padding mask),
// BHSD and BSHD. Run with --gtest_also_run_disabled_tests; prints the best of 3 runs in microseconds per call,
// asserts nothing about speed.
TEST(GpuAttention, DISABLED_TimingBertBase) {
  const int64_t h = 12, s = 128, d = 64;
  for (int64_t b : {1, 8, 32})
    for (bool bshd : {false, true})
      for (bool with_mask : {true, false}) {
        const int64_t n = b * h * s * d;
        void *q, *k, *v, *o, *mask;
        ASSERT_EQ(cudaMalloc(&q, n * 2), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&k, n * 2), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&v, n * 2), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&o, n * 2), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&mask, b * s * 2), cudaSuccess);
        cudaMemset(q, 0x31, n * 2);
        cudaMemset(k, 0x32, n * 2);
        cudaMemset(v, 0x33, n * 2);
        cudaMemset(mask, 0, b * s * 2);
        cuda::AttentionParams p;
        p.q = q;
        p.k = k;
        p.v = v;
        p.out = o;
        p.mask = with_mask ? mask : nullptr;
        p.nbd = 2;
        p.batch_dims[0] = b;
        p.batch_dims[1] = h;
        p.batch = b * h;
        const int64_t bs = h * s * d, hs = bshd ? d : s * d, rs = bshd ? h * d : d;
        for (int64_t* st : {p.q_bstride, p.k_bstride, p.v_bstride, p.out_bstride}) {
          st[0] = bs;
          st[1] = hs;
        }
        p.mask_bstride[0] = s;
        p.q_row_stride = p.v_row_stride = p.out_row_stride = p.k_row_stride = rs;
        p.k_dim_stride = 1;
        p.mask_col = 1;
        p.sq = p.sk = s;
        p.d = p.dv = static_cast<int>(d);
        p.scale = 0.125f;
        ASSERT_EQ(cuda::PrepareAttentionSimt(), cudaSuccess);
        ASSERT_EQ(cuda::PrepareAttentionMma(), cudaSuccess);
        const int kHalf = static_cast<int>(DataType::kFloat16);  // the kernels' dtype code is the DataType value
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        for (int qk : {-1, 0, 2}) {  // float16 out; int8; float8
        p.q_kind = qk;
        p.q_inv_scale = 100.f;
        for (int variant = 0; variant < 6; ++variant) {  // mma auto, w1, w2, w4, w8; simt
          if (qk >= 0 && variant != 0 && variant != 4) continue;
          auto launch = [&] {
            return variant < 5 ? cuda::LaunchAttentionMma(p, kHalf, nullptr, variant == 0 ? 0 : 1 << (variant - 1))
                               : cuda::LaunchAttentionSimt(p, kHalf, nullptr);
          };
          for (int i = 0; i < 20; ++i) ASSERT_EQ(launch(), cudaSuccess);
          const int iters = 200;
          float ms = 1e30f;
          for (int rep = 0; rep < 3; ++rep) {  // the best of 3 runs of `iters` launches
            cudaEventRecord(e0);
            for (int i = 0; i < iters; ++i) launch();
            cudaEventRecord(e1);
            ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
            float rep_ms = 0;
            cudaEventElapsedTime(&rep_ms, e0, e1);
            ms = std::min(ms, rep_ms);
          }
          const char* names[] = {"mma(auto)", "mma.w1", "mma.w2", "mma.w4", "mma.w8", "simt"};
          std::printf("attention B=%lld H=12 S=128 D=64 fp16 q%d %s %-7s %-9s %8.2f us\n", static_cast<long long>(b), qk,
                      bshd ? "BSHD" : "BHSD", with_mask ? "mask" : "no-mask", names[variant], 1000.f * ms / iters);
        }
        }
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        for (void* x : {q, k, v, o, mask}) cudaFree(x);
      }
}

// The output written quantized (int8 with a zero point, uint8, float8e4m3fn) by both kernels: BERT's layout
// (BSHD output), a row count that fills no block, float16 and bfloat16.
TEST(GpuAttention, QuantizedOutput) {
  for (const char* tactic : {kMma, kSimt})
    for (DataType dt : kLowFloats)
      for (DataType qt : {DataType::kInt8, DataType::kUInt8, DataType::kFloat8E4M3FN}) {
        Attn a;
        a.dt = dt;
        a.tactic = tactic;
        a.q_bshd = a.k_bshd = a.v_bshd = a.out_bshd = true;
        a.q = a.k = a.v = {2, 4, 37, 64};
        a.q_out = qt;
        a.q_zero_point = qt == DataType::kInt8 ? -5 : qt == DataType::kUInt8 ? 120 : 0;
        a.q_scale = 0.01f;
        a.seed = 71;
        SCOPED_TRACE(Name(a) + " -> " + DataTypeName(qt));
        EXPECT_TRUE(a.Check());
      }
}

TEST(GpuAttention, EmptyTensors) {
  for (auto [dt, tactic] : AllConfigs()) {
    Attn a;
    a.dt = dt;
    a.tactic = tactic;
    a.q = {2, 5, 64};  // no keys: zeros
    a.k = a.v = {2, 0, 64};
    EXPECT_TRUE(a.Check()) << Name(a) << " no keys";
    a.q = {2, 0, 64};  // no queries
    a.k = a.v = {2, 9, 64};
    EXPECT_TRUE(a.Check()) << Name(a) << " no queries";
    a.q = {0, 5, 64};  // empty batch
    a.k = a.v = {0, 9, 64};
    EXPECT_TRUE(a.Check()) << Name(a) << " empty batch";
  }
}

TEST(GpuAttention, UnsupportedConfigurationsAreErrors) {
  Attn a;
  a.q = a.k = a.v = {1, 4, 300};  // head size above 256
  auto r = a.Check();
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("head size"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("node0"), std::string::npos) << r.message();
  Attn b;
  b.q = b.k = b.v = {1, 4, 64};
  b.tactic = kMma;  // float32 has no tensor-core tactic
  auto r2 = b.Check();
  EXPECT_FALSE(r2);
  EXPECT_NE(std::string(r2.message()).find(kSimt), std::string::npos) << r2.message();
}

}  // namespace
}  // namespace kiln::gputest
