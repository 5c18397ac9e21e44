// Pass fuse-pointwise: groups adjacent elementwise ops into one kiln "FusedPointwise" node that runs them in
// one pass over memory (one read of each operand, one write of the result).
//   before: t = Sub(1, m); u = Mul(t, -10000)            after: u = kiln.FusedPointwise(m; program)
// A group is a tree of >= 2 elementwise ops (float32/float16/bfloat16; unary or binary, see fused_ops.h)
// whose results all have the shape of the group's last op; operands from outside the group (constants or
// graph values) may broadcast. Every value inside the group is read only inside it and is not a graph
// output. Groups are grown backwards from the last op, so each is maximal; the last op is rewritten in place.
#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"
#include "ops/fused_ops.h"
#include "ops/op_def.h"
#include "ops/pointwise_op.h"

namespace kiln {
namespace {

using fusion::Uses;

struct Step {
  std::string op;              // program name
  std::vector<Value*> operands;  // 1 or 2
  float alpha = 0.f, beta = 0.f;
};

// The program step of an elementwise node, or nullopt when it cannot be fused.
std::optional<Step> AsStep(const Node* n) {
  if (!n->domain.empty() || n->outputs.size() != 1 || !n->outputs[0]) return std::nullopt;
  const Value* y = n->outputs[0];
  if (!fusion::IsFloatType(y->dtype) || !y->has_shape) return std::nullopt;
  std::string op = n->op_type;
  const OpTraits& traits = TraitsOf(*n);  // the OpDef says whether the op has a fusable formula
  if (!traits.fusable_pointwise()) return std::nullopt;
  Step s;
  size_t operands = static_cast<size_t>(traits.pointwise_arity);
  if (op == "Clip") {
    if (n->inputs.empty() || n->inputs.size() > 3) return std::nullopt;
    s.alpha = -std::numeric_limits<float>::infinity();
    s.beta = std::numeric_limits<float>::infinity();
    for (size_t i = 1; i < n->inputs.size(); ++i) {
      if (!n->inputs[i]) continue;
      auto c = fusion::ScalarConst(n->inputs[i]);
      if (!c) return std::nullopt;
      (i == 1 ? s.alpha : s.beta) = static_cast<float>(*c);
    }
  } else {
    if (n->inputs.size() != operands) return std::nullopt;
    // The formula's a and b: the attributes its row names (ops/pointwise_formulas.h), 0 where none.
    const PwOpInfo& info = PwInfo(traits.pointwise);
    auto f = [&](const char* k, float d) -> std::optional<float> {
      if (!*k) return 0.f;
      auto r = n->attr_float(k, d);
      return r.ok() ? std::optional<float>(*r) : std::nullopt;
    };
    const std::optional<float> a = f(info.attr_a, info.default_a), b = f(info.attr_b, info.default_b);
    if (!a || !b) return std::nullopt;
    s.alpha = *a;
    s.beta = *b;
    if (op == "Gelu") {
      auto ap = n->attr_string("approximate", "none");
      if (!ap.ok() || (*ap != "none" && *ap != "tanh")) return std::nullopt;
      if (*ap == "tanh") op = "GeluTanh";
    }
  }
  for (size_t i = 0; i < operands; ++i) {
    Value* v = n->inputs[i];
    if (!v || v->dtype != y->dtype) return std::nullopt;
    s.operands.push_back(v);
  }
  s.op = op;
  return s;
}

}  // namespace

Result<PassReport> FusePointwisePass(Graph& g, const PassOptions& o) {
  PassReport report;
  Uses u(g);
  std::unordered_map<const Node*, size_t> index;
  for (size_t k = 0; k < g.nodes().size(); ++k) index[g.nodes()[k].get()] = k;
  std::unordered_set<const Node*> taken;
  std::vector<std::vector<Node*>> groups;
  const auto& nodes = g.nodes();
  for (size_t k = nodes.size(); k-- > 0;) {
    Node* root = nodes[k].get();
    if (taken.count(root) || !AsStep(root)) continue;
    const Value* shape_ref = root->outputs[0];
    if (!fusion::SameShape(shape_ref, shape_ref)) continue;  // every dim known or symbolic
    std::vector<Node*> group = {root};
    std::unordered_set<const Node*> in_group = {root};
    for (size_t gi = 0; gi < group.size(); ++gi) {
      auto step = AsStep(group[gi]);
      for (Value* v : step->operands) {
        Node* p = u.Producer(v);
        if (!p || taken.count(p) || in_group.count(p) || u.IsOutput(v) || !AsStep(p)) continue;
        if (!fusion::SameShape(p->outputs[0], shape_ref)) continue;
        bool private_value = true;
        for (Node* r : u.Readers(v)) private_value &= in_group.count(r) != 0;
        if (!private_value) continue;
        group.push_back(p);
        in_group.insert(p);
      }
    }
    if (group.size() < 2) continue;
    for (Node* n : group) taken.insert(n);
    groups.push_back(std::move(group));
  }

  std::vector<Node*> inner;  // nodes folded into a group's root
  for (auto& group : groups) {
    std::sort(group.begin(), group.end(), [&](Node* a, Node* b) { return index[a] < index[b]; });
    Node* root = group.back();
    std::vector<Value*> inputs;
    std::unordered_map<const Value*, int64_t> operand;  // value -> program operand index
    std::vector<std::string> ops;
    std::vector<int64_t> args;
    std::vector<float> alpha, beta;
    std::string names;
    for (size_t j = 0; j < group.size(); ++j) {
      Step s = *AsStep(group[j]);
      for (size_t i = 0; i < 2; ++i) {
        Value* v = s.operands[std::min(i, s.operands.size() - 1)];
        auto it = operand.find(v);
        if (it == operand.end()) {
          it = operand.emplace(v, static_cast<int64_t>(inputs.size())).first;
          inputs.push_back(v);
        }
        args.push_back(it->second);
      }
      ops.push_back(s.op);
      alpha.push_back(s.alpha);
      beta.push_back(s.beta);
      operand[group[j]->outputs[0]] = -1 - static_cast<int64_t>(j);
      names += (j ? " + " : "") + group[j]->name;
    }
    const std::string old = root->name;
    root->op_type = "FusedPointwise";
    root->domain = "kiln";
    root->opset = 1;
    root->inputs = inputs;
    root->attrs.clear();
    Attribute prog;
    prog.kind = Attribute::Kind::kStrings;
    prog.strings = ops;
    root->attrs["kiln_ops"] = prog;
    root->attrs["kiln_args"] = Attribute::Ints(args);
    root->attrs["kiln_alpha"] = Attribute::Floats(alpha);
    root->attrs["kiln_beta"] = Attribute::Floats(beta);
    root->name = old + "/FusedPointwise";
    std::string program;
    for (const auto& op : ops) program += (program.empty() ? "" : ",") + op;
    report.details.push_back(fmt::format("pointwise: {} -> kiln.FusedPointwise '{}' [{}] ({} inputs)", names,
                                         root->name, program, inputs.size()));
    ++report.rewrites;
    inner.insert(inner.end(), group.begin(), group.end() - 1);
  }
  // The fused nodes go in one sweep after every group is rewritten (one per group made the pass quadratic).
  if (!groups.empty()) fusion::UseKilnDomain(g);
  fusion::RemoveUnread(g, inner);
  return report;
}

}  // namespace kiln
