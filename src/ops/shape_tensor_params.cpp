// Parameter arithmetic of the data-movement ops (see shape_tensor_params.h).
#include "ops/shape_tensor_params.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace kiln {

std::optional<std::vector<Dim>> InputDims(const InferContext& c, size_t i) {
  if (!c.has_input(i)) return std::nullopt;
  const TensorInfo& t = c.in(i);
  if (t.value && (IsIntegerType(t.value->dtype()) || t.value->dtype() == DataType::kBool)) {
    std::vector<Dim> r;
    for (int64_t v : t.value->ToInt64Vector()) r.emplace_back(v);
    return r;
  }
  if (t.sym_value) {
    std::vector<Dim> r = *t.sym_value;
    for (Dim& d : r)
      if (IsNegativeContent(d)) d = Dim::Unknown();  // a negative integer is no dim (as a constant's reads)
    return r;
  }
  return std::nullopt;
}

std::optional<std::vector<Dim>> InputContents(const InferContext& c, size_t i) {
  if (!c.has_input(i)) return std::nullopt;
  const TensorInfo& t = c.in(i);
  if (t.value && (IsIntegerType(t.value->dtype()) || t.value->dtype() == DataType::kBool)) {
    if (t.value->rank() > 1 || t.value->numel() > 64) return std::nullopt;
    std::vector<Dim> r;
    for (int64_t v : t.value->ToInt64Vector()) r.push_back(ContentDim(v));
    return r;
  }
  if (t.sym_value) return *t.sym_value;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> InputInts(const InferContext& c, size_t i) {
  if (!c.has_input(i)) return std::nullopt;
  if (c.in(i).value) return c.in(i).value->ToInt64Vector();
  if (!c.in(i).sym_value) return std::nullopt;
  std::vector<int64_t> r;
  for (const Dim& x : *c.in(i).sym_value) {
    const std::optional<int64_t> v = ContentValue(x);
    if (!v) return std::nullopt;
    r.push_back(*v);
  }
  return r;
}

Result<std::vector<int64_t>> NormalizeAxesList(const Node& n, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> r;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t a : axes) {
    auto na = NormalizeAxis(a, rank);
    if (!na) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), a, rank);
    if (seen[*na]) return Err(StatusCode::kInvalidModel, "{}: axis {} is given twice", n.Where(), a);
    seen[*na] = true;
    r.push_back(*na);
  }
  return r;
}

Result<std::vector<int64_t>> TransposePerm(const Node& n, int64_t rank) {
  std::vector<int64_t> def(rank);
  for (int64_t i = 0; i < rank; ++i) def[i] = rank - 1 - i;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, n.attr_ints("perm", def));
  if (static_cast<int64_t>(perm.size()) != rank)
    return Err(StatusCode::kInvalidModel, "{}: perm {} has {} entries but the input has rank {}", n.Where(), perm,
               perm.size(), rank);
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return Err(StatusCode::kInvalidModel, "{}: perm {} is not a permutation of 0..{}", n.Where(), perm, rank - 1);
    seen[p] = true;
  }
  return perm;
}

Result<std::vector<int64_t>> ReshapeTarget(const Node& n, const std::vector<int64_t>& in,
                                           const std::vector<int64_t>& shape, bool allowzero) {
  std::vector<int64_t> out(shape.size());
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size())
        return Err(StatusCode::kInvalidArgument, "{}: shape {} copies dim {} (0) but the input {} has rank {}",
                   n.Where(), shape, i, ShapeToString(in), in.size());
      d = in[i];
    } else if (d == -1) {
      if (infer_at >= 0)
        return Err(StatusCode::kInvalidArgument, "{}: shape {} has more than one -1", n.Where(), shape);
      if (allowzero && std::count(shape.begin(), shape.end(), 0) > 0)
        return Err(StatusCode::kInvalidArgument, "{}: shape {} has both -1 and 0 with allowzero=1", n.Where(), shape);
      infer_at = static_cast<int64_t>(i);
      continue;
    } else if (d < 0) {
      return Err(StatusCode::kInvalidArgument, "{}: shape {} has a negative dim {}", n.Where(), shape, d);
    }
    out[i] = d;
    if (__builtin_mul_overflow(known, d, &known))
      return Err(StatusCode::kInvalidArgument, "{}: shape {} has more than 2^63 elements", n.Where(), shape);
  }
  const int64_t total = NumElements(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      return Err(StatusCode::kInvalidArgument, "{}: cannot reshape {} ({} elements) to {}", n.Where(),
                 ShapeToString(in), total, shape);
    out[infer_at] = total / known;
  } else if (known != total) {
    return Err(StatusCode::kInvalidArgument, "{}: cannot reshape {} ({} elements) to {} ({} elements)", n.Where(),
               ShapeToString(in), total, ShapeToString(out), known);
  }
  return out;
}

Result<SliceParams> ComputeSlice(const Node& n, const std::vector<int64_t>& in_shape,
                                 const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                                 const std::vector<int64_t>& axes_in, const std::vector<int64_t>& steps) {
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  if (starts.size() != ends.size())
    return Err(StatusCode::kInvalidModel, "{}: starts has {} entries but ends has {}", n.Where(), starts.size(),
               ends.size());
  std::vector<int64_t> axes = axes_in;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (axes.size() != starts.size() || (!steps.empty() && steps.size() != starts.size()))
    return Err(StatusCode::kInvalidModel, "{}: starts, ends, axes and steps must have the same length ({}, {}, {}, {})",
               n.Where(), starts.size(), ends.size(), axes.size(), steps.size());
  KILN_ASSIGN_OR_RETURN(axes, NormalizeAxesList(n, axes, rank));
  SliceParams p;
  p.start.assign(rank, 0);
  p.step.assign(rank, 1);
  p.count = in_shape;
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t ax = axes[k], d = in_shape[ax];
    int64_t step = steps.empty() ? 1 : steps[k];
    if (step == 0) return Err(StatusCode::kInvalidModel, "{}: slice step is 0 on axis {}", n.Where(), ax);
    // A step past the axis takes one element at most; clamped, the counts below cannot overflow (INT64_MIN's
    // negation, e - s + INT64_MAX).
    step = std::clamp<int64_t>(step, -(d + 1), d + 1);
    int64_t s = starts[k], e = ends[k];
    if (s < 0) s += d;
    if (e < 0) e += d;
    int64_t cnt;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      cnt = e > s ? (e - s + step - 1) / step : 0;
    } else if (d > 0) {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      cnt = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    } else {  // an empty axis: nothing to take (and no [0, -1] clamp range)
      cnt = 0;
    }
    p.start[ax] = cnt > 0 ? s : 0;
    p.step[ax] = step;
    p.count[ax] = cnt;
  }
  return p;
}

Result<std::vector<int64_t>> ComputeSplit(const Node& n, int64_t dim, bool has_split,
                                          const std::vector<int64_t>& split, int64_t parts) {
  if (has_split) {
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return Err(StatusCode::kInvalidModel, "{}: split {} has a negative size", n.Where(), split);
      if (__builtin_add_overflow(sum, s, &sum))
        return Err(StatusCode::kInvalidModel, "{}: split {} sums past 2^63", n.Where(), split);
    }
    if (sum != dim)
      return Err(StatusCode::kInvalidArgument, "{}: split {} sums to {} but the axis has length {}", n.Where(), split,
                 sum, dim);
    if (static_cast<int64_t>(split.size()) != parts)
      return Err(StatusCode::kInvalidModel, "{}: split {} has {} entries but the node has {} outputs", n.Where(),
                 split, split.size(), parts);
    return split;
  }
  if (parts <= 0) return Err(StatusCode::kInvalidModel, "{}: split into {} parts", n.Where(), parts);
  // Before opset 18 a Split without sizes cuts the axis into equal parts; 18's num_outputs lets the last be smaller.
  if (n.opset > 0 && n.opset < 18 && dim % parts != 0)
    return Err(StatusCode::kInvalidModel,
               "{}: at opset {} Split cuts an axis into equal parts, and {} is not a multiple of {}: give the split "
               "sizes, or use opset 18 and num_outputs", n.Where(), n.opset, dim, parts);
  const int64_t chunk = (dim + parts - 1) / parts;
  std::vector<int64_t> r(parts, chunk);
  r.back() = dim - chunk * (parts - 1);
  if (r.back() < 0)
    return Err(StatusCode::kInvalidArgument, "{}: cannot split an axis of length {} into {} parts", n.Where(), dim,
               parts);
  return r;
}

Result<std::vector<int64_t>> ComputePads(const Node& n, int64_t rank, const std::vector<int64_t>& pads,
                                         const std::vector<int64_t>& axes_in) {
  std::vector<int64_t> axes = axes_in;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  } else {
    KILN_ASSIGN_OR_RETURN(axes, NormalizeAxesList(n, axes_in, rank));
  }
  if (pads.size() != 2 * axes.size())
    return Err(StatusCode::kInvalidModel, "{}: pads has {} entries, expected {} (2 per padded axis)", n.Where(),
               pads.size(), 2 * axes.size());
  std::vector<int64_t> r(2 * rank, 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    r[axes[k]] = pads[k];
    r[rank + axes[k]] = pads[axes.size() + k];
  }
  return r;
}

Result<int64_t> RangeCount(const Node& n, double start, double limit, double delta) {
  if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
    return Err(StatusCode::kInvalidArgument, "{}: Range({}, {}, {}) is not finite", n.Where(), start, limit, delta);
  const double c = std::ceil((limit - start) / delta);
  if (!(c > 0)) return 0;  // empty (a count far below zero would not fit an int64)
  if (c > static_cast<double>(std::numeric_limits<int32_t>::max()))
    return Err(StatusCode::kInvalidArgument, "{}: Range({}, {}, {}) has too many elements", n.Where(), start, limit,
               delta);
  return static_cast<int64_t>(c);
}

}  // namespace kiln
