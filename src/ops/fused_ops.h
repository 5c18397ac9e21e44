// The internal ops the optimizer creates (domain "kiln"), shared by the passes that create them, their shape
// functions (ops/fused.cpp) and the backends' kernels:
//   FusedConv / FusedGemm   Conv / Gemm with an activation epilogue (attributes: the base op's, plus
//                           kiln_activation, kiln_activation_alpha, kiln_activation_beta)
//   FusedMatMul(A, B, bias[N])  MatMul + bias over the last axis + activation (same three attributes)
//   Residual (all three, optional input 3; FusedGemm's C / FusedConv's B at input 2 may then be empty): R of
//                           exactly the output's shape, type and layout, added before the activation, as the
//                           graph's Add -> act did: Y = act(base (+ bias / beta C) + R) (in float32; the graph
//                           rounded base and the sum to the storage type, the GPU's fused graphs need not). fuse-residual-add creates
//                           it for GEMMs only with activation None (the GPU runs it as cuBLASLt's beta * C, beta
//                           1; FusedGemm's C is then a bias) and for convolutions with any activation (ResNet's
//                           conv -> Add(identity) -> Relu; cuDNN adds R in the fused graph).
//   FusedPointwise(inputs...)   a chain of elementwise ops run in one pass (program attributes below)
//   Attention(Q, K, V, [mask], [keep])  softmax(Q K^T * scale (+ mask) (Where keep)) V
//                           kiln_q_layout / kiln_k_layout / kiln_v_layout / kiln_out_layout = "BHSD" (default) or
//                           "BSHD": that tensor is the logical one with axes -3 and -2 swapped (Q given as
//                           [B, S, H, D] for [B, H, S, D]; the output written as [B, Sq, H, dv]); masks stay logical
//   Reformat(X)             Y = Transpose(Cast(X, to), perm) with its last axis zero-padded at the end to kiln_pad_last
//                           entries: a Cast -> Transpose -> Pad chain in one pass (plan/fuse_reformats.cpp makes it
//                           from the precision and layout planners' reformats at a convolution network's input)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/pointwise_id.h"

namespace kiln {
struct PwOpInfo;  // ops/pointwise_op.h
}

namespace kiln::fused {

// ---- activations of FusedConv / FusedGemm / FusedMatMul ----
enum class Act { kNone, kRelu, kLeakyRelu, kSigmoid, kTanh, kClip, kHardSigmoid, kSiLU, kGelu, kGeluTanh };
// "None", "Relu", "LeakyRelu" (alpha), "Sigmoid", "Tanh", "Clip" (alpha=min, beta=max), "HardSigmoid" (alpha,
// beta), "SiLU", "Gelu", "GeluTanh".
std::optional<Act> ParseActivation(const std::string& name);

// ---- FusedPointwise program ----
// kiln_ops:   strings, one op per step, in execution order (names below)
// kiln_args:  ints, two per step: operand indices; i >= 0 is node input i, i < 0 is the result of step -1 - i
//             (unary steps repeat their operand in the second slot)
// kiln_alpha, kiln_beta: floats, one per step: the formula's a and b (the op's attributes as its row in
//             ops/pointwise_formulas.h names them, Clip's min/max; 0 where unused)
// The node's output is the last step's result.
using PwOp = kiln::PwOp;          // ops/pointwise_id.h, ops/pointwise_op.h
using PwOpInfo = kiln::PwOpInfo;  // the step names are the formulas' names (ops/pointwise_formulas.h)
// The formula of a program step name (the ONNX op type, or "GeluTanh"); nullptr when unknown.
const PwOpInfo* FindPointwiseOp(const std::string& name);

struct PwProgram {
  std::vector<PwOp> ops;
  std::vector<int> arity;
  std::vector<int64_t> args;  // 2 per step
  std::vector<float> alpha, beta;
};
// Reads and checks a FusedPointwise node's program (error names the node).
Result<PwProgram> ParseProgram(const Node& n, size_t num_inputs);

// ---- Attention layouts ----
// The layout attributes of Attention's Q, K and V (input slots 0, 1, 2), and of its output.
inline constexpr const char* kAttentionInputLayouts[3] = {"kiln_q_layout", "kiln_k_layout", "kiln_v_layout"};
inline constexpr const char* kAttentionOutputLayout = "kiln_out_layout";
// BHSD: the logical [.., H, S, D]; BSHD: axes -3 and -2 swapped; BS3HD (inputs only): Q, K and V packed in one
// [.., S, 3, H, D] tensor, the slot's part read as BSHD.
enum class AttnLayout { kBHSD, kBSHD, kBS3HD };
// The layout attribute `name` of `n` (default BHSD); an unknown value, or BS3HD on the output, names the node.
Result<AttnLayout> ReadAttentionLayout(const Node& n, const char* name);

// ---- Reformat ----
// Attributes: to (ONNX type code; absent: X's type), perm (absent: the axes in order), kiln_pad_last (the padded size
// of the output's last axis; 0, or that axis's own size: no padding). X and Y are float32, float16, bfloat16 or
// float64; the cast rounds as Cast does.
bool IsReformatType(DataType t);
struct ReformatParams {
  DataType to = DataType::kUndefined;
  std::vector<int64_t> perm;  // output axis i is input axis perm[i]
  int64_t pad_last = 0;       // 0: no padding
};
// Reads and checks a Reformat node's attributes for an X of type `from` and rank `rank` (errors name the node).
Result<ReformatParams> ReadReformat(const Node& n, DataType from, int64_t rank);
// Y's shape for X's concrete shape; an error naming the node where the permuted last axis exceeds kiln_pad_last.
Result<std::vector<int64_t>> ReformatOutputShape(const Node& n, const ReformatParams& p,
                                                 const std::vector<int64_t>& x_shape);

}  // namespace kiln::fused
