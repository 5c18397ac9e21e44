// Shape functions of the data-movement ops, part 2: Split, Slice, Tile, Pad, DepthToSpace, SpaceToDepth,
// Trilu. Slice also propagates symbolic contents (sym_value) of 1-D shape tensors.
#include <algorithm>
#include <climits>

#include "core/error.h"
#include "ops/families.h"
#include "ops/shape_tensor_params.h"

namespace kiln {
namespace {

Status SplitShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.node.attr_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t num_outputs, c.node.attr_int("num_outputs", 0));
  const TensorInfo& x = c.in(0);
  const int64_t parts = static_cast<int64_t>(c.outputs.size());
  if (c.node.has_attr("num_outputs") && num_outputs != parts)
    return Err(StatusCode::kInvalidModel, "{}: num_outputs is {} but the node has {} outputs", c.node.Where(),
               num_outputs, parts);
  if (c.node.has_attr("num_outputs") && c.has_input(1))
    return Err(StatusCode::kInvalidModel, "{}: give either the split input or num_outputs, not both", c.node.Where());
  if (!x.has_shape) {
    for (int64_t i = 0; i < parts; ++i) c.set_output_rank_unknown(i, x.dtype);
    return Status::Ok();
  }
  auto ax = NormalizeAxis(axis, x.rank());
  if (!ax) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", c.node.Where(), axis, x.rank());
  const Dim d = x.shape[*ax];
  std::vector<Dim> sizes(parts, Dim::Unknown());
  auto split = InputInts(c, 1);
  if (c.has_input(1) && !split) {
    // sizes unknown
  } else if (d.known()) {
    KILN_ASSIGN_OR_RETURN(auto s, ComputeSplit(c.node, d.value, c.has_input(1), split ? *split : std::vector<int64_t>{},
                                               parts));
    for (int64_t i = 0; i < parts; ++i) sizes[i] = Dim(s[i]);
  } else if (split) {
    if (static_cast<int64_t>(split->size()) != parts)
      return Err(StatusCode::kInvalidModel, "{}: split has {} entries but the node has {} outputs", c.node.Where(),
                 split->size(), parts);
    for (int64_t i = 0; i < parts; ++i) sizes[i] = Dim((*split)[i]);
  } else {
    for (int64_t i = 0; i < parts; ++i) sizes[i] = parts == 1 ? d : DimDiv(d, Dim(parts));
  }
  for (int64_t i = 0; i < parts; ++i) {
    Shape s = x.shape;
    s[*ax] = sizes[i];
    c.set_output(i, x.dtype, std::move(s));
  }
  return Status::Ok();
}

// Output length of one sliced axis when the dim, start or end is symbolic. Only forms whose answer does
// not depend on clamping are resolved (x[s:], x[-k:], x[:-k], x[:n] with n symbolic); others are unknown.
Dim SymbolicSliceDim(const Dim& d, const Dim& s, const Dim& e, int64_t step) {
  if (step != 1) return Dim::Unknown();
  const bool to_end = e.known() && e.value >= 1000000000;  // "to the end" (INT64_MAX, INT32_MAX, 1e9)
  if (s.known() && to_end) return s.value >= 0 ? DimSub(d, s) : Dim(-s.value);
  if (s.symbolic() && to_end) return DimSub(d, s);
  if (s.known() && s.value >= 0 && e.symbolic()) return DimSub(e.same(d) ? d : e, s);
  return Dim::Unknown();
}

Status SliceShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 3));
  const TensorInfo& x = c.in(0);
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  const int64_t r = x.rank();
  auto starts = InputDims(c, 1), ends = InputDims(c, 2);
  std::optional<std::vector<int64_t>> axes = std::vector<int64_t>{}, steps = std::vector<int64_t>{};
  if (c.has_input(3)) axes = InputInts(c, 3);
  if (c.has_input(4)) steps = InputInts(c, 4);
  // Constant starts/ends may hold negative numbers, which Dim reads as unknown: take them from the value.
  auto exact = [&](size_t i, std::optional<std::vector<Dim>>& dims) {
    if (const Tensor* v = c.value(i)) {
      dims = std::vector<Dim>{};
      for (int64_t iv : v->ToInt64Vector()) {
        Dim dd;
        dd.value = iv;
        dims->push_back(dd);
      }
    }
  };
  exact(1, starts);
  exact(2, ends);
  if (!axes || !steps || !starts || !ends) {
    Shape out = x.shape;
    if (axes && !axes->empty()) {
      KILN_ASSIGN_OR_RETURN(auto norm, NormalizeAxesList(c.node, *axes, r));
      for (int64_t a : norm) out[a] = Dim::Unknown();
    } else {
      std::fill(out.begin(), out.end(), Dim::Unknown());
    }
    c.set_output(0, x.dtype, std::move(out));
    return Status::Ok();
  }
  const size_t n = starts->size();
  if (ends->size() != n || (!axes->empty() && axes->size() != n) || (!steps->empty() && steps->size() != n))
    return Err(StatusCode::kInvalidModel, "{}: starts, ends, axes and steps must have the same length ({}, {}, {}, {})",
               c.node.Where(), n, ends->size(), axes->size(), steps->size());
  std::vector<int64_t> ax = *axes;
  if (ax.empty())
    for (size_t i = 0; i < n; ++i) ax.push_back(static_cast<int64_t>(i));
  KILN_ASSIGN_OR_RETURN(ax, NormalizeAxesList(c.node, ax, r));
  Shape out = x.shape;
  for (size_t k = 0; k < n; ++k) {
    const int64_t step = steps->empty() ? 1 : (*steps)[k];
    if (step == 0) return Err(StatusCode::kInvalidModel, "{}: slice step is 0 on axis {}", c.node.Where(), ax[k]);
    const Dim& d = x.shape[ax[k]];
    const Dim& s = (*starts)[k];
    const Dim& e = (*ends)[k];
    const bool s_int = s.sym.empty() && (s.value != -1 || c.value(1));
    const bool e_int = e.sym.empty() && (e.value != -1 || c.value(2));
    if (d.known() && s_int && e_int) {
      KILN_ASSIGN_OR_RETURN(auto p, ComputeSlice(c.node, {d.value}, {s.value}, {e.value}, {0}, {step}));
      out[ax[k]] = Dim(p.count[0]);
    } else {
      out[ax[k]] = SymbolicSliceDim(d, s_int || s.symbolic() ? s : Dim::Unknown(), e_int || e.symbolic() ? e : Dim::Unknown(), step);
    }
  }
  c.set_output(0, x.dtype, out);
  // Symbolic contents of a sliced 1-D shape tensor.
  if (r == 1 && x.sym_value && x.shape[0].known() && static_cast<int64_t>(x.sym_value->size()) == x.shape[0].value) {
    auto si = InputInts(c, 1), ei = InputInts(c, 2);
    if (si && ei) {
      KILN_ASSIGN_OR_RETURN(auto p, ComputeSlice(c.node, {x.shape[0].value}, *si, *ei, *axes, *steps));
      std::vector<Dim> sym;
      for (int64_t i = 0; i < p.count[0]; ++i) sym.push_back((*x.sym_value)[p.start[0] + i * p.step[0]]);
      c.out(0).sym_value = std::move(sym);
    }
  }
  return Status::Ok();
}

Status TileShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& x = c.in(0);
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  auto reps = InputDims(c, 1);
  if (auto ints = InputInts(c, 1)) {
    for (int64_t v : *ints)
      if (v < 0) return Err(StatusCode::kInvalidArgument, "{}: repeats {} has a negative entry", c.node.Where(), *ints);
  }
  if (reps && static_cast<int64_t>(reps->size()) != x.rank())
    return Err(StatusCode::kInvalidModel, "{}: repeats has {} entries but the input has rank {}", c.node.Where(),
               reps->size(), x.rank());
  Shape out(x.rank(), Dim::Unknown());
  if (reps)
    for (int64_t i = 0; i < x.rank(); ++i) out[i] = DimMul(x.shape[i], (*reps)[i]);
  c.set_output(0, x.dtype, std::move(out));
  return Status::Ok();
}

Status PadShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  KILN_ASSIGN_OR_RETURN(std::string mode, c.node.attr_string("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return Err(StatusCode::kInvalidModel, "{}: unknown mode '{}'", c.node.Where(), mode);
  const TensorInfo& x = c.in(0);
  // (Before opset 11 the value was a float attribute, converted before the input's type may be known.)
  if (c.node.opset >= 11 && c.has_input(2) && c.in(2).dtype != DataType::kUndefined &&
      x.dtype != DataType::kUndefined && c.in(2).dtype != x.dtype)
    return Err(StatusCode::kInvalidModel, "{}: constant_value has type {} but the input has {}", c.node.Where(),
               DataTypeName(c.in(2).dtype), DataTypeName(x.dtype));
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  auto pads = InputInts(c, 1);
  std::optional<std::vector<int64_t>> axes = std::vector<int64_t>{};
  if (c.has_input(3)) axes = InputInts(c, 3);
  if (!pads || !axes) {
    c.set_output(0, x.dtype, Shape(x.rank(), Dim::Unknown()));
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(auto p, ComputePads(c.node, x.rank(), *pads, *axes));
  Shape out(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) {
    out[i] = DimAdd(DimAdd(x.shape[i], Dim(p[i] >= 0 ? p[i] : 0)), Dim(p[x.rank() + i] >= 0 ? p[x.rank() + i] : 0));
    const int64_t neg = std::min<int64_t>(p[i], 0) + std::min<int64_t>(p[x.rank() + i], 0);
    if (neg < 0) out[i] = DimSub(out[i], Dim(-neg));
    if (x.shape[i].known() && out[i].value < 0)
      return Err(StatusCode::kInvalidArgument, "{}: pads {} make axis {} of {} negative", c.node.Where(), *pads, i,
                 ShapeToString(x.shape));
    if (x.shape[i].known() && x.shape[i].value == 0 && mode != "constant" && out[i].value > 0)
      return Err(StatusCode::kInvalidArgument, "{}: cannot pad an empty axis {} in mode '{}'", c.node.Where(), i, mode);
  }
  c.set_output(0, x.dtype, std::move(out));
  return Status::Ok();
}

Status BlockShape(InferContext& c, bool to_space) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  KILN_ASSIGN_OR_RETURN(int64_t b, c.node.attr_int("blocksize", 0));
  if (b <= 0) return Err(StatusCode::kInvalidModel, "{}: blocksize must be positive, got {}", c.node.Where(), b);
  KILN_ASSIGN_OR_RETURN(std::string mode, c.node.attr_string("mode", "DCR"));
  if (mode != "DCR" && mode != "CRD")  // SpaceToDepth has it from opset 28
    return Err(StatusCode::kInvalidModel, "{}: mode must be DCR or CRD, got '{}'", c.node.Where(), mode);
  const TensorInfo& x = c.in(0);
  if (!x.has_shape) {
    c.set_output(0, x.dtype, Shape(4, Dim::Unknown()));
    return Status::Ok();
  }
  if (x.rank() != 4)
    return Err(StatusCode::kInvalidModel, "{}: the input must be 4-D, got {}", c.node.Where(), ShapeToString(x.shape));
  const Shape& s = x.shape;
  auto check = [&](const Dim& d, int64_t by, const char* what) -> Status {
    if (d.known() && d.value % by != 0)
      return Err(StatusCode::kInvalidArgument, "{}: {} {} is not a multiple of {}", c.node.Where(), what, d.value, by);
    return Status::Ok();
  };
  if (to_space) {
    KILN_RETURN_IF_ERROR(check(s[1], b * b, "channels"));
    c.set_output(0, x.dtype, {s[0], DimDiv(s[1], Dim(b * b)), DimMul(s[2], Dim(b)), DimMul(s[3], Dim(b))});
  } else {
    KILN_RETURN_IF_ERROR(check(s[2], b, "height"));
    KILN_RETURN_IF_ERROR(check(s[3], b, "width"));
    c.set_output(0, x.dtype, {s[0], DimMul(s[1], Dim(b * b)), DimDiv(s[2], Dim(b)), DimDiv(s[3], Dim(b))});
  }
  return Status::Ok();
}

Status TriluShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  KILN_ASSIGN_OR_RETURN(int64_t upper, c.node.attr_int("upper", 1));
  (void)upper;
  const TensorInfo& x = c.in(0);
  if (x.has_shape && x.rank() < 2)
    return Err(StatusCode::kInvalidModel, "{}: the input must have rank >= 2, got {}", c.node.Where(),
               ShapeToString(x.shape));
  if (c.has_input(1) && c.in(1).has_shape && IsStatic(c.in(1).shape) && NumElements(ToStatic(c.in(1).shape)) != 1)
    return Err(StatusCode::kInvalidModel, "{}: k must be a scalar", c.node.Where());
  if (x.has_shape) c.set_output(0, x.dtype, x.shape);
  else c.set_output_rank_unknown(0, x.dtype);
  return Status::Ok();
}

// EyeLike: the input's 2-D shape; its type, or the `dtype` attribute's.
Status EyeLikeShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  if (x.has_shape && x.rank() != 2)
    return Err(StatusCode::kInvalidModel, "{}: the input must be 2-D, got {}", c.node.Where(), ShapeToString(x.shape));
  KILN_ASSIGN_OR_RETURN(int64_t k, c.node.attr_int("k", 0));
  (void)k;
  DataType t = x.dtype;
  if (c.node.attrs.count("dtype")) {
    KILN_ASSIGN_OR_RETURN(int64_t code, c.node.attr_int("dtype", 0));
    t = static_cast<DataType>(code);
    if (t != DataType::kBool && !IsIntegerType(t) && !IsFloatType(t))
      return Err(StatusCode::kInvalidModel, "{}: dtype {} is not a numeric or bool type", c.node.Where(), code);
  }
  c.set_output(0, t, x.has_shape ? x.shape : Shape{Dim::Unknown(), Dim::Unknown()});
  return Status::Ok();
}

// HannWindow / HammingWindow / BlackmanWindow: a 1-D window of `size` (a scalar input) elements of output_datatype.
Status WindowShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& size = c.in(0);
  if (size.dtype != DataType::kInt32 && size.dtype != DataType::kInt64 && size.dtype != DataType::kUndefined)
    return Err(StatusCode::kInvalidModel, "{}: size must be int32 or int64, got {}", c.node.Where(),
               DataTypeName(size.dtype));
  KILN_ASSIGN_OR_RETURN(int64_t code, c.node.attr_int("output_datatype", 1));
  const DataType t = static_cast<DataType>(code);
  if (!IsIntegerType(t) && !IsFloatType(t))
    return Err(StatusCode::kInvalidModel, "{}: output_datatype {} is not a numeric type", c.node.Where(), code);
  if (const Tensor* v = c.value(0); v && v->numel() == 1) {
    const int64_t n = v->GetAsInt(0);
    if (n < 0) return Err(StatusCode::kInvalidModel, "{}: size {} is negative", c.node.Where(), n);
    c.set_output(0, t, {Dim(n)});
  } else {
    c.set_output(0, t, {Dim::Unknown()});
  }
  return Status::Ok();
}

// ReverseSequence: the input's shape and type (sequence_lens is a 1-D int64 of the batch size).
Status ReverseSequenceShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& x = c.in(0);
  if (c.in(1).dtype != DataType::kInt64 && c.in(1).dtype != DataType::kUndefined)
    return Err(StatusCode::kInvalidModel, "{}: sequence_lens must be int64, got {}", c.node.Where(),
               DataTypeName(c.in(1).dtype));
  KILN_ASSIGN_OR_RETURN(int64_t batch_axis, c.node.attr_int("batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t time_axis, c.node.attr_int("time_axis", 0));
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) || batch_axis == time_axis)
    return Err(StatusCode::kInvalidModel, "{}: batch_axis and time_axis must be 0 and 1 (or 1 and 0), got {} and {}",
               c.node.Where(), batch_axis, time_axis);
  if (x.has_shape && x.rank() < 2)
    return Err(StatusCode::kInvalidModel, "{}: the input must have rank >= 2, got {}", c.node.Where(),
               ShapeToString(x.shape));
  if (x.has_shape) c.set_output(0, x.dtype, x.shape);
  else c.set_output_rank_unknown(0, x.dtype);
  return Status::Ok();
}

// Compress: the selected slices along `axis` (or of the flattened input): their count is known only from a constant
// condition.
Status CompressShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& x = c.in(0);
  if (c.in(1).dtype != DataType::kBool && c.in(1).dtype != DataType::kUndefined)
    return Err(StatusCode::kInvalidModel, "{}: condition must be bool, got {}", c.node.Where(),
               DataTypeName(c.in(1).dtype));
  Dim count = Dim::Unknown();
  if (const Tensor* cond = c.value(1)) {
    int64_t n = 0;
    for (int64_t i = 0; i < cond->numel(); ++i) n += cond->data<bool>()[i] ? 1 : 0;
    count = Dim(n);
  }
  if (!c.node.attrs.count("axis")) {
    c.set_output(0, x.dtype, {count});
    return Status::Ok();
  }
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.node.attr_int("axis", 0));
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (axis < -rank || axis >= rank)
    return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", c.node.Where(), axis, rank);
  Shape out = x.shape;
  out[axis < 0 ? axis + rank : axis] = count;
  c.set_output(0, x.dtype, out);
  return Status::Ok();
}

// LRN and MeanVarianceNormalization: a float input's shape and type.
Status SameFloatShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  if (x.dtype != DataType::kUndefined && !IsFloatType(x.dtype))
    return Err(StatusCode::kInvalidModel, "{}: the input must be a float type, got {}", c.node.Where(),
               DataTypeName(x.dtype));
  if (x.has_shape) c.set_output(0, x.dtype, x.shape);
  else c.set_output_rank_unknown(0, x.dtype);
  return Status::Ok();
}

// DynamicQuantizeLinear: y (uint8, x's shape), y_scale (float32 scalar), y_zero_point (uint8 scalar).
Status DynamicQuantizeLinearShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  if (x.dtype != DataType::kFloat32 && x.dtype != DataType::kUndefined)
    return Err(StatusCode::kInvalidModel, "{}: x must be float32, got {}", c.node.Where(), DataTypeName(x.dtype));
  if (x.has_shape) c.set_output(0, DataType::kUInt8, x.shape);
  else c.set_output_rank_unknown(0, DataType::kUInt8);
  c.set_output(1, DataType::kFloat32, {});
  c.set_output(2, DataType::kUInt8, {});
  return Status::Ok();
}

// CenterCropPad(input, shape; axes): the input with the dims of `axes` (default all) set to `shape`'s values.
Status CenterCropPadShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& x = c.in(0);
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> axes;
  KILN_ASSIGN_OR_RETURN(axes, c.node.attr_ints("axes", {}));
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  Shape out = x.shape;
  const Tensor* shape = c.value(1);
  if (shape && shape->numel() != static_cast<int64_t>(axes.size()))
    return Err(StatusCode::kInvalidModel, "{}: shape has {} values for {} axes", c.node.Where(), shape->numel(),
               axes.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank)
      return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", c.node.Where(), a, rank);
    if (a < 0) a += rank;
    out[static_cast<size_t>(a)] = shape ? Dim(shape->GetAsInt(static_cast<int64_t>(i))) : Dim::Unknown();
  }
  c.set_output(0, x.dtype, out);
  return Status::Ok();
}

// AffineGrid(theta [N, 2, 3] or [N, 3, 4], size [N, C, H, W] or [N, C, D, H, W]): grid [N, H, W, 2] or
// [N, D, H, W, 3] of theta's type.
Status AffineGridShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& theta = c.in(0);
  if (theta.dtype != DataType::kUndefined && !IsFloatType(theta.dtype))
    return Err(StatusCode::kInvalidModel, "{}: theta must be a float type, got {}", c.node.Where(),
               DataTypeName(theta.dtype));
  const Tensor* size = c.value(1);
  if (!size) {
    c.set_output_rank_unknown(0, theta.dtype);
    return Status::Ok();
  }
  if (size->numel() != 4 && size->numel() != 5)
    return Err(StatusCode::kInvalidModel, "{}: size must hold 4 (2-D) or 5 (3-D) values, got {}", c.node.Where(),
               size->numel());
  Shape out = {Dim(size->GetAsInt(0))};
  for (int64_t i = 2; i < size->numel(); ++i) out.push_back(Dim(size->GetAsInt(i)));
  out.push_back(Dim(size->numel() - 2));
  c.set_output(0, theta.dtype, out);
  return Status::Ok();
}

// Det: [..., M, M] -> [...], a float type.
Status DetShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  if (x.dtype != DataType::kUndefined && !IsFloatType(x.dtype))
    return Err(StatusCode::kInvalidModel, "{}: the input must be a float type, got {}", c.node.Where(),
               DataTypeName(x.dtype));
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  if (x.rank() < 2)
    return Err(StatusCode::kInvalidModel, "{}: the input must have rank >= 2, got {}", c.node.Where(),
               ShapeToString(x.shape));
  const Dim m = x.shape[x.rank() - 2], n = x.shape[x.rank() - 1];
  if (m.known() && n.known() && m.value != n.value)
    return Err(StatusCode::kInvalidModel, "{}: the matrices must be square, got {}", c.node.Where(),
               ShapeToString(x.shape));
  c.set_output(0, x.dtype, Shape(x.shape.begin(), x.shape.end() - 2));
  return Status::Ok();
}

// Col2Im(input [N, C * prod(block), L], image_shape, block_shape): [N, C, image...].
Status Col2ImShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 3));
  const TensorInfo& x = c.in(0);
  const Tensor* image = c.value(1);
  const Tensor* block = c.value(2);
  if (!x.has_shape || !image || !block) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  if (x.rank() != 3)
    return Err(StatusCode::kInvalidModel, "{}: the input must be [N, C * prod(block_shape), L], got {}",
               c.node.Where(), ShapeToString(x.shape));
  int64_t block_volume = 1;
  for (int64_t i = 0; i < block->numel(); ++i) block_volume *= block->GetAsInt(i);
  Dim ch = Dim::Unknown();
  if (x.shape[1].known() && block_volume > 0) {
    if (x.shape[1].value % block_volume != 0)
      return Err(StatusCode::kInvalidModel, "{}: dim 1 ({}) is not a multiple of the block volume {}", c.node.Where(),
                 x.shape[1].value, block_volume);
    ch = Dim(x.shape[1].value / block_volume);
  }
  Shape out = {x.shape[0], ch};
  for (int64_t i = 0; i < image->numel(); ++i) out.push_back(Dim(image->GetAsInt(i)));
  c.set_output(0, x.dtype, out);
  return Status::Ok();
}

// Unique(X; axis?, sorted): Y (the unique values, or slices along axis), indices, inverse_indices, counts (int64).
// Their lengths depend on the data.
Status UniqueShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  if (!c.node.attrs.count("axis") || !x.has_shape) {
    c.set_output(0, x.dtype, {Dim::Unknown()});
    if (c.node.attrs.count("axis")) c.set_output_rank_unknown(0, x.dtype);
    Dim total = Dim::Unknown();
    if (x.has_shape && IsStatic(x.shape)) total = Dim(NumElements(ToStatic(x.shape)));
    c.set_output(1, DataType::kInt64, {Dim::Unknown()});
    c.set_output(2, DataType::kInt64, {c.node.attrs.count("axis") ? Dim::Unknown() : total});
    c.set_output(3, DataType::kInt64, {Dim::Unknown()});
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.node.attr_int("axis", 0));
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (axis < -rank || axis >= rank)
    return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", c.node.Where(), axis, rank);
  if (axis < 0) axis += rank;
  Shape y = x.shape;
  y[static_cast<size_t>(axis)] = Dim::Unknown();
  c.set_output(0, x.dtype, y);
  c.set_output(1, DataType::kInt64, {Dim::Unknown()});
  c.set_output(2, DataType::kInt64, {x.shape[static_cast<size_t>(axis)]});
  c.set_output(3, DataType::kInt64, {Dim::Unknown()});
  return Status::Ok();
}

// MaxUnpool(X, I, output_shape?): zeros of the unpooled shape with X's values at I's (flat) indices.
Status MaxUnpoolShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& x = c.in(0);
  if (c.has_input(2)) {
    if (const Tensor* os = c.value(2)) {
      Shape out;
      for (int64_t i = 0; i < os->numel(); ++i) out.push_back(Dim(os->GetAsInt(i)));
      c.set_output(0, x.dtype, out);
    } else {
      c.set_output_rank_unknown(0, x.dtype);
    }
    return Status::Ok();
  }
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, c.node.attr_ints("kernel_shape", {}));
  const size_t r = x.rank() - 2;
  if (kernel.size() != r)
    return Err(StatusCode::kInvalidModel, "{}: kernel_shape must have {} values", c.node.Where(), r);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, c.node.attr_ints("strides", std::vector<int64_t>(r, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.node.attr_ints("pads", std::vector<int64_t>(2 * r, 0)));
  if (strides.size() != r || pads.size() != 2 * r)
    return Err(StatusCode::kInvalidModel, "{}: strides and pads must match the {} spatial dims", c.node.Where(), r);
  Shape out = {x.shape[0], x.shape[1]};
  for (size_t d = 0; d < r; ++d) {
    const Dim in = x.shape[2 + d];
    out.push_back(in.known() ? Dim((in.value - 1) * strides[d] + kernel[d] - pads[d] - pads[d + r]) : Dim::Unknown());
  }
  c.set_output(0, x.dtype, out);
  return Status::Ok();
}

}  // namespace

// ---- converters: operands older opsets gave as attributes become constant inputs ----
namespace {

Status ConvertSplit(ConvertContext& c) {
  if (c.opset < 13) MoveIntsAttrToInput(c, "split", 1);
  return Status::Ok();
}

Status ConvertSlice(ConvertContext& c) {
  if (c.opset >= 10) return Status::Ok();
  MoveIntsAttrToInput(c, "starts", 1);
  MoveIntsAttrToInput(c, "ends", 2);
  MoveIntsAttrToInput(c, "axes", 3);
  return Status::Ok();
}

Status ConvertPad(ConvertContext& c) {
  if (c.opset >= 11) return Status::Ok();
  const Value* x = c.node.input(0);
  MoveIntsAttrToInput(c, "pads", 1);
  MoveFloatAttrToInput(c, "value", 2, x ? x->dtype : DataType::kUndefined);
  return Status::Ok();
}

}  // namespace

void RegisterTensorOpsMore(OpRegistry& r) {
  r.Onnx("Split").Since(2).Convert(ConvertSplit).Shape(SplitShape);
  r.Onnx("Slice").Convert(ConvertSlice).Shape(SliceShape);
  r.Onnx("Tile").Since(6).Shape(TileShape);
  r.Onnx("Pad").Since(2).Convert(ConvertPad).Shape(PadShape);
  r.Onnx("DepthToSpace").Shape([](InferContext& c) { return BlockShape(c, true); });
  r.Onnx("SpaceToDepth").Shape([](InferContext& c) { return BlockShape(c, false); });
  r.Onnx("Trilu").Since(14).Shape(TriluShape);
  r.Onnx("EyeLike").Since(9).Shape(EyeLikeShape);
  r.Onnx("ReverseSequence").Since(10).Shape(ReverseSequenceShape);
  r.Onnx("Compress").Since(9).Shape(CompressShape);
  r.Onnx("LRN").Shape(SameFloatShape);
  r.Onnx("MeanVarianceNormalization").Since(9).Shape(SameFloatShape);
  r.Onnx("DynamicQuantizeLinear").Since(11).Shape(DynamicQuantizeLinearShape);
  r.Onnx("CenterCropPad").Since(18).Shape(CenterCropPadShape).ParameterInputsFrom(1);
  r.Onnx("AffineGrid").Since(20).Shape(AffineGridShape).ParameterInputsFrom(1);
  r.Onnx("Det").Since(11).Shape(DetShape);
  r.Onnx("Col2Im").Since(18).Shape(Col2ImShape).ParameterInputsFrom(1);
  r.Onnx("Unique").Since(11).Shape(UniqueShape);
  r.Onnx("MaxUnpool").Since(9).Shape(MaxUnpoolShape).ParameterInputsFrom(2);
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"}) r.Onnx(w).Since(17).Shape(WindowShape);
}

}  // namespace kiln
