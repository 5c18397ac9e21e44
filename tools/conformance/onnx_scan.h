// kiln-conformance helper (header-only): a tiny reader of the protobuf wire format that lists the op types
// of an ONNX model (top-level graph and nested subgraphs) without importing it, so that the runner can decide
// a test's scope and its "main" op even when kiln's importer would reject the model. A test is in scope when
// every op of it is one kiln implements (the public op table, read from the OpDefs).
#pragma once

#include "kiln/ops.h"

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::conformance {

// The ops in scope: every default-domain op kiln implements (its OpDefs, through the public op table), and
// `Constant`, which the importer turns into an initializer.
inline const std::set<std::string>& InScopeOps() {
  static const std::set<std::string> ops = [] {
    std::set<std::string> r = {"Constant"};
    for (const kiln::OpInfo& op : kiln::getSupportedOps())
      if (op.domain.empty() && !op.plugin) r.insert(op.name);
    return r;
  }();
  return ops;
}

struct ScannedNode {
  std::string op_type;
  std::string domain;  // "" or "ai.onnx" for the default domain
  int depth = 0;       // 0: top-level graph; 1+: inside a subgraph attribute (If/Loop/Scan bodies)
};

struct ScannedModel {
  std::vector<ScannedNode> nodes;  // in file order, subgraph nodes right after their parent node
  bool ok = false;
  std::string error;
};

namespace detail {

// A bounds-checked cursor over protobuf wire-format bytes.
class Wire {
 public:
  explicit Wire(std::string_view b) : b_(b) {}
  bool done() const { return pos_ >= b_.size(); }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= b_.size()) return false;
      const uint8_t c = static_cast<uint8_t>(b_[pos_++]);
      *v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return true;
    }
    return false;
  }
  // Reads one field key; sets `len_payload` for length-delimited fields and skips every other kind.
  bool Next(uint32_t* field, std::string_view* len_payload, bool* is_len) {
    uint64_t key = 0;
    if (!Varint(&key)) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *is_len = false;
    switch (key & 7) {
      case 0: { uint64_t ignored; return Varint(&ignored); }
      case 1: return Skip(8);
      case 5: return Skip(4);
      case 2: {
        uint64_t n = 0;
        if (!Varint(&n) || n > b_.size() - pos_) return false;
        *len_payload = b_.substr(pos_, n);
        pos_ += n;
        *is_len = true;
        return true;
      }
      default: return false;  // groups (3/4) are not used by onnx.proto
    }
  }

 private:
  bool Skip(size_t n) {
    if (n > b_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::string_view b_;
  size_t pos_ = 0;
};

inline bool ScanGraph(std::string_view bytes, int depth, std::vector<ScannedNode>* out);

// AttributeProto: g = 6 (GraphProto), graphs = 11 (repeated GraphProto).
inline bool ScanAttribute(std::string_view bytes, int depth, std::vector<ScannedNode>* out) {
  Wire w(bytes);
  while (!w.done()) {
    uint32_t f; std::string_view p; bool len;
    if (!w.Next(&f, &p, &len)) return false;
    if (len && (f == 6 || f == 11) && !ScanGraph(p, depth + 1, out)) return false;
  }
  return true;
}

// NodeProto: op_type = 4, domain = 7, attribute = 5.
inline bool ScanNode(std::string_view bytes, int depth, std::vector<ScannedNode>* out) {
  Wire w(bytes);
  ScannedNode node;
  node.depth = depth;
  std::vector<std::string_view> attrs;
  while (!w.done()) {
    uint32_t f; std::string_view p; bool len;
    if (!w.Next(&f, &p, &len)) return false;
    if (!len) continue;
    if (f == 4) node.op_type = std::string(p);
    else if (f == 7) node.domain = std::string(p);
    else if (f == 5) attrs.push_back(p);
  }
  out->push_back(node);
  for (std::string_view a : attrs)
    if (!ScanAttribute(a, depth, out)) return false;
  return true;
}

// GraphProto: node = 1.
inline bool ScanGraph(std::string_view bytes, int depth, std::vector<ScannedNode>* out) {
  if (depth > 16) return false;
  Wire w(bytes);
  while (!w.done()) {
    uint32_t f; std::string_view p; bool len;
    if (!w.Next(&f, &p, &len)) return false;
    if (len && f == 1 && !ScanNode(p, depth, out)) return false;
  }
  return true;
}

}  // namespace detail

// ModelProto: graph = 7.
inline ScannedModel ScanModelFile(const std::string& path) {
  ScannedModel m;
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    m.error = "cannot open " + path;
    return m;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  detail::Wire w(bytes);
  bool have_graph = false;
  while (!w.done()) {
    uint32_t field; std::string_view p; bool len;
    if (!w.Next(&field, &p, &len)) {
      m.error = "malformed protobuf in " + path;
      return m;
    }
    if (len && field == 7) {
      have_graph = true;
      if (!detail::ScanGraph(p, 0, &m.nodes)) {
        m.error = "malformed graph in " + path;
        return m;
      }
    }
  }
  if (!have_graph) {
    m.error = "no graph in " + path;
    return m;
  }
  m.ok = true;
  return m;
}

inline bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// "com.microsoft:Foo" for ops outside the default domain, else "Foo".
inline std::string QualifiedOp(const ScannedNode& n) {
  return IsDefaultDomain(n.domain) ? n.op_type : n.domain + ":" + n.op_type;
}

// A committed exclusion list (tests/conformance/out_of_scope.txt): entries are default-domain op names ("ImageDecoder"),
// "domain:Op", or "domain:*" for a whole domain.
struct Exclusions {
  std::set<std::string> entries;
  bool loaded = false;
  bool Excludes(const ScannedNode& n) const {
    if (IsDefaultDomain(n.domain)) return entries.count(n.op_type) > 0;
    return entries.count(n.domain + ":*") > 0 || entries.count(n.domain + ":" + n.op_type) > 0;
  }
};

// The ops that put the model out of scope (sorted, unique); empty when the test is in scope. With an exclusion list,
// only the listed ops and domains are out of scope: an op kiln does not implement counts as a failure. Without one,
// every op kiln does not implement is out of scope (the narrower measure of earlier sessions).
inline std::vector<std::string> OutOfScopeOps(const ScannedModel& m, const Exclusions& ex) {
  std::set<std::string> bad;
  for (const ScannedNode& n : m.nodes) {
    const bool out = ex.loaded ? ex.Excludes(n) : (!IsDefaultDomain(n.domain) || !InScopeOps().count(n.op_type));
    if (out) bad.insert(QualifiedOp(n));
  }
  return {bad.begin(), bad.end()};
}

// The op type of the model's main node: the first top-level node that is not a Constant ("Constant" when
// every node is one).
inline std::string MainOp(const ScannedModel& m) {
  for (const ScannedNode& n : m.nodes)
    if (n.depth == 0 && !(IsDefaultDomain(n.domain) && n.op_type == "Constant")) return QualifiedOp(n);
  return m.nodes.empty() ? "(empty)" : "Constant";
}

}  // namespace kiln::conformance
