// Dimensions that are fixed (3), symbolic ("batch", "seq", or an expression like "seq+1") or unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/types.h"  // Dims, and ShapeToString / NumElements of static dims

namespace kiln {

struct Dim {
  int64_t value = -1;  // >= 0 when the dimension is known
  std::string sym;     // a name or expression when symbolic; empty otherwise

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor)
  static Dim Symbol(std::string s) {
    Dim d;
    d.sym = std::move(s);
    return d;
  }
  static Dim Unknown() { return Dim(); }

  bool known() const { return value >= 0; }
  bool symbolic() const { return value < 0 && !sym.empty(); }
  bool unknown() const { return value < 0 && sym.empty(); }
  // Two dims are the same when both are the same constant or the same symbol.
  bool same(const Dim& o) const { return known() ? (o.known() && value == o.value) : (symbolic() && sym == o.sym); }
  std::string ToString() const { return known() ? std::to_string(value) : (sym.empty() ? "?" : sym); }
};

using Shape = std::vector<Dim>;

bool IsStatic(const Shape& s);
std::vector<int64_t> ToStatic(const Shape& s);  // requires IsStatic
Shape FromStatic(const std::vector<int64_t>& v);
std::string ShapeToString(const Shape& s);  // "[batch,3,224,224]"
std::optional<int64_t> NumElements(const Shape& s);

// Arithmetic that keeps symbols: a*b with a=2, b="seq" gives "2*seq"; unknown in, unknown out.
Dim DimMul(const Dim& a, const Dim& b);
Dim DimAdd(const Dim& a, const Dim& b);
Dim DimSub(const Dim& a, const Dim& b);
Dim DimDiv(const Dim& a, const Dim& b);  // floor division; symbolic only when exact is unknown

// ---- shape tensors' symbolic contents (sym_value): the elements of a small int64 tensor as dims ----
// A negative integer among them (Reshape's -1, the -1 of an exported expand(-1)) cannot be a Dim's value, which
// reads as unknown when negative; it is held as the symbol "#<value>" ("#-1"), which no dimension symbol can be
// (symbols are names and expressions of names). Consumers that read contents as a shape see it as unknown
// (InputDims); those that read integers see the value (InputInts, ContentValue).
Dim ContentDim(int64_t v);                          // v >= 0: Dim(v); else the "#v" symbol
bool IsNegativeContent(const Dim& d);               // a "#v" symbol
std::optional<int64_t> ContentValue(const Dim& d);  // the integer of a known dim or a "#v" symbol
// A shape's dim as contents (Shape, Size): a dim whose name a model happened to start with '#' is unknown there, so
// that no dimension name is ever read as a "#v" integer.
Dim ShapeDimAsContent(const Dim& d);

// Normalizes a possibly negative axis against rank; nullopt when out of range.
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

}  // namespace kiln
