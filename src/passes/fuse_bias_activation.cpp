// Pass fuse-bias-activation: folds the bias add and the activation that follow a Conv, Gemm or MatMul into
// one kiln node (domain kiln) whose kernel applies them as an epilogue, so the activation never makes an
// extra trip through memory.
//   Conv(x, w, [b]) -> act                  =>  kiln.FusedConv(x, w, [b]; Conv's attrs, kiln_activation)
//   Gemm(a, b, [c]) -> act                  =>  kiln.FusedGemm(a, b, [c]; Gemm's attrs, kiln_activation)
//   MatMul(a, b) -> Add(bias) [-> act]      =>  kiln.FusedMatMul(a, b, bias[N]; kiln_activation)
//   MatMul(a, W) -> act (W a constant matrix) => kiln.FusedMatMul(a, W, zeros[N]; kiln_activation)
// act: Relu, LeakyRelu(alpha), Sigmoid, Tanh, Clip(min, max constants), HardSigmoid(alpha, beta),
// SiLU (y * Sigmoid(y)), Gelu (approximate none/tanh). The bias of MatMul is a constant broadcast along the
// last axis only. Fused only when the intermediate has no other reader and is not a graph output; the last
// node is rewritten in place (its output value and name stay; the node takes the Conv/Gemm/MatMul's name).
#include <cmath>
#include <limits>

#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/match_activation.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using fusion::Activation;
using fusion::Is;
using fusion::MatchActivation;
using fusion::SetActivationAttrs;
using fusion::Uses;

// A constant over the last axis only (numel n, other dims 1, rank <= out's rank) of out's dtype.
bool IsLastAxisBias(const Value* b, const Value* out, int64_t n) {
  if (!b || !b->is_const() || b->dtype != out->dtype) return false;
  const Tensor& t = *b->const_value;
  if (t.numel() != n || t.rank() > static_cast<int64_t>(out->shape.size())) return false;
  for (int64_t d = 0; d + 1 < t.rank(); ++d)
    if (t.dim(d) != 1) return false;
  return true;
}

// Rewrites `last` in place into `fused_op` with `base`'s inputs/attributes; removes the rest.
std::string Rewrite(Graph& g, Node* base, Node* last, const std::string& fused_op, std::vector<Value*> inputs,
                    const Activation& act, std::vector<Node*> inner) {
  const std::string base_name = base->name, last_name = last->name;
  std::map<std::string, Attribute> attrs = base->attrs;
  last->op_type = fused_op;
  last->domain = "kiln";
  last->opset = 1;
  last->inputs = std::move(inputs);
  last->attrs = std::move(attrs);
  SetActivationAttrs(last, act);
  last->name = base_name;
  inner.push_back(base);
  fusion::UseKilnDomain(g);
  fusion::RemoveUnread(g, inner);
  return fmt::format("fused {}{} -> {} '{}' (activation {})", base_name,
                     last_name == base_name ? "" : " + " + last_name, fused_op, base_name,
                     act.kind.empty() ? "none" : act.kind);
}

bool TryConvGemm(Graph& g, const Uses& u, Node* n, PassReport& report) {
  const bool conv = n->domain.empty() && n->op_type == "Conv";
  const bool gemm = n->domain.empty() && n->op_type == "Gemm";
  if ((!conv && !gemm) || n->outputs.size() != 1 || !n->outputs[0]) return false;
  if (!fusion::IsFloatType(n->outputs[0]->dtype) && n->outputs[0]->dtype != DataType::kFloat64) return false;
  Activation act = MatchActivation(u, n->outputs[0]);
  if (act.kind.empty()) return false;
  report.details.push_back(
      Rewrite(g, n, act.last, conv ? "FusedConv" : "FusedGemm", n->inputs, act, act.inner));
  return true;
}

bool TryMatMul(Graph& g, const Uses& u, Node* n, PassReport& report) {
  if (!Is(n, "MatMul", 2) || !n->inputs[0] || !n->inputs[1]) return false;
  Value* y = n->outputs[0];
  if (!fusion::IsFloatType(y->dtype) && y->dtype != DataType::kFloat64) return false;
  if (!y->has_shape || y->shape.empty() || !n->inputs[1]->has_shape || n->inputs[1]->shape.size() < 2) return false;
  const Dim nd = y->shape.back();
  if (!nd.known()) return false;
  Node* add = u.Single(y);
  if (!Is(add, "Add", 2)) {
    // No bias (T5's and LLaMA's projections): an activation that follows still fuses, over a zero bias, when the
    // weight is a constant matrix (the GEMM layer's bias epilogue costs next to nothing).
    Activation act = MatchActivation(u, y);
    if (act.kind.empty() || !fusion::IsMatMulByConstMatrix(n)) return false;
    Value* zero = g.AddConstant(n->name + "/zero_bias", Tensor(y->dtype, {nd.value}));
    report.details.push_back(
        Rewrite(g, n, act.last, "FusedMatMul", {n->inputs[0], n->inputs[1], zero}, act, act.inner));
    return true;
  }
  Value* bias = add->inputs[0] == y ? add->inputs[1] : (add->inputs[1] == y ? add->inputs[0] : nullptr);
  if (!bias || bias == y || !IsLastAxisBias(bias, y, nd.value)) return false;
  Activation act = MatchActivation(u, add->outputs[0]);
  Node* last = act.kind.empty() ? add : act.last;
  std::vector<Node*> inner = act.inner;
  if (!act.kind.empty()) inner.push_back(add);
  if (bias->const_value->rank() != 1)
    bias = g.AddConstant(bias->name + "/flat", bias->const_value->Reshaped({nd.value}));
  report.details.push_back(Rewrite(g, n, last, "FusedMatMul", {n->inputs[0], n->inputs[1], bias}, act, inner));
  return true;
}

}  // namespace

Result<PassReport> FuseBiasActivationPass(Graph& g, const PassOptions& o) {
  PassReport report;
  report.rewrites = fusion::RewriteToFixpoint(
      g, [&](const Uses& u, Node* n) { return TryConvGemm(g, u, n, report) || TryMatMul(g, u, n, report); });
  return report;
}

}  // namespace kiln
