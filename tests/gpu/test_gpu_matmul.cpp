// Differential tests of the matmul family's CUDA layers (MatMul, Gemm, kiln.FusedGemm, kiln.FusedMatMul, Einsum)
// against the CPU reference: odd sizes, batching and broadcasting, 1-D operands, Gemm attributes and C shapes,
// fused epilogues, TF32 on/off, float16/bfloat16, the generic kernel's types, and every tactic the heuristic lists.
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape64 = std::vector<int64_t>;
constexpr DataType kF32 = DataType::kFloat32;
constexpr DataType kF16 = DataType::kFloat16;
constexpr DataType kBF16 = DataType::kBFloat16;

// Tolerances: float32 without TF32 is tight; TF32/FP16/BF16 round their inputs or outputs to 10/7-bit mantissas.
constexpr double kTightAtol = 1e-4, kTightRtol = 1e-4;
constexpr double kTf32Atol = 3e-2, kTf32Rtol = 1e-2;
constexpr double kF16Atol = 3e-2, kF16Rtol = 1e-2;
constexpr double kBF16Atol = 1e-1, kBF16Rtol = 2e-2;

struct MatMulCase {
  Shape64 a, b;
};

const std::vector<MatMulCase>& MatMulCases() {
  static const std::vector<MatMulCase> cases = {
      {{1, 1}, {1, 1}},
      {{7, 33}, {33, 129}},
      {{33, 1000}, {1000, 7}},
      {{129, 7}, {7, 1}},
      {{1, 65}, {65, 1000}},
      {{33}, {33, 7}},                  // 1-D A
      {{7, 33}, {33}},                  // 1-D B
      {{33}, {33}},                     // both 1-D: a scalar
      {{3, 7, 33}, {3, 33, 5}},         // batched
      {{2, 3, 7, 9}, {9, 5}},           // B shared: batch folded into M
      {{7, 9}, {4, 9, 5}},              // A shared: stride-0 batch
      {{2, 1, 7, 9}, {1, 3, 9, 5}},     // broadcast both ways: host loop over groups
      {{3, 1, 4, 5, 6}, {2, 1, 6, 7}},  // rank 5, loop + folded inner batch
      {{5}, {3, 5, 7}},                 // 1-D A against a batch
      {{3, 7, 5}, {5}},                 // batch against a 1-D B
      {{2, 1, 3, 4, 5, 6}, {1, 2, 1, 1, 6, 3}},  // rank 6
  };
  return cases;
}

TEST(GpuMatMul, Float32NoTF32MatchesCpu) {
  uint32_t seed = 1;
  for (const auto& c : MatMulCases()) {
    EXPECT_TRUE(OneNode("MatMul").Input(Random(kF32, c.a, seed++)).Input(Random(kF32, c.b, seed++)).NoTF32()
                    .MatchesCpu(kTightAtol, kTightRtol))
        << ShapeToString(c.a) << " x " << ShapeToString(c.b);
  }
}

TEST(GpuMatMul, Float32TF32MatchesCpu) {
  uint32_t seed = 100;
  for (const auto& c : MatMulCases()) {
    EXPECT_TRUE(OneNode("MatMul").Input(Random(kF32, c.a, seed++)).Input(Random(kF32, c.b, seed++))
                    .MatchesCpu(kTf32Atol, kTf32Rtol))
        << ShapeToString(c.a) << " x " << ShapeToString(c.b);
  }
}

TEST(GpuMatMul, Float16AndBFloat16MatchCpu) {
  uint32_t seed = 200;
  for (const auto& c : MatMulCases()) {
    EXPECT_TRUE(OneNode("MatMul").Input(Random(kF16, c.a, seed++)).Input(Random(kF16, c.b, seed++))
                    .ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol))
        << "float16 " << ShapeToString(c.a) << " x " << ShapeToString(c.b);
    EXPECT_TRUE(OneNode("MatMul").Input(Random(kBF16, c.a, seed++)).Input(Random(kBF16, c.b, seed++))
                    .ReferenceInFloat32().MatchesCpu(kBF16Atol, kBF16Rtol))
        << "bfloat16 " << ShapeToString(c.a) << " x " << ShapeToString(c.b);
  }
}

TEST(GpuMatMul, ConstantWeightsAndEmptyShapes) {
  EXPECT_TRUE(OneNode("MatMul").Input(Random(kF32, {4, 7, 33}, 1)).Const(Random(kF32, {33, 17}, 2)).NoTF32()
                  .MatchesCpu(kTightAtol, kTightRtol));
  EXPECT_TRUE(OneNode("MatMul").Input(Random(kF32, {0, 5}, 3)).Input(Random(kF32, {5, 3}, 4)).MatchesCpu());
  EXPECT_TRUE(OneNode("MatMul").Input(Random(kF32, {2, 0, 4, 5}, 3)).Input(Random(kF32, {5, 3}, 4)).MatchesCpu());
  // K = 0: the product is all zeros.
  EXPECT_TRUE(OneNode("MatMul").Input(Random(kF32, {4, 0}, 5)).Input(Random(kF32, {0, 3}, 6)).MatchesCpu());
  EXPECT_TRUE(OneNode("MatMul").Input(Random(kF16, {2, 4, 0}, 5)).Input(Random(kF16, {0, 3}, 6)).MatchesCpu());
}

TEST(GpuMatMul, GenericTypesAreExact) {
  uint32_t seed = 300;
  for (DataType t : {DataType::kInt32, DataType::kInt64}) {
    for (const auto& c : MatMulCases())
      EXPECT_TRUE(OneNode("MatMul").Input(Random(t, c.a, seed++, -5, 5)).Input(Random(t, c.b, seed++, -5, 5))
                      .MatchesCpu())
          << DataTypeName(t) << " " << ShapeToString(c.a) << " x " << ShapeToString(c.b);
  }
  for (DataType t : {DataType::kUInt32, DataType::kUInt64})
    EXPECT_TRUE(OneNode("MatMul").Input(Random(t, {2, 7, 33}, seed++, 0, 9)).Input(Random(t, {33, 5}, seed++, 0, 9))
                    .MatchesCpu())
        << DataTypeName(t);
  for (const auto& c : MatMulCases())
    EXPECT_TRUE(OneNode("MatMul").Input(Random(DataType::kFloat64, c.a, seed++))
                    .Input(Random(DataType::kFloat64, c.b, seed++)).MatchesCpu(1e-10, 1e-10))
        << "float64 " << ShapeToString(c.a) << " x " << ShapeToString(c.b);
}

// ---- Gemm ----

struct GemmCase {
  int64_t m, n, k;
  int ta, tb;
  float alpha, beta;
  Shape64 c;  // empty + has_c false: no C
  bool has_c;
};

std::vector<GemmCase> GemmCases() {
  std::vector<GemmCase> cases;
  for (int ta : {0, 1})
    for (int tb : {0, 1}) {
      cases.push_back({7, 33, 129, ta, tb, 1.f, 1.f, {}, false});
      cases.push_back({33, 129, 7, ta, tb, 0.5f, 1.f, {129}, true});       // C row: bias epilogue
      cases.push_back({1, 1000, 33, ta, tb, 1.f, 2.f, {1, 1000}, true});   // scaled row: filled
    }
  cases.push_back({7, 33, 129, 0, 1, 1.5f, -0.5f, {7, 33}, true});  // full C read with beta
  cases.push_back({7, 33, 129, 0, 0, 1.f, 1.f, {7, 1}, true});      // column
  cases.push_back({7, 33, 129, 1, 0, 1.f, 0.25f, {}, true});        // scalar
  cases.push_back({7, 33, 129, 0, 0, 1.f, 1.f, {1}, true});
  cases.push_back({7, 33, 129, 0, 0, 2.f, 0.f, {7, 33}, true});     // beta 0 ignores C
  cases.push_back({1000, 1, 1, 0, 0, 1.f, 1.f, {1}, true});
  cases.push_back({4, 3, 0, 0, 0, 1.f, 0.5f, {3}, true});           // K = 0: Y = beta * C
  return cases;
}

OneNode GemmNode(const std::string& op, const GemmCase& g, DataType t, uint32_t seed, double lo = -1, double hi = 1) {
  OneNode node(op, op == "Gemm" ? "" : "kiln");
  node.Input(Random(t, g.ta ? Shape64{g.k, g.m} : Shape64{g.m, g.k}, seed, lo, hi))
      .Const(Random(t, g.tb ? Shape64{g.n, g.k} : Shape64{g.k, g.n}, seed + 1, lo, hi));
  if (g.has_c) node.Input(Random(t, g.c, seed + 2, lo, hi));
  node.Attr("transA", Attribute::Int(g.ta)).Attr("transB", Attribute::Int(g.tb))
      .Attr("alpha", Attribute::Float(g.alpha)).Attr("beta", Attribute::Float(g.beta));
  return node;
}

std::string Describe(const GemmCase& g) {
  return "M=" + std::to_string(g.m) + " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k) +
         " transA=" + std::to_string(g.ta) + " transB=" + std::to_string(g.tb) + " alpha=" + std::to_string(g.alpha) +
         " beta=" + std::to_string(g.beta) + " C=" + (g.has_c ? ShapeToString(g.c) : "none");
}

TEST(GpuGemm, AttributesAndCShapesMatchCpu) {
  uint32_t seed = 1;
  for (const auto& g : GemmCases()) {
    EXPECT_TRUE(GemmNode("Gemm", g, kF32, seed += 3).NoTF32().MatchesCpu(kTightAtol, kTightRtol)) << Describe(g);
    EXPECT_TRUE(GemmNode("Gemm", g, kF32, seed += 3).MatchesCpu(kTf32Atol, kTf32Rtol)) << "TF32 " << Describe(g);
    EXPECT_TRUE(GemmNode("Gemm", g, kF16, seed += 3).ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol))
        << "float16 " << Describe(g);
    EXPECT_TRUE(GemmNode("Gemm", g, kBF16, seed += 3).ReferenceInFloat32().MatchesCpu(kBF16Atol, kBF16Rtol))
        << "bfloat16 " << Describe(g);
  }
}

TEST(GpuGemm, GenericTypesMatchCpu) {
  uint32_t seed = 500;
  for (const auto& g : GemmCases()) {
    EXPECT_TRUE(GemmNode("Gemm", g, DataType::kFloat64, seed += 3).MatchesCpu(1e-10, 1e-10)) << Describe(g);
    GemmCase gi = g;
    gi.alpha = g.alpha == 0.5f ? 3.f : 1.f;  // integer-valued scales keep the integer results exact
    gi.beta = g.beta == 0.f ? 0.f : 2.f;
    for (DataType t : {DataType::kInt32, DataType::kInt64})
      EXPECT_TRUE(GemmNode("Gemm", gi, t, seed += 3, -5, 5).MatchesCpu()) << DataTypeName(t) << " " << Describe(gi);
  }
}

// ---- FusedGemm / FusedMatMul ----

struct ActCase {
  const char* name;
  float alpha, beta;
};
const std::vector<ActCase> kActs = {{"None", 0, 0},      {"Relu", 0, 0},     {"LeakyRelu", 0.1f, 0},
                                    {"Sigmoid", 0, 0},   {"Tanh", 0, 0},     {"Clip", -0.5f, 0.75f},
                                    {"HardSigmoid", 0.2f, 0.5f}, {"SiLU", 0, 0}, {"Gelu", 0, 0},
                                    {"GeluTanh", 0, 0}};

OneNode& WithAct(OneNode& n, const ActCase& a) {
  return n.Attr("kiln_activation", Attribute::String(a.name))
      .Attr("kiln_activation_alpha", Attribute::Float(a.alpha))
      .Attr("kiln_activation_beta", Attribute::Float(a.beta));
}

// kiln.FusedMatMul(A, B, bias[N]) of case c with activation a; consumes three seeds.
OneNode FusedMatMulNode(const MatMulCase& c, const ActCase& a, DataType t, uint32_t& seed) {
  OneNode node("FusedMatMul", "kiln");
  node.Input(Random(t, c.a, seed++)).Const(Random(t, c.b, seed++)).Const(Random(t, {c.b.back()}, seed++));
  WithAct(node, a);
  return node;
}

TEST(GpuFusedGemm, ActivationsMatchCpu) {
  const std::vector<GemmCase> cases = {
      {7, 33, 129, 0, 0, 1.f, 1.f, {}, false},          // activation epilogue alone
      {33, 129, 7, 0, 1, 0.5f, 1.f, {129}, true},       // bias + activation epilogue
      {7, 33, 65, 1, 0, 1.f, 0.5f, {7, 33}, true},      // full C: activation after the GEMM
      {7, 33, 65, 0, 0, 1.f, 1.f, {7, 1}, true},        // filled C
  };
  uint32_t seed = 700;
  for (const auto& g : cases)
    for (const auto& a : kActs) {
      OneNode n32 = GemmNode("FusedGemm", g, kF32, seed += 3);
      EXPECT_TRUE(WithAct(n32, a).NoTF32().MatchesCpu(kTightAtol, kTightRtol)) << a.name << " " << Describe(g);
      OneNode n16 = GemmNode("FusedGemm", g, kF16, seed += 3);
      EXPECT_TRUE(WithAct(n16, a).ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol))
          << "float16 " << a.name << " " << Describe(g);
      OneNode nb16 = GemmNode("FusedGemm", g, kBF16, seed += 3);
      EXPECT_TRUE(WithAct(nb16, a).ReferenceInFloat32().MatchesCpu(kBF16Atol, kBF16Rtol))
          << "bfloat16 " << a.name << " " << Describe(g);
      OneNode n64 = GemmNode("FusedGemm", g, DataType::kFloat64, seed += 3);
      EXPECT_TRUE(WithAct(n64, a).MatchesCpu(1e-10, 1e-10)) << "float64 " << a.name << " " << Describe(g);
    }
}

TEST(GpuFusedMatMul, ActivationsAndBatchesMatchCpu) {
  const std::vector<MatMulCase> cases = {
      {{7, 33}, {33, 129}}, {{2, 7, 33}, {33, 129}}, {{3, 7, 9}, {3, 9, 65}}, {{7, 9}, {4, 9, 5}},
      {{2, 1, 7, 9}, {1, 3, 9, 5}}, {{33}, {33, 7}}, {{1, 1000}, {1000, 33}}, {{4, 0}, {0, 3}},
  };
  uint32_t seed = 900;
  for (const auto& c : cases)
    for (const auto& a : kActs) {
      auto make = [&](DataType t) { return FusedMatMulNode(c, a, t, seed); };
      const std::string what = std::string(a.name) + " " + ShapeToString(c.a) + " x " + ShapeToString(c.b);
      EXPECT_TRUE(make(kF32).NoTF32().MatchesCpu(kTightAtol, kTightRtol)) << what;
      EXPECT_TRUE(make(kF16).ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol)) << "float16 " << what;
      EXPECT_TRUE(make(kBF16).ReferenceInFloat32().MatchesCpu(kBF16Atol, kBF16Rtol)) << "bfloat16 " << what;
      EXPECT_TRUE(make(DataType::kFloat64).MatchesCpu(1e-10, 1e-10)) << "float64 " << what;
      // The separate post-op kernel instead of cuBLASLt's epilogue.
      EXPECT_TRUE(make(kF32).NoTF32().Tactic("postop/cublaslt:heuristic").MatchesCpu(kTightAtol, kTightRtol))
          << "postop " << what;
    }
}

// Post-ops on 16-byte packs: the bias (when the post-op adds it) needs N a multiple of the pack (8 halves, 4
// floats); an activation alone needs the element count to be. N = 12 keeps float16 with a bias on the scalar
// kernel; the FusedGemm without C runs the activation alone.
TEST(GpuFusedMatMul, PackedPostOpsMatchCpu) {
  const std::vector<MatMulCase> cases = {
      {{7, 33}, {33, 64}}, {{2, 5, 16}, {16, 24}}, {{9, 12}, {12, 12}}, {{3, 40}, {40, 8}}, {{1, 8}, {8, 1000}}};
  uint32_t seed = 1500;
  for (const auto& c : cases)
    for (const auto& a : kActs) {
      auto make = [&](DataType t) { return FusedMatMulNode(c, a, t, seed); };
      const std::string what = std::string(a.name) + " " + ShapeToString(c.a) + " x " + ShapeToString(c.b);
      for (const char* tactic : {"", "postop/cublaslt:heuristic"}) {  // "": the first listed tactic
        EXPECT_TRUE(make(kF32).NoTF32().Tactic(tactic).MatchesCpu(kTightAtol, kTightRtol)) << tactic << " " << what;
        EXPECT_TRUE(make(kF16).ReferenceInFloat32().Tactic(tactic).MatchesCpu(kF16Atol, kF16Rtol))
            << tactic << " float16 " << what;
        EXPECT_TRUE(make(kBF16).ReferenceInFloat32().Tactic(tactic).MatchesCpu(kBF16Atol, kBF16Rtol))
            << tactic << " bfloat16 " << what;
      }
    }
  const GemmCase no_c = {8, 12, 16, 0, 0, 1.f, 1.f, {}, false};
  for (const auto& a : kActs) {
    OneNode n32 = GemmNode("FusedGemm", no_c, kF32, seed += 3);
    EXPECT_TRUE(WithAct(n32, a).NoTF32().MatchesCpu(kTightAtol, kTightRtol)) << a.name;
    OneNode n16 = GemmNode("FusedGemm", no_c, kF16, seed += 3);
    EXPECT_TRUE(WithAct(n16, a).ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol)) << "float16 " << a.name;
  }
}

// ---- residual input (kiln.FusedMatMul / kiln.FusedGemm input 3: cuBLASLt's C with beta 1, C != D) ----

// The row-major product shape of a MatMul (numpy rules).
Shape64 MatMulOut(Shape64 a, Shape64 b) {
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  const size_t r = std::max(a.size(), b.size()) - 2;
  Shape64 out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + a.size() - 2 >= r ? a[i + a.size() - 2 - r] : 1;
    const int64_t db = i + b.size() - 2 >= r ? b[i + b.size() - 2 - r] : 1;
    out[i] = da == 1 ? db : da;
  }
  if (!a1) out.push_back(a[a.size() - 2]);
  if (!b1) out.push_back(b.back());
  return out;
}

OneNode ResidualMatMul(const MatMulCase& c, DataType t, uint32_t seed) {
  OneNode node("FusedMatMul", "kiln");
  node.Input(Random(t, c.a, seed)).Const(Random(t, c.b, seed + 1)).Const(Random(t, {c.b.back()}, seed + 2))
      .Input(Random(t, MatMulOut(c.a, c.b), seed + 3)).Attr("kiln_activation", Attribute::String("None"));
  return node;
}

TEST(GpuFusedMatMul, ResidualMatchesCpu) {
  const std::vector<MatMulCase> cases = {
      {{7, 33}, {33, 129}},        {{2, 7, 33}, {33, 129}},      // batch folded into M
      {{3, 7, 9}, {3, 9, 65}},     {{7, 9}, {4, 9, 5}},          // strided batch; A broadcast
      {{2, 1, 7, 9}, {1, 3, 9, 5}},                              // host loop over the outer batch
      {{33}, {33, 7}},             {{1, 1000}, {1000, 33}},      // 1-D A; long K
      {{5, 17, 31}, {31, 3}},      {{4, 0}, {0, 3}},             // odd sizes; K = 0: Y = R + bias
      {{2, 128, 768}, {768, 768}},                               // a BERT-base dense layer
  };
  uint32_t seed = 1300;
  for (const auto& c : cases) {
    const std::string what = ShapeToString(c.a) + " x " + ShapeToString(c.b);
    EXPECT_TRUE(ResidualMatMul(c, kF32, seed += 4).NoTF32().MatchesCpu(kTightAtol, kTightRtol)) << what;
    EXPECT_TRUE(ResidualMatMul(c, kF32, seed += 4).MatchesCpu(kTf32Atol, kTf32Rtol)) << "TF32 " << what;
    EXPECT_TRUE(ResidualMatMul(c, kF16, seed += 4).ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol))
        << "float16 " << what;
    EXPECT_TRUE(ResidualMatMul(c, kBF16, seed += 4).ReferenceInFloat32().MatchesCpu(kBF16Atol, kBF16Rtol))
        << "bfloat16 " << what;
    EXPECT_TRUE(ResidualMatMul(c, kF32, seed += 4).NoTF32().Tactic("postop/cublaslt:heuristic")
                    .MatchesCpu(kTightAtol, kTightRtol))
        << "postop " << what;
    EXPECT_TRUE(ResidualMatMul(c, kF16, seed += 4).ReferenceInFloat32().Tactic("postop/cublaslt:heuristic")
                    .MatchesCpu(kF16Atol, kF16Rtol))
        << "postop float16 " << what;
  }
}

// FusedGemm with a residual: no C (input 2 omitted) or a bias row C with beta 1.
OneNode ResidualGemm(const GemmCase& g, DataType t, uint32_t seed) {
  OneNode node("FusedGemm", "kiln");
  node.Input(Random(t, g.ta ? Shape64{g.k, g.m} : Shape64{g.m, g.k}, seed))
      .Const(Random(t, g.tb ? Shape64{g.n, g.k} : Shape64{g.k, g.n}, seed + 1));
  if (g.has_c) node.Const(Random(t, g.c, seed + 2));
  else node.Omitted();
  node.Input(Random(t, {g.m, g.n}, seed + 3))
      .Attr("transA", Attribute::Int(g.ta)).Attr("transB", Attribute::Int(g.tb))
      .Attr("alpha", Attribute::Float(g.alpha)).Attr("beta", Attribute::Float(g.beta))
      .Attr("kiln_activation", Attribute::String("None"));
  return node;
}

std::vector<GemmCase> ResidualGemmCases() {
  std::vector<GemmCase> cases;
  for (int ta : {0, 1})
    for (int tb : {0, 1}) {
      cases.push_back({7, 33, 129, ta, tb, 1.f, 1.f, {}, false});
      cases.push_back({33, 129, 7, ta, tb, 0.5f, 1.f, {129}, true});     // bias epilogue + C = R
      cases.push_back({1, 1000, 33, ta, tb, 1.f, 1.f, {1, 1000}, true});  // M = 1: [1, N] C is still the bias
    }
  cases.push_back({1000, 1, 1, 0, 0, 1.f, 1.f, {1}, true});
  cases.push_back({4, 3, 0, 0, 0, 1.f, 1.f, {3}, true});  // K = 0: Y = R + C
  cases.push_back({4, 3, 0, 0, 0, 1.f, 1.f, {}, false});  // K = 0: Y = R
  cases.push_back({9, 31, 17, 0, 1, 2.f, 0.f, {31}, true});  // beta 0: C ignored
  return cases;
}

TEST(GpuFusedGemm, ResidualMatchesCpu) {
  uint32_t seed = 1700;
  for (const auto& g : ResidualGemmCases()) {
    EXPECT_TRUE(ResidualGemm(g, kF32, seed += 4).NoTF32().MatchesCpu(kTightAtol, kTightRtol)) << Describe(g);
    EXPECT_TRUE(ResidualGemm(g, kF32, seed += 4).MatchesCpu(kTf32Atol, kTf32Rtol)) << "TF32 " << Describe(g);
    EXPECT_TRUE(ResidualGemm(g, kF16, seed += 4).ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol))
        << "float16 " << Describe(g);
    EXPECT_TRUE(ResidualGemm(g, kBF16, seed += 4).ReferenceInFloat32().MatchesCpu(kBF16Atol, kBF16Rtol))
        << "bfloat16 " << Describe(g);
    EXPECT_TRUE(ResidualGemm(g, kF32, seed += 4).NoTF32().Tactic("postop/cublaslt:heuristic")
                    .MatchesCpu(kTightAtol, kTightRtol))
        << "postop " << Describe(g);
  }
}

TEST(GpuFusedGemm, ResidualWithActivationOrFullCIsRefused) {
  const GemmCase g{7, 33, 65, 0, 0, 1.f, 1.f, {}, false};
  OneNode act = ResidualGemm(g, kF32, 1);
  auto r = act.Attr("kiln_activation", Attribute::String("Relu")).NoTF32().MatchesCpu();
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("residual"), std::string::npos) << r.message();
  const GemmCase full{7, 33, 65, 0, 0, 1.f, 1.f, {7, 33}, true};
  auto r2 = ResidualGemm(full, kF32, 2).NoTF32().MatchesCpu();
  ASSERT_FALSE(r2);
  EXPECT_NE(std::string(r2.message()).find("residual"), std::string::npos) << r2.message();
}

// ---- tactics ----

// The factory's tactics for a one-node graph at the given shapes.
std::vector<std::string> TacticsOf(const std::string& op, const std::string& domain, DataType t,
                                   const std::vector<Shape64>& ins, const Shape64& out, bool tf32,
                                   const std::map<std::string, Attribute>& attrs = {}) {
  Graph g;
  Node* n = g.AddNode(op, "node0");
  n->domain = domain;
  n->attrs = attrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    Value* v = g.GetOrAddValue("in" + std::to_string(i));
    v->dtype = t;
    v->shape = FromStatic(ins[i]);
    v->has_shape = true;
    n->inputs.push_back(v);
  }
  Value* o = g.GetOrAddValue("out0");
  o->dtype = t;
  o->shape = FromStatic(out);
  o->has_shape = true;
  n->outputs.push_back(o);
  cuda::LayerSpec spec{*n, ins, {out}, tf32};
  auto r = cuda::TacticsFor(spec);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<std::string>{};
}

TEST(GpuMatMul, EveryHeuristicTacticMatchesCpu) {
  const Shape64 a{3, 33, 65}, b{65, 129}, y{3, 33, 129};
  for (DataType t : {kF32, kF16}) {
    const bool tf32 = false;
    const auto tactics = TacticsOf("MatMul", "", t, {a, b}, y, tf32);
    ASSERT_FALSE(tactics.empty());
    const Tensor ta = Random(t, a, 1), tb = Random(t, b, 2);
    for (const auto& tac : tactics) {
      ASSERT_EQ(tac.rfind("cublaslt:", 0), 0u) << tac;
      OneNode node("MatMul");
      node.Input(ta).Input(tb).NoTF32().Tactic(tac);
      if (t == kF32) EXPECT_TRUE(node.MatchesCpu(kTightAtol, kTightRtol)) << tac;
      else EXPECT_TRUE(node.ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol)) << tac;
    }
    // The same tactics at other shapes (dynamic shapes) fall back to the heuristic and stay correct.
    OneNode other("MatMul");
    other.Input(Random(t, {5, 7, 65}, 3)).Input(Random(t, b, 4)).NoTF32().Tactic(tactics.front());
    if (t == kF32) EXPECT_TRUE(other.MatchesCpu(kTightAtol, kTightRtol));
    else EXPECT_TRUE(other.ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol));
  }
}

TEST(GpuFusedMatMul, EveryHeuristicTacticMatchesCpu) {
  const Shape64 a{2, 33, 65}, b{65, 129}, bias{129}, y{2, 33, 129};
  for (const char* act : {"Relu", "GeluTanh", "Sigmoid"}) {
    const std::map<std::string, Attribute> attrs = {{"kiln_activation", Attribute::String(act)}};
    const auto tactics = TacticsOf("FusedMatMul", "kiln", kF16, {a, b, bias}, y, false, attrs);
    ASSERT_FALSE(tactics.empty()) << act;
    for (const auto& tac : tactics) {
      OneNode node("FusedMatMul", "kiln");
      node.Input(Random(kF16, a, 1)).Const(Random(kF16, b, 2)).Const(Random(kF16, bias, 3))
          .Attr("kiln_activation", Attribute::String(act)).NoTF32().Tactic(tac);
      EXPECT_TRUE(node.ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol)) << act << " " << tac;
    }
  }
}

TEST(GpuFusedMatMul, ResidualEveryHeuristicTacticMatchesCpu) {
  const Shape64 a{2, 33, 65}, b{65, 129}, bias{129}, y{2, 33, 129};
  const std::map<std::string, Attribute> attrs = {{"kiln_activation", Attribute::String("None")}};
  for (DataType t : {kF32, kF16, kBF16}) {
    const auto tactics = TacticsOf("FusedMatMul", "kiln", t, {a, b, bias, y}, y, false, attrs);
    ASSERT_FALSE(tactics.empty()) << DataTypeName(t);
    for (const auto& tac : tactics) {
      OneNode node("FusedMatMul", "kiln");
      node.Input(Random(t, a, 1)).Const(Random(t, b, 2)).Const(Random(t, bias, 3)).Input(Random(t, y, 4))
          .Attr("kiln_activation", Attribute::String("None")).NoTF32().Tactic(tac);
      if (t == kF32) EXPECT_TRUE(node.MatchesCpu(kTightAtol, kTightRtol)) << tac;
      else if (t == kF16) EXPECT_TRUE(node.ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol)) << tac;
      else EXPECT_TRUE(node.ReferenceInFloat32().MatchesCpu(kBF16Atol, kBF16Rtol)) << tac;
    }
  }
}

TEST(GpuFusedGemm, ResidualEveryHeuristicTacticMatchesCpu) {
  const std::map<std::string, Attribute> attrs = {{"transB", Attribute::Int(1)}, {"alpha", Attribute::Float(0.5f)},
                                                  {"kiln_activation", Attribute::String("None")}};
  for (DataType t : {kF32, kF16}) {
    const auto tactics = TacticsOf("FusedGemm", "kiln", t, {{33, 1000}, {7, 1000}, {7}, {33, 7}}, {33, 7}, false, attrs);
    ASSERT_FALSE(tactics.empty());
    for (const auto& tac : tactics) {
      OneNode node("FusedGemm", "kiln");
      node.Input(Random(t, {33, 1000}, 1)).Const(Random(t, {7, 1000}, 2)).Const(Random(t, {7}, 3))
          .Input(Random(t, {33, 7}, 4)).Attr("transB", Attribute::Int(1)).Attr("alpha", Attribute::Float(0.5f))
          .Attr("kiln_activation", Attribute::String("None")).NoTF32().Tactic(tac);
      if (t == kF32) EXPECT_TRUE(node.MatchesCpu(kTightAtol, kTightRtol)) << tac;
      else EXPECT_TRUE(node.ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol)) << tac;
    }
  }
}

TEST(GpuGemm, EveryHeuristicTacticMatchesCpu) {
  const std::map<std::string, Attribute> attrs = {{"transB", Attribute::Int(1)}, {"alpha", Attribute::Float(0.5f)}};
  const auto tactics = TacticsOf("Gemm", "", kF32, {{33, 1000}, {7, 1000}, {7}}, {33, 7}, false, attrs);
  ASSERT_FALSE(tactics.empty());
  for (const auto& tac : tactics) {
    EXPECT_TRUE(OneNode("Gemm").Input(Random(kF32, {33, 1000}, 1)).Const(Random(kF32, {7, 1000}, 2))
                    .Const(Random(kF32, {7}, 3)).Attr("transB", Attribute::Int(1))
                    .Attr("alpha", Attribute::Float(0.5f)).NoTF32().Tactic(tac).MatchesCpu(kTightAtol, kTightRtol))
        << tac;
  }
}

TEST(GpuMatMul, UnknownTacticIsAnErrorNamingTheNode) {
  auto r = OneNode("MatMul").Input(Random(kF32, {2, 3}, 1)).Input(Random(kF32, {3, 4}, 2)).Tactic("bogus")
               .MatchesCpu();
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("node0"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("unknown tactic"), std::string::npos) << r.message();
}

// ---- Einsum ----

struct EinsumCase {
  const char* eq;
  std::vector<Shape64> ins;
};

const std::vector<EinsumCase>& EinsumCases() {
  static const std::vector<EinsumCase> cases = {
      {"ij,jk->ik", {{7, 33}, {33, 5}}},
      {"bij,bjk->bik", {{3, 7, 33}, {3, 33, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 7, 16}, {2, 3, 9, 16}}},
      {"ij,jk", {{4, 5}, {5, 6}}},  // implicit output
      {"ii->i", {{7, 7}}},           // diagonal
      {"ij->ji", {{7, 33}}},
      {"ij->", {{7, 33}}},
      {"i,i->", {{1000}, {1000}}},
      {"i,j->ij", {{7}, {9}}},
      {"ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 6}}},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 6}}},  // broadcast ellipsis
      {"bi,bi->b", {{1, 8}, {6, 8}}},                     // size-1 label broadcasts
      {"ij,ij->ij", {{0, 3}, {0, 3}}},                    // empty
  };
  return cases;
}

OneNode EinsumNode(const EinsumCase& c, DataType t, uint32_t seed, double lo = -1, double hi = 1) {
  OneNode node("Einsum");
  for (const auto& s : c.ins) node.Input(Random(t, s, seed++, lo, hi));
  node.Attr("equation", Attribute::String(c.eq));
  return node;
}

TEST(GpuEinsum, FloatTypesMatchCpu) {
  uint32_t seed = 1;
  for (const auto& c : EinsumCases()) {
    EXPECT_TRUE(EinsumNode(c, kF32, seed += 5).MatchesCpu(kTightAtol, kTightRtol)) << c.eq;
    EXPECT_TRUE(EinsumNode(c, DataType::kFloat64, seed += 5).MatchesCpu(1e-10, 1e-10)) << "float64 " << c.eq;
    EXPECT_TRUE(EinsumNode(c, kF16, seed += 5).ReferenceInFloat32().MatchesCpu(kF16Atol, kF16Rtol))
        << "float16 " << c.eq;
    EXPECT_TRUE(EinsumNode(c, kBF16, seed += 5).ReferenceInFloat32().MatchesCpu(kBF16Atol, kBF16Rtol))
        << "bfloat16 " << c.eq;
  }
}

TEST(GpuEinsum, IntegerTypesAreExact) {
  uint32_t seed = 1000;
  for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kInt8, DataType::kUInt8})
    for (const auto& c : EinsumCases()) {
      const bool is_unsigned = t == DataType::kUInt8;
      EXPECT_TRUE(EinsumNode(c, t, seed += 5, is_unsigned ? 0 : -9, 9).MatchesCpu()) << DataTypeName(t) << " " << c.eq;
    }
}

}  // namespace
}  // namespace kiln::gputest
