// FuseReformats (see fuse_reformats.h).
#include "plan/fuse_reformats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "ops/fused_ops.h"
#include "ops/op_def.h"
#include "ops/shape_tensor_params.h"

namespace kiln {
namespace {

bool IsOnnx(const Node* n, const char* op) {
  return n && n->domain.empty() && n->op_type == op && !n->inputs.empty() && n->inputs[0] && n->outputs.size() == 1 &&
         n->outputs[0];
}

// The constant int64 contents of input i, or the int-list attribute `attr` where the input is absent (Pad before
// opset 11); nullopt where the input is given but not constant.
std::optional<std::vector<int64_t>> ConstInts(const Node& n, size_t i, const char* attr) {
  const Value* v = n.input(i);
  if (!v) return n.getints(attr, {});
  if (!v->is_const()) return std::nullopt;
  return v->const_value->ToInt64Vector();
}

// Whether Pad `p` adds zeros at the end of the last axis only, and to how many entries that axis grows (nullopt:
// another pad, or sizes not known).
std::optional<int64_t> PadsLastAxisWithZeros(const Node& p) {
  const Value* x = p.input(0);
  const Value* y = p.output(0);
  if (p.gets("mode", "constant") != "constant" || !x->has_shape || x->shape.empty() || !x->shape.back().known() ||
      !y->has_shape || y->shape.size() != x->shape.size() || !y->shape.back().known())
    return std::nullopt;
  const auto pads = ConstInts(p, 1, "pads");
  const auto axes = ConstInts(p, 3, "axes");
  if (!pads || !axes) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  auto all = ComputePads(p, rank, *pads, *axes);
  if (!all.ok()) return std::nullopt;
  for (int64_t d = 0; d < 2 * rank; ++d)
    if ((*all)[d] != 0 && d != 2 * rank - 1) return std::nullopt;
  if ((*all)[2 * rank - 1] < 0) return std::nullopt;
  // The value: an omitted input, an empty one, or a constant +0 (not -0: Reformat writes +0's bits); before opset
  // 11, the attribute.
  double value = p.getf("value", 0.f);
  if (const Value* v = p.input(2)) {
    if (!v->is_const()) return std::nullopt;
    const Tensor& t = *v->const_value;
    if (t.numel() > 1) return std::nullopt;
    value = t.numel() == 1 ? t.GetAsDouble(0) : 0.0;
  }
  if (value != 0.0 || std::signbit(value)) return std::nullopt;
  const int64_t padded = x->shape.back().value + (*all)[2 * rank - 1];
  return padded == y->shape.back().value ? std::optional<int64_t>(padded) : std::nullopt;
}

}  // namespace

ReformatFusions FuseReformats(Graph& g, const std::function<bool(const Node&)>& prefers) {
  ReformatFusions r;
  std::map<const Value*, std::vector<Node*>> readers;
  for (const auto& n : g.nodes())
    for (Value* v : n->inputs)
      if (v) readers[v].push_back(n.get());
  // The one node reading v, where v has exactly one reader and is not a graph output.
  auto sole_reader = [&](const Value* v) -> Node* {
    auto it = readers.find(v);
    return !v->is_graph_output && it != readers.end() && it->second.size() == 1 ? it->second[0] : nullptr;
  };
  std::set<const Node*> dead;
  std::map<const Node*, std::unique_ptr<Node>> made;  // the last node of a merged chain -> its Reformat
  for (const auto& np : g.nodes()) {
    Node* t = np.get();
    if (!IsOnnx(t, "Transpose") || dead.count(t) || !t->input(0)->has_shape) continue;
    const int64_t rank = static_cast<int64_t>(t->input(0)->shape.size());
    auto perm = TransposePerm(*t, rank);
    if (!perm.ok()) continue;
    Node* cast = t->input(0)->producer;
    if (!IsOnnx(cast, "Cast") || cast->inputs.size() != 1 || sole_reader(cast->outputs[0]) != t ||
        !fused::IsReformatType(cast->input(0)->dtype) || !fused::IsReformatType(cast->outputs[0]->dtype))
      cast = nullptr;
    Node* pad = sole_reader(t->outputs[0]);
    std::optional<int64_t> pad_last;
    if (IsOnnx(pad, "Pad") && pad->inputs[0] == t->outputs[0]) pad_last = PadsLastAxisWithZeros(*pad);
    if (!pad_last) pad = nullptr;
    if (!cast && !pad) continue;  // a Transpose alone saves nothing
    Value* x = cast ? cast->input(0) : t->input(0);
    Value* y = pad ? pad->outputs[0] : t->outputs[0];
    if (!fused::IsReformatType(x->dtype) || !fused::IsReformatType(y->dtype)) continue;
    auto node = std::make_unique<Node>();
    node->name = fmt::format("kiln_reformat_{}_{}", r.merged, x->name);
    node->op_type = "Reformat";
    node->domain = kKilnDomain;
    node->opset = 1;
    node->inputs = {x};
    node->outputs = {y};
    node->attrs["to"] = Attribute::Int(static_cast<int64_t>(y->dtype));
    node->attrs["perm"] = Attribute::Ints(*perm);
    if (pad) node->attrs["kiln_pad_last"] = Attribute::Int(*pad_last);
    if (!prefers(*node)) continue;
    std::string chain;
    for (Node* n : {cast, t, pad})
      if (n) {
        dead.insert(n);
        chain += (chain.empty() ? "" : " -> ") + n->op_type + " '" + n->name + "'";
        for (Value* o : n->outputs) o->producer = nullptr;
      }
    r.details.push_back(fmt::format("{}: {}", node->name, chain));
    y->producer = node.get();
    made[pad ? pad : t] = std::move(node);
    ++r.merged;
  }
  if (r.merged == 0) return r;
  r.nodes_removed = static_cast<int>(dead.size());
  // Each Reformat takes the place of its chain's last node: X is made before the chain, Y's readers come after it.
  std::vector<std::unique_ptr<Node>> kept;
  for (auto& n : g.mutable_nodes()) {
    if (auto it = made.find(n.get()); it != made.end()) kept.push_back(std::move(it->second));
    if (!dead.count(n.get())) kept.push_back(std::move(n));
  }
  g.mutable_nodes() = std::move(kept);
  if (!g.opsets.count(kKilnDomain)) g.opsets[kKilnDomain] = 1;
  return r;
}

}  // namespace kiln
