// Differential tests of the CUDA EyeLike and HannWindow/HammingWindow/BlackmanWindow layers (generator_layers.cpp,
// generators.cu) against the CPU reference: diagonals inside and outside the matrix, every output dtype kind (the
// input's, float16/bfloat16/float64/int/bool by attribute), empty and one-row matrices; windows periodic and
// symmetric of lengths 0 to 1031 as float, 16-bit float, double and integer outputs, the length given as a constant
// and as a runtime input.
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "gpu_test_util.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

TEST(GpuEyeLike, MatchesTheCpuReference) {
  uint32_t seed = 20;
  const std::vector<Shape> shapes = {{5, 7}, {7, 5}, {1, 1}, {0, 3}, {33, 17}, {1, 9}};
  for (const Shape& s : shapes)
    for (int64_t k : {-40, -6, -2, 0, 1, 3, 7, 10})
      for (DataType in : {DataType::kFloat32, DataType::kInt32, DataType::kFloat16}) {
        // Without dtype: the input's type.
        EXPECT_TRUE(OneNode("EyeLike").Input(Random(in, s, seed++)).Attr("k", Attribute::Int(k)).MatchesCpu(0, 0))
            << DataTypeName(in) << " " << ShapeToString(s) << " k " << k;
        for (DataType out : {DataType::kInt64, DataType::kBFloat16, DataType::kBool, DataType::kUInt8,
                             DataType::kFloat64, DataType::kFloat8E4M3FN})
          EXPECT_TRUE(OneNode("EyeLike")
                          .Input(Random(in, s, seed++))
                          .Attr("k", Attribute::Int(k))
                          .Attr("dtype", Attribute::Int(static_cast<int64_t>(out)))
                          .MatchesCpu(0, 0))
              << DataTypeName(in) << " to " << DataTypeName(out) << " " << ShapeToString(s) << " k " << k;
      }
}

Tensor SizeScalar(int64_t n) {
  Tensor t(DataType::kInt64, {});
  t.data<int64_t>()[0] = n;
  return t;
}

TEST(GpuWindows, MatchTheCpuReference) {
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    for (int64_t periodic : {0, 1})
      for (int64_t n : {0, 1, 2, 7, 10, 64, 1031})
        for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                           DataType::kInt32, DataType::kUInt8, DataType::kInt64})
          for (bool runtime_size : {false, true}) {
            OneNode node(op);
            if (runtime_size) node.Input(SizeScalar(n));
            else node.Const(SizeScalar(n));
            node.Attr("periodic", Attribute::Int(periodic)).Attr("output_datatype",
                                                                  Attribute::Int(static_cast<int64_t>(t)));
            // Values in [0, 1] computed in double on both sides; the 16-bit types round them once.
            const double tol = t == DataType::kFloat32 ? 1e-6 : t == DataType::kFloat64 ? 1e-12
                               : IsFloatType(t)        ? 1e-2
                                                       : 0;
            EXPECT_TRUE(node.MatchesCpu(tol, tol)) << op << " periodic " << periodic << " n " << n << " "
                                                   << DataTypeName(t) << (runtime_size ? " (runtime size)" : "");
          }
}

TEST(GpuWindows, RefusesFloat8Output) {
  Graph g;
  Node* n = g.AddNode("HannWindow", "window0");
  n->inputs = {g.AddConstant("size", SizeScalar(8))};
  Value* y = g.GetOrAddValue("y");
  y->dtype = DataType::kFloat8E4M3FN;
  n->outputs = {y};
  n->attrs["output_datatype"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat8E4M3FN));
  auto layer = cuda::CreateLayer(cuda::LayerSpec{*n, {}, {}}, "default");
  ASSERT_FALSE(layer.ok());
  EXPECT_NE(layer.status().message().find("window0"), std::string::npos) << layer.status().ToString();
  EXPECT_NE(layer.status().message().find("float8"), std::string::npos) << layer.status().ToString();
}

}  // namespace
}  // namespace kiln::gputest
