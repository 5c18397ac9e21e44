// Tables of the internal fused ops (see fused_ops.h).
#include "ops/fused_ops.h"

#include <algorithm>

#include "core/error.h"
#include "ops/pointwise_op.h"

namespace kiln::fused {

std::optional<Act> ParseActivation(const std::string& n) {
  static const struct { const char* name; Act act; } kActs[] = {
      {"None", Act::kNone}, {"Relu", Act::kRelu}, {"LeakyRelu", Act::kLeakyRelu}, {"Sigmoid", Act::kSigmoid},
      {"Tanh", Act::kTanh}, {"Clip", Act::kClip}, {"HardSigmoid", Act::kHardSigmoid}, {"SiLU", Act::kSiLU},
      {"Gelu", Act::kGelu}, {"GeluTanh", Act::kGeluTanh}};
  for (const auto& a : kActs)
    if (n == a.name) return a.act;
  return std::nullopt;
}

const PwOpInfo* FindPointwiseOp(const std::string& name) {
  for (const PwOpInfo& o : kPwOps)
    if (name == o.name) return &o;
  return nullptr;
}

Result<PwProgram> ParseProgram(const Node& n, size_t num_inputs) {
  PwProgram p;
  auto it = n.attrs.find("kiln_ops");
  if (it == n.attrs.end() || it->second.kind != Attribute::Kind::kStrings || it->second.strings.empty())
    return Err(StatusCode::kInvalidModel, "{}: attribute 'kiln_ops' must be a non-empty list of strings", n.Where());
  const auto& names = it->second.strings;
  const size_t steps = names.size();
  KILN_ASSIGN_OR_RETURN(p.args, n.attr_ints("kiln_args"));
  KILN_ASSIGN_OR_RETURN(p.alpha, n.attr_floats("kiln_alpha"));
  KILN_ASSIGN_OR_RETURN(p.beta, n.attr_floats("kiln_beta"));
  if (p.args.size() != 2 * steps || p.alpha.size() != steps || p.beta.size() != steps)
    return Err(StatusCode::kInvalidModel,
               "{}: the program has {} steps but kiln_args has {} entries (want {}), kiln_alpha {} and kiln_beta {}",
               n.Where(), steps, p.args.size(), 2 * steps, p.alpha.size(), p.beta.size());
  for (size_t j = 0; j < steps; ++j) {
    const PwOpInfo* info = FindPointwiseOp(names[j]);
    if (!info) return Err(StatusCode::kInvalidModel, "{}: step {} has unknown op '{}'", n.Where(), j, names[j]);
    p.ops.push_back(info->op);
    p.arity.push_back(info->arity);
    for (int k = 0; k < 2; ++k) {
      const int64_t a = p.args[2 * j + k];
      const bool ok = a >= 0 ? a < static_cast<int64_t>(num_inputs) : (-1 - a) < static_cast<int64_t>(j);
      if (!ok)
        return Err(StatusCode::kInvalidModel, "{}: step {} ({}) reads operand {}, which is neither one of the {} "
                   "inputs nor an earlier step", n.Where(), j, names[j], a, num_inputs);
    }
  }
  return p;
}

Result<AttnLayout> ReadAttentionLayout(const Node& n, const char* name) {
  const bool output = std::string(name) == kAttentionOutputLayout;
  const Result<std::string> l = n.attr_string(name, "BHSD");
  if (!l.ok()) return l.status();
  if (*l == "BHSD") return AttnLayout::kBHSD;
  if (*l == "BSHD") return AttnLayout::kBSHD;
  if (*l == "BS3HD" && !output) return AttnLayout::kBS3HD;
  return Err(StatusCode::kInvalidModel, "{}: {} is '{}'; expected BHSD or BSHD{}", n.Where(), name, *l,
             output ? "" : " or BS3HD");
}

bool IsReformatType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

Result<ReformatParams> ReadReformat(const Node& n, DataType from, int64_t rank) {
  ReformatParams p;
  KILN_ASSIGN_OR_RETURN(const int64_t to, n.attr_int("to", static_cast<int64_t>(from)));
  p.to = static_cast<DataType>(to);
  if (!IsReformatType(from) || !IsReformatType(p.to))
    return Err(StatusCode::kUnsupported, "{}: Reformat casts between float32, float16, bfloat16 and float64, not {} to {}",
               n.Where(), DataTypeName(from), DataTypeName(p.to));
  std::vector<int64_t> identity(static_cast<size_t>(std::max<int64_t>(rank, 0)));
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int64_t>(i);
  KILN_ASSIGN_OR_RETURN(p.perm, n.attr_ints("perm", identity));
  std::vector<bool> seen(identity.size(), false);
  bool ok = static_cast<int64_t>(p.perm.size()) == rank;
  for (size_t i = 0; ok && i < p.perm.size(); ++i) {
    ok = p.perm[i] >= 0 && p.perm[i] < rank && !seen[p.perm[i]];
    if (ok) seen[p.perm[i]] = true;
  }
  if (!ok)
    return Err(StatusCode::kInvalidModel, "{}: perm [{}] is not a permutation of the {} axes of X", n.Where(),
               fmt::join(p.perm, ", "), rank);
  KILN_ASSIGN_OR_RETURN(p.pad_last, n.attr_int("kiln_pad_last", 0));
  if (p.pad_last < 0 || (p.pad_last > 0 && rank == 0))
    return Err(StatusCode::kInvalidModel, "{}: kiln_pad_last {} needs to be >= 0 and an output of rank >= 1",
               n.Where(), p.pad_last);
  return p;
}

Result<std::vector<int64_t>> ReformatOutputShape(const Node& n, const ReformatParams& p,
                                                 const std::vector<int64_t>& x_shape) {
  std::vector<int64_t> y;
  for (int64_t a : p.perm) y.push_back(x_shape.at(static_cast<size_t>(a)));
  if (p.pad_last > 0) {
    if (y.back() > p.pad_last)
      return Err(StatusCode::kInvalidArgument, "{}: the last output axis has {} entries, more than kiln_pad_last {}",
                 n.Where(), y.back(), p.pad_last);
    y.back() = p.pad_last;
  }
  return y;
}

}  // namespace kiln::fused
