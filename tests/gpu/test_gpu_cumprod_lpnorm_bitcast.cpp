// Differential tests of the CUDA CumProd, LpNormalization and BitCast layers (cumprod_lpnorm_bitcast_layers.cpp,
// cumprod_lpnorm_bitcast.cu) against the CPU reference. CumProd: every axis, exclusive and reverse, rows long enough
// for the block scan, every integer type (products that wrap) and float type, the axis as a constant and as a runtime
// input. LpNormalization: p 1 and 2 along every axis, lines of zeros, every float type. BitCast: the ONNX pairs of
// one width (floats, integers, bool, float8), to bool from any nonzero byte, scalars and empty tensors; types narrower
// than a byte are refused with the reason.
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

Tensor Int64s(const std::vector<int64_t>& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

bool IsLow(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// ---- CumProd ----

TEST(GpuCumProd, FloatsMatchTheCpuReference) {
  uint32_t seed = 30000;
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{37}, 0},        {{3, 100}, 1},    {{3, 100}, -1},   {{4, 5, 6}, 0},
                                   {{4, 5, 6}, 1},   {{4, 5, 6}, 2},   {{2, 300, 1}, 1}, {{1, 1000}, 1},
                                   {{0, 3}, 1},      {{2, 70, 3}, -2}};
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16})
    for (const Case& c : cases)
      for (int64_t exclusive : {0, 1})
        for (int64_t reverse : {0, 1})
          for (bool axis_const : {true, false}) {
            OneNode n("CumProd");
            n.Opset(26).Input(Random(t, c.shape, seed++, 0.5, 1.5));
            if (axis_const) n.Const(Int64s({c.axis}));
            else n.Input(Int64s({c.axis}));
            n.Attr("exclusive", Attribute::Int(exclusive)).Attr("reverse", Attribute::Int(reverse));
            const auto r = IsLow(t) ? n.ReferenceInFloat32().MatchesCpu(1e-2, 1e-2)
                                    : n.MatchesCpu(t == DataType::kFloat64 ? 1e-12 : 1e-6,
                                                   t == DataType::kFloat64 ? 1e-12 : 1e-6);
            EXPECT_TRUE(r) << DataTypeName(t) << " " << ShapeToString(c.shape) << " axis " << c.axis << " exclusive "
                           << exclusive << " reverse " << reverse << (axis_const ? "" : " (axis at run time)");
          }
}

TEST(GpuCumProd, IntegersWrapAsTheCpuReference) {
  uint32_t seed = 31000;
  const DataType types[] = {DataType::kInt8,   DataType::kUInt8,  DataType::kInt16,  DataType::kUInt16,
                            DataType::kInt32,  DataType::kUInt32, DataType::kInt64,  DataType::kUInt64};
  for (DataType t : types)
    for (const Shape& s : {Shape{5, 90}, Shape{3, 7, 4}})
      for (int64_t exclusive : {0, 1})
        for (int64_t reverse : {0, 1}) {
          const bool is_unsigned = t == DataType::kUInt8 || t == DataType::kUInt16 || t == DataType::kUInt32 ||
                                   t == DataType::kUInt64;
          EXPECT_TRUE(OneNode("CumProd")
                          .Opset(26)
                          .Input(Random(t, s, seed++, is_unsigned ? 0 : -3, 3))
                          .Const(Int64s({1}))
                          .Attr("exclusive", Attribute::Int(exclusive))
                          .Attr("reverse", Attribute::Int(reverse))
                          .MatchesCpu(0, 0))
              << DataTypeName(t) << " " << ShapeToString(s) << " exclusive " << exclusive << " reverse " << reverse;
        }
}

// ---- LpNormalization ----

TEST(GpuLpNormalization, MatchesTheCpuReference) {
  uint32_t seed = 32000;
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{3, 17}, -1}, {{4, 5, 6}, 1}, {{4, 5, 6}, 0}, {{2, 1000}, 1},
                                   {{7}, 0},      {{3, 0}, 1},    {{2, 3, 1}, 2}};
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16})
    for (const Case& c : cases)
      for (int64_t p : {1, 2}) {
        OneNode n("LpNormalization");
        n.Opset(22).Input(Random(t, c.shape, seed++, -3, 3)).Attr("axis", Attribute::Int(c.axis)).Attr(
            "p", Attribute::Int(p));
        const auto r = IsLow(t) ? n.ReferenceInFloat32().MatchesCpu(1e-2, 1e-2)
                                : n.MatchesCpu(t == DataType::kFloat64 ? 1e-12 : 1e-6,
                                               t == DataType::kFloat64 ? 1e-12 : 1e-6);
        EXPECT_TRUE(r) << DataTypeName(t) << " " << ShapeToString(c.shape) << " axis " << c.axis << " p " << p;
      }
  // Lines of zeros give zeros; the default attributes (axis -1, p 2).
  Tensor z = Random(DataType::kFloat32, {4, 6}, seed++);
  for (int64_t i = 6; i < 12; ++i) z.data<float>()[i] = 0.f;
  EXPECT_TRUE(OneNode("LpNormalization").Input(z).MatchesCpu(1e-6, 1e-6));
  EXPECT_TRUE(OneNode("LpNormalization").Input(z).Attr("axis", Attribute::Int(0)).Attr("p", Attribute::Int(1))
                  .MatchesCpu(1e-6, 1e-6));
}

// ---- BitCast ----

TEST(GpuBitCast, CopiesTheBytes) {
  uint32_t seed = 33000;
  struct Case {
    DataType from, to;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {DataType::kFloat32, DataType::kInt32, -1e3, 1e3},     {DataType::kInt32, DataType::kFloat32, -2e9, 2e9},
      {DataType::kFloat64, DataType::kInt64, -1e3, 1e3},     {DataType::kInt64, DataType::kFloat64, -1e15, 1e15},
      {DataType::kUInt32, DataType::kInt32, 0, 4e9},          {DataType::kUInt16, DataType::kInt16, 0, 65535},
      {DataType::kFloat16, DataType::kBFloat16, -100, 100},  {DataType::kInt8, DataType::kUInt8, -128, 127},
      {DataType::kBool, DataType::kUInt8, 0, 1},             {DataType::kUInt8, DataType::kBool, 0, 3},
      {DataType::kInt8, DataType::kBool, -2, 2},             {DataType::kFloat8E4M3FN, DataType::kUInt8, -10, 10},
      {DataType::kUInt8, DataType::kFloat8E5M2, 0, 255},     {DataType::kUInt64, DataType::kInt64, 0, 1e18},
  };
  for (const Case& c : cases)
    for (const Shape& s : {Shape{}, Shape{7}, Shape{3, 5, 9}, Shape{0, 4}}) {
      EXPECT_TRUE(OneNode("BitCast")
                      .Opset(26)
                      .Input(Random(c.from, s, seed++, c.lo, c.hi))
                      .Attr("to", Attribute::Int(static_cast<int64_t>(c.to)))
                      .Float8ByValue()
                      .MatchesCpu(0, 0))
          << DataTypeName(c.from) << " to " << DataTypeName(c.to) << " " << ShapeToString(s);
    }
}

TEST(GpuBitCast, RefusesTypesNarrowerThanAByte) {
  for (const auto& [from, to] : {std::pair{DataType::kInt4, DataType::kUInt4}, std::pair{DataType::kUInt4, DataType::kInt4}}) {
    Graph g;
    Node* n = g.AddNode("BitCast", "bitcast0");
    n->opset = 26;
    n->inputs = {g.AddConstant("x", Tensor(from, {3}))};
    n->attrs["to"] = Attribute::Int(static_cast<int64_t>(to));
    auto layer = cuda::CreateLayer(cuda::LayerSpec{*n, {}, {}}, "default");
    ASSERT_FALSE(layer.ok()) << DataTypeName(from);
    EXPECT_NE(layer.status().message().find("bitcast0"), std::string::npos) << layer.status().ToString();
    EXPECT_NE(layer.status().message().find("4-bit"), std::string::npos) << layer.status().ToString();
  }
}

}  // namespace
}  // namespace kiln::gputest
