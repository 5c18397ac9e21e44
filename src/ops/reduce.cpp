// Shape functions of the reduction family: Reduce* (axes as input 1), ArgMax/ArgMin, TopK, CumSum, CumProd,
// Softmax/LogSoftmax. Reductions keep the symbolic dims of the axes they do not reduce.
#include <algorithm>

#include "core/error.h"
#include "ops/families.h"

namespace kiln {

namespace {

// Normalizes `axes` against `rank`; errors on out-of-range or repeated axes.
Result<std::vector<int64_t>> NormalizeAxes(const Node& n, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> r;
  for (int64_t a : axes) {
    auto na = NormalizeAxis(a, rank);
    if (!na) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), a, rank);
    if (std::find(r.begin(), r.end(), *na) != r.end())
      return Err(StatusCode::kInvalidModel, "{}: axis {} is repeated in axes {}", n.Where(), a, axes);
    r.push_back(*na);
  }
  return r;
}

// ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp in the canonical form: axes as optional
// int64 input 1, attributes keepdims (default 1) and noop_with_empty_axes (default 0).
Status ReduceShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  if (n.has_attr("axes"))
    return Err(StatusCode::kInvalidModel,
               "{}: the 'axes' attribute must have been converted to input 1 by the ONNX converter", n.Where());
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, n.attr_int("keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t noop, n.attr_int("noop_with_empty_axes", 0));
  const TensorInfo& x = ctx.in(0);
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  const int64_t rank = x.rank();
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    const TensorInfo& a = ctx.in(1);
    if (a.dtype != DataType::kInt64)
      return Err(StatusCode::kInvalidModel, "{}: axes (input 1) must be int64, but it is {}", n.Where(),
                 DataTypeName(a.dtype));
    if (a.has_shape && a.rank() > 1)
      return Err(StatusCode::kInvalidModel, "{}: axes (input 1) must be 1-D, but its shape is {}", n.Where(),
                 ShapeToString(a.shape));
    if (!a.value) {
      // Axes known only at run time: the rank is known when dims are kept or when the count of axes is.
      Shape out;
      if (keepdims) {
        for (const Dim& d : x.shape) out.push_back(d.known() && d.value == 1 ? Dim(1) : Dim::Unknown());
      } else if (a.has_shape && a.rank() == 1 && a.shape[0].known() && a.shape[0].value > 0) {
        if (a.shape[0].value > rank)
          return Err(StatusCode::kInvalidModel, "{}: {} axes given for an input of rank {}", n.Where(),
                     a.shape[0].value, rank);
        out.assign(rank - a.shape[0].value, Dim::Unknown());
      } else {
        ctx.set_output_rank_unknown(0, x.dtype);
        return Status::Ok();
      }
      ctx.set_output(0, x.dtype, out);
      return Status::Ok();
    }
    axes = a.value->ToInt64Vector();
  }
  if (axes.empty()) {
    if (noop) {
      ctx.set_output(0, x.dtype, x.shape);
      return Status::Ok();
    }
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  KILN_ASSIGN_OR_RETURN(axes, NormalizeAxes(n, axes, rank));
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) out.push_back(x.shape[i]);
    else if (keepdims) out.push_back(Dim(1));
  }
  ctx.set_output(0, x.dtype, out);
  // Shape arithmetic on symbolic shape tensors: ReduceProd/ReduceSum of Shape(x) keep their symbols.
  const bool prod = n.op_type == "ReduceProd", sum = n.op_type == "ReduceSum";
  if ((prod || sum) && rank == 1 && x.sym_value && !axes.empty() &&
      std::none_of(x.sym_value->begin(), x.sym_value->end(), [](const Dim& d) { return IsNegativeContent(d); })) {
    Dim acc = prod ? Dim(1) : Dim(0);
    for (const Dim& d : *x.sym_value) acc = prod ? DimMul(acc, d) : DimAdd(acc, d);
    if (!acc.unknown()) ctx.out(0).sym_value = std::vector<Dim>{acc};
  }
  return Status::Ok();
}

// ArgMax/ArgMin: axis (default 0), keepdims (default 1), select_last_index; int64 output.
Status ArgShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, n.attr_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, n.attr_int("keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t last, n.attr_int("select_last_index", 0));
  (void)last;
  const TensorInfo& x = ctx.in(0);
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, DataType::kInt64);
    return Status::Ok();
  }
  auto na = NormalizeAxis(axis, x.rank());
  if (!na) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), axis, x.rank());
  if (x.shape[*na].known() && x.shape[*na].value == 0)
    return Err(StatusCode::kInvalidArgument, "{}: cannot take the arg{} of an empty axis {} (input shape {})",
               n.Where(), n.op_type == "ArgMax" ? "max" : "min", axis, ShapeToString(x.shape));
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != *na) out.push_back(x.shape[i]);
    else if (keepdims) out.push_back(Dim(1));
  }
  ctx.set_output(0, DataType::kInt64, out);
  return Status::Ok();
}

// TopK (canonical form: K as int64 input 1 with one element): Values (input type) and Indices (int64).
Status TopKShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  if (n.has_attr("k"))
    return Err(StatusCode::kInvalidModel, "{}: the 'k' attribute must have been converted to input 1", n.Where());
  KILN_ASSIGN_OR_RETURN(int64_t axis, n.attr_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t largest, n.attr_int("largest", 1));
  KILN_ASSIGN_OR_RETURN(int64_t sorted, n.attr_int("sorted", 1));
  (void)largest;
  (void)sorted;
  const TensorInfo& x = ctx.in(0);
  const TensorInfo& k = ctx.in(1);
  if (k.dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: K (input 1) must be int64, but it is {}", n.Where(),
               DataTypeName(k.dtype));
  if (k.has_shape) {
    auto ne = NumElements(k.shape);
    if (k.rank() > 1 || (ne && *ne != 1))
      return Err(StatusCode::kInvalidModel, "{}: K (input 1) must hold one element, but its shape is {}",
                 n.Where(), ShapeToString(k.shape));
  }
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, x.dtype);
    ctx.set_output_rank_unknown(1, DataType::kInt64);
    return Status::Ok();
  }
  auto na = NormalizeAxis(axis, x.rank());
  if (!na) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), axis, x.rank());
  Dim kd = Dim::Unknown();
  if (k.value) {
    if (k.value->numel() != 1)
      return Err(StatusCode::kInvalidModel, "{}: K must hold one element, it holds {}", n.Where(), k.value->numel());
    const int64_t kv = k.value->GetAsInt(0);
    if (kv < 0) return Err(StatusCode::kInvalidArgument, "{}: K must not be negative, it is {}", n.Where(), kv);
    const Dim& ad = x.shape[*na];
    if (ad.known() && kv > ad.value)
      return Err(StatusCode::kInvalidArgument, "{}: K = {} exceeds the size {} of axis {}", n.Where(), kv, ad.value,
                 axis);
    kd = Dim(kv);
  } else if (k.sym_value && k.sym_value->size() == 1 && !IsNegativeContent((*k.sym_value)[0])) {
    kd = (*k.sym_value)[0];
  }
  Shape out = x.shape;
  out[*na] = kd;
  ctx.set_output(0, x.dtype, out);
  ctx.set_output(1, DataType::kInt64, out);
  return Status::Ok();
}

// CumSum, CumProd: x and a scalar (or one-element) int32/int64 axis; output like x.
Status CumSumShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_ASSIGN_OR_RETURN(int64_t exclusive, n.attr_int("exclusive", 0));
  KILN_ASSIGN_OR_RETURN(int64_t reverse, n.attr_int("reverse", 0));
  (void)exclusive;
  (void)reverse;
  const TensorInfo& x = ctx.in(0);
  const TensorInfo& a = ctx.in(1);
  if (a.dtype != DataType::kInt32 && a.dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: axis (input 1) must be int32 or int64, but it is {}", n.Where(),
               DataTypeName(a.dtype));
  if (a.has_shape && a.rank() > 1)
    return Err(StatusCode::kInvalidModel, "{}: axis (input 1) must be a scalar, but its shape is {}", n.Where(),
               ShapeToString(a.shape));
  if (x.dtype == DataType::kBool || x.dtype == DataType::kString)
    return Err(StatusCode::kInvalidModel, "{}: {} does not accept {} input", n.Where(), n.op_type,
               DataTypeName(x.dtype));
  if (x.has_shape && a.value) {
    if (a.value->numel() != 1)
      return Err(StatusCode::kInvalidModel, "{}: axis must hold one element, it holds {}", n.Where(),
                 a.value->numel());
    const int64_t axis = a.value->GetAsInt(0);
    if (!NormalizeAxis(axis, x.rank()))
      return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), axis, x.rank());
  }
  SetOutputLike(ctx, 0, x);
  return Status::Ok();
}

// Softmax/LogSoftmax (canonical form: explicit axis; kiln_flatten_2d=1 for the opset < 13 semantics).
Status SoftmaxShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, n.attr_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t flatten, n.attr_int("kiln_flatten_2d", 0));
  const TensorInfo& x = ctx.in(0);
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  const int64_t rank = x.rank();
  // The legacy form allows axis == rank (an empty trailing block); scalars are treated as [1].
  const bool ok = flatten ? (axis >= -rank && axis <= rank) : (rank == 0 ? (axis == 0 || axis == -1)
                                                                        : NormalizeAxis(axis, rank).has_value());
  if (!ok) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), axis, rank);
  ctx.set_output(0, x.dtype, x.shape);
  return Status::Ok();
}

}  // namespace

// ---- converters ----
// Converters of the reduction family. Canonical forms the kernels and shape functions see:
//  - Reduce*: axes as int64 input 1 (the attribute form before opset 13 for ReduceSum, 18 for the others).
//  - TopK: K as int64 input 1 of shape [1] (the attribute form before opset 10).
//  - Softmax/LogSoftmax: an explicit `axis`; before opset 13 the op flattened the input to 2-D at `axis`
//    (default 1), recorded as the internal attribute kiln_flatten_2d = 1.
namespace {

// Reduce* whose axes became an input at `input_opset`.
ConverterFn ReduceConverter(int64_t input_opset) {
  return [input_opset](ConvertContext& c) -> Status {
                     if (c.opset >= input_opset) return Status::Ok();
                     if (c.node.input(1))
                       return Err(StatusCode::kInvalidModel, "{}: opset {} takes axes as an attribute, not an input",
                                  c.node.Where(), c.opset);
                     auto it = c.node.attrs.find("axes");
                     if (it != c.node.attrs.end() && it->second.kind != Attribute::Kind::kInts &&
                         it->second.kind != Attribute::Kind::kInt)
                       return Err(StatusCode::kInvalidModel, "{}: attribute 'axes' must be a list of ints, but the model gives {}",
                                  c.node.Where(), AttributeKindName(it->second.kind));
                     // Before the input form there was no noop_with_empty_axes: missing/empty axes reduce all.
                     c.node.attrs.erase("noop_with_empty_axes");
                     MoveIntsAttrToInput(c, "axes", 1);
                     return Status::Ok();
                   };
}

Status ConvertTopK(ConvertContext& c) {
  if (c.opset >= 10) return Status::Ok();
  auto it = c.node.attrs.find("k");
  if (it == c.node.attrs.end())
    return Err(StatusCode::kInvalidModel, "{}: opset {} requires the attribute 'k'", c.node.Where(), c.opset);
  if (it->second.kind != Attribute::Kind::kInt)
    return Err(StatusCode::kInvalidModel, "{}: attribute 'k' must be an int, but the model gives {}", c.node.Where(),
               AttributeKindName(it->second.kind));
  MoveIntsAttrToInput(c, "k", 1);
  return Status::Ok();
}

Status ConvertSoftmax(ConvertContext& c) {
  auto it = c.node.attrs.find("axis");
  if (it != c.node.attrs.end() && it->second.kind != Attribute::Kind::kInt)
    return Err(StatusCode::kInvalidModel, "{}: attribute 'axis' must be an int, but the model gives {}",
               c.node.Where(), AttributeKindName(it->second.kind));
  if (c.opset < 13) {
    if (it == c.node.attrs.end()) c.node.attrs["axis"] = Attribute::Int(1);
    c.node.attrs["kiln_flatten_2d"] = Attribute::Int(1);
  } else if (it == c.node.attrs.end()) {
    c.node.attrs["axis"] = Attribute::Int(-1);
  }
  return Status::Ok();
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  r.Onnx("ReduceSum").Convert(ReduceConverter(13)).Shape(ReduceShape);
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
    r.Onnx(op).Convert(ReduceConverter(18)).Shape(ReduceShape);
  r.Onnx("ArgMax").Shape(ArgShape);
  r.Onnx("ArgMin").Shape(ArgShape);
  r.Onnx("TopK").Convert(ConvertTopK).Shape(TopKShape);
  r.Onnx("CumSum").Since(11).Shape(CumSumShape);
  r.Onnx("CumProd").Since(26).Shape(CumSumShape);
  r.Onnx("Softmax").Convert(ConvertSoftmax).Shape(SoftmaxShape);
  r.Onnx("LogSoftmax").Convert(ConvertSoftmax).Shape(SoftmaxShape);
  // Hardmax: 1 at the first largest value along the axis (opset < 13: of the input flattened to 2-D there), else 0.
  r.Onnx("Hardmax").Convert(ConvertSoftmax).Shape(SoftmaxShape);
}

}  // namespace kiln
