// Recurrent ops: a bidirectional LSTM with sequence_lens, initial states and peepholes, and GRUs with and without
// linear_before_reset, against straightforward double-precision loops over the ONNX equations; layout 1 against
// layout 0 transposed; float16; omitted outputs; activations with alpha and clip on an RNN; symbolic output shapes
// and the errors for bad attributes and shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "ops/infer.h"
#include "ops/op_def.h"
#include "testing.h"

namespace kiln {
namespace {

Tensor Rand(std::vector<int64_t> shape, uint32_t seed, DataType dt = DataType::kFloat32) {
  return testing::Random(std::move(shape), seed, -1, 1, dt);
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

void ExpectNear(const Tensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i)
    EXPECT_NEAR(got.GetAsDouble(i), want[static_cast<size_t>(i)], tol * (1 + std::fabs(want[static_cast<size_t>(i)])))
        << "at " << i;
}

// Steps of batch entry b in the order direction d visits them: forwards for d = 0, backwards for d = 1.
std::vector<int64_t> Steps(int64_t len, int64_t d) {
  std::vector<int64_t> s;
  for (int64_t k = 0; k < len; ++k) s.push_back(d == 0 ? k : len - 1 - k);
  return s;
}

// The ONNX outputs in layout 0: Y [seq, dirs, batch, H], Y_h and Y_c [dirs, batch, H].
struct Ref {
  std::vector<double> y, yh, yc;
};

// LSTM (gates i, o, f, c; f = Sigmoid, g = h = Tanh) with B, initial_h, initial_c and P all given.
Ref RefLstm(const Tensor& x, const Tensor& w, const Tensor& r, const Tensor& bias, const Tensor& h0, const Tensor& c0,
            const Tensor& p, const std::vector<int64_t>& lens, int64_t hs) {
  const int64_t seq = x.dim(0), batch = x.dim(1), in = x.dim(2), dirs = w.dim(0);
  Ref out{std::vector<double>(seq * dirs * batch * hs, 0.0), std::vector<double>(dirs * batch * hs, 0.0),
          std::vector<double>(dirs * batch * hs, 0.0)};
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> h(hs), c(hs);
      for (int64_t j = 0; j < hs; ++j) {
        h[j] = h0.GetAsDouble((d * batch + b) * hs + j);
        c[j] = c0.GetAsDouble((d * batch + b) * hs + j);
      }
      for (int64_t t : Steps(lens[b], d)) {
        std::vector<double> pre(4 * hs);
        for (int64_t row = 0; row < 4 * hs; ++row) {
          double v = bias.GetAsDouble(d * 8 * hs + row) + bias.GetAsDouble(d * 8 * hs + 4 * hs + row);
          for (int64_t i = 0; i < in; ++i) v += w.GetAsDouble((d * 4 * hs + row) * in + i) * x.GetAsDouble((t * batch + b) * in + i);
          for (int64_t k = 0; k < hs; ++k) v += r.GetAsDouble((d * 4 * hs + row) * hs + k) * h[k];
          pre[row] = v;
        }
        for (int64_t j = 0; j < hs; ++j) {
          const double pi = p.GetAsDouble(d * 3 * hs + j), po = p.GetAsDouble(d * 3 * hs + hs + j),
                       pf = p.GetAsDouble(d * 3 * hs + 2 * hs + j);
          const double it = Sigmoid(pre[j] + pi * c[j]);
          const double ft = Sigmoid(pre[2 * hs + j] + pf * c[j]);
          const double ct = std::tanh(pre[3 * hs + j]);
          c[j] = ft * c[j] + it * ct;
          const double ot = Sigmoid(pre[hs + j] + po * c[j]);
          h[j] = ot * std::tanh(c[j]);
          out.y[((t * dirs + d) * batch + b) * hs + j] = h[j];
        }
      }
      if (lens[b] > 0)
        for (int64_t j = 0; j < hs; ++j) {
          out.yh[(d * batch + b) * hs + j] = h[j];
          out.yc[(d * batch + b) * hs + j] = c[j];
        }
    }
  return out;
}

// GRU (gates z, r, h; f = Sigmoid, g = Tanh) with B and initial_h given.
Ref RefGru(const Tensor& x, const Tensor& w, const Tensor& r, const Tensor& bias, const Tensor& h0,
           const std::vector<int64_t>& lens, int64_t hs, bool linear_before_reset) {
  const int64_t seq = x.dim(0), batch = x.dim(1), in = x.dim(2), dirs = w.dim(0);
  Ref out{std::vector<double>(seq * dirs * batch * hs, 0.0), std::vector<double>(dirs * batch * hs, 0.0), {}};
  auto W = [&](int64_t d, int64_t row, int64_t i) { return w.GetAsDouble((d * 3 * hs + row) * in + i); };
  auto R = [&](int64_t d, int64_t row, int64_t k) { return r.GetAsDouble((d * 3 * hs + row) * hs + k); };
  auto Wb = [&](int64_t d, int64_t row) { return bias.GetAsDouble(d * 6 * hs + row); };
  auto Rb = [&](int64_t d, int64_t row) { return bias.GetAsDouble(d * 6 * hs + 3 * hs + row); };
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> h(hs);
      for (int64_t j = 0; j < hs; ++j) h[j] = h0.GetAsDouble((d * batch + b) * hs + j);
      for (int64_t t : Steps(lens[b], d)) {
        auto xw = [&](int64_t row) {
          double v = Wb(d, row);
          for (int64_t i = 0; i < in; ++i) v += W(d, row, i) * x.GetAsDouble((t * batch + b) * in + i);
          return v;
        };
        auto rv = [&](int64_t row, const std::vector<double>& v) {
          double s = 0;
          for (int64_t k = 0; k < hs; ++k) s += R(d, row, k) * v[k];
          return s;
        };
        std::vector<double> z(hs), rt(hs), rh(hs), next(hs);
        for (int64_t j = 0; j < hs; ++j) {
          z[j] = Sigmoid(xw(j) + rv(j, h) + Rb(d, j));
          rt[j] = Sigmoid(xw(hs + j) + rv(hs + j, h) + Rb(d, hs + j));
          rh[j] = rt[j] * h[j];
        }
        for (int64_t j = 0; j < hs; ++j) {
          const double ht = linear_before_reset
                                ? std::tanh(xw(2 * hs + j) + rt[j] * (rv(2 * hs + j, h) + Rb(d, 2 * hs + j)))
                                : std::tanh(xw(2 * hs + j) + rv(2 * hs + j, rh) + Rb(d, 2 * hs + j));
          next[j] = (1 - z[j]) * ht + z[j] * h[j];
        }
        h = next;
        for (int64_t j = 0; j < hs; ++j) out.y[((t * dirs + d) * batch + b) * hs + j] = h[j];
      }
      if (lens[b] > 0)
        for (int64_t j = 0; j < hs; ++j) out.yh[(d * batch + b) * hs + j] = h[j];
    }
  return out;
}

// Swaps the first two dims of a 3-D tensor ([seq, batch, x] <-> [batch, seq, x]).
Tensor Swap01(const Tensor& t) {
  const int64_t a = t.dim(0), b = t.dim(1), c = t.dim(2);
  Tensor o(t.dtype(), {b, a, c});
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k) o.SetFromDouble((j * a + i) * c + k, t.GetAsDouble((i * b + j) * c + k));
  return o;
}

struct Lstm {
  int64_t seq = 4, batch = 3, in = 5, hs = 3, dirs = 2;
  std::vector<int64_t> lens = {4, 2, 0};
  Tensor x, w, r, b, sl, h0, c0, p;
  explicit Lstm(DataType dt = DataType::kFloat32) {
    x = Rand({seq, batch, in}, 1, dt);
    w = Rand({dirs, 4 * hs, in}, 2, dt);
    r = Rand({dirs, 4 * hs, hs}, 3, dt);
    b = Rand({dirs, 8 * hs}, 4, dt);
    h0 = Rand({dirs, batch, hs}, 5, dt);
    c0 = Rand({dirs, batch, hs}, 6, dt);
    p = Rand({dirs, 3 * hs}, 7, dt);
    sl = Tensor(DataType::kInt32, {batch});
    for (int64_t i = 0; i < batch; ++i) sl.SetFromDouble(i, static_cast<double>(lens[i]));
  }
  testing::OneNode MakeNode(int64_t layout = 0) const {
    testing::OneNode t("LSTM", 8, 3, 22, "lstm_node");
    t.n->attrs["direction"] = Attribute::String("bidirectional");
    t.n->attrs["hidden_size"] = Attribute::Int(hs);
    t.n->attrs["layout"] = Attribute::Int(layout);
    return t;
  }
};

TEST(RnnOps, BidirectionalLstmWithSequenceLensMatchesReference) {
  Lstm m;
  auto t = m.MakeNode();
  auto res = t.Run({&m.x, &m.w, &m.r, &m.b, &m.sl, &m.h0, &m.c0, &m.p});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const Ref ref = RefLstm(m.x, m.w, m.r, m.b, m.h0, m.c0, m.p, m.lens, m.hs);
  ASSERT_EQ((*res)[0].shape(), (std::vector<int64_t>{m.seq, m.dirs, m.batch, m.hs}));
  ASSERT_EQ((*res)[1].shape(), (std::vector<int64_t>{m.dirs, m.batch, m.hs}));
  ExpectNear((*res)[0], ref.y, 1e-5);
  ExpectNear((*res)[1], ref.yh, 1e-5);
  ExpectNear((*res)[2], ref.yc, 1e-5);
  // Entry 1 (length 2): Y past step 1 is zero; the forward Y_h is Y at step 1, the backward one Y at step 0.
  const Tensor& y = (*res)[0];
  for (int64_t j = 0; j < m.hs; ++j) {
    EXPECT_EQ(y.GetAsDouble(((3 * 2 + 0) * 3 + 1) * 3 + j), 0.0);
    EXPECT_EQ((*res)[1].GetAsDouble((0 * 3 + 1) * 3 + j), y.GetAsDouble(((1 * 2 + 0) * 3 + 1) * 3 + j));
    EXPECT_EQ((*res)[1].GetAsDouble((1 * 3 + 1) * 3 + j), y.GetAsDouble(((0 * 2 + 1) * 3 + 1) * 3 + j));
  }

  // Layout 1 (batch first) gives the same numbers transposed.
  auto t1 = m.MakeNode(1);
  Tensor x1 = Swap01(m.x), h1 = Swap01(m.h0), c1 = Swap01(m.c0);
  auto r1 = t1.Run({&x1, &m.w, &m.r, &m.b, &m.sl, &h1, &c1, &m.p});
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_EQ((*r1)[0].shape(), (std::vector<int64_t>{m.batch, m.seq, m.dirs, m.hs}));
  for (int64_t s = 0; s < m.seq; ++s)
    for (int64_t d = 0; d < m.dirs; ++d)
      for (int64_t b = 0; b < m.batch; ++b)
        for (int64_t j = 0; j < m.hs; ++j)
          EXPECT_EQ((*r1)[0].GetAsDouble(((b * m.seq + s) * m.dirs + d) * m.hs + j),
                    y.GetAsDouble(((s * m.dirs + d) * m.batch + b) * m.hs + j));
  EXPECT_EQ(Swap01((*r1)[1]).ToFloatVector(), (*res)[1].ToFloatVector());
  EXPECT_EQ(Swap01((*r1)[2]).ToFloatVector(), (*res)[2].ToFloatVector());
}

TEST(RnnOps, LstmFloat16AndOmittedOutputs) {
  Lstm m(DataType::kFloat16);
  auto t = m.MakeNode();
  t.n->outputs[0] = nullptr;  // Y omitted: only Y_h and Y_c
  auto res = t.Run({&m.x, &m.w, &m.r, &m.b, &m.sl, &m.h0, &m.c0, &m.p});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_FALSE((*res)[0].defined());
  ASSERT_EQ((*res)[1].dtype(), DataType::kFloat16);
  const Ref ref = RefLstm(m.x, m.w, m.r, m.b, m.h0, m.c0, m.p, m.lens, m.hs);
  ExpectNear((*res)[1], ref.yh, 2e-3);
  ExpectNear((*res)[2], ref.yc, 2e-3);
}

TEST(RnnOps, GruMatchesReferenceWithAndWithoutLinearBeforeReset) {
  const int64_t seq = 5, batch = 2, in = 4, hs = 3, dirs = 2;
  const std::vector<int64_t> lens = {5, 3};
  Tensor x = Rand({seq, batch, in}, 11), w = Rand({dirs, 3 * hs, in}, 12), r = Rand({dirs, 3 * hs, hs}, 13);
  Tensor b = Rand({dirs, 6 * hs}, 14), h0 = Rand({dirs, batch, hs}, 15);
  Tensor sl = Tensor::FromInt64(lens);
  for (int64_t lbr : {1, 0}) {
    testing::OneNode t("GRU", 6, 2, 14, "gru_node");
    t.n->attrs["direction"] = Attribute::String("bidirectional");
    t.n->attrs["hidden_size"] = Attribute::Int(hs);
    t.n->attrs["linear_before_reset"] = Attribute::Int(lbr);
    auto res = t.Run({&x, &w, &r, &b, &sl, &h0});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    const Ref ref = RefGru(x, w, r, b, h0, lens, hs, lbr != 0);
    ExpectNear((*res)[0], ref.y, 1e-5);
    ExpectNear((*res)[1], ref.yh, 1e-5);
  }
  // The two forms differ (else the test would not tell them apart).
  const Ref a = RefGru(x, w, r, b, h0, lens, hs, true), c = RefGru(x, w, r, b, h0, lens, hs, false);
  EXPECT_GT(std::fabs(a.yh[0] - c.yh[0]), 1e-4);
}

TEST(RnnOps, RnnActivationWithAlphaAndClip) {
  // One step of a reverse RNN: h = LeakyRelu(clip(W x + R h0 + Wb + Rb)), alpha from activation_alpha.
  const int64_t batch = 2, in = 3, hs = 4;
  Tensor x = Rand({1, batch, in}, 21), w = Rand({1, hs, in}, 22), r = Rand({1, hs, hs}, 23);
  Tensor b = Rand({1, 2 * hs}, 24), h0 = Rand({1, batch, hs}, 25);
  for (int64_t i = 0; i < x.numel(); ++i) x.SetFromDouble(i, 4 * x.GetAsDouble(i));  // some values beyond the clip
  testing::OneNode t("RNN", 6, 2, 7, "rnn_node");
  t.n->attrs["direction"] = Attribute::String("reverse");
  t.n->attrs["activations"] = Attribute{};
  t.n->attrs["activations"].kind = Attribute::Kind::kStrings;
  t.n->attrs["activations"].strings = {"LeakyRelu"};
  t.n->attrs["activation_alpha"] = Attribute::Floats({0.25f});
  t.n->attrs["clip"] = Attribute::Float(0.75f);
  auto res = t.Run({&x, &w, &r, &b, nullptr, &h0});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  std::vector<double> want(batch * hs);
  int clipped = 0;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t j = 0; j < hs; ++j) {
      double v = b.GetAsDouble(j) + b.GetAsDouble(hs + j);
      for (int64_t i = 0; i < in; ++i) v += w.GetAsDouble(j * in + i) * x.GetAsDouble(n * in + i);
      for (int64_t k = 0; k < hs; ++k) v += r.GetAsDouble(j * hs + k) * h0.GetAsDouble(n * hs + k);
      clipped += std::fabs(v) > 0.75;
      v = std::min(std::max(v, -0.75), 0.75);
      want[n * hs + j] = v >= 0 ? v : 0.25 * v;
    }
  EXPECT_GT(clipped, 0);
  ExpectNear((*res)[0], want, 1e-6);
  ExpectNear((*res)[1], want, 1e-6);
}

TensorInfo Info(Shape s, DataType dt = DataType::kFloat32) { return TensorInfo{dt, std::move(s), true}; }

TEST(RnnOps, SymbolicShapes) {
  {
    testing::OneNode t("LSTM", 3, 3, 22, "lstm_node");
    t.n->attrs["direction"] = Attribute::String("bidirectional");  // no hidden_size: R's last dim gives it
    InferContext ctx{*t.n, {}, {}};
    ctx.inputs = {Info({Dim::Symbol("seq"), Dim::Symbol("batch"), Dim(5)}), Info({Dim(2), Dim(12), Dim(5)}),
                  Info({Dim(2), Dim(12), Dim(3)})};
    ctx.outputs.resize(3);
    ASSERT_TRUE(InferNode(ctx).ok());
    EXPECT_EQ(ShapeToString(ctx.outputs[0].shape), "[seq,2,batch,3]");
    EXPECT_EQ(ShapeToString(ctx.outputs[1].shape), "[2,batch,3]");
    EXPECT_EQ(ShapeToString(ctx.outputs[2].shape), "[2,batch,3]");
  }
  {
    testing::OneNode t("GRU", 3, 2, 14, "gru_node");
    t.n->attrs["layout"] = Attribute::Int(1);
    t.n->attrs["hidden_size"] = Attribute::Int(6);
    InferContext ctx{*t.n, {}, {}};
    ctx.inputs = {Info({Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(4)}), Info({Dim(1), Dim(18), Dim(4)}),
                  Info({Dim(1), Dim(18), Dim::Unknown()})};
    ctx.outputs.resize(2);
    ASSERT_TRUE(InferNode(ctx).ok());
    EXPECT_EQ(ShapeToString(ctx.outputs[0].shape), "[batch,seq,1,6]");
    EXPECT_EQ(ShapeToString(ctx.outputs[1].shape), "[batch,1,6]");
  }
}

TEST(RnnOps, BadAttributesAndShapesAreRefused) {
  struct Case {
    const char* what;
    std::string op;
    std::vector<std::pair<std::string, Attribute>> attrs;
    std::vector<Shape> inputs;  // X, W, R
  };
  auto strings = [](std::vector<std::string> v) {
    Attribute a;
    a.kind = Attribute::Kind::kStrings;
    a.strings = std::move(v);
    return a;
  };
  const Shape x = {Dim(2), Dim(1), Dim(3)};
  const std::vector<Case> cases = {
      {"unknown direction", "RNN", {{"direction", Attribute::String("sideways")}}, {x, {1, 4, 3}, {1, 4, 4}}},
      {"unknown activation", "GRU", {{"activations", strings({"Sigmoid", "Gelu"})}}, {x, {1, 6, 3}, {1, 6, 2}}},
      {"activation count", "LSTM", {{"activations", strings({"Sigmoid", "Tanh"})}}, {x, {1, 8, 3}, {1, 8, 2}}},
      {"hidden_size vs R", "LSTM", {{"hidden_size", Attribute::Int(4)}}, {x, {1, 12, 3}, {1, 12, 3}}},
      {"negative hidden_size", "RNN", {{"hidden_size", Attribute::Int(-2)}}, {x, {1, 4, 3}, {1, 4, 4}}},
      {"X rank", "RNN", {}, {{Dim(2), Dim(3)}, {1, 4, 3}, {1, 4, 4}}},
      {"layout", "RNN", {{"layout", Attribute::Int(2)}}, {x, {1, 4, 3}, {1, 4, 4}}},
      {"W directions", "RNN", {}, {x, {2, 4, 3}, {2, 4, 4}}},
      {"W input size", "GRU", {}, {x, {1, 6, 5}, {1, 6, 2}}},
      {"clip", "LSTM", {{"clip", Attribute::Float(-1.f)}}, {x, {1, 8, 3}, {1, 8, 2}}},
  };
  for (const Case& c : cases) {
    testing::OneNode t(c.op, 3, 2, 14, "bad_node");
    for (const auto& [k, v] : c.attrs) t.n->attrs[k] = v;
    InferContext ctx{*t.n, {}, {}};
    for (const Shape& s : c.inputs) ctx.inputs.push_back(Info(s));
    ctx.outputs.resize(2);
    Status st = InferNode(ctx);
    ASSERT_FALSE(st.ok()) << c.what;
    EXPECT_NE(st.message().find("bad_node"), std::string::npos) << c.what << ": " << st.message();
  }

  // A length past seq_length is refused at run time, naming the node.
  Lstm m;
  m.sl.SetFromDouble(0, 9);
  auto t = m.MakeNode();
  auto res = t.Run({&m.x, &m.w, &m.r, &m.b, &m.sl, &m.h0, &m.c0, &m.p});
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("lstm_node"), std::string::npos) << res.status().message();
}

}  // namespace
}  // namespace kiln
