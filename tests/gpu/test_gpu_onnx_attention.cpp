// Differential tests of the CUDA layer of ONNX's Attention (opsets 23-25; onnx_attention_layers.cpp,
// onnx_attention.cu) against the CPU reference (cpu/onnx_attention.cpp): 3-D and 4-D inputs, odd head sizes and
// lengths, grouped-query and multi-query heads, bool / float / integer masks of every broadcast rank (a short last
// dim too), is_causal with and without a past, past_key/past_value with the present outputs, scale (negative too),
// softcap, the four qk_matmul_output modes, softmax_precision, nonpad_kv_seqlen, the opset-25 windows, fully masked
// rows, no keys, and key counts whose scores leave shared memory for the workspace. float32 and float64 tight;
// float16 and bfloat16 against the CPU reference computing in the same type. Every case runs with both tactics:
// onnx_attn.rows (rounds where the CPU rounds) and onnx_attn.flash (kiln's fused kernels where the case fits them,
// tensor cores for float16/bfloat16 heads of 32/64/80/96/128; the row kernel otherwise).
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64};
const std::vector<std::string> kTactics = {"onnx_attn.rows", "onnx_attn.flash"};

struct AttnCase {
  DataType t = DataType::kFloat32;
  bool three = false;  // Q, K, V as [B, S, H * d] (q_num_heads / kv_num_heads)
  int64_t b = 2, hq = 2, hkv = 2, sq = 3, skv = 5, d = 8, dv = 8;
  int64_t past = -1;            // past_key / past_value of this length (-1: none)
  std::optional<Tensor> mask;   // attn_mask
  std::vector<int64_t> nonpad;  // nonpad_kv_seqlen (opset 24+); empty: none
  std::map<std::string, Attribute> attrs;
  int outputs = 1;
  int64_t opset = 23;
  uint32_t seed = 1;

  OneNode Build() const {
    OneNode n("Attention");
    n.Opset(opset);
    const Shape q = three ? Shape{b, sq, hq * d} : Shape{b, hq, sq, d};
    const Shape k = three ? Shape{b, skv, hkv * d} : Shape{b, hkv, skv, d};
    const Shape v = three ? Shape{b, skv, hkv * dv} : Shape{b, hkv, skv, dv};
    n.Input(Random(t, q, seed, -1.5, 1.5)).Input(Random(t, k, seed + 1, -1.5, 1.5)).Input(Random(t, v, seed + 2));
    const bool more = past >= 0 || !nonpad.empty();
    if (mask) n.Input(*mask);
    else if (more) n.Omitted();
    if (past >= 0) {
      n.Input(Random(t, {b, hkv, past, d}, seed + 3, -1.5, 1.5)).Input(Random(t, {b, hkv, past, dv}, seed + 4));
    } else if (!nonpad.empty()) {
      n.Omitted().Omitted();
    }
    if (!nonpad.empty())
      n.Input(FromValues(DataType::kInt64, {b}, std::vector<double>(nonpad.begin(), nonpad.end())));
    if (three) {
      n.Attr("q_num_heads", Attribute::Int(hq));
      n.Attr("kv_num_heads", Attribute::Int(hkv));
    }
    for (const auto& [name, a] : attrs) n.Attr(name, a);
    n.Outputs(outputs);
    return n;
  }

  int64_t total() const { return (past > 0 ? past : 0) + skv; }
};

double Tolerance(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 3e-5;
    case DataType::kFloat64: return 1e-10;
    case DataType::kFloat16: return 1e-2;
    default: return 4e-2;
  }
}

::testing::AssertionResult Check(const AttnCase& c) {
  return c.Build().MatchesCpuWithEachTactic(kTactics, Tolerance(c.t), Tolerance(c.t));
}

std::string Describe(const AttnCase& c) {
  return std::string(DataTypeName(c.t)) + (c.three ? " 3-D" : " 4-D") + " B" + std::to_string(c.b) + " Hq" +
         std::to_string(c.hq) + " Hkv" + std::to_string(c.hkv) + " Sq" + std::to_string(c.sq) + " Skv" +
         std::to_string(c.skv) + " d" + std::to_string(c.d) + " dv" + std::to_string(c.dv) + " past" +
         std::to_string(c.past) + " opset" + std::to_string(c.opset) + " seed" + std::to_string(c.seed);
}

TEST(GpuOnnxAttention, ShapesAndHeads) {
  uint32_t seed = 10;
  struct Dims {
    bool three;
    int64_t b, hq, hkv, sq, skv, d, dv;
  };
  const std::vector<Dims> dims = {
      {false, 2, 3, 3, 5, 7, 8, 6},    {true, 2, 3, 3, 5, 7, 8, 6},    {false, 1, 6, 2, 4, 9, 5, 3},
      {true, 3, 6, 2, 1, 13, 5, 3},    {false, 2, 4, 1, 3, 6, 16, 16}, {true, 1, 8, 1, 7, 7, 4, 9},
      {false, 1, 1, 1, 1, 1, 1, 1},    {false, 2, 2, 2, 33, 65, 64, 64}, {true, 1, 4, 2, 17, 129, 96, 40},
      {false, 1, 2, 2, 3, 4, 300, 70}, {true, 2, 8, 2, 37, 70, 128, 128}, {false, 1, 4, 4, 64, 64, 80, 80},
      {false, 2, 6, 3, 20, 33, 32, 32},
  };
  for (DataType t : kTypes)
    for (const Dims& x : dims) {
      AttnCase c;
      c.t = t, c.three = x.three, c.b = x.b, c.hq = x.hq, c.hkv = x.hkv, c.sq = x.sq, c.skv = x.skv, c.d = x.d;
      c.dv = x.dv, c.seed = seed += 5;
      EXPECT_TRUE(Check(c)) << Describe(c);
    }
}

TEST(GpuOnnxAttention, Masks) {
  uint32_t seed = 100;
  for (DataType t : kTypes) {
    AttnCase base;
    base.t = t, base.b = 2, base.hq = 4, base.hkv = 2, base.sq = 5, base.skv = 7, base.d = 6, base.dv = 5;
    const int64_t T = base.total();
    // Bool masks of every broadcast rank (true attends), one with a row masked everywhere.
    for (const Shape& s : std::vector<Shape>{{T}, {5, T}, {4, 5, T}, {2, 4, 5, T}, {2, 1, 5, T}, {1, 4, 1, T},
                                             {1, 1, 5, T}, {5, 1}, {5, 3}}) {
      AttnCase c = base;
      c.seed = seed += 5;
      c.mask = Random(DataType::kBool, s, seed + 7);
      EXPECT_TRUE(Check(c)) << Describe(c) << " bool mask " << ShapeToString(s);
      c.three = true;
      EXPECT_TRUE(Check(c)) << Describe(c) << " bool mask " << ShapeToString(s);
    }
    // Additive masks: Q's type, float32, int32, with a shorter last dim, with -inf entries and a fully masked row.
    for (const Shape& s : std::vector<Shape>{{T}, {5, T}, {4, 5, T}, {2, 4, 5, T}, {2, 1, 1, T}, {5, T - 3}}) {
      AttnCase c = base;
      c.seed = seed += 5;
      c.mask = Random(t, s, seed + 7, -2, 2);
      EXPECT_TRUE(Check(c)) << Describe(c) << " additive mask " << ShapeToString(s);
      c.mask = Random(DataType::kFloat32, s, seed + 8, -2, 2);
      EXPECT_TRUE(Check(c)) << Describe(c) << " float32 mask " << ShapeToString(s);
      c.mask = Random(DataType::kInt32, s, seed + 9, -3, 3);
      EXPECT_TRUE(Check(c)) << Describe(c) << " int32 mask " << ShapeToString(s);
    }
    AttnCase c = base;
    std::vector<double> values(static_cast<size_t>(5 * T), 0.5);
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < T; ++j) values[static_cast<size_t>(2 * T + j)] = -inf;  // row 2 fully masked
    values[3] = -inf;
    values[static_cast<size_t>(T + 1)] = -inf;
    c.mask = FromValues(t, {5, T}, values);
    c.outputs = 4;
    c.attrs["qk_matmul_output_mode"] = Attribute::Int(3);
    EXPECT_TRUE(Check(c)) << Describe(c) << " -inf mask, fully masked row";
    c.attrs["qk_matmul_output_mode"] = Attribute::Int(2);
    EXPECT_TRUE(Check(c)) << Describe(c) << " -inf mask, fully masked row, mode 2";
    c.outputs = 1;  // no qk_matmul_output: the fused kernels' path
    EXPECT_TRUE(Check(c)) << Describe(c) << " -inf mask, fully masked row, Y only";
  }
}

TEST(GpuOnnxAttention, CausalPastAndPresent) {
  uint32_t seed = 300;
  for (DataType t : kTypes)
    for (bool three : {false, true})
      for (int64_t past : {-1, 0, 1, 6})
        for (int64_t sq : {1, 3, 8}) {
          AttnCase c;
          c.t = t, c.three = three, c.b = 2, c.hq = 6, c.hkv = 3, c.sq = sq, c.skv = sq == 8 ? 5 : sq, c.d = 7;
          c.dv = 4, c.past = past, c.seed = seed += 7;
          c.attrs["is_causal"] = Attribute::Int(1);
          c.outputs = past >= 0 ? 3 : 1;
          EXPECT_TRUE(Check(c)) << Describe(c) << " causal";
          c.attrs.erase("is_causal");
          c.outputs = 3;
          if (past >= 0) c.mask = Random(DataType::kBool, {c.sq, c.total()}, seed + 9);
          EXPECT_TRUE(Check(c)) << Describe(c) << " present outputs";
        }
}

TEST(GpuOnnxAttention, ScaleSoftcapAndQkModes) {
  uint32_t seed = 500;
  for (DataType t : kTypes)
    for (int64_t mode : {0, 1, 2, 3})
      for (float softcap : {0.f, 2.5f}) {
        AttnCase c;
        c.t = t, c.b = 2, c.hq = 4, c.hkv = 2, c.sq = 4, c.skv = 6, c.d = 9, c.dv = 3, c.past = 2, c.seed = seed += 7;
        c.outputs = 4;
        c.mask = Random(t, {4, 1, 8}, seed + 11, -1, 1);
        c.attrs["qk_matmul_output_mode"] = Attribute::Int(mode);
        if (softcap > 0) c.attrs["softcap"] = Attribute::Float(softcap);
        c.attrs["scale"] = Attribute::Float(0.7f);
        EXPECT_TRUE(Check(c)) << Describe(c) << " mode " << mode << " softcap " << softcap;
        c.attrs["scale"] = Attribute::Float(-0.4f);
        EXPECT_TRUE(Check(c)) << Describe(c) << " mode " << mode << " softcap " << softcap << " negative scale";
        c.attrs.erase("scale");
        c.attrs["is_causal"] = Attribute::Int(1);
        c.three = true;
        EXPECT_TRUE(Check(c)) << Describe(c) << " mode " << mode << " softcap " << softcap << " causal";
      }
}

TEST(GpuOnnxAttention, SoftmaxPrecision) {
  uint32_t seed = 700;
  for (DataType t : kTypes)
    for (int64_t p : {1, 10, 11, 16}) {
      AttnCase c;
      c.t = t, c.b = 1, c.hq = 2, c.hkv = 1, c.sq = 5, c.skv = 9, c.d = 12, c.dv = 7, c.seed = seed += 7;
      c.attrs["softmax_precision"] = Attribute::Int(p);
      c.outputs = 4;
      c.past = 3;
      c.attrs["qk_matmul_output_mode"] = Attribute::Int(3);
      EXPECT_TRUE(Check(c)) << Describe(c) << " softmax_precision " << p;
    }
}

TEST(GpuOnnxAttention, NonpadKvSeqlenAndWindows) {
  uint32_t seed = 900;
  for (DataType t : kTypes)
    for (int64_t opset : {24, 25}) {
      AttnCase c;
      c.t = t, c.b = 3, c.hq = 4, c.hkv = 2, c.sq = 3, c.skv = 9, c.d = 6, c.dv = 5, c.opset = opset;
      c.nonpad = {9, 4, 0};
      c.seed = seed += 7;
      EXPECT_TRUE(Check(c)) << Describe(c) << " nonpad";
      c.attrs["is_causal"] = Attribute::Int(1);
      EXPECT_TRUE(Check(c)) << Describe(c) << " nonpad causal";
      c.three = true;
      c.mask = Random(DataType::kBool, {3, 9}, seed + 5);
      c.outputs = 4;
      EXPECT_TRUE(Check(c)) << Describe(c) << " nonpad causal masked 3-D";
    }
  // Opset 25's windows: left only, right only, both, with is_causal, a past, nonpad_kv_seqlen.
  for (DataType t : kTypes)
    for (int64_t left : {-1, 0, 2})
      for (int64_t right : {-1, 0, 1}) {
        AttnCase c;
        c.t = t, c.b = 2, c.hq = 2, c.hkv = 2, c.sq = 6, c.skv = 6, c.d = 5, c.dv = 5, c.opset = 25;
        c.seed = seed += 7;
        c.attrs["left_window_size"] = Attribute::Int(left);
        c.attrs["right_window_size"] = Attribute::Int(right);
        c.outputs = 4;
        c.attrs["qk_matmul_output_mode"] = Attribute::Int(2);
        EXPECT_TRUE(Check(c)) << Describe(c) << " window " << left << " " << right;
        c.attrs["is_causal"] = Attribute::Int(1);
        c.past = 4;
        c.sq = 2, c.skv = 2;
        EXPECT_TRUE(Check(c)) << Describe(c) << " window " << left << " " << right << " causal, past";
        c.past = -1;
        c.sq = 3, c.skv = 8;
        c.nonpad = {6, 8};
        c.outputs = 1;
        EXPECT_TRUE(Check(c)) << Describe(c) << " window " << left << " " << right << " causal, nonpad";
      }
}

TEST(GpuOnnxAttention, EdgeCases) {
  for (DataType t : kTypes) {
    // No keys: Y is zero.
    AttnCase c;
    c.t = t, c.skv = 0, c.outputs = 1;
    EXPECT_TRUE(Check(c)) << Describe(c) << " no keys";
    // No queries, but a past to carry into the present outputs.
    c = AttnCase();
    c.t = t, c.sq = 0, c.past = 3, c.outputs = 3;
    EXPECT_TRUE(Check(c)) << Describe(c) << " no queries";
    // An empty past.
    c = AttnCase();
    c.t = t, c.past = 0, c.outputs = 4;
    EXPECT_TRUE(Check(c)) << Describe(c) << " empty past";
  }
  // The layer run twice on the same buffers, its workspace filled with garbage before each run.
  AttnCase c;
  c.past = 5, c.outputs = 4, c.mask = Random(DataType::kFloat32, {2, 1, 3, 10}, 3);
  c.attrs["is_causal"] = Attribute::Int(1);
  OneNode n = c.Build();
  EXPECT_TRUE(n.Repeat(2).MatchesCpuWithEachTactic(kTactics, 3e-5, 3e-5));
}

// Cases the fused kernels' tensor-core path takes (float16/bfloat16, d == dv == 64): masks, is_causal with a past,
// windows, nonpad_kv_seqlen, grouped heads, 3-D layouts.
TEST(GpuOnnxAttention, FusedKernelCases) {
  uint32_t seed = 1100;
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32})
    for (int variant = 0; variant < 6; ++variant) {
      AttnCase c;
      c.t = t, c.b = 2, c.hq = 8, c.hkv = 2, c.sq = 19, c.skv = 45, c.d = 64, c.dv = 64, c.seed = seed += 7;
      c.three = variant % 2 == 1;
      switch (variant) {
        case 0: c.mask = Random(DataType::kBool, {2, 1, 19, 45}, seed + 1); break;
        case 1: c.mask = Random(t, {8, 19, 45}, seed + 1, -2, 2); c.attrs["is_causal"] = Attribute::Int(1); break;
        case 2: c.past = 30, c.skv = 4, c.sq = 4, c.outputs = 3, c.attrs["is_causal"] = Attribute::Int(1); break;
        case 3: c.opset = 25, c.attrs["left_window_size"] = Attribute::Int(7); c.attrs["is_causal"] = Attribute::Int(1);
                break;
        case 4: c.opset = 24, c.nonpad = {45, 20}, c.attrs["is_causal"] = Attribute::Int(1); break;
        default: c.mask = Random(DataType::kFloat32, {19, 1}, seed + 1, -1, 1); c.attrs["scale"] = Attribute::Float(0.2f);
      }
      EXPECT_TRUE(Check(c)) << Describe(c) << " variant " << variant;
    }
}

// Key counts whose scores do not fit in shared memory (float: about 12000 keys, double: about 6000) run with the
// scores in the workspace.
TEST(GpuOnnxAttention, ManyKeys) {
  for (DataType t : kTypes) {
    AttnCase c;
    c.t = t, c.b = 1, c.hq = 2, c.hkv = 1, c.sq = 3, c.skv = t == DataType::kFloat64 ? 6500 : 13000, c.d = 16;
    c.dv = 8, c.seed = 77;
    c.attrs["is_causal"] = Attribute::Int(1);
    c.past = c.skv - 3;
    c.skv = 3;
    c.mask = Random(DataType::kBool, {c.total()}, 78, 0, 1.2);
    c.outputs = 4;
    c.attrs["qk_matmul_output_mode"] = Attribute::Int(3);
    EXPECT_TRUE(Check(c)) << Describe(c);
    c.outputs = 3;
    EXPECT_TRUE(Check(c)) << Describe(c) << " without qk_matmul_output";
    OneNode n = c.Build();
    EXPECT_TRUE(n.Repeat(2).MatchesCpuWithEachTactic(kTactics, Tolerance(t), Tolerance(t))) << Describe(c)
                                                                                           << " repeated";
  }
}

TEST(GpuOnnxAttention, RefusesHeadsAboveTheKernelsLimit) {
  Graph g;
  Node* n = g.AddNode("Attention", "big_heads");
  n->opset = 23;
  Value* q = g.GetOrAddValue("q");
  q->dtype = DataType::kFloat32;
  q->shape = FromStatic({1, 2, 3, 4096});
  q->has_shape = true;
  n->inputs = {q, q, q};
  n->outputs = {g.GetOrAddValue("y")};
  cuda::LayerSpec spec{*n, {{1, 2, 3, 4096}, {1, 2, 3, 4096}, {1, 2, 3, 4096}}, {}, true};
  auto tactics = cuda::TacticsFor(spec);
  ASSERT_FALSE(tactics.ok());
  EXPECT_NE(tactics.status().message().find("big_heads"), std::string::npos) << tactics.status().ToString();
  EXPECT_NE(tactics.status().message().find("head size 4096"), std::string::npos) << tactics.status().ToString();
}

}  // namespace
}  // namespace kiln::gputest
