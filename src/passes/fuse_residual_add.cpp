// Pass fuse-residual-add: folds a residual Add that follows a GEMM or a convolution into its epilogue, so the sum
// is written once instead of the product being written, read back and written again (BERT's post-LN blocks:
// y = LayerNorm(x + (h W + b)); GPT-2's and ViT's pre-LN blocks: x + proj(...); ResNet's bottleneck:
// relu(conv3(...) + identity)).
//   kiln.FusedMatMul(a, b, bias; activation None) -> Add(., r)  =>  kiln.FusedMatMul(a, b, bias, r)
//   Gemm(a, b, [c]) / kiln.FusedGemm(...; None)   -> Add(., r)  =>  kiln.FusedGemm(a, b, [c], r; None)
//     (c only when it is a bias: beta 1 and shape [N] or [1, N])
//   Conv(x, w, [b]) / kiln.FusedConv(...; None)   -> Add(., r) [-> act]  =>  kiln.FusedConv(x, w, [b], r; act)
// Fused only when the base applies no activation of its own, the Add's other operand has exactly the output's
// shape and dtype (no broadcast), and the base's output is read by the Add alone (and is no graph output).
// GEMMs take no activation after the Add (the GPU runs R as cuBLASLt's beta * C, beta 1); convolutions take the
// one that alone reads the sum (Y = act(conv + b + R), one cuDNN graph on the GPU; see fused_ops.h). The last
// node is rewritten in place (its output value and name stay; the node takes the base's name), so the residual,
// computed before the Add, stays computed before its new reader. The residual is input 3.
#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/match_activation.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using fusion::Uses;

constexpr size_t kResidualInput = 3;

bool ActivationIsNone(const Node* n) {
  auto it = n->attrs.find("kiln_activation");
  if (it == n->attrs.end()) return true;
  auto s = n->attr_string("kiln_activation", "None");
  return s.ok() && *s == "None";
}

// Gemm's C, when given, must be what the GPU runs as cuBLASLt's bias epilogue (beta 1, one value per column:
// shape [N] or [1, N]), since cuBLASLt's C matrix then carries the residual.
bool GemmCIsBias(const Node* g) {
  if (g->inputs.size() < 3 || !g->inputs[2]) return true;
  auto beta = g->attr_float("beta", 1.f);
  const Value* c = g->inputs[2];
  const Value* y = g->outputs[0];
  if (!beta.ok() || *beta != 1.f || !c->has_shape || !y->has_shape || y->shape.size() != 2) return false;
  const Dim& n = y->shape[1];
  if (c->shape.size() == 1) return n.known() && c->shape[0].known() && c->shape[0].value == n.value && n.value != 1;
  if (c->shape.size() == 2)
    return c->shape[0].known() && c->shape[0].value == 1 && n.known() && c->shape[1].known() &&
           c->shape[1].value == n.value && n.value != 1;
  return false;
}

// A GEMM node whose epilogue can take a residual: kiln.FusedMatMul (A, B, bias) or Gemm / kiln.FusedGemm, with
// activation None and no residual yet.
// A bias-less MatMul by a constant matrix whose output's last dim is known: it takes the residual as a FusedMatMul over
// a zero bias.
bool IsBiaslessMatMul(const Node* g) {
  if (!fusion::IsMatMulByConstMatrix(g)) return false;
  const Value* y = g->outputs[0];
  return y->has_shape && !y->shape.empty() && y->shape.back().known();
}

bool IsResidualCandidate(const Node* g) {
  if (!g || g->outputs.size() != 1 || !g->outputs[0]) return false;
  const bool gemm = (g->domain.empty() && g->op_type == "Gemm") || (g->domain == "kiln" && g->op_type == "FusedGemm");
  if (gemm) return g->inputs.size() >= 2 && g->inputs.size() <= 3 && ActivationIsNone(g) && GemmCIsBias(g);
  if (g->domain == "kiln" && g->op_type == "FusedMatMul") return g->inputs.size() == 3 && ActivationIsNone(g);
  return IsBiaslessMatMul(g);
}

// A convolution whose epilogue can take a residual: Conv, or kiln.FusedConv with activation None and no residual.
bool IsConvCandidate(const Node* c) {
  if (!c || c->outputs.size() != 1 || !c->outputs[0] || c->inputs.size() < 2 || c->inputs.size() > 3) return false;
  if (c->domain.empty() && c->op_type == "Conv") return true;
  return c->domain == "kiln" && c->op_type == "FusedConv" && ActivationIsNone(c);
}

// conv -> Add(., r) [-> act]: rewrites the activation (or the Add) in place into kiln.FusedConv(x, w, [b], r; act).
void FuseConv(Graph& g, const Uses& u, Node* conv, Node* add, Value* r, PassReport& report) {
  const fusion::Activation act = fusion::MatchActivation(u, add->outputs[0]);
  Node* last = act.kind.empty() ? add : act.last;
  const std::string conv_name = conv->name, add_name = add->name, last_name = last->name;
  std::vector<Value*> inputs = conv->inputs;
  inputs.resize(kResidualInput, nullptr);  // Conv without B: input 2 stays empty
  inputs.push_back(r);
  last->op_type = "FusedConv";
  last->domain = "kiln";
  last->opset = 1;
  last->inputs = std::move(inputs);
  last->attrs = conv->attrs;
  fusion::SetActivationAttrs(last, act);
  last->name = conv_name;
  std::vector<Node*> dead = act.inner;
  if (last != add) dead.push_back(add);
  dead.push_back(conv);
  fusion::UseKilnDomain(g);
  fusion::RemoveUnread(g, dead);
  report.details.push_back(fmt::format("fused {} + {}{} -> FusedConv '{}' (residual {}, activation {})", conv_name,
                                       add_name, last == add ? "" : " + " + last_name, conv_name, r->name,
                                       act.kind.empty() ? "none" : act.kind));
}

bool TryFuse(Graph& g, const Uses& u, Node* add, PassReport& report) {
  if (!fusion::Is(add, "Add", 2) || add->outputs.size() != 1 || !add->outputs[0]) return false;
  for (int side = 0; side < 2; ++side) {
    Value* y = add->inputs[side];
    Value* r = add->inputs[1 - side];
    if (!y || !r || y == r) continue;
    Node* gemm = u.Producer(y);
    const bool conv = IsConvCandidate(gemm);
    if ((!conv && !IsResidualCandidate(gemm)) || !u.OnlyBy(y, add)) continue;
    if (!fusion::IsFloatType(y->dtype) || r->dtype != y->dtype || add->outputs[0]->dtype != y->dtype) continue;
    if (!fusion::SameShape(r, y) || !fusion::SameShape(add->outputs[0], y)) continue;
    if (conv) {
      FuseConv(g, u, gemm, add, r, report);
      return true;
    }
    // A residual that is the GEMM's own operand is fine (it is computed before the GEMM); one computed from the
    // GEMM's output cannot be (y is read by the Add alone).
    const std::string gemm_name = gemm->name, add_name = add->name;
    std::vector<Value*> inputs = gemm->inputs;
    inputs.resize(kResidualInput, nullptr);  // Gemm without C: input 2 stays empty
    const bool biasless = IsBiaslessMatMul(gemm);
    if (biasless)
      inputs[2] = g.AddConstant(gemm->name + "/zero_bias", Tensor(y->dtype, {y->shape.back().value}));
    inputs.push_back(r);
    std::map<std::string, Attribute> attrs = gemm->attrs;
    const std::string fused_op = gemm->op_type == "FusedMatMul" || biasless ? "FusedMatMul" : "FusedGemm";
    add->op_type = fused_op;
    add->domain = "kiln";
    add->opset = 1;
    add->inputs = std::move(inputs);
    add->attrs = std::move(attrs);
    add->attrs["kiln_activation"] = Attribute::String("None");
    if (!add->attrs.count("kiln_activation_alpha")) add->attrs["kiln_activation_alpha"] = Attribute::Float(0.f);
    if (!add->attrs.count("kiln_activation_beta")) add->attrs["kiln_activation_beta"] = Attribute::Float(0.f);
    add->name = gemm_name;
    fusion::UseKilnDomain(g);
    fusion::RemoveUnread(g, {gemm});
    report.details.push_back(fmt::format("fused {} + {} -> {} '{}' (residual {})", gemm_name, add_name, fused_op,
                                         gemm_name, r->name));
    return true;
  }
  return false;
}

}  // namespace

Result<PassReport> FuseResidualAddPass(Graph& g, const PassOptions& o) {
  (void)o;
  PassReport report;
  report.rewrites = fusion::RewriteToFixpoint(g, [&](const fusion::Uses& u, Node* n) { return TryFuse(g, u, n, report); });
  return report;
}

}  // namespace kiln
