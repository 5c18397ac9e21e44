// Einsum equation parsing and label sizes (see einsum_equation.h).
#include "ops/einsum_equation.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/error.h"

namespace kiln {

namespace {

std::string Strip(const std::string& s) {
  std::string r;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) r += c;
  return r;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> r(1);
  for (char c : s) {
    if (c == sep) r.emplace_back();
    else r.back() += c;
  }
  return r;
}

// One term ("ab...c") into letters with an ellipsis marker -1; errors on bad characters.
Result<std::vector<int>> ParseTerm(const Node& n, const std::string& t) {
  std::vector<int> r;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, 3, "...") == 0) {
      if (seen_ellipsis)
        return Err(StatusCode::kInvalidModel, "{}: equation term '{}' has more than one ellipsis", n.Where(), t);
      seen_ellipsis = true;
      r.push_back(-1);
      i += 3;
    } else if (std::isalpha(static_cast<unsigned char>(t[i]))) {
      r.push_back(t[i]);
      ++i;
    } else {
      return Err(StatusCode::kInvalidModel, "{}: unexpected character '{}' in einsum term '{}'", n.Where(), t[i], t);
    }
  }
  return r;
}

}  // namespace

Result<EinsumSpec> ParseEinsum(const Node& n, const std::string& eq_in, const std::vector<int64_t>& ranks) {
  const std::string eq = Strip(eq_in);
  if (eq.empty()) return Err(StatusCode::kInvalidModel, "{}: empty einsum equation", n.Where());
  const size_t arrow = eq.find("->");
  const std::string lhs = arrow == std::string::npos ? eq : eq.substr(0, arrow);
  const auto terms = Split(lhs, ',');
  if (terms.size() != ranks.size())
    return Err(StatusCode::kInvalidModel, "{}: equation '{}' names {} operands but the node has {} inputs",
               n.Where(), eq_in, terms.size(), ranks.size());
  EinsumSpec spec;
  // Pass 1: letters and ellipsis widths.
  std::vector<std::vector<int>> raw(terms.size());
  int64_t ell_rank = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(raw[k], ParseTerm(n, terms[k]));
    const int64_t letters = std::count_if(raw[k].begin(), raw[k].end(), [](int l) { return l >= 0; });
    const bool has_ell = letters != static_cast<int64_t>(raw[k].size());
    if ((!has_ell && letters != ranks[k]) || (has_ell && letters > ranks[k]))
      return Err(StatusCode::kInvalidModel, "{}: einsum term '{}' does not match input {} of rank {}", n.Where(),
                 terms[k], k, ranks[k]);
    if (has_ell) ell_rank = std::max(ell_rank, ranks[k] - letters);
  }
  // Pass 2: expand ellipses (right-aligned across operands).
  std::map<int, int> count;
  for (size_t k = 0; k < terms.size(); ++k) {
    std::vector<int> labels;
    const int64_t letters = std::count_if(raw[k].begin(), raw[k].end(), [](int l) { return l >= 0; });
    for (int l : raw[k]) {
      if (l >= 0) {
        labels.push_back(l);
      } else {
        const int64_t e = ranks[k] - letters;
        for (int64_t j = ell_rank - e; j < ell_rank; ++j) labels.push_back(EinsumSpec::kEllipsisBase + j);
      }
    }
    for (int l : labels) count[l]++;
    spec.inputs.push_back(std::move(labels));
  }
  if (arrow != std::string::npos) {
    KILN_ASSIGN_OR_RETURN(auto out_raw, ParseTerm(n, eq.substr(arrow + 2)));
    for (int l : out_raw) {
      if (l >= 0) {
        if (!count.count(l))
          return Err(StatusCode::kInvalidModel, "{}: output label '{}' of '{}' appears in no input", n.Where(),
                     static_cast<char>(l), eq_in);
        if (std::find(spec.output.begin(), spec.output.end(), l) != spec.output.end())
          return Err(StatusCode::kInvalidModel, "{}: output label '{}' repeats in '{}'", n.Where(),
                     static_cast<char>(l), eq_in);
        spec.output.push_back(l);
      } else {
        for (int64_t j = 0; j < ell_rank; ++j) spec.output.push_back(EinsumSpec::kEllipsisBase + j);
      }
    }
  } else {
    for (int64_t j = 0; j < ell_rank; ++j) spec.output.push_back(EinsumSpec::kEllipsisBase + j);
    for (const auto& [l, c] : count)  // std::map: letters in ascending char order
      if (l < EinsumSpec::kEllipsisBase && c == 1) spec.output.push_back(l);
  }
  spec.all_labels = spec.output;
  for (const auto& [l, c] : count)
    if (std::find(spec.output.begin(), spec.output.end(), l) == spec.output.end()) spec.all_labels.push_back(l);
  return spec;
}

Result<std::vector<Dim>> EinsumLabelSizes(const Node& n, const EinsumSpec& spec, const std::vector<Shape>& shapes) {
  std::vector<Dim> sizes(spec.all_labels.size(), Dim(1));
  std::vector<bool> seen(spec.all_labels.size(), false);
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    for (size_t d = 0; d < spec.inputs[k].size(); ++d) {
      const int l = spec.inputs[k][d];
      const size_t idx = std::find(spec.all_labels.begin(), spec.all_labels.end(), l) - spec.all_labels.begin();
      const Dim& dim = shapes[k][d];
      if (!seen[idx] || (sizes[idx].known() && sizes[idx].value == 1)) {
        if (!seen[idx] || !dim.unknown()) sizes[idx] = dim;
        seen[idx] = true;
        continue;
      }
      if (dim.known() && dim.value == 1) continue;
      if (dim.known() && sizes[idx].known() && dim.value != sizes[idx].value)
        return Err(StatusCode::kInvalidModel, "{}: einsum label '{}' has size {} in input {} but {} elsewhere",
                   n.Where(), l < EinsumSpec::kEllipsisBase ? std::string(1, static_cast<char>(l)) : "...",
                   dim.value, k, sizes[idx].value);
      if (!sizes[idx].known() && dim.known()) sizes[idx] = dim;
    }
  }
  return sizes;
}

}  // namespace kiln
