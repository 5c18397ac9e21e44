// Differential tests of kiln.WeightOnlyMatMul (packed 4-bit weight, float activations) against the CPU reference:
// every tactic (the tensor-core GEMV where it applies), int4 and uint4, zero points, group sizes that are and are
// not multiples of 16 and 32, K and N that leave partial chunks, tiles and columns, 1 to 100 rows (past the GEMVs'
// row limit), float32 / float16 / bfloat16 X and scales.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "kiln/kiln.h"

namespace kiln::gputest {
namespace {

struct WCase {
  std::vector<int64_t> x;  // [..., K]
  int64_t n, group;
  DataType x_type = DataType::kFloat16, s_type = DataType::kFloat16;
  bool is_signed = true, zeros = false;
  uint32_t seed = 1;
};

::testing::AssertionResult RunCase(const WCase& c, const std::string& tactic) {
  const int64_t k = c.x.back(), groups = (k + c.group - 1) / c.group;
  OneNode node("WeightOnlyMatMul", "kiln");
  node.Input(Random(c.x_type, c.x, c.seed, -1, 1));
  Tensor w = Random(DataType::kUInt8, {c.n, (k + 1) / 2}, c.seed + 1, 0, 255);
  if (k % 2)  // the padding nibble of each row's last byte is 0, as the pass writes it
    for (int64_t j = 0; j < c.n; ++j) w.data<uint8_t>()[j * ((k + 1) / 2) + k / 2] &= 0x0f;
  node.Const(w);
  node.Const(Random(c.s_type, {c.n, groups}, c.seed + 2, 0.01, 0.1));
  if (c.zeros) node.Const(Random(DataType::kInt8, {c.n, groups}, c.seed + 3, c.is_signed ? -8 : 0, c.is_signed ? 7 : 15));
  node.Attr("kiln_k", Attribute::Int(k));
  node.Attr("kiln_group_size", Attribute::Int(c.group));
  node.Attr("kiln_w_type", Attribute::Int(static_cast<int64_t>(c.is_signed ? DataType::kInt4 : DataType::kUInt4)));
  node.Tactic(tactic);
  // Float32 sums in another order: float32 outputs agree to rounding, 16-bit ones to a step of their type.
  const double tol = c.x_type == DataType::kFloat32 ? 1e-4 : c.x_type == DataType::kFloat16 ? 4e-3 : 2e-2;
  return node.MatchesCpu(tol, tol);
}

// The tensor-core GEMV takes 16-bit X with scales of X's type, groups of 16s, zero points in the 4-bit range.
bool MmaTakes(const WCase& c) {
  return c.x_type != DataType::kFloat32 && c.s_type == c.x_type && c.group % 16 == 0;
}

TEST(GpuWeightOnly, MatchesCpuOnEveryTactic) {
  const std::vector<WCase> cases = {
      {{1, 4096}, 64, 128},                                                          // a decode step
      {{3, 70}, 13, 32, DataType::kFloat32, DataType::kFloat32, true, false, 2},     // partial chunk, odd N
      {{5, 100}, 9, 10, DataType::kBFloat16, DataType::kFloat32, false, true, 3},    // uint4, zero points, group 10
      {{17, 256}, 40, 64, DataType::kFloat16, DataType::kFloat32, true, true, 4},    // rows past one block's 8
      {{2, 50, 128}, 48, 128, DataType::kFloat16, DataType::kFloat16, true, false, 5},  // 100 rows: past the GEMV
      {{2, 37}, 6, 37, DataType::kFloat32, DataType::kFloat16, false, false, 6},     // odd K: unaligned rows of X
      {{4, 64}, 7, 1, DataType::kFloat16, DataType::kBFloat16, true, true, 7},       // group size 1
      {{3, 512}, 33, 64, DataType::kFloat16, DataType::kFloat16, true, true, 8},     // half2 path: rows, zero points
      {{1, 1, 200}, 16, 32, DataType::kFloat16, DataType::kFloat16, false, true, 9}, // half2 path: uint4, short K
      {{2, 288}, 10, 96, DataType::kFloat16, DataType::kFloat16, true, false, 10},   // group 3 x 32: a division
      {{9, 45}, 21, 16, DataType::kBFloat16, DataType::kBFloat16, true, true, 11},   // mma: 2 row blocks, odd K and N
      {{8, 4096}, 300, 64, DataType::kFloat16, DataType::kFloat16, false, true, 12}, // mma: uint4 and zero points
      {{2, 1000}, 17, 32, DataType::kBFloat16, DataType::kBFloat16, true, false, 13},// mma: bfloat16, partial tile
      {{1, 11008}, 40, 128, DataType::kFloat16, DataType::kFloat16, true, false, 14},// mma: a long K (172 tiles)
      {{70, 96}, 24, 48, DataType::kFloat16, DataType::kFloat16, true, true, 15},    // mma past its rows; group 3x16
  };
  for (size_t i = 0; i < cases.size(); ++i)
    for (const char* tactic : {"w4-mma", "w4-gemv", "w4-dequant-cublaslt"}) {
      if (std::string(tactic) == "w4-mma" && !MmaTakes(cases[i])) continue;
      SCOPED_TRACE("case " + std::to_string(i) + ", tactic " + tactic);
      EXPECT_TRUE(RunCase(cases[i], tactic));
    }
}

// Asked for a node it cannot run exactly, the tensor-core tactic refuses with the reason.
TEST(GpuWeightOnly, TensorCoreTacticRefusesWhatItCannotRoundAsTheReference) {
  const WCase float_scales{{2, 64}, 8, 32, DataType::kFloat16, DataType::kFloat32};
  const ::testing::AssertionResult r = RunCase(float_scales, "w4-mma");
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("the scales' type is not X's"), std::string::npos) << r.message();
  const WCase group8{{2, 64}, 8, 8, DataType::kFloat16, DataType::kFloat16};
  const ::testing::AssertionResult r8 = RunCase(group8, "w4-mma");
  EXPECT_FALSE(r8);
  EXPECT_NE(std::string(r8.message()).find("multiple of 16"), std::string::npos) << r8.message();
}

class QuietLogger : public ILogger {
 public:
  void log(Severity, const char*) noexcept override {}
};

// --fp16 --int4Weights on a float32 model: the int4 scales are float16 (the GEMV's half2 path), and the engine runs.
TEST(GpuWeightOnly, Fp16BuildOfAFloatModelGetsFloat16Scales) {
  NetworkDefinition net;
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {1, 256}).ok());
  const Tensor w = Random(DataType::kFloat32, {256, 64}, 51, -1, 1);
  ASSERT_TRUE(net.addConstant("w", DataType::kFloat32, {256, 64}, w.raw()).ok());
  ASSERT_TRUE(net.addOp("MatMul", "mm", {"x", "w"}, {"y"}).ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  QuietLogger quiet;
  Builder b(quiet);
  auto cfg = b.createBuilderConfig();
  cfg->setBackend("cuda");
  cfg->setFlag(BuilderFlag::kFP16);
  cfg->setInt4WeightBlockSize(128);
  cfg->setProfilingVerbosity(ProfilingVerbosity::kDetailed);
  BuildReport report;
  auto bytes = b.buildSerializedNetwork(net, *cfg, &report);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(report.layers_int4_weight_only, 1);
  Runtime rt(quiet);
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const std::string info = (*e)->getLayerInformationJson();
  EXPECT_NE(info.find("float16[64,2]"), std::string::npos) << info;  // mm/weight_scales
}

}  // namespace
}  // namespace kiln::gputest
