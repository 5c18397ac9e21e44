// Shape functions of the data-movement ops, part 1: Shape, Size, Reshape, Flatten, Transpose, Squeeze,
// Unsqueeze, Expand, Concat, Identity, Dropout, ConstantOfShape, Range. (Split, Slice, Tile, Pad,
// DepthToSpace, SpaceToDepth, Trilu live in shape_tensor_more.cpp.)
//
// Besides shapes these propagate TensorInfo::sym_value, the symbolically known contents of small int64
// shape tensors, so that Shape -> Gather -> Concat -> Reshape chains give symbolic output shapes when a
// dim such as "batch" is not fixed.
#include <algorithm>

#include "core/error.h"
#include "ops/families.h"
#include "ops/shape_tensor_params.h"

namespace kiln {
namespace {

// The most dims a shape input may name (what an engine file holds).
constexpr int64_t kMaxShapeRank = 64;


constexpr DataType kI64 = DataType::kInt64;

// Product of dims [b, e) keeping symbols.
Dim DimProduct(const Shape& s, size_t b, size_t e) {
  Dim r(1);
  for (size_t i = b; i < e && i < s.size(); ++i) r = DimMul(r, s[i]);
  return r;
}

// Passes sym_value through ops that keep the contents (Identity, Reshape, Squeeze, Unsqueeze).
void PassSymValue(InferContext& c) {
  if (!c.has_input(0) || !c.in(0).sym_value || c.outputs.empty()) return;
  const TensorInfo& o = c.out(0);
  if (!o.has_shape || o.rank() > 1) return;
  auto n = NumElements(o.shape);
  if (n && *n == static_cast<int64_t>(c.in(0).sym_value->size())) c.out(0).sym_value = c.in(0).sym_value;
}

Status ShapeOfShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  KILN_ASSIGN_OR_RETURN(int64_t start, c.node.attr_int("start", 0));
  KILN_ASSIGN_OR_RETURN(int64_t end, c.node.attr_int("end", INT64_MAX));
  const TensorInfo& x = c.in(0);
  if (!x.has_shape) {
    c.set_output(0, kI64, {Dim::Unknown()});
    return Status::Ok();
  }
  const int64_t r = x.rank();
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<Dim> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(ShapeDimAsContent(x.shape[i]));
  c.set_output(0, kI64, {Dim(static_cast<int64_t>(dims.size()))});
  c.out(0).sym_value = std::move(dims);
  return Status::Ok();
}

Status SizeShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  c.set_output(0, kI64, {});
  if (c.in(0).has_shape)
    c.out(0).sym_value = std::vector<Dim>{ShapeDimAsContent(DimProduct(c.in(0).shape, 0, c.in(0).shape.size()))};
  return Status::Ok();
}

// The dim that Reshape's -1 stands for: input elements over the other output dims, cancelling equal
// symbols ("batch*seq*768 / (batch*64)" -> "12*seq"); unknown when that is not possible.
Result<Dim> InferReshapeDim(const Node& n, const Shape& in, const Shape& others) {
  int64_t num = 1, den = 1;
  std::vector<Dim> num_sym, den_sym;
  for (const Dim& d : in) {
    if (d.known()) {
      if (__builtin_mul_overflow(num, d.value, &num))
        return Err(StatusCode::kInvalidArgument, "{}: input shape {} has more than 2^63 elements", n.Where(),
                   ShapeToString(in));
    } else if (d.symbolic()) num_sym.push_back(d);
    else return Dim::Unknown();
  }
  for (const Dim& d : others) {
    if (d.known()) {
      if (__builtin_mul_overflow(den, d.value, &den))
        return Err(StatusCode::kInvalidArgument, "{}: target shape {} has more than 2^63 elements", n.Where(),
                   ShapeToString(others));
    } else if (d.symbolic()) {
      auto it = std::find_if(num_sym.begin(), num_sym.end(), [&](const Dim& x) { return x.same(d); });
      if (it != num_sym.end()) num_sym.erase(it);
      else den_sym.push_back(d);
    } else {
      return Dim::Unknown();
    }
  }
  if (den == 0) return Dim::Unknown();
  Dim sym_num(1), sym_den(1);
  for (const Dim& d : num_sym) sym_num = DimMul(sym_num, d);
  for (const Dim& d : den_sym) sym_den = DimMul(sym_den, d);
  if (den_sym.empty()) {
    if (num % den == 0) return DimMul(Dim(num / den), sym_num);
    if (num_sym.empty())
      return Err(StatusCode::kInvalidArgument, "{}: cannot reshape {} elements into {} with one dim inferred",
                 n.Where(), num, ShapeToString(others));
    return DimDiv(DimMul(Dim(num), sym_num), Dim(den));
  }
  return DimDiv(DimMul(Dim(num), sym_num), DimMul(Dim(den), sym_den));
}

Status ReshapeShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  KILN_ASSIGN_OR_RETURN(int64_t allowzero, c.node.attr_int("allowzero", 0));
  const TensorInfo& x = c.in(0);
  const TensorInfo& s = c.in(1);
  if (s.dtype != DataType::kUndefined && s.dtype != kI64)
    return Err(StatusCode::kInvalidModel, "{}: the shape input must be int64, not {}", c.node.Where(),
               DataTypeName(s.dtype));
  // Requested dims: -1 (infer) is kept apart from "unknown" because Dim(-1) reads as unknown.
  std::vector<Dim> req;
  std::vector<bool> minus_one;
  if (s.value) {
    for (int64_t v : s.value->ToInt64Vector()) {
      req.emplace_back(v);
      minus_one.push_back(v == -1);
    }
  } else if (s.sym_value) {
    req = *s.sym_value;
    // A -1 inside symbolic contents is ContentDim's "#-1"; other negative contents are invalid, read as unknown
    // here and refused when the values are known at run time.
    for (Dim& d : req) {
      const bool content = IsNegativeContent(d);
      const std::optional<int64_t> v = content ? ContentValue(d) : std::nullopt;
      minus_one.push_back(v && *v == -1);
      if (content) d = Dim::Unknown();  // parsed or not, never a dim of the output
    }
  } else {
    if (s.has_shape && s.rank() == 1 && s.shape[0].known()) {
      if (s.shape[0].value > kMaxShapeRank)
        return Err(StatusCode::kInvalidModel, "{}: the shape input has {} elements: at most {} dims", c.node.Where(),
                   s.shape[0].value, kMaxShapeRank);
      c.set_output(0, x.dtype, Shape(s.shape[0].value, Dim::Unknown()));
    }
    else
      c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  if (s.has_shape && s.rank() > 1)
    return Err(StatusCode::kInvalidModel, "{}: the shape input must be 1-D, got {}", c.node.Where(),
               ShapeToString(s.shape));
  if (x.has_shape && IsStatic(x.shape) && s.value) {
    KILN_ASSIGN_OR_RETURN(auto out, ReshapeTarget(c.node, ToStatic(x.shape), s.value->ToInt64Vector(), allowzero));
    c.set_output(0, x.dtype, FromStatic(out));
    PassSymValue(c);
    return Status::Ok();
  }
  Shape out(req.size());
  int64_t infer_at = -1;
  for (size_t i = 0; i < req.size(); ++i) {
    const Dim& d = req[i];
    if (minus_one[i]) {
      if (infer_at >= 0) return Err(StatusCode::kInvalidArgument, "{}: shape has more than one -1", c.node.Where());
      infer_at = static_cast<int64_t>(i);
    } else if (d.known() && d.value == 0 && !allowzero) {
      if (x.has_shape && i >= x.shape.size())
        return Err(StatusCode::kInvalidArgument, "{}: shape copies dim {} (0) but the input has rank {}",
                   c.node.Where(), i, x.rank());
      out[i] = x.has_shape ? x.shape[i] : Dim::Unknown();
    } else if (!d.known() && !d.symbolic() && s.value) {
      return Err(StatusCode::kInvalidArgument, "{}: shape has a negative dim {}", c.node.Where(), d.value);
    } else {
      out[i] = d;
    }
  }
  if (infer_at >= 0) {
    if (!x.has_shape) {
      out[infer_at] = Dim::Unknown();
    } else {
      Shape others;
      for (size_t i = 0; i < out.size(); ++i)
        if (static_cast<int64_t>(i) != infer_at) others.push_back(out[i]);
      KILN_ASSIGN_OR_RETURN(out[infer_at], InferReshapeDim(c.node, x.shape, others));
    }
  } else if (x.has_shape && IsStatic(x.shape) && IsStatic(out) &&
             NumElements(ToStatic(x.shape)) != NumElements(ToStatic(out))) {
    return Err(StatusCode::kInvalidArgument, "{}: cannot reshape {} to {}", c.node.Where(), ShapeToString(x.shape),
               ShapeToString(out));
  }
  c.set_output(0, x.dtype, std::move(out));
  PassSymValue(c);
  return Status::Ok();
}

Status FlattenShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.node.attr_int("axis", 1));
  const TensorInfo& x = c.in(0);
  if (!x.has_shape) {
    c.set_output(0, x.dtype, {Dim::Unknown(), Dim::Unknown()});
    return Status::Ok();
  }
  const int64_t r = x.rank();
  if (axis < -r || axis > r)
    return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", c.node.Where(), axis, r);
  if (axis < 0) axis += r;
  c.set_output(0, x.dtype, {DimProduct(x.shape, 0, axis), DimProduct(x.shape, axis, r)});
  return Status::Ok();
}

Status TransposeShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  if (!x.has_shape) {
    KILN_ASSIGN_OR_RETURN(auto perm, c.node.attr_ints("perm", {}));
    if (perm.empty()) c.set_output_rank_unknown(0, x.dtype);
    else c.set_output(0, x.dtype, Shape(perm.size(), Dim::Unknown()));
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(auto perm, TransposePerm(c.node, x.rank()));
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  c.set_output(0, x.dtype, std::move(out));
  return Status::Ok();
}

Status SqueezeShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  std::vector<bool> drop(x.rank(), false);
  if (c.has_input(1)) {
    auto axes = InputInts(c, 1);
    if (!axes) {
      c.set_output_rank_unknown(0, x.dtype);
      return Status::Ok();
    }
    KILN_ASSIGN_OR_RETURN(auto norm, NormalizeAxesList(c.node, *axes, x.rank()));
    for (int64_t a : norm) {
      if (x.shape[a].known() && x.shape[a].value != 1)
        return Err(StatusCode::kInvalidArgument, "{}: cannot squeeze axis {} of shape {} (not 1)", c.node.Where(), a,
                   ShapeToString(x.shape));
      drop[a] = true;
    }
  } else {
    for (int64_t i = 0; i < x.rank(); ++i) {
      if (!x.shape[i].known()) {  // whether it is 1 is not known
        c.set_output_rank_unknown(0, x.dtype);
        return Status::Ok();
      }
      drop[i] = x.shape[i].value == 1;
    }
  }
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.shape[i]);
  c.set_output(0, x.dtype, std::move(out));
  PassSymValue(c);
  return Status::Ok();
}

Status UnsqueezeShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& x = c.in(0);
  auto axes = InputInts(c, 1);
  if (!x.has_shape || !axes) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  const int64_t r = x.rank() + static_cast<int64_t>(axes->size());
  KILN_ASSIGN_OR_RETURN(auto norm, NormalizeAxesList(c.node, *axes, r));
  std::vector<bool> added(r, false);
  for (int64_t a : norm) added[a] = true;
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(added[i] ? Dim(1) : x.shape[j++]);
  c.set_output(0, x.dtype, std::move(out));
  PassSymValue(c);
  return Status::Ok();
}

Status ExpandShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& x = c.in(0);
  const TensorInfo& s = c.in(1);
  auto dims = InputDims(c, 1);
  if (!dims || !x.has_shape) {
    if (s.has_shape && s.rank() == 1 && s.shape[0].known() && x.has_shape)
      c.set_output(0, x.dtype, Shape(std::max<int64_t>(x.rank(), s.shape[0].value), Dim::Unknown()));
    else
      c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  if (s.value)
    for (int64_t v : s.value->ToInt64Vector())
      if (v < 0) return Err(StatusCode::kInvalidArgument, "{}: shape has a negative dim {}", c.node.Where(), v);
  KILN_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(c.node, x.shape, *dims));
  c.set_output(0, x.dtype, std::move(out));
  return Status::Ok();
}

Status ConcatShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  if (!c.node.has_attr("axis")) return Err(StatusCode::kInvalidModel, "{}: attribute 'axis' is required", c.node.Where());
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.node.attr_int("axis", 0));
  const TensorInfo* ref = nullptr;
  DataType dtype = DataType::kUndefined;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) return Err(StatusCode::kInvalidModel, "{}: input {} is missing", c.node.Where(), i);
    const TensorInfo& t = c.in(i);
    if (dtype == DataType::kUndefined) dtype = t.dtype;
    else if (t.dtype != DataType::kUndefined && t.dtype != dtype)
      return Err(StatusCode::kInvalidModel, "{}: inputs have different types ({} and {})", c.node.Where(),
                 DataTypeName(dtype), DataTypeName(t.dtype));
    if (t.has_shape && !ref) ref = &t;
  }
  if (!ref) {
    c.set_output_rank_unknown(0, dtype);
    return Status::Ok();
  }
  const int64_t r = ref->rank();
  auto ax = NormalizeAxis(axis, r);
  if (!ax) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", c.node.Where(), axis, r);
  Shape out = ref->shape;
  out[*ax] = Dim(0);
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const TensorInfo& t = c.in(i);
    if (!t.has_shape) {
      out[*ax] = Dim::Unknown();
      continue;
    }
    if (t.rank() != r)
      return Err(StatusCode::kInvalidModel, "{}: inputs have different ranks ({} and {})", c.node.Where(),
                 ShapeToString(ref->shape), ShapeToString(t.shape));
    for (int64_t d = 0; d < r; ++d) {
      if (d == *ax) continue;
      const Dim& a = out[d];
      const Dim& b = t.shape[d];
      if (a.known() && b.known() && a.value != b.value)
        return Err(StatusCode::kInvalidArgument, "{}: input shapes {} and {} differ outside axis {}", c.node.Where(),
                   ShapeToString(ref->shape), ShapeToString(t.shape), axis);
      if (!a.known() && b.known()) out[d] = b;
      else if (a.unknown() && b.symbolic()) out[d] = b;
    }
    out[*ax] = DimAdd(out[*ax], t.shape[*ax]);
  }
  c.set_output(0, dtype, std::move(out));
  // Symbolic contents: the concatenation of every input's contents.
  if (r == 1) {
    std::vector<Dim> sym;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      auto d = InputContents(c, i);
      if (!d) return Status::Ok();
      sym.insert(sym.end(), d->begin(), d->end());
    }
    c.out(0).sym_value = std::move(sym);
  }
  return Status::Ok();
}

Status IdentityShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  c.out(0).dtype = x.dtype;
  c.out(0).shape = x.shape;
  c.out(0).has_shape = x.has_shape;
  c.out(0).sym_value = x.sym_value;
  c.out(0).kind = x.kind;  // Identity passes sequences and optionals through too (opset 14 and 16)
  return Status::Ok();
}

Status DropoutShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  const TensorInfo& x = c.in(0);
  if (const Tensor* r = c.value(1); r && r->numel() == 1) {
    const double ratio = r->GetAsDouble(0);
    if (!(ratio >= 0.0 && ratio < 1.0))
      return Err(StatusCode::kInvalidArgument, "{}: ratio {} is outside [0, 1)", c.node.Where(), ratio);
  }
  KILN_RETURN_IF_ERROR(IdentityShape(c));
  c.out(0).sym_value.reset();
  if (c.outputs.size() > 1) {
    // Before opset 10 the mask has the input's type; since then it is bool.
    const DataType mt = c.node.opset != 0 && c.node.opset < 10 ? x.dtype : DataType::kBool;
    if (x.has_shape) c.set_output(1, mt, x.shape);
    else c.set_output_rank_unknown(1, mt);
  }
  return Status::Ok();
}

Status ConstantOfShapeShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  DataType dtype = DataType::kFloat32;
  if (c.node.has_attr("value")) {
    const Attribute& a = c.node.attrs.at("value");
    if (a.kind != Attribute::Kind::kTensor || a.t.numel() != 1)
      return Err(StatusCode::kInvalidModel, "{}: attribute 'value' must be a one-element tensor", c.node.Where());
    dtype = a.t.dtype();
  }
  const TensorInfo& s = c.in(0);
  if (s.has_shape && s.rank() != 1)
    return Err(StatusCode::kInvalidModel, "{}: the shape input must be 1-D, got {}", c.node.Where(),
               ShapeToString(s.shape));
  if (auto ints = InputInts(c, 0)) {
    for (int64_t v : *ints)
      if (v < 0) return Err(StatusCode::kInvalidArgument, "{}: shape {} has a negative dim", c.node.Where(), *ints);
    c.set_output(0, dtype, FromStatic(*ints));
  } else if (auto dims = InputDims(c, 0)) {
    c.set_output(0, dtype, *dims);
  } else if (s.has_shape && s.shape[0].known()) {
    if (s.shape[0].value > kMaxShapeRank)
      return Err(StatusCode::kInvalidModel, "{}: the shape input has {} elements: at most {} dims", c.node.Where(),
                 s.shape[0].value, kMaxShapeRank);
    c.set_output(0, dtype, Shape(s.shape[0].value, Dim::Unknown()));
  } else {
    c.set_output_rank_unknown(0, dtype);
  }
  return Status::Ok();
}

Status RangeShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 3));
  const DataType t = c.in(0).dtype;
  for (size_t i = 1; i < 3; ++i)
    if (c.in(i).dtype != t && c.in(i).dtype != DataType::kUndefined && t != DataType::kUndefined)
      return Err(StatusCode::kInvalidModel, "{}: start, limit and delta must have one type ({} vs {})",
                 c.node.Where(), DataTypeName(t), DataTypeName(c.in(i).dtype));
  for (size_t i = 0; i < 3; ++i) {
    const TensorInfo& in = c.in(i);
    if (in.has_shape && IsStatic(in.shape) && NumElements(ToStatic(in.shape)) != 1)
      return Err(StatusCode::kInvalidModel, "{}: input {} must be a scalar, got {}", c.node.Where(), i,
                 ShapeToString(in.shape));
  }
  const Tensor *a = c.value(0), *b = c.value(1), *d = c.value(2);
  if (a && b && d && a->numel() == 1 && b->numel() == 1 && d->numel() == 1) {
    KILN_ASSIGN_OR_RETURN(int64_t n, RangeCount(c.node, a->GetAsDouble(0), b->GetAsDouble(0), d->GetAsDouble(0)));
    c.set_output(0, t, {Dim(n)});
  } else if (a && d && a->numel() == 1 && d->numel() == 1 && IsIntegerType(t) && a->GetAsInt(0) == 0 &&
             d->GetAsInt(0) == 1 && c.in(1).sym_value && c.in(1).sym_value->size() == 1 &&
             c.in(1).sym_value->front().symbolic() && !IsNegativeContent(c.in(1).sym_value->front()) &&
             NonNegativeDim(c.in(1).sym_value->front())) {
    // Range(0, n, 1) with n a dim known by name (torch.arange(x.size(1)) in position ids): n elements, so that
    // what it indexes keeps the sequence's symbol and meets the tensors it is added to as the same shape.
    c.set_output(0, t, {c.in(1).sym_value->front()});
  } else {
    c.set_output(0, t, {Dim::Unknown()});
  }
  return Status::Ok();
}

}  // namespace

// ---- converters ----
// ONNX converters of the data-movement ops. Operands that older opsets gave as attributes become constant
// inputs so that shape functions and kernels see the newest form only:
//   Squeeze/Unsqueeze axes (< 13), Split split (< 13), Slice starts/ends/axes (< 10),
//   Pad pads/value (< 11), Dropout ratio (< 12).
namespace {

Status ConvertAxesAttr(ConvertContext& c) {
  if (c.opset < 13) MoveIntsAttrToInput(c, "axes", 1);
  return Status::Ok();
}

Status ConvertDropout(ConvertContext& c) {
  if (c.opset >= 12) return Status::Ok();
  // Before opset 12 there is no training mode: inference only, and the ratio is informational.
  MoveFloatAttrToInput(c, "ratio", 1, DataType::kFloat32);
  return Status::Ok();
}

}  // namespace

void RegisterTensorOps(OpRegistry& r) {
  r.Onnx("Shape").Shape(ShapeOfShape).KeepsFp32();
  r.Onnx("Size").Shape(SizeShape).KeepsFp32();
  r.Onnx("Reshape").Since(5).Shape(ReshapeShape).View();
  r.Onnx("Flatten").Shape(FlattenShape).View();
  r.Onnx("Transpose").Shape(TransposeShape);
  r.Onnx("Squeeze").Convert(ConvertAxesAttr).Shape(SqueezeShape).View();
  r.Onnx("Unsqueeze").Convert(ConvertAxesAttr).Shape(UnsqueezeShape).View();
  r.Onnx("Expand").Since(8).Shape(ExpandShape);
  r.Onnx("Concat").Since(4).Shape(ConcatShape);
  r.Onnx("Identity").Shape(IdentityShape).View().LayoutNeutral();
  r.Onnx("Dropout").Since(7).Convert(ConvertDropout).Shape(DropoutShape).Nondeterministic();
  r.Onnx("ConstantOfShape").Since(9).Shape(ConstantOfShapeShape).KeepsFp32();
  r.Onnx("Range").Since(11).Shape(RangeShape).KeepsFp32();
  RegisterTensorOpsMore(r);
}

}  // namespace kiln
