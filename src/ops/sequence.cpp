// Sequence and optional ops (ONNX opsets 11 to 18): SequenceEmpty, SequenceConstruct, SequenceAt, SequenceInsert,
// SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, SequenceMap (its body is typed by InferBodies,
// ops/control_flow.cpp), Optional, OptionalHasElement and OptionalGetElement. A sequence output's dtype is its element
// type and its shape the elements' shape where the shape function knows they all share one.
#include "ops/sequence.h"

#include <climits>
#include <set>
#include <string>

#include "core/error.h"
#include "ops/control_flow.h"
#include "ops/families.h"

namespace kiln {

const char* ValueKindName(ValueKind k) {
  switch (k) {
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kSequence: return "sequence";
    case ValueKind::kOptionalTensor: return "optional tensor";
    case ValueKind::kOptionalSequence: return "optional sequence";
  }
  return "value";
}

const char* AValueKind(ValueKind k) {
  switch (k) {
    case ValueKind::kTensor: return "a tensor";
    case ValueKind::kSequence: return "a sequence";
    case ValueKind::kOptionalTensor: return "an optional tensor";
    case ValueKind::kOptionalSequence: return "an optional sequence";
  }
  return "a value";
}

bool TakesNonTensorInputs(const Node& n) {
  static const std::set<std::string> ops = {"Identity",       "If",
                                           "Loop",           "Scan",
                                           "SequenceAt",     "SequenceInsert",
                                           "SequenceErase",  "SequenceLength",
                                           "ConcatFromSequence", "SequenceMap",
                                           "Optional",       "OptionalHasElement",
                                           "OptionalGetElement"};
  return n.domain.empty() && ops.count(n.op_type) != 0;
}

Attribute TypeAttribute(ValueKind element, DataType dtype) {
  return Attribute::Ints({static_cast<int64_t>(element), static_cast<int64_t>(dtype)});
}

Result<std::pair<ValueKind, DataType>> ReadTypeAttribute(const Node& n, const char* attr) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, n.attr_ints(attr, {}));
  const bool kind_ok = v.size() == 2 && (v[0] == static_cast<int64_t>(ValueKind::kTensor) ||
                                         v[0] == static_cast<int64_t>(ValueKind::kSequence));
  if (!kind_ok || v[1] <= 0 || v[1] > INT32_MAX || !IsSupportedType(static_cast<DataType>(v[1])))
    return Err(StatusCode::kInvalidModel, "{}: attribute '{}' must give a tensor or sequence-of-tensors type with an "
               "element type kiln holds", n.Where(), attr);
  return std::make_pair(static_cast<ValueKind>(v[0]), static_cast<DataType>(v[1]));
}

namespace {

// The element type of a sequence holding tensors of types a and b: dims that differ become unknown, ranks that
// differ leave the rank unknown.
TensorInfo MergeElements(const TensorInfo& a, const TensorInfo& b) {
  TensorInfo r;
  r.dtype = a.dtype != DataType::kUndefined ? a.dtype : b.dtype;
  if (!a.has_shape || !b.has_shape || a.shape.size() != b.shape.size()) return r;
  r.has_shape = true;
  for (size_t i = 0; i < a.shape.size(); ++i) r.shape.push_back(a.shape[i].same(b.shape[i]) ? a.shape[i] : Dim::Unknown());
  return r;
}

// Output i is a value of `kind` holding `dtype` elements of shape `shape` (rank unknown where null).
void SetKindOutput(InferContext& c, size_t i, ValueKind kind, DataType dtype, const Shape* shape) {
  if (i >= c.outputs.size()) return;
  TensorInfo& o = c.outputs[i];
  o.kind = kind;
  o.dtype = dtype;
  o.has_shape = shape != nullptr;
  o.shape = shape ? *shape : Shape{};
  o.sym_value.reset();
}

Status RequireKind(const InferContext& c, size_t i, ValueKind kind, const char* what) {
  if (!c.has_input(i))
    return Err(StatusCode::kInvalidModel, "{}: needs input {} ({})", c.node.Where(), i, what);
  if (c.in(i).kind != kind)
    return Err(StatusCode::kInvalidModel, "{}: input {} ({}) must be {}, but it is {}", c.node.Where(), i, what,
               AValueKind(kind), AValueKind(c.in(i).kind));
  return Status::Ok();
}

// An int32/int64 position of one element (a scalar; a one-element 1-D tensor is taken too).
Status RequirePosition(const InferContext& c, size_t i) {
  KILN_RETURN_IF_ERROR(RequireKind(c, i, ValueKind::kTensor, "position"));
  const TensorInfo& p = c.in(i);
  if (p.dtype != DataType::kInt32 && p.dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: the position must be int32 or int64, not {}", c.node.Where(),
               DataTypeName(p.dtype));
  if (p.has_shape && p.rank() > 1)
    return Err(StatusCode::kInvalidModel, "{}: the position must be a scalar, not shape {}", c.node.Where(),
               ShapeToString(p.shape));
  return Status::Ok();
}

void SetLike(InferContext& c, size_t i, ValueKind kind, const TensorInfo& x) {
  SetKindOutput(c, i, kind, x.dtype, x.has_shape ? &x.shape : nullptr);
}

Status SequenceEmptyShape(InferContext& c) {
  KILN_ASSIGN_OR_RETURN(const int64_t dt, c.node.attr_int("dtype", static_cast<int64_t>(DataType::kFloat32)));
  const auto t = static_cast<DataType>(dt);
  if (dt <= 0 || dt > INT32_MAX || !IsSupportedType(t))
    return Err(StatusCode::kUnsupported, "{}: dtype {} is not an element type kiln holds", c.node.Where(), dt);
  SetKindOutput(c, 0, ValueKind::kSequence, t, nullptr);
  return Status::Ok();
}

Status SequenceConstructShape(InferContext& c) {
  if (c.num_inputs() == 0)
    return Err(StatusCode::kInvalidModel, "{}: needs at least one tensor", c.node.Where());
  TensorInfo elem;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(RequireKind(c, i, ValueKind::kTensor, "an element"));
    const TensorInfo& x = c.in(i);
    if (i > 0 && x.dtype != elem.dtype)
      return Err(StatusCode::kInvalidModel, "{}: input {} is {} but input 0 is {}; a sequence holds one element type",
                 c.node.Where(), i, DataTypeName(x.dtype), DataTypeName(elem.dtype));
    elem = i == 0 ? x : MergeElements(elem, x);
  }
  SetLike(c, 0, ValueKind::kSequence, elem);
  return Status::Ok();
}

Status SequenceAtShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireKind(c, 0, ValueKind::kSequence, "the sequence"));
  KILN_RETURN_IF_ERROR(RequirePosition(c, 1));
  SetLike(c, 0, ValueKind::kTensor, c.in(0));
  return Status::Ok();
}

Status SequenceInsertShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireKind(c, 0, ValueKind::kSequence, "the sequence"));
  KILN_RETURN_IF_ERROR(RequireKind(c, 1, ValueKind::kTensor, "the tensor to insert"));
  if (c.has_input(2)) KILN_RETURN_IF_ERROR(RequirePosition(c, 2));
  const TensorInfo &s = c.in(0), &t = c.in(1);
  if (t.dtype != s.dtype)
    return Err(StatusCode::kInvalidModel, "{}: inserts a {} tensor into a sequence of {}", c.node.Where(),
               DataTypeName(t.dtype), DataTypeName(s.dtype));
  SetLike(c, 0, ValueKind::kSequence, MergeElements(s, t));
  return Status::Ok();
}

Status SequenceEraseShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireKind(c, 0, ValueKind::kSequence, "the sequence"));
  if (c.has_input(1)) KILN_RETURN_IF_ERROR(RequirePosition(c, 1));
  SetLike(c, 0, ValueKind::kSequence, c.in(0));
  return Status::Ok();
}

Status SequenceLengthShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireKind(c, 0, ValueKind::kSequence, "the sequence"));
  c.set_output(0, DataType::kInt64, {});
  return Status::Ok();
}

Status SplitToSequenceShape(InferContext& c) {
  const Node& n = c.node;
  KILN_RETURN_IF_ERROR(RequireKind(c, 0, ValueKind::kTensor, "the tensor to split"));
  KILN_ASSIGN_OR_RETURN(const int64_t axis, n.attr_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t keepdims, n.attr_int("keepdims", 1));
  const TensorInfo& x = c.in(0);
  const bool has_split = c.has_input(1);
  if (has_split) {
    KILN_RETURN_IF_ERROR(RequireKind(c, 1, ValueKind::kTensor, "split"));
    const TensorInfo& s = c.in(1);
    if (s.dtype != DataType::kInt32 && s.dtype != DataType::kInt64)
      return Err(StatusCode::kInvalidModel, "{}: split must be int32 or int64, not {}", n.Where(), DataTypeName(s.dtype));
    if (s.has_shape && s.rank() > 1)
      return Err(StatusCode::kInvalidModel, "{}: split must be a scalar or a 1-D tensor, not shape {}", n.Where(),
                 ShapeToString(s.shape));
  }
  if (!x.has_shape) {
    SetKindOutput(c, 0, ValueKind::kSequence, x.dtype, nullptr);
    return Status::Ok();
  }
  const auto ax = NormalizeAxis(axis, x.rank());
  if (!ax) return Err(StatusCode::kInvalidModel, "{}: axis {} is outside rank {}", n.Where(), axis, x.rank());
  Shape e = x.shape;
  const auto a = static_cast<size_t>(*ax);
  const Dim& len = x.shape[a];
  if (!has_split) {
    if (keepdims) e[a] = Dim(1);
    else e.erase(e.begin() + *ax);
  } else {
    Dim piece = Dim::Unknown();
    if (const Tensor* s = c.value(1)) {
      const std::vector<int64_t> sizes = s->ToInt64Vector();
      if (s->rank() == 0) {
        if (sizes[0] <= 0) return Err(StatusCode::kInvalidModel, "{}: split is {}; it must be positive", n.Where(), sizes[0]);
        if (len.known() && len.value % sizes[0] == 0) piece = Dim(sizes[0]);
      } else {
        int64_t total = 0;
        for (int64_t v : sizes) {
          if (v < 0) return Err(StatusCode::kInvalidModel, "{}: split holds the negative size {}", n.Where(), v);
          total += v;
        }
        if (len.known() && total != len.value)
          return Err(StatusCode::kInvalidModel, "{}: split sums to {} but axis {} has {} elements", n.Where(), total,
                     axis, len.value);
        bool same = !sizes.empty();
        for (int64_t v : sizes) same = same && v == sizes[0];
        if (same) piece = Dim(sizes[0]);
      }
    }
    e[a] = piece;
  }
  SetKindOutput(c, 0, ValueKind::kSequence, x.dtype, &e);
  return Status::Ok();
}

Status ConcatFromSequenceShape(InferContext& c) {
  const Node& n = c.node;
  KILN_RETURN_IF_ERROR(RequireKind(c, 0, ValueKind::kSequence, "the sequence"));
  if (!n.has_attr("axis")) return Err(StatusCode::kInvalidModel, "{}: needs the attribute 'axis'", n.Where());
  KILN_ASSIGN_OR_RETURN(const int64_t axis, n.attr_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t new_axis, n.attr_int("new_axis", 0));
  if (new_axis != 0 && new_axis != 1)
    return Err(StatusCode::kInvalidModel, "{}: new_axis is {}; it must be 0 or 1", n.Where(), new_axis);
  const TensorInfo& s = c.in(0);
  if (!s.has_shape) {
    c.set_output_rank_unknown(0, s.dtype);
    return Status::Ok();
  }
  const int64_t rank = s.rank() + new_axis;
  const auto ax = NormalizeAxis(axis, rank);
  if (!ax || rank == 0)
    return Err(StatusCode::kInvalidModel, "{}: axis {} is outside the {} rank {}", n.Where(), axis,
               new_axis ? "stacked" : "elements'", rank);
  Shape out = s.shape;
  if (new_axis) out.insert(out.begin() + *ax, Dim::Unknown());
  else out[static_cast<size_t>(*ax)] = Dim::Unknown();  // the sum over the elements
  c.set_output(0, s.dtype, out);
  return Status::Ok();
}

Status SequenceMapShape(InferContext& c) {
  const Node& n = c.node;
  const Graph* body = BodyOf(n, "body");
  if (!body) return Err(StatusCode::kInvalidModel, "{}: needs the graph attribute 'body'", n.Where());
  const size_t k = CapturedInputCount(n);
  const size_t formal = c.num_inputs() - k;
  if (formal == 0) return Err(StatusCode::kInvalidModel, "{}: needs the input sequence", n.Where());
  KILN_RETURN_IF_ERROR(RequireKind(c, 0, ValueKind::kSequence, "the input sequence"));
  for (size_t i = 1; i < formal; ++i) {
    if (!c.has_input(i)) return Err(StatusCode::kInvalidModel, "{}: input {} is empty", n.Where(), i);
    if (c.in(i).kind != ValueKind::kTensor && c.in(i).kind != ValueKind::kSequence)
      return Err(StatusCode::kInvalidModel, "{}: input {} is {}; SequenceMap takes sequences and tensors", n.Where(),
                 i, AValueKind(c.in(i).kind));
  }
  if (body->inputs.size() != c.num_inputs())
    return Err(StatusCode::kInvalidModel, "{}: the body takes {} inputs but the node gives {}", n.Where(),
               body->inputs.size() - k, formal);
  if (n.outputs.size() > body->outputs.size())
    return Err(StatusCode::kInvalidModel, "{}: has {} outputs but its body makes {}", n.Where(), n.outputs.size(),
               body->outputs.size());
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const Value* o = body->outputs[i];
    if (o->kind != ValueKind::kTensor)
      return Err(StatusCode::kUnsupported, "{}: body output {} is {}; kiln's sequences hold tensors", n.Where(), i,
                 AValueKind(o->kind));
    SetKindOutput(c, i, ValueKind::kSequence, o->dtype, o->has_shape ? &o->shape : nullptr);
  }
  return Status::Ok();
}

Status OptionalShape(InferContext& c) {
  const Node& n = c.node;
  if (c.has_input(0)) {
    const TensorInfo& x = c.in(0);
    if (x.kind != ValueKind::kTensor && x.kind != ValueKind::kSequence)
      return Err(StatusCode::kInvalidModel, "{}: its input is {}; an optional holds a tensor or a sequence", n.Where(),
                 AValueKind(x.kind));
    SetLike(c, 0, OptionalOf(x.kind), x);
    return Status::Ok();
  }
  if (!n.has_attr("type"))
    return Err(StatusCode::kInvalidModel, "{}: without an input it needs the attribute 'type'", n.Where());
  KILN_ASSIGN_OR_RETURN(const auto type, ReadTypeAttribute(n, "type"));
  SetKindOutput(c, 0, OptionalOf(type.first), type.second, nullptr);
  return Status::Ok();
}

// Opset 15 takes optionals only; 18 takes tensors and sequences too (they always hold their value).
Status RequireOptionalBefore18(const InferContext& c) {
  if (c.node.opset >= 18 || !c.has_input(0) || IsOptionalKind(c.in(0).kind)) return Status::Ok();
  return Err(StatusCode::kInvalidModel, "{}: at opset {} its input must be an optional, not {} (opset 18 takes "
             "those)", c.node.Where(), c.node.opset, AValueKind(c.in(0).kind));
}

Status OptionalHasElementShape(InferContext& c) {
  if (c.node.opset < 18 && !c.has_input(0))
    return Err(StatusCode::kInvalidModel, "{}: needs its input at opset {} (opset 18 takes none)", c.node.Where(),
               c.node.opset);
  KILN_RETURN_IF_ERROR(RequireOptionalBefore18(c));
  c.set_output(0, DataType::kBool, {});
  return Status::Ok();
}

Status OptionalGetElementShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  KILN_RETURN_IF_ERROR(RequireOptionalBefore18(c));
  const TensorInfo& x = c.in(0);
  SetLike(c, 0, HeldKind(x.kind), x);
  return Status::Ok();
}

}  // namespace

void RegisterSequenceOps(OpRegistry& r) {
  // Nothing here computes: FP16 planning leaves their float values as they are.
  r.Onnx("SequenceEmpty").Since(11).Shape(SequenceEmptyShape).KeepsFp32();
  r.Onnx("SequenceConstruct").Since(11).Shape(SequenceConstructShape).KeepsFp32();
  r.Onnx("SequenceAt").Since(11).Shape(SequenceAtShape).KeepsFp32();
  r.Onnx("SequenceInsert").Since(11).Shape(SequenceInsertShape).KeepsFp32();
  r.Onnx("SequenceErase").Since(11).Shape(SequenceEraseShape).KeepsFp32();
  r.Onnx("SequenceLength").Since(11).Shape(SequenceLengthShape).KeepsFp32();
  r.Onnx("SplitToSequence").Since(11).Shape(SplitToSequenceShape).KeepsFp32();
  r.Onnx("ConcatFromSequence").Since(11).Shape(ConcatFromSequenceShape).KeepsFp32();
  r.Onnx("SequenceMap").Since(17).Shape(SequenceMapShape).KeepsFp32();
  r.Onnx("Optional").Since(15).Shape(OptionalShape).KeepsFp32();
  r.Onnx("OptionalHasElement").Since(15).Shape(OptionalHasElementShape).KeepsFp32();
  r.Onnx("OptionalGetElement").Since(15).Shape(OptionalGetElementShape).KeepsFp32();
}

}  // namespace kiln
