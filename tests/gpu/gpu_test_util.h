// Differential testing of CUDA layers against the CPU reference: build a one-node graph, run it on both, compare.
//
//   EXPECT_TRUE(OneNode("Softmax").Input(Random(DataType::kFloat32, {3, 17}, 1)).Attr("axis", Attribute::Int(-1))
//                   .MatchesCpu(1e-5, 1e-5));
//
// FP16/BF16 cases: .ReferenceInFloat32() runs the CPU side on float32 copies of the floating inputs, and the GPU
// output is compared after conversion to float32.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/logger.h"

namespace kiln::gputest {

// The tests' logger (errors only) and uniform random floats in [-scale, scale) for building networks.
StderrLogger& Logger();
std::vector<float> RandomVec(size_t n, uint32_t seed, float scale = 1.f);

// Uniform random tensor: floats in [lo, hi); integers in [lo, hi] rounded; bool 0/1.
Tensor Random(DataType dtype, const std::vector<int64_t>& shape, uint32_t seed, double lo = -1.0, double hi = 1.0);
// A tensor from values (converted to dtype).
Tensor FromValues(DataType dtype, const std::vector<int64_t>& shape, const std::vector<double>& values);

class OneNode {
 public:
  explicit OneNode(std::string op_type, std::string domain = "");
  OneNode& Input(Tensor t);  // a graph input (uploaded at run time)
  OneNode& Const(Tensor t);  // a constant input (an initializer: weights, shapes, axes)
  OneNode& Omitted();        // an omitted optional input
  OneNode& Attr(const std::string& name, Attribute a);
  OneNode& Outputs(int n);   // default 1
  OneNode& ReferenceInFloat32();
  OneNode& Tactic(std::string t);  // run the GPU side with this tactic
  OneNode& NoTF32();
  OneNode& Repeat(int n);  // the GPU layer runs n times on the same buffers, its workspace refilled with garbage
                          // before each run; the last run is compared
  OneNode& Opset(int64_t opset);  // the default domain's opset of the node (default 21)
  // Integer outputs may differ by one step in up to this fraction of elements (a transcendental function in the
  // GPU's float epilogue, erff say, is not bit-identical to the host's; its rare rounding ties land one step off).
  OneNode& IntegersOneOff(double fraction);
  // Float8 outputs compared by value (decoded, with atol and rtol) instead of by code.
  OneNode& Float8ByValue();
  // Runs both sides and compares every output: |gpu - cpu| <= atol + rtol * |cpu| (exact for integers and bool;
  // float8 by code unless Float8ByValue; NaN must match NaN). Shapes and dtypes must agree.
  ::testing::AssertionResult MatchesCpu(double atol = 1e-5, double rtol = 1e-5);
  // The same for each of `tactics` in turn, with the CPU reference computed once; the first failure names its tactic.
  ::testing::AssertionResult MatchesCpuWithEachTactic(const std::vector<std::string>& tactics, double atol,
                                                      double rtol);

 private:
  std::string op_, domain_, tactic_;
  std::vector<std::optional<Tensor>> inputs_;
  std::vector<bool> is_const_;
  std::map<std::string, Attribute> attrs_;
  int outputs_ = 1;
  int repeat_ = 1;
  int64_t opset_ = 21;
  bool ref_f32_ = false, tf32_ = true;
  double one_off_fraction_ = 0;
  bool f8_by_value_ = false;
};

}  // namespace kiln::gputest
