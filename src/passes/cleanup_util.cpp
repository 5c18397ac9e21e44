// Helpers of the cleanup passes (see cleanup_util.h).
#include "passes/cleanup_util.h"

#include <algorithm>

namespace kiln {

std::vector<Node*> LiveConsumers(const Graph& g, const Value* v, const std::unordered_set<const Node*>& dead) {
  std::vector<Node*> r = Consumers(g, v);
  std::erase_if(r, [&](const Node* n) { return dead.count(n) != 0; });
  return r;
}

bool SameTypeAndShape(const Value* a, const Value* b) {
  if (!a || !b || a->dtype != b->dtype || a->dtype == DataType::kUndefined) return false;
  if (!a->has_shape || !b->has_shape || a->shape.size() != b->shape.size()) return false;
  for (size_t i = 0; i < a->shape.size(); ++i)
    if (!a->shape[i].same(b->shape[i])) return false;
  return true;
}

Bypass BypassValue(Graph& g, Value* in, Value* out) {
  if (!in || !out || in == out) return Bypass::kKept;
  if (!IsGraphOutput(g, out)) {
    ReplaceAllUses(g, out, in);
    return Bypass::kRedirected;
  }
  // `out` must keep its name. `in` can give its place to it only when it is an ordinary intermediate.
  Node* p = in->producer;
  if (!p || in->is_const() || in->is_graph_input || IsGraphOutput(g, in)) return Bypass::kKept;
  for (Value*& o : p->outputs)
    if (o == in) o = out;
  out->producer = p;
  in->producer = nullptr;
  ReplaceAllUses(g, in, out);
  return Bypass::kRenamed;
}

std::optional<std::vector<int64_t>> ConstInts(const Value* v) {
  if (!v || !v->is_const()) return std::nullopt;
  const Tensor& t = *v->const_value;
  if (!IsIntegerType(t.dtype())) return std::nullopt;
  return t.ToInt64Vector();
}

std::optional<std::vector<int64_t>> ReshapeTargetFor(const Value* x, const Value* out) {
  if (!x || !out || !x->has_shape || !out->has_shape || out->shape.empty()) return std::nullopt;
  std::vector<int64_t> t;
  int inferred = 0;
  for (size_t i = 0; i < out->shape.size(); ++i) {
    const Dim& d = out->shape[i];
    if (d.known()) {
      if (d.value == 0) return std::nullopt;
      t.push_back(d.value);
    } else if (d.symbolic() && i < x->shape.size() && d.same(x->shape[i])) {
      t.push_back(0);
    } else {
      t.push_back(-1);
      if (++inferred > 1) return std::nullopt;
    }
  }
  // A copied dim that is 0 at run time would leave the -1 undefined (0 / 0), where the model's own target worked.
  if (inferred > 0 && std::find(t.begin(), t.end(), 0) != t.end()) return std::nullopt;
  return t;
}

}  // namespace kiln
