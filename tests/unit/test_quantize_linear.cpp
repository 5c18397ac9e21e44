// QuantizeLinear-23's `precision` and DequantizeLinear-23's `output_dtype` on the CPU reference backend, against values
// worked out by hand (the rounding ONNX's reference implementation does).
#include <gtest/gtest.h>

#include "kiln/builder.h"
#include "kiln/debug.h"
#include "testing.h"

namespace kiln {
namespace {

Status AddTensor(NetworkDefinition& net, const std::string& name, const Tensor& t) {
  return net.addConstant(name, t.dtype(), t.shape(), t.raw());
}

Tensor Values(DataType t, std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor r(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) r.SetFromDouble(static_cast<int64_t>(i), v[i]);
  return r;
}

// x / scale in `precision` (x and the scale rounded to it, the quotient too) before the rounding to the output:
//   0: float32 x and scale, no precision: 1024.7 / 0.5 = 2049.4 -> 2049
//   1: the same with precision float16: x becomes 1025 (float16's step is 1 there), 2050 -> 2050
//   2: float16 x and scale: 2050 / 0.75 = 2733.33, in float16 (step 2 there) 2734 -> 2734
//   3: float16 x, float32 scale, no precision: the division is float32's (numpy's promotion): 2733.33 -> 2733
TEST(QuantizeLinear23, PrecisionRoundsTheDivision) {
  const std::vector<std::vector<double>> want = {{2049, -2049, 3}, {2050, -2050, 3}, {2734, -2734, 2}, {2733, -2733, 2}};
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    NetworkDefinition net;
    const DataType xt = variant >= 2 ? DataType::kFloat16 : DataType::kFloat32;
    const DataType st = variant == 2 ? DataType::kFloat16 : DataType::kFloat32;
    ASSERT_TRUE(net.addInput("x", xt, {3}).ok());
    ASSERT_TRUE(AddTensor(net, "s", Tensor::Scalar(st, variant >= 2 ? 0.75 : 0.5)).ok());
    ASSERT_TRUE(AddTensor(net, "z", Tensor(DataType::kInt16, {})).ok());
    AttrMap attrs;
    if (variant == 1) attrs["precision"] = int64_t{10};
    ASSERT_TRUE(net.addOp("QuantizeLinear", "q", {"x", "s", "z"}, {"y"}, attrs).ok());
    ASSERT_TRUE(net.markOutput("y").ok());
    const Tensor x = variant >= 2 ? Values(xt, {3}, {2050, -2050, 1.5}) : Values(xt, {3}, {1024.7, -1024.7, 1.5});
    auto out = debug::RunNetwork(net, {{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out->at("y").GetAsDouble(i), want[variant][i]) << i;
  }
}

// output_dtype sets DequantizeLinear's output type; the product (x - zero point) * scale is float32's, then rounded.
TEST(QuantizeLinear23, DequantizeOutputDtype) {
  NetworkDefinition net;
  ASSERT_TRUE(net.addInput("x", DataType::kInt8, {2}).ok());
  ASSERT_TRUE(AddTensor(net, "s", Tensor::Scalar(DataType::kFloat32, 1.0009765625)).ok());  // 1 + 2^-10
  ASSERT_TRUE(net.addOp("DequantizeLinear", "dq", {"x", "s"}, {"y"}, {{"output_dtype", int64_t{10}}}).ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  auto out = debug::RunNetwork(net, {{"x", Values(DataType::kInt8, {2}, {2, 100})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& y = out->at("y");
  ASSERT_EQ(y.dtype(), DataType::kFloat16);
  EXPECT_EQ(y.GetAsDouble(0), 2.001953125);  // 2 + 2^-9 is a float16 value (its step in [2, 4))
  EXPECT_EQ(y.GetAsDouble(1), 100.125);       // 100.09765625 rounds to 100.125 (step 2^-4 in [64, 128))
  NetworkDefinition bad;  // output_dtype must be a float type
  ASSERT_TRUE(bad.addInput("x", DataType::kInt8, {2}).ok());
  ASSERT_TRUE(AddTensor(bad, "s", Tensor::Scalar(DataType::kFloat32, 1)).ok());
  const Status st = bad.addOp("DequantizeLinear", "dq", {"x", "s"}, {"y"}, {{"output_dtype", int64_t{6}}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("output_dtype 6"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kiln
