// Differential tests of the CUDA RotaryEmbedding, TensorScatter, LinearAttention and CausalConvWithState layers
// (llm_layers.cpp, llm_ops.cu) against the CPU references: odd shapes, 3-D and 4-D X, partial rotary dims,
// interleaved pairs, position_ids and broadcast caches; scatter axes, linear and circular (wrapping, negative) write
// indices, element types of every width; every LinearAttention update rule with per-head and per-key decay, beta
// per head or shared, grouped-query heads, key sizes across the warp's lanes, a past state of another type;
// convolution kernel sizes 1 to 5, with and without bias and past, silu. float32 tight, the 16-bit types against the
// CPU computing in the same type.
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

const DataType kLowFloats[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

::testing::AssertionResult Check(OneNode n, DataType t, double f32_tol = 1e-6) {
  if (t == DataType::kFloat32) return n.MatchesCpu(f32_tol, f32_tol);
  if (t == DataType::kFloat64) return n.MatchesCpu(1e-12, 1e-12);
  if (t == DataType::kFloat16) return n.MatchesCpu(2e-3, 2e-3);
  return n.MatchesCpu(1.6e-2, 1.6e-2);
}

// ---- RotaryEmbedding ----

struct Rope {
  DataType t = DataType::kFloat32;
  bool three = false, interleaved = false, with_pos = true;
  int64_t b = 2, h = 3, s = 5, head = 8, rot = 0;  // rot 0: the whole head
  Shape pos_shape = {};                            // empty: [b, s]
  Shape cache_shape = {};                          // without position ids; empty: [b, s, half]
  int64_t max_pos = 11;
  uint32_t seed = 1;

  OneNode Build() const {
    OneNode n("RotaryEmbedding");
    n.Opset(23);
    const int64_t half = (rot == 0 ? head : rot) / 2;
    n.Input(Random(t, three ? Shape{b, s, h * head} : Shape{b, h, s, head}, seed, -2, 2));
    const Shape cache = with_pos ? Shape{max_pos, half} : (cache_shape.empty() ? Shape{b, s, half} : cache_shape);
    n.Input(Random(t, cache, seed + 1)).Input(Random(t, cache, seed + 2));
    if (with_pos) n.Input(Random(DataType::kInt64, pos_shape.empty() ? Shape{b, s} : pos_shape, seed + 3, 0, max_pos - 1));
    if (three) n.Attr("num_heads", Attribute::Int(h));
    if (interleaved) n.Attr("interleaved", Attribute::Int(1));
    if (rot != 0) n.Attr("rotary_embedding_dim", Attribute::Int(rot));
    return n;
  }
};

TEST(GpuRotaryEmbedding, MatchesTheCpuReference) {
  uint32_t seed = 10;
  const DataType types[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64};
  for (DataType t : types)
    for (bool three : {false, true})
      for (bool interleaved : {false, true})
        for (int64_t rot : {0, 4, 2}) {
          Rope r;
          r.t = t, r.three = three, r.interleaved = interleaved, r.rot = rot, r.head = rot == 2 ? 6 : 10;
          r.seed = seed += 5;
          EXPECT_TRUE(Check(r.Build(), t)) << DataTypeName(t) << " three " << three << " interleaved " << interleaved
                                           << " rot " << rot;
          r.with_pos = false;
          EXPECT_TRUE(Check(r.Build(), t)) << DataTypeName(t) << " no position_ids";
          r.cache_shape = {1, r.s, (rot == 0 ? r.head : rot) / 2};
          EXPECT_TRUE(Check(r.Build(), t)) << DataTypeName(t) << " cache broadcast over the batch";
          r.cache_shape = {r.b, 1, (rot == 0 ? r.head : rot) / 2};
          EXPECT_TRUE(Check(r.Build(), t)) << DataTypeName(t) << " cache broadcast over the sequence";
          r.with_pos = true;
          r.pos_shape = {1, r.s};
          EXPECT_TRUE(Check(r.Build(), t)) << DataTypeName(t) << " position_ids broadcast over the batch";
          r.pos_shape = {r.b, 1};
          EXPECT_TRUE(Check(r.Build(), t)) << DataTypeName(t) << " position_ids broadcast over the sequence";
        }
  // Larger, odd sizes.
  Rope r;
  r.b = 3, r.h = 7, r.s = 37, r.head = 64, r.rot = 32, r.max_pos = 100, r.seed = 5;
  EXPECT_TRUE(Check(r.Build(), DataType::kFloat32));
  r.three = true, r.interleaved = true;
  EXPECT_TRUE(Check(r.Build(), DataType::kFloat16));
}

// ---- TensorScatter ----

TEST(GpuTensorScatter, MatchesTheCpuReference) {
  uint32_t seed = 100;
  const DataType types[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                            DataType::kInt8,    DataType::kInt64,   DataType::kBool,     DataType::kUInt16};
  struct Case {
    Shape past, update;
    int64_t axis;
    std::vector<double> indices;  // empty: none
    bool circular;
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 4}, {2, 3, 3, 4}, -2, {0, 5}, false},
      {{2, 3, 8, 4}, {2, 3, 3, 4}, -2, {6, 7}, true},
      {{2, 3, 8, 4}, {2, 3, 3, 4}, 2, {-1, 13}, true},
      {{2, 3, 8, 4}, {2, 3, 1, 4}, -2, {}, false},
      {{2, 3, 8, 4}, {2, 3, 8, 4}, -2, {3, 0}, true},
      {{3, 9, 5}, {3, 4, 5}, 1, {5, 0, 2}, false},
      {{2, 5, 7, 3}, {2, 2, 7, 3}, 1, {3, 4}, true},
      {{2, 3, 6}, {2, 3, 2}, -1, {1, 4}, false},
      {{1, 2, 0, 4}, {1, 2, 0, 4}, -2, {0}, false},
      {{2, 3, 8, 4}, {2, 3, 0, 4}, -2, {2, 1}, false},
  };
  for (DataType t : types)
    for (const Case& c : cases) {
      OneNode n("TensorScatter");
      n.Opset(24);
      n.Input(Random(t, c.past, seed++, 0, 9)).Input(Random(t, c.update, seed++, 0, 9));
      if (!c.indices.empty())
        n.Input(FromValues(DataType::kInt64, {static_cast<int64_t>(c.indices.size())}, c.indices));
      n.Attr("axis", Attribute::Int(c.axis));
      if (c.circular) n.Attr("mode", Attribute::String("circular"));
      EXPECT_TRUE(n.MatchesCpu(0, 0)) << DataTypeName(t) << " past " << ShapeToString(c.past) << " update "
                                      << ShapeToString(c.update) << " axis " << c.axis;
    }
}

// ---- LinearAttention ----

struct LinAttn {
  DataType t = DataType::kFloat32;
  std::string rule = "gated_delta";
  int64_t b = 2, len = 5, hq = 4, hkv = 2, dk = 6, dv = 3;
  bool past = true, decay_per_key = false, beta_shared = false;
  DataType state_type = DataType::kFloat32;
  float scale = 0.f;
  uint32_t seed = 1;

  OneNode Build() const {
    OneNode n("LinearAttention");
    n.Opset(27);
    const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
    n.Input(Random(t, {b, len, hq * dk}, seed, -1, 1))
        .Input(Random(t, {b, len, hkv * dk}, seed + 1, -0.5, 0.5))
        .Input(Random(t, {b, len, hkv * dv}, seed + 2));
    if (past) n.Input(Random(state_type, {b, hkv, dk, dv}, seed + 3, -0.5, 0.5));
    else if (gated || delta) n.Omitted();
    if (gated) n.Input(Random(t, {b, len, decay_per_key ? hkv * dk : hkv}, seed + 4, -0.7, 0));
    else if (delta) n.Omitted();
    if (delta) n.Input(Random(t, {b, len, beta_shared ? 1 : hkv}, seed + 5, 0, 1));
    n.Attr("q_num_heads", Attribute::Int(hq));
    n.Attr("kv_num_heads", Attribute::Int(hkv));
    n.Attr("update_rule", Attribute::String(rule));
    if (scale != 0.f) n.Attr("scale", Attribute::Float(scale));
    n.Outputs(2);
    return n;
  }
};

TEST(GpuLinearAttention, MatchesTheCpuReference) {
  uint32_t seed = 300;
  for (DataType t : kLowFloats)
    for (const char* rule : {"linear", "gated", "delta", "gated_delta"})
      for (int variant = 0; variant < 4; ++variant) {
        LinAttn a;
        a.t = t, a.rule = rule, a.seed = seed += 7;
        a.past = variant != 1;
        a.decay_per_key = variant >= 2;
        a.beta_shared = variant == 3;
        a.state_type = variant == 2 ? DataType::kFloat16 : t;
        if (variant == 3) a.hq = 6, a.hkv = 3, a.dk = 40, a.dv = 9, a.len = 11, a.scale = 0.3f;
        if (variant == 2) a.hq = 2, a.hkv = 2, a.dk = 1, a.dv = 1, a.b = 1;
        EXPECT_TRUE(Check(a.Build(), t, 1e-5)) << DataTypeName(t) << " " << rule << " variant " << variant;
      }
  // A key size that fills every register slot of the lanes, a long sequence.
  LinAttn a;
  a.dk = 256, a.dv = 33, a.len = 40, a.hq = 2, a.hkv = 1, a.b = 1, a.seed = 9;
  EXPECT_TRUE(Check(a.Build(), DataType::kFloat32, 1e-5));
  // No tokens: the state passes through.
  a.len = 0;
  EXPECT_TRUE(Check(a.Build(), DataType::kFloat32, 1e-5));
}

TEST(GpuLinearAttention, RefusesKeyHeadsAboveTheKernelsLimit) {
  Graph g;
  Node* n = g.AddNode("LinearAttention", "wide_keys");
  n->opset = 27;
  n->attrs["q_num_heads"] = Attribute::Int(1);
  n->attrs["kv_num_heads"] = Attribute::Int(1);
  n->attrs["update_rule"] = Attribute::String("linear");
  Value* q = g.GetOrAddValue("q");
  q->dtype = DataType::kFloat32;
  q->shape = FromStatic({1, 4, 512});
  q->has_shape = true;
  n->inputs = {q, q, q};
  n->outputs = {g.GetOrAddValue("o"), g.GetOrAddValue("s")};
  cuda::LayerSpec spec{*n, {{1, 4, 512}, {1, 4, 512}, {1, 4, 512}}, {}, true};
  auto tactics = cuda::TacticsFor(spec);
  ASSERT_FALSE(tactics.ok());
  EXPECT_NE(tactics.status().message().find("wide_keys"), std::string::npos) << tactics.status().ToString();
}

// ---- CausalConvWithState ----

TEST(GpuCausalConvWithState, MatchesTheCpuReference) {
  uint32_t seed = 500;
  for (DataType t : kLowFloats)
    for (int64_t k : {1, 2, 4, 5})
      for (int variant = 0; variant < 4; ++variant) {
        const int64_t b = 2, c = 5, len = variant == 3 ? 1 : 9;
        OneNode n("CausalConvWithState");
        n.Opset(27);
        n.Input(Random(t, {b, c, len}, seed++, -2, 2)).Input(Random(t, {c, 1, k}, seed++));
        const bool bias = variant != 1, past = variant != 2;
        if (bias) n.Input(Random(t, {c}, seed++));
        else if (past) n.Omitted();
        if (past) n.Input(Random(t, {b, c, k - 1}, seed++, -2, 2));
        if (variant >= 2) n.Attr("activation", Attribute::String(variant == 2 ? "silu" : "swish"));
        n.Outputs(2);
        EXPECT_TRUE(Check(n, t, 1e-6)) << DataTypeName(t) << " k " << k << " variant " << variant;
      }
  // Many channels and a long input.
  OneNode n("CausalConvWithState");
  n.Opset(27);
  n.Input(Random(DataType::kFloat32, {3, 257, 100}, 1)).Input(Random(DataType::kFloat32, {257, 1, 4}, 2));
  n.Omitted().Input(Random(DataType::kFloat32, {3, 257, 3}, 3)).Attr("activation", Attribute::String("silu"));
  n.Outputs(2);
  EXPECT_TRUE(Check(n, DataType::kFloat32, 1e-6));
}

}  // namespace
}  // namespace kiln::gputest
