#include "core/dims.h"

#include <charconv>

#include <limits>

namespace kiln {

bool IsStatic(const Shape& s) {
  for (const auto& d : s)
    if (!d.known()) return false;
  return true;
}

std::vector<int64_t> ToStatic(const Shape& s) {
  std::vector<int64_t> r;
  r.reserve(s.size());
  for (const auto& d : s) r.push_back(d.value);
  return r;
}

Shape FromStatic(const std::vector<int64_t>& v) {
  Shape s;
  s.reserve(v.size());
  for (int64_t x : v) s.emplace_back(x);
  return s;
}

std::string ShapeToString(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += s[i].ToString();
  }
  return r + "]";
}

std::string ShapeToString(const std::vector<int64_t>& s) { return ShapeToString(FromStatic(s)); }

int64_t NumElements(const std::vector<int64_t>& s) {
  // Saturates at INT64_MAX instead of overflowing (no allocation of that size succeeds, so callers see a failed
  // allocation rather than a wrapped-around small size).
  int64_t n = 1;
  for (int64_t d : s) {
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

std::optional<int64_t> NumElements(const Shape& s) {
  int64_t n = 1;
  for (const auto& d : s) {
    if (!d.known()) return std::nullopt;
    if (__builtin_mul_overflow(n, d.value, &n)) return std::numeric_limits<int64_t>::max();  // saturates
  }
  return n;
}

static std::string Paren(const Dim& d) {
  const std::string s = d.ToString();
  return s.find_first_of("+-*/") == std::string::npos ? s : "(" + s + ")";
}

// Known-value arithmetic that would overflow int64 gives Unknown (no real tensor has such a dim; a
// malformed model or engine must not reach undefined behaviour, and consumers refuse Unknown sizes).
Dim DimMul(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) {
    int64_t r;
    return __builtin_mul_overflow(a.value, b.value, &r) ? Dim::Unknown() : Dim(r);
  }
  if ((a.known() && a.value == 0) || (b.known() && b.value == 0)) return Dim(0);
  if (a.known() && a.value == 1) return b;
  if (b.known() && b.value == 1) return a;
  if (a.unknown() || b.unknown()) return Dim::Unknown();
  return Dim::Symbol(Paren(a) + "*" + Paren(b));
}

Dim DimAdd(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) {
    int64_t r;
    return __builtin_add_overflow(a.value, b.value, &r) ? Dim::Unknown() : Dim(r);
  }
  if (a.known() && a.value == 0) return b;
  if (b.known() && b.value == 0) return a;
  if (a.unknown() || b.unknown()) return Dim::Unknown();
  return Dim::Symbol(Paren(a) + "+" + Paren(b));
}

Dim DimSub(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) {
    int64_t r;
    return __builtin_sub_overflow(a.value, b.value, &r) ? Dim::Unknown() : Dim(r);
  }
  if (b.known() && b.value == 0) return a;
  if (a.same(b)) return Dim(0);
  if (a.unknown() || b.unknown()) return Dim::Unknown();
  return Dim::Symbol(Paren(a) + "-" + Paren(b));
}

Dim DimDiv(const Dim& a, const Dim& b) {
  if (a.known() && b.known() && b.value != 0) {
    if (b.value == -1 && a.value == std::numeric_limits<int64_t>::min()) return Dim::Unknown();
    return Dim(a.value / b.value);
  }
  if (b.known() && b.value == 1) return a;
  if (a.same(b) && !a.unknown()) return Dim(1);
  if (a.unknown() || b.unknown()) return Dim::Unknown();
  return Dim::Symbol(Paren(a) + "/" + Paren(b));
}

Dim ContentDim(int64_t v) { return v >= 0 ? Dim(v) : Dim::Symbol("#" + std::to_string(v)); }

bool IsNegativeContent(const Dim& d) { return d.symbolic() && d.sym.size() > 1 && d.sym[0] == '#'; }

Dim ShapeDimAsContent(const Dim& d) { return d.symbolic() && d.sym[0] == '#' ? Dim::Unknown() : d; }

std::optional<int64_t> ContentValue(const Dim& d) {
  if (d.known()) return d.value;
  if (!IsNegativeContent(d)) return std::nullopt;
  int64_t v = 0;
  const char* first = d.sym.data() + 1;
  const char* last = d.sym.data() + d.sym.size();
  auto [p, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || p != last) return std::nullopt;
  return v;
}

std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

}  // namespace kiln
