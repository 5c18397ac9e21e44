#include "ops/onnx_schema.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>

namespace kiln {

namespace {

struct SchemaRow {
  const char* op;
  int64_t since;
  const char* attributes;  // space-separated
};

constexpr SchemaRow kRows[] = {
#include "ops/onnx_attributes.inc"
};

using Versions = std::vector<std::pair<int64_t, std::vector<std::string>>>;  // by since version, ascending

const std::unordered_map<std::string, Versions>& Table() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, Versions>();
    for (const SchemaRow& r : kRows) {
      std::vector<std::string> names;
      std::istringstream in(r.attributes);
      for (std::string a; in >> a;) names.push_back(a);
      (*t)[r.op].emplace_back(r.since, std::move(names));
    }
    for (auto& [op, v] : *t) std::sort(v.begin(), v.end());
    return t;
  }();
  return *table;
}

}  // namespace

std::optional<std::vector<std::string>> OnnxSchemaAttributes(std::string_view op, int64_t opset) {
  const auto& table = Table();
  auto it = table.find(std::string(op));
  if (it == table.end()) return std::nullopt;
  const std::vector<std::string>* found = nullptr;
  for (const auto& [since, names] : it->second)
    if (since <= opset) found = &names;
  if (!found) return std::nullopt;
  return *found;
}

}  // namespace kiln
