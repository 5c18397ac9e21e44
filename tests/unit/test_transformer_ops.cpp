// ONNX's transformer ops (ops/transformer.cpp; CPU kernels onnx_attention.cpp, rotary_embedding.cpp): Attention
// against a naive double-precision loop over combinations the node tests do not put together (3-D grouped heads with
// a past, a short float mask and softcap; windows with nonpad_kv_seqlen; every qk_matmul_output mode), fully masked
// rows, symbolic shape inference and refusals; RotaryEmbedding on a hand-made rotation; SwiGLU's import as Swish * B.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "backends/cpu/executor.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx_testing.h"
#include "ops/infer.h"
#include "testing.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  bool three = false;
  int64_t batch = 2, hq = 4, hkv = 2, sq = 3, skv = 5, past = 0, d = 4, dv = 6;
  bool causal = false;
  int mask = 0;  // 0: none, 1: float [sq, T - 1] (the last key padded with -inf), 2: bool [batch, 1, sq, T]
  float softcap = 0, scale = 0;  // scale 0: the default 1 / sqrt(d)
  int64_t mode = 0, left = -1, right = -1;
  bool nonpad = false;  // nonpad_kv_seqlen = {skv - 1, skv - b...} (opset 24+, no past)
  int64_t opset = 23;
};

// Runs the case on the CPU kernel and compares Y, present_key/value and qk_matmul_output with naive loops.
void CheckCase(const Case& c) {
  const int64_t total = c.past + c.skv;
  auto sh = [&](int64_t h, int64_t s, int64_t d) {
    return c.three ? std::vector<int64_t>{c.batch, s, h * d} : std::vector<int64_t>{c.batch, h, s, d};
  };
  uint32_t seed = 5;
  const Tensor q = testing::Random(sh(c.hq, c.sq, c.d), seed++), k = testing::Random(sh(c.hkv, c.skv, c.d), seed++);
  const Tensor v = testing::Random(sh(c.hkv, c.skv, c.dv), seed++);
  const Tensor pk = testing::Random({c.batch, c.hkv, c.past, c.d}, seed++);
  const Tensor pv = testing::Random({c.batch, c.hkv, c.past, c.dv}, seed++);
  Tensor mask;
  if (c.mask == 1) mask = testing::Random({c.sq, total - 1}, seed++, -2, 2);
  if (c.mask == 2) {
    mask = Tensor(DataType::kBool, {c.batch, 1, c.sq, total});
    for (int64_t i = 0; i < mask.numel(); ++i) mask.SetFromDouble(i, (i * 7) % 3 != 0 ? 1 : 0);
  }
  std::vector<int64_t> lens(static_cast<size_t>(c.batch));
  for (int64_t b = 0; b < c.batch; ++b) lens[b] = std::max<int64_t>(0, c.skv - 1 - b);
  const Tensor nonpad = Tensor::FromInt64(lens);

  testing::OneNode t("Attention", 7, 4, c.opset);
  if (c.three) {
    t.n->attrs["q_num_heads"] = Attribute::Int(c.hq);
    t.n->attrs["kv_num_heads"] = Attribute::Int(c.hkv);
  }
  if (c.causal) t.n->attrs["is_causal"] = Attribute::Int(1);
  if (c.softcap > 0) t.n->attrs["softcap"] = Attribute::Float(c.softcap);
  if (c.scale > 0) t.n->attrs["scale"] = Attribute::Float(c.scale);
  if (c.left >= 0) t.n->attrs["left_window_size"] = Attribute::Int(c.left);
  if (c.right >= 0) t.n->attrs["right_window_size"] = Attribute::Int(c.right);
  t.n->attrs["qk_matmul_output_mode"] = Attribute::Int(c.mode);
  const bool past = c.past > 0;
  std::vector<const Tensor*> ins = {
      &q, &k, &v, c.mask ? &mask : nullptr, past ? &pk : nullptr, past ? &pv : nullptr, c.nonpad ? &nonpad : nullptr};
  if (c.opset < 24) t.n->inputs.resize(6), ins.resize(6);
  auto r = t.Run(ins);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<Tensor>& out = *r;

  // The 4-D views, past ++ new for the keys and values.
  auto at = [&](const Tensor& x, int64_t h, int64_t s, int64_t d, int64_t b, int64_t hi, int64_t si, int64_t di) {
    return c.three ? x.GetAsDouble(((b * s + si) * h + hi) * d + di) : x.GetAsDouble(((b * h + hi) * s + si) * d + di);
  };
  auto key = [&](int64_t b, int64_t h, int64_t j, int64_t x) {
    return j < c.past ? pk.GetAsDouble(((b * c.hkv + h) * c.past + j) * c.d + x)
                      : at(k, c.hkv, c.skv, c.d, b, h, j - c.past, x);
  };
  auto value = [&](int64_t b, int64_t h, int64_t j, int64_t x) {
    return j < c.past ? pv.GetAsDouble(((b * c.hkv + h) * c.past + j) * c.dv + x)
                      : at(v, c.hkv, c.skv, c.dv, b, h, j - c.past, x);
  };
  const double scale = c.scale > 0 ? c.scale : 1 / std::sqrt(static_cast<double>(c.d));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        const int64_t kh = h / (c.hq / c.hkv);
        const int64_t pos = i + (c.nonpad ? lens[b] - c.sq : c.past);
        std::vector<double> bias(total, 0.0), s(total), p(total, 0.0);
        bool all_masked = true;
        for (int64_t j = 0; j < total; ++j) {
          if (c.mask == 1) bias[j] = j < total - 1 ? mask.GetAsDouble(i * (total - 1) + j) : -kInf;
          if (c.mask == 2 && mask.GetAsDouble((b * c.sq + i) * total + j) == 0) bias[j] = -kInf;
          if ((c.causal && j > pos) || (c.left >= 0 && pos - j > c.left) || (c.right >= 0 && j - pos > c.right) ||
              (c.nonpad && j >= lens[b]))
            bias[j] = -kInf;
          all_masked = all_masked && bias[j] == -kInf;
          double dot = 0;
          for (int64_t x = 0; x < c.d; ++x) dot += at(q, c.hq, c.sq, c.d, b, h, i, x) * key(b, kh, j, x);
          s[j] = dot * scale;
        }
        const int64_t row = ((b * c.hq + h) * c.sq + i) * total;
        for (int64_t j = 0; j < total; ++j) {
          double want = s[j];
          if (c.softcap > 0) s[j] = c.softcap * std::tanh(s[j] / c.softcap);
          if (c.mode == 1) want = s[j];
          if (c.mode == 2) want = s[j] + bias[j];
          if (c.mode == 3) continue;
          if (std::isinf(want))
            EXPECT_EQ(out[3].GetAsDouble(row + j), want) << row + j;
          else
            EXPECT_NEAR(out[3].GetAsDouble(row + j), want, 1e-5 * (1 + std::fabs(want))) << row + j;
        }
        if (!all_masked) {
          double mx = -kInf, sum = 0;
          for (int64_t j = 0; j < total; ++j) mx = std::max(mx, s[j] + bias[j]);
          for (int64_t j = 0; j < total; ++j) sum += (p[j] = std::exp(s[j] + bias[j] - mx));
          for (double& x : p) x /= sum;
        }
        if (c.mode == 3)
          for (int64_t j = 0; j < total; ++j) EXPECT_NEAR(out[3].GetAsDouble(row + j), p[j], 1e-6) << row + j;
        for (int64_t x = 0; x < c.dv; ++x) {
          double y = 0;
          for (int64_t j = 0; j < total; ++j) y += p[j] * value(b, kh, j, x);
          const int64_t yi = c.three ? ((b * c.sq + i) * c.hq + h) * c.dv + x : ((b * c.hq + h) * c.sq + i) * c.dv + x;
          EXPECT_NEAR(out[0].GetAsDouble(yi), y, 1e-5) << "Y at " << yi;
        }
      }
  ASSERT_EQ(out[0].shape(), c.three ? (std::vector<int64_t>{c.batch, c.sq, c.hq * c.dv})
                                    : (std::vector<int64_t>{c.batch, c.hq, c.sq, c.dv}));
  ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{c.batch, c.hkv, total, c.d}));
  ASSERT_EQ(out[2].shape(), (std::vector<int64_t>{c.batch, c.hkv, total, c.dv}));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.hkv; ++h)
      for (int64_t j = 0; j < total; ++j) {
        for (int64_t x = 0; x < c.d; ++x)
          ASSERT_EQ(out[1].GetAsDouble(((b * c.hkv + h) * total + j) * c.d + x), key(b, h, j, x));
        for (int64_t x = 0; x < c.dv; ++x)
          ASSERT_EQ(out[2].GetAsDouble(((b * c.hkv + h) * total + j) * c.dv + x), value(b, h, j, x));
      }
}

TEST(OnnxAttention, MatchesNaiveLoops) {
  std::vector<Case> cases;
  cases.push_back({});
  Case c;
  c.three = true, c.past = 3, c.mask = 1, c.softcap = 1.5f, c.mode = 2;  // 3-D grouped heads, past, short mask
  cases.push_back(c);
  c = {};
  c.causal = true, c.past = 4, c.sq = 2, c.mode = 1, c.softcap = 2, c.scale = 0.3f;  // offset = past
  cases.push_back(c);
  c = {};
  c.three = true, c.hq = 6, c.hkv = 1, c.mask = 2, c.causal = true, c.mode = 3;  // multi-query, bool mask
  cases.push_back(c);
  c = {};
  c.opset = 25, c.nonpad = true, c.causal = true, c.left = 1, c.skv = 6, c.mode = 3;  // window + external cache
  cases.push_back(c);
  c = {};
  c.opset = 25, c.left = 1, c.right = 1, c.past = 2, c.mode = 2;  // bidirectional window after a past
  cases.push_back(c);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    CheckCase(cases[i]);
  }
}

// A query row with no key left (an all-false bool mask row; causal rows before the nonpad frontier) gives zeros in Y
// and in the mode-3 probabilities, never NaN.
TEST(OnnxAttention, FullyMaskedRowsAreZero) {
  const Tensor q = testing::Random({1, 2, 3, 4}, 1), k = testing::Random({1, 2, 3, 4}, 2);
  const Tensor v = testing::Random({1, 2, 3, 4}, 3);
  Tensor mask(DataType::kBool, {3, 3});
  for (int64_t i = 3; i < 9; ++i) mask.SetFromDouble(i, 1);  // row 0 all false
  testing::OneNode t("Attention", 4, 4, 23);
  t.n->outputs[1] = t.n->outputs[2] = nullptr;
  t.n->attrs["qk_matmul_output_mode"] = Attribute::Int(3);
  auto r = t.Run({&q, &k, &v, &mask});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t x = 0; x < 4; ++x) EXPECT_EQ((*r)[0].GetAsDouble(h * 12 + x), 0.0);
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ((*r)[3].GetAsDouble(h * 9 + j), 0.0);
    double sum = 0;
    for (int64_t j = 0; j < 3; ++j) sum += (*r)[3].GetAsDouble(h * 9 + 3 + j);
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }

  // nonpad_kv_seqlen 1 with 3 queries: offset -2, so queries 0 and 1 see no key.
  const Tensor len = Tensor::FromInt64({1});
  testing::OneNode u("Attention", 7, 1, 24);
  u.n->attrs["is_causal"] = Attribute::Int(1);
  auto y = u.Run({&q, &k, &v, nullptr, nullptr, nullptr, &len});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  for (int64_t i = 0; i < (*y)[0].numel(); ++i) {
    const int64_t row = (i / 4) % 3;
    if (row < 2)
      EXPECT_EQ((*y)[0].GetAsDouble(i), 0.0) << i;
    else
      EXPECT_NEAR((*y)[0].GetAsDouble(i), v.GetAsDouble((i / 12) * 12 + i % 4), 1e-6) << i;  // key 0 only
  }
}

TensorInfo Info(DataType t, Shape s) {
  TensorInfo i;
  i.dtype = t;
  i.shape = std::move(s);
  i.has_shape = true;
  return i;
}

TEST(OnnxAttention, ShapeInferenceKeepsSymbols) {
  testing::OneNode t("Attention", 6, 4, 23);
  t.n->attrs["q_num_heads"] = Attribute::Int(8);
  t.n->attrs["kv_num_heads"] = Attribute::Int(2);
  const Dim b = Dim::Symbol("b"), s = Dim::Symbol("s"), kv = Dim::Symbol("t"), p = Dim::Symbol("p");
  InferContext ctx{*t.n, {}, {}};
  ctx.inputs = {Info(DataType::kFloat16, {b, s, 128}),   Info(DataType::kFloat16, {b, kv, 32}),
                Info(DataType::kFloat16, {b, kv, 48}),   std::nullopt,
                Info(DataType::kFloat16, {b, 2, p, 16}), Info(DataType::kFloat16, {b, 2, p, 24})};
  ctx.outputs.resize(4);
  ASSERT_TRUE(InferNode(ctx).ok());
  EXPECT_EQ(ShapeToString(ctx.outputs[0].shape), "[b,s,192]");  // 8 heads x 24
  EXPECT_EQ(ShapeToString(ctx.outputs[1].shape), ShapeToString(Shape{b, 2, DimAdd(p, kv), 16}));
  EXPECT_EQ(ShapeToString(ctx.outputs[2].shape), ShapeToString(Shape{b, 2, DimAdd(p, kv), 24}));
  EXPECT_EQ(ShapeToString(ctx.outputs[3].shape), ShapeToString(Shape{b, 8, s, DimAdd(p, kv)}));
  EXPECT_EQ(ctx.outputs[0].dtype, DataType::kFloat16);
}

TEST(OnnxAttention, RefusesInputsThatDoNotLineUp) {
  auto infer = [](int64_t opset, std::vector<std::optional<TensorInfo>> ins, int64_t q_heads = 0) {
    testing::OneNode t("Attention", ins.size(), 1, opset);
    for (size_t i = 0; i < ins.size(); ++i)
      if (!ins[i]) t.n->inputs[i] = nullptr;
    if (q_heads) t.n->attrs["q_num_heads"] = Attribute::Int(q_heads), t.n->attrs["kv_num_heads"] = Attribute::Int(2);
    InferContext ctx{*t.n, std::move(ins), {}};
    ctx.outputs.resize(1);
    return InferNode(ctx);
  };
  const auto f = [](Shape s) { return std::optional<TensorInfo>(Info(DataType::kFloat32, std::move(s))); };
  EXPECT_TRUE(infer(23, {f({1, 4, 3, 8}), f({1, 2, 5, 8}), f({1, 2, 5, 8})}).ok());
  // 3 query heads over 2 kv heads
  Status st = infer(23, {f({1, 3, 3, 8}), f({1, 2, 5, 8}), f({1, 2, 5, 8})});
  EXPECT_NE(st.message().find("multiple"), std::string::npos) << st.message();
  // head sizes 8 and 6
  EXPECT_FALSE(infer(23, {f({1, 2, 3, 8}), f({1, 2, 5, 6}), f({1, 2, 5, 8})}).ok());
  // 3-D without the head counts, and a hidden size 20 that 8 heads do not divide
  EXPECT_FALSE(infer(23, {f({1, 3, 16}), f({1, 5, 16}), f({1, 5, 16})}).ok());
  EXPECT_FALSE(infer(23, {f({1, 3, 20}), f({1, 5, 16}), f({1, 5, 16})}, 8).ok());
  // past_key without past_value
  st = infer(23, {f({1, 2, 3, 8}), f({1, 2, 5, 8}), f({1, 2, 5, 8}), std::nullopt, f({1, 2, 4, 8}), std::nullopt});
  EXPECT_NE(st.message().find("past_value"), std::string::npos) << st.message();
  // a mask longer than the keys, and one whose head dim is neither 1 nor Hq
  EXPECT_FALSE(infer(23, {f({1, 2, 3, 8}), f({1, 2, 5, 8}), f({1, 2, 5, 8}), f({3, 6})}).ok());
  EXPECT_FALSE(infer(23, {f({1, 2, 3, 8}), f({1, 2, 5, 8}), f({1, 2, 5, 8}), f({3, 3, 5})}).ok());
  // nonpad_kv_seqlen is opset 24's
  std::optional<TensorInfo> len = Info(DataType::kInt64, {1});
  EXPECT_FALSE(
      infer(23, {f({1, 2, 3, 8}), f({1, 2, 5, 8}), f({1, 2, 5, 8}), std::nullopt, std::nullopt, std::nullopt, len})
          .ok());
  EXPECT_TRUE(
      infer(24, {f({1, 2, 3, 8}), f({1, 2, 5, 8}), f({1, 2, 5, 8}), std::nullopt, std::nullopt, std::nullopt, len})
          .ok());
}

// cos = 0, sin = 1 turns each pair (x1, x2) into (-x2, x1); features past rotary_embedding_dim stay.
TEST(RotaryEmbedding, RotatesPairsAndKeepsTheRest) {
  const Tensor x = testing::Random({1, 2, 2, 6}, 3);  // [B, H, S, head 6], rotary dim 4: pairs (0, 2), (1, 3)
  Tensor cos(DataType::kFloat32, {3, 2}), sin(DataType::kFloat32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) {
    cos.SetFromDouble(i, i < 2 ? 1 : 0);  // position 0: no rotation
    sin.SetFromDouble(i, i < 2 ? 0 : 1);
  }
  const Tensor ids = Tensor::FromInt64({0, 2}, {1, 2});
  for (int64_t interleaved : {0, 1}) {
    testing::OneNode t("RotaryEmbedding", 4, 1, 23);
    t.n->attrs["rotary_embedding_dim"] = Attribute::Int(4);
    t.n->attrs["interleaved"] = Attribute::Int(interleaved);
    auto r = t.Run({&x, &cos, &sin, &ids});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (int64_t row = 0; row < 4; ++row) {
      const int64_t s = row % 2, base = row * 6;
      for (int64_t f = 0; f < 6; ++f) {
        double want = x.GetAsDouble(base + f);
        if (s == 1 && f < 4) {
          const int64_t k = interleaved ? f / 2 : f % 2;
          const int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + 2;
          want = f == i1 ? -x.GetAsDouble(base + i2) : x.GetAsDouble(base + i1);
        }
        EXPECT_EQ((*r)[0].GetAsDouble(base + f), want) << interleaved << " " << row << " " << f;
      }
    }
  }
  testing::OneNode t("RotaryEmbedding", 4, 1, 23);
  t.n->attrs["rotary_embedding_dim"] = Attribute::Int(4);
  const Tensor far = Tensor::FromInt64({0, 3}, {1, 2});  // the caches have 3 rows
  auto r = t.Run({&x, &cos, &sin, &far});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("position"), std::string::npos) << r.status().message();
}

TEST(SwiGLU, ImportsAsSwishTimesB) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "swiglu");
  m.mutable_opset_import(0)->set_version(28);
  testing::SetValueInfo(g->add_input(), "a", {"2", "3"});
  testing::SetValueInfo(g->add_input(), "b", {"2", "3"});
  testing::SetValueInfo(g->add_output(), "y", {"2", "3"});
  auto* n = testing::AddNode(g, "SwiGLU", "glu", {"a", "b"}, {"y"});
  auto* alpha = n->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.5f);
  ImportOptions o;
  o.infer.evaluator = cpu::MakeConstEvaluator();
  auto imported = ImportOnnxBytes(m.SerializeAsString(), ".", "swiglu.onnx", o);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  const Tensor a = testing::Random({2, 3}, 1, -4, 4), b = testing::Random({2, 3}, 2);
  auto y = cpu::RunGraph(**imported, {{"a", a}, {"b", b}});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  for (int64_t i = 0; i < 6; ++i) {
    const double x = a.GetAsDouble(i);
    EXPECT_NEAR(y->at("y").GetAsDouble(i), x / (1 + std::exp(-0.5 * x)) * b.GetAsDouble(i), 1e-5);
  }

  // A and B of different shapes are refused (SwiGLU does not broadcast).
  g->mutable_input(1)->Clear();
  testing::SetValueInfo(g->mutable_input(1), "b", {"1", "3"});
  EXPECT_FALSE(ImportOnnxBytes(m.SerializeAsString(), ".", "swiglu.onnx", o).ok());
}

}  // namespace
}  // namespace kiln
