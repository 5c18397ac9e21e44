// Pass eliminate-common-subexpressions: merges what is computed twice.
//   1. Constants with equal contents (same type, shape and bytes) merge into the first one (creation order).
//   2. Nodes with the same op type, domain, opset, attributes and inputs merge into the first one (node
//      order), so that readers of the later node's outputs read the earlier node's outputs.
// Before: x -> Relu(r1) -> a;  x -> Relu(r2) -> b;  Add(a, b)      After: x -> Relu(r1) -> a;  Add(a, a)
// The later node is left dead for dead-code elimination. Random ops, Dropout, nodes with subgraphs and nodes
// writing a graph output are never merged. Deterministic: one sweep in node order; merges cascade because
// each node is keyed after the merges of the nodes before it.
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "ops/op_def.h"
#include "passes/pass_list.h"

namespace kiln {

namespace {

uint64_t Fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.raw() == b.raw()) return true;
  return a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// A key for bucketing constants: type, shape and a hash of (for large tensors, evenly spaced samples of) the
// bytes. Equality is decided by SameTensor, so sampling only costs extra comparisons on collisions.
std::string TensorKey(const Tensor& t) {
  constexpr size_t kFullHashBytes = 1 << 16, kSamples = 4096;
  const size_t n = t.nbytes();
  uint64_t h = 1469598103934665603ull;
  if (n <= kFullHashBytes) {
    h = Fnv1a(t.raw(), n, h);
  } else {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    const size_t stride = (n - 8) / kSamples;
    for (size_t i = 0; i < kSamples; ++i) h = Fnv1a(p + i * stride, 8, h);
    h = Fnv1a(p + n - 8, 8, h);
  }
  return fmt::format("{}{}#{:x}", static_cast<int>(t.dtype()), ShapeToString(t.shape()), h);
}

// The attributes in a canonical text form (std::map keeps them sorted); nullopt for attributes that cannot
// be compared (subgraphs).
std::optional<std::string> AttrKey(const Node& n) {
  std::string k;
  for (const auto& [name, a] : n.attrs) {
    k += name + "=" + std::to_string(static_cast<int>(a.kind)) + ":";
    switch (a.kind) {
      case Attribute::Kind::kFloat: k += std::to_string(Fnv1a(&a.f, sizeof(float))); break;
      case Attribute::Kind::kInt: k += std::to_string(a.i); break;
      case Attribute::Kind::kString: k += std::to_string(a.s.size()) + ":" + a.s; break;
      case Attribute::Kind::kTensor: k += TensorKey(a.t); break;
      case Attribute::Kind::kFloats: k += std::to_string(Fnv1a(a.floats.data(), a.floats.size() * sizeof(float))); break;
      case Attribute::Kind::kInts: k += fmt::format("{}", a.ints); break;
      case Attribute::Kind::kStrings:
        for (const auto& s : a.strings) k += std::to_string(s.size()) + ":" + s + ",";
        break;
      default: return std::nullopt;
    }
    k += ";";
  }
  return k;
}

bool SameAttrs(const Node& a, const Node& b) {
  if (a.attrs.size() != b.attrs.size()) return false;
  for (auto ia = a.attrs.begin(), ib = b.attrs.begin(); ia != a.attrs.end(); ++ia, ++ib) {
    const Attribute &x = ia->second, &y = ib->second;
    if (ia->first != ib->first || x.kind != y.kind) return false;
    bool same = true;
    switch (x.kind) {
      case Attribute::Kind::kFloat: same = std::memcmp(&x.f, &y.f, sizeof(float)) == 0; break;
      case Attribute::Kind::kInt: same = x.i == y.i; break;
      case Attribute::Kind::kString: same = x.s == y.s; break;
      case Attribute::Kind::kTensor: same = SameTensor(x.t, y.t); break;
      case Attribute::Kind::kFloats:
        same = x.floats.size() == y.floats.size() &&
               std::memcmp(x.floats.data(), y.floats.data(), x.floats.size() * sizeof(float)) == 0;
        break;
      case Attribute::Kind::kInts: same = x.ints == y.ints; break;
      case Attribute::Kind::kStrings: same = x.strings == y.strings; break;
      default: same = false;
    }
    if (!same) return false;
  }
  return true;
}

// Nodes without inputs, and ops that may draw random numbers (OpDef trait), are never merged.
bool NeverMerge(const Node& n) { return n.inputs.empty() || TraitsOf(n).nondeterministic; }

bool SameSignature(const Node& a, const Node& b) {
  if (a.op_type != b.op_type || a.domain != b.domain || a.opset != b.opset || a.inputs != b.inputs) return false;
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if ((a.outputs[i] == nullptr) != (b.outputs[i] == nullptr)) return false;
  return SameAttrs(a, b);
}

}  // namespace

Result<PassReport> EliminateCommonSubexpressionsPass(Graph& g, const PassOptions& o) {
  PassReport report;

  // 1. Constants read by some node, by contents.
  std::unordered_set<const Value*> read;
  for (const auto& n : g.nodes())
    for (const Value* in : n->inputs)
      if (in) read.insert(in);
  std::unordered_map<std::string, std::vector<Value*>> by_contents;
  std::unordered_map<Value*, Value*> canonical;
  for (Value* v : g.values()) {
    if (!v->is_const() || v->is_graph_input || !read.count(v)) continue;
    auto& bucket = by_contents[TensorKey(*v->const_value)];
    Value* same = nullptr;
    for (Value* c : bucket)
      if (SameTensor(*c->const_value, *v->const_value)) {
        same = c;
        break;
      }
    if (!same) {
      bucket.push_back(v);
      continue;
    }
    canonical[v] = same;
    report.details.push_back(fmt::format("merged constant '{}' into '{}' (equal {} contents)", v->name, same->name,
                                         v->const_value->Describe()));
    ++report.rewrites;
  }
  if (!canonical.empty())
    for (const auto& n : g.nodes())
      for (Value*& in : n->inputs)
        if (in) {
          auto it = canonical.find(in);
          if (it != canonical.end()) in = it->second;
        }

  // 2. Nodes, in order. A node is keyed after the rewrites before it, so chains of duplicates merge at once.
  std::unordered_map<std::string, std::vector<Node*>> seen;
  std::unordered_map<Value*, Value*> replace;  // output of a merged node -> output of the node kept
  for (const auto& node_ptr : g.nodes()) {
    Node* n = node_ptr.get();
    for (Value*& in : n->inputs)
      if (in) {
        auto it = replace.find(in);
        if (it != replace.end()) in = it->second;
      }
    if (NeverMerge(*n)) continue;
    auto attrs = AttrKey(*n);
    if (!attrs) continue;
    std::string key = n->op_type + "|" + n->domain + "|" + std::to_string(n->opset) + "|" + *attrs + "|";
    for (const Value* in : n->inputs) key += (in ? in->name : std::string("<none>")) + ",";
    key += "|" + std::to_string(n->outputs.size());
    auto& bucket = seen[key];
    Node* first = nullptr;
    for (Node* c : bucket)
      if (SameSignature(*c, *n)) {
        first = c;
        break;
      }
    bool writes_output = false;
    for (const Value* out : n->outputs) writes_output = writes_output || IsGraphOutput(g, out);
    if (!first || writes_output) {
      if (!first) bucket.push_back(n);
      continue;
    }
    for (size_t i = 0; i < n->outputs.size(); ++i)
      if (n->outputs[i]) replace[n->outputs[i]] = first->outputs[i];
    report.details.push_back(fmt::format("merged {} into {} (same {} of the same inputs)", n->name, first->name,
                                         n->op_type));
    ++report.rewrites;
  }
  return report;
}

}  // namespace kiln
