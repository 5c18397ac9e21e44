#include "passes/uniform_value.h"

#include <cmath>

#include "core/dtype.h"

namespace kiln {
namespace {

constexpr int kMaxDepth = 16;
constexpr int64_t kExactInDouble = int64_t{1} << 53;  // integers up to this magnitude are exact as doubles

std::optional<double> Uniform(const Value* v, int depth);

bool IsDefaultDomain(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The float types that hold 0, small integers and infinities exactly (not the 8-bit floats).
bool IsWideFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

// The least element of v, where v is a Range with constant start and a positive constant step (or a shape-only
// op or widening Cast of one). An empty Range has no elements, which every claim below holds for.
std::optional<double> LowerBound(const Value* v, int depth) {
  if (!v || depth > kMaxDepth) return std::nullopt;
  if (auto u = Uniform(v, depth + 1)) return u;
  const Node* p = v->producer;
  if (!p || !IsDefaultDomain(*p)) return std::nullopt;
  const std::string& op = p->op_type;
  if (op == "Range") {
    const Value* start = p->input(0);
    const Value* delta = p->input(2);
    if (!start || !delta || !start->is_const() || !delta->is_const() || start->const_value->numel() != 1 ||
        delta->const_value->numel() != 1)
      return std::nullopt;
    const double s = start->const_value->GetAsDouble(0), d = delta->const_value->GetAsDouble(0);
    if (!(d > 0) || !std::isfinite(s)) return std::nullopt;
    return s;
  }
  if (op == "Identity" || op == "Expand" || op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" ||
      op == "Flatten" || op == "Tile" || op == "Transpose")
    return LowerBound(p->input(0), depth + 1);
  if (op == "Cast") {
    // A cast that keeps every value's order and cannot wrap keeps the least element a lower bound: to a wide float
    // (monotone rounding; overflow goes to +inf), or to int64 from an integer type, or to the source's own type.
    const Value* src = p->input(0);
    auto lb = LowerBound(src, depth + 1);
    if (!lb || !src) return std::nullopt;
    if (IsWideFloat(v->dtype) && std::fabs(*lb) <= 256 && *lb == std::floor(*lb)) return lb;
    if (v->dtype == src->dtype) return lb;
    if (v->dtype == DataType::kInt64 && IsIntegerType(src->dtype) && !IsSubByteIntegerType(src->dtype)) return lb;
    return std::nullopt;
  }
  return std::nullopt;
}

// A comparison of a and b, when their uniform values or a's lower bound against a uniform b decide it.
std::optional<double> Compare(const std::string& op, const Value* a, const Value* b, int depth) {
  auto ua = Uniform(a, depth + 1), ub = Uniform(b, depth + 1);
  if (ua && ub) {
    if (op == "Greater") return *ua > *ub ? 1.0 : 0.0;
    if (op == "GreaterOrEqual") return *ua >= *ub ? 1.0 : 0.0;
    if (op == "Less") return *ua < *ub ? 1.0 : 0.0;
    if (op == "LessOrEqual") return *ua <= *ub ? 1.0 : 0.0;
    return *ua == *ub ? 1.0 : 0.0;  // Equal
  }
  if (!ub || op == "Equal") return std::nullopt;
  auto lb = LowerBound(a, depth + 1);
  if (!lb) return std::nullopt;
  if (op == "GreaterOrEqual" && *lb >= *ub) return 1.0;
  if (op == "Greater" && *lb > *ub) return 1.0;
  if (op == "Less" && *lb >= *ub) return 0.0;
  if (op == "LessOrEqual" && *lb > *ub) return 0.0;
  return std::nullopt;
}

// x converted to dtype t, where the conversion is exact for it.
std::optional<double> CastExactly(double x, DataType t) {
  if (t == DataType::kBool) return x != 0 ? 1.0 : 0.0;
  if (IsWideFloat(t)) {
    if (std::isinf(x) || x == 0 || ((std::fabs(x) <= 256) && x == std::floor(x))) return x;  // exact in each of them
    return std::nullopt;
  }
  // Integers inside the type's range (int2 holds [-2, 1], uint4 [0, 15], ...).
  if (IsIntegerType(t) && std::isfinite(x) && x == std::floor(x)) {
    const auto [lo, hi] = IntegerRange(t);
    if (x >= static_cast<double>(lo) && x <= static_cast<double>(hi)) return x;
  }
  return std::nullopt;
}

std::optional<double> Uniform(const Value* v, int depth) {
  if (!v || depth > kMaxDepth || v->kind != ValueKind::kTensor) return std::nullopt;
  if (v->is_const()) {
    const Tensor& t = *v->const_value;
    if (t.numel() == 0) return std::nullopt;
    if (IsIntegerType(t.dtype())) {  // compared exactly; values a double cannot hold exactly are not claimed
      const int64_t first = t.GetAsInt(0);
      if (first > kExactInDouble || first < -kExactInDouble || (t.dtype() == DataType::kUInt64 && first < 0))
        return std::nullopt;
      for (int64_t i = 1; i < t.numel(); ++i)
        if (t.GetAsInt(i) != first) return std::nullopt;
      return static_cast<double>(first);
    }
    const double first = t.GetAsDouble(0);
    if (std::isnan(first)) return std::nullopt;
    for (int64_t i = 1; i < t.numel(); ++i)
      if (t.GetAsDouble(i) != first) return std::nullopt;
    return first;
  }
  const Node* p = v->producer;
  if (!p || !IsDefaultDomain(*p) || p->outputs.empty() || p->outputs[0] != v) return std::nullopt;
  const std::string& op = p->op_type;
  if (op == "ConstantOfShape") {
    auto it = p->attrs.find("value");
    if (it == p->attrs.end()) return 0.0;
    const Tensor& t = it->second.t;
    if (t.numel() != 1) return std::nullopt;
    const double x = t.GetAsDouble(0);
    if (std::isnan(x) || (IsIntegerType(t.dtype()) && std::fabs(x) > kExactInDouble)) return std::nullopt;
    return x;
  }
  if (op == "Identity" || op == "Expand" || op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" ||
      op == "Flatten" || op == "Tile" || op == "Transpose")
    return Uniform(p->input(0), depth + 1);
  if (op == "Cast") {
    auto x = Uniform(p->input(0), depth + 1);
    return x ? CastExactly(*x, v->dtype) : std::nullopt;
  }
  if (op == "Where") {
    if (auto c = Uniform(p->input(0), depth + 1)) return Uniform(p->input(*c != 0 ? 1 : 2), depth + 1);
    auto a = Uniform(p->input(1), depth + 1), b = Uniform(p->input(2), depth + 1);
    if (a && b && *a == *b) return a;
    return std::nullopt;
  }
  if (op == "Not") {
    auto x = Uniform(p->input(0), depth + 1);
    return x ? std::optional<double>(*x != 0 ? 0.0 : 1.0) : std::nullopt;
  }
  if (op == "And" || op == "Or") {
    auto a = Uniform(p->input(0), depth + 1), b = Uniform(p->input(1), depth + 1);
    const bool is_and = op == "And";
    // One operand decides (false for And, true for Or) whatever the other holds.
    if ((a && (*a != 0) != is_and) || (b && (*b != 0) != is_and)) return is_and ? 0.0 : 1.0;
    if (a && b) return is_and ? 1.0 : 0.0;
    return std::nullopt;
  }
  if (op == "Greater" || op == "GreaterOrEqual" || op == "Less" || op == "LessOrEqual" || op == "Equal")
    return Compare(op, p->input(0), p->input(1), depth);
  return std::nullopt;
}

}  // namespace

std::optional<double> UniformValue(const Value* v) { return Uniform(v, 0); }

}  // namespace kiln
