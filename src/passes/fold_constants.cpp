// Pass fold-constants: evaluates nodes whose inputs are all constant (with PassOptions::evaluator, normally
// the CPU reference backend) and replaces their outputs by constants. The importer already folds what it
// sees; this pass folds what earlier passes exposed (for example a Cast of a constant after an Identity was
// removed).
// Before: W(const) -> Transpose(t1) -> w_t -> MatMul      After: w_t(const) -> MatMul   (t1 removed)
// Not folded: random ops (their output differs per run), a quantized weight's DequantizeLinear (the INT8 layers
// read the weight itself; fold-dequantized-weights folds those left after fusion), outputs larger than kMaxFoldElements (they would
// bloat the engine), and nodes the evaluator cannot run (left as they are; a detail line says why).
#include <unordered_set>

#include "core/error.h"
#include "ops/op_def.h"
#include "passes/pass_list.h"

namespace kiln {

namespace {

constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

// Ops that may draw random numbers (OpDef trait) are not folded; Dropout does only in training mode.
bool IsNondeterministic(const Node& n) {
  if (!TraitsOf(n).nondeterministic) return false;
  if (n.domain.empty() && n.op_type == "Dropout") {
    const Value* tm = n.input(2);
    return tm && (!tm->is_const() || tm->const_value->numel() != 1 || tm->const_value->GetAsDouble(0) != 0);
  }
  return true;
}

bool AllInputsConst(const Node& n) {
  bool any = false;
  for (const Value* in : n.inputs) {
    if (!in) continue;
    if (!in->is_const()) return false;
    any = true;
  }
  return any;
}

bool HasGraphAttr(const Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.kind == Attribute::Kind::kGraph) return true;
  return false;
}

// A sequence or an optional (SequenceConstruct of constants) is no constant tensor.
bool MakesNonTensor(const Node& n) {
  for (const Value* o : n.outputs)
    if (o && o->kind != ValueKind::kTensor) return true;
  return false;
}

// Folds the nodes with constant inputs; `weights_only`: only the quantized weights' DequantizeLinear nodes (which
// the first kind of run leaves).
Result<PassReport> Fold(Graph& g, const PassOptions& o, bool weights_only) {
  PassReport report;
  if (!o.evaluator) return report;
  std::unordered_set<const Node*> folded;
  for (const auto& node_ptr : g.nodes()) {
    Node& n = *node_ptr;
    if (!AllInputsConst(n) || IsNondeterministic(n) || HasGraphAttr(n) || MakesNonTensor(n) ||
        KeepsQuantizedConstant(n) != weights_only)
      continue;
    // Bound the size before evaluating where the shapes say it.
    int64_t elems = 0;
    bool too_big = false;
    for (const Value* out : n.outputs) {
      if (!out || !out->has_shape) continue;
      auto ne = NumElements(out->shape);
      if (ne) elems += *ne;
      too_big = too_big || elems > kMaxFoldElements;
    }
    if (too_big) continue;
    std::vector<const Tensor*> ins;
    for (const Value* in : n.inputs) ins.push_back(in ? &*in->const_value : nullptr);
    auto r = o.evaluator(n, ins);
    if (!r.ok()) {
      report.details.push_back(fmt::format("left {} unfolded: {}", n.Where(), r.status().ToString()));
      continue;
    }
    std::vector<Tensor>& outs = *r;
    bool usable = outs.size() >= n.outputs.size();
    elems = 0;
    for (size_t i = 0; usable && i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      usable = outs[i].defined() && (outs[i].dtype() == n.outputs[i]->dtype ||
                                     n.outputs[i]->dtype == DataType::kUndefined);
      elems += outs[i].numel();
    }
    if (!usable || elems > kMaxFoldElements) continue;
    std::string names;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value* out = n.outputs[i];
      if (!out) continue;
      out->dtype = outs[i].dtype();
      out->shape = FromStatic(outs[i].shape());
      out->has_shape = true;
      out->const_value = std::move(outs[i]);
      out->producer = nullptr;
      names += (names.empty() ? "'" : ", '") + out->name + "'";
    }
    folded.insert(&n);
    ++report.rewrites;
    report.details.push_back(fmt::format("folded {} ({}) into constant {}", n.name, n.op_type, names));
  }
  if (!folded.empty()) RemoveNodes(g, [&](const Node* n) { return folded.count(n) != 0; });
  return report;
}

}  // namespace

Result<PassReport> FoldConstantsPass(Graph& g, const PassOptions& o) { return Fold(g, o, false); }

// Pass fold-dequantized-weights: after fuse-quantized took the quantized weights it runs as INT8, the weights'
// DequantizeLinear nodes left (layers without an INT8 kernel read a float weight) fold into float constants.
// Before: W_q(const int8) -> DequantizeLinear -> w -> Add          After: w(const float32) -> Add
Result<PassReport> FoldDequantizedWeightsPass(Graph& g, const PassOptions& o) { return Fold(g, o, true); }

}  // namespace kiln
