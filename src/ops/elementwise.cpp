// The elementwise family's OpDefs (converters, shape and type functions, traits): unary math and activations, broadcasting binary
// arithmetic (with Mod and Pow), comparisons and logic, Where, variadic Min/Max/Sum/Mean, Cast/CastLike, BitCast and
// Q/DQ.
// Add/Sub/Mul/Div/Cast also carry the symbolic contents of small int64 shape tensors (sym_value), so that
// Shape -> Mul -> Reshape keeps "batch*seq"-style dims through the arithmetic.
#include <algorithm>
#include <functional>

#include "core/element_bits.h"
#include "core/error.h"
#include "ops/families.h"
#include "ops/pointwise_op.h"

namespace kiln {
namespace {

enum class Cat { kFloat, kSigned, kNumeric, kAll, kBool, kInteger, kUnsigned };

bool IsPlainFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kFloat64 ||
         t == DataType::kBFloat16;
}

bool InCat(DataType t, Cat c) {
  switch (c) {
    case Cat::kFloat: return IsPlainFloat(t);
    case Cat::kSigned:
      return IsPlainFloat(t) || t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kInt32 ||
             t == DataType::kInt64;
    case Cat::kNumeric: return IsPlainFloat(t) || IsIntegerType(t);
    case Cat::kAll: return IsPlainFloat(t) || IsIntegerType(t) || t == DataType::kBool;
    case Cat::kBool: return t == DataType::kBool;
    case Cat::kUnsigned:
      return t == DataType::kUInt8 || t == DataType::kUInt16 || t == DataType::kUInt32 || t == DataType::kUInt64;
    case Cat::kInteger:
      return InCat(t, Cat::kUnsigned) || t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kInt32 ||
             t == DataType::kInt64;
  }
  return false;
}

const char* CatName(Cat c) {
  switch (c) {
    case Cat::kFloat: return "a float type (float16, bfloat16, float32, float64)";
    case Cat::kSigned: return "a signed numeric type";
    case Cat::kNumeric: return "a numeric type";
    case Cat::kAll: return "a numeric or bool type";
    case Cat::kBool: return "bool";
    case Cat::kInteger: return "an integer type (int8, int16, int32, int64, uint8, uint16, uint32, uint64)";
    case Cat::kUnsigned: return "an unsigned integer type (uint8, uint16, uint32, uint64)";
  }
  return "";
}

Status CheckType(const InferContext& ctx, size_t i, Cat c) {
  const DataType t = ctx.in(i).dtype;
  if (!InCat(t, c))
    return Err(StatusCode::kInvalidModel, "{}: input {} has type {}, expected {}", ctx.node.Where(), i,
               DataTypeName(t), CatName(c));
  return Status::Ok();
}

Status CheckSameType(const InferContext& ctx, size_t i, size_t j) {
  if (ctx.in(i).dtype != ctx.in(j).dtype)
    return Err(StatusCode::kInvalidModel, "{}: inputs {} and {} must have the same type, got {} and {}",
               ctx.node.Where(), i, j, DataTypeName(ctx.in(i).dtype), DataTypeName(ctx.in(j).dtype));
  return Status::Ok();
}

// Output 0 gets `dtype` and the broadcast of the shapes of the given inputs (rank unknown if any is).
Status SetBroadcastOutput(InferContext& ctx, const std::vector<size_t>& inputs, DataType dtype) {
  Shape s;
  for (size_t i : inputs) {
    if (!ctx.in(i).has_shape) {
      ctx.set_output_rank_unknown(0, dtype);
      return Status::Ok();
    }
  }
  s = ctx.in(inputs[0]).shape;
  for (size_t k = 1; k < inputs.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(s, BroadcastShapes(ctx.node, s, ctx.in(inputs[k]).shape));
  }
  ctx.set_output(0, dtype, std::move(s));
  return Status::Ok();
}

void SetSameShape(InferContext& ctx, size_t from, DataType dtype) {
  if (ctx.in(from).has_shape) ctx.set_output(0, dtype, ctx.in(from).shape);
  else ctx.set_output_rank_unknown(0, dtype);
}

ShapeFn Unary(Cat c, std::vector<const char*> attrs = {}) {
  return [c, attrs](InferContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
    KILN_RETURN_IF_ERROR(CheckType(ctx, 0, c));
    for (const char* a : attrs) {
      KILN_ASSIGN_OR_RETURN(float v, ctx.node.attr_float(a, 0.f));
      (void)v;
    }
    SetSameShape(ctx, 0, ctx.in(0).dtype);
    return Status::Ok();
  };
}

// ---- symbolic contents of small int64 tensors ----
// The elements of input i as dims: its sym_value, or its constant value when small and of rank <= 1.
std::optional<std::vector<Dim>> SymElements(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i) || ctx.in(i).dtype != DataType::kInt64) return std::nullopt;
  if (ctx.in(i).sym_value) return ctx.in(i).sym_value;
  const Tensor* v = ctx.value(i);
  if (!v || v->rank() > 1 || v->numel() > 64) return std::nullopt;
  std::vector<Dim> r;
  for (int64_t k = 0; k < v->numel(); ++k) r.push_back(ContentDim(v->GetAsInt(k)));
  return r;
}

void PropagateSymArith(InferContext& ctx, const std::function<Dim(const Dim&, const Dim&)>& op,
                       const std::function<std::optional<int64_t>(int64_t, int64_t)>& int_op = nullptr) {
  if (!ctx.in(0).sym_value && !ctx.in(1).sym_value) return;  // constants fold by evaluation
  auto a = SymElements(ctx, 0);
  auto b = SymElements(ctx, 1);
  if (!a || !b || ctx.out(0).dtype != DataType::kInt64 || !ctx.out(0).has_shape || ctx.out(0).shape.size() > 1)
    return;
  const size_t n = std::max(a->size(), b->size());
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return;
  std::vector<Dim> r(n);
  for (size_t k = 0; k < n; ++k) {
    const Dim& x = (*a)[a->size() == 1 ? 0 : k];
    const Dim& y = (*b)[b->size() == 1 ? 0 : k];
    // Dim arithmetic is for dims; with a negative integer among the contents the integers are computed (int_op, when
    // both are integers and it does not overflow), else the element is unknown.
    if (IsNegativeContent(x) || IsNegativeContent(y)) {
      const auto cx = ContentValue(x), cy = ContentValue(y);
      const auto v = cx && cy && int_op ? int_op(*cx, *cy) : std::nullopt;
      r[k] = v ? ContentDim(*v) : Dim::Unknown();
    } else {
      r[k] = op(x, y);
    }
  }
  ctx.out(0).sym_value = std::move(r);
}

ShapeFn Arith(Cat c, std::function<Dim(const Dim&, const Dim&)> sym_op,
              std::function<std::optional<int64_t>(int64_t, int64_t)> int_op = nullptr) {
  return [c, sym_op, int_op](InferContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
    KILN_RETURN_IF_ERROR(CheckType(ctx, 0, c));
    KILN_RETURN_IF_ERROR(CheckSameType(ctx, 0, 1));
    KILN_RETURN_IF_ERROR(SetBroadcastOutput(ctx, {0, 1}, ctx.in(0).dtype));
    if (sym_op) PropagateSymArith(ctx, sym_op, int_op);
    return Status::Ok();
  };
}

ShapeFn Compare(Cat c) {
  return [c](InferContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
    KILN_RETURN_IF_ERROR(CheckType(ctx, 0, c));
    KILN_RETURN_IF_ERROR(CheckSameType(ctx, 0, 1));
    return SetBroadcastOutput(ctx, {0, 1}, DataType::kBool);
  };
}

ShapeFn Variadic(Cat c) {
  return [c](InferContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
    std::vector<size_t> all;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i))
        return Err(StatusCode::kInvalidModel, "{}: input {} is missing", ctx.node.Where(), i);
      KILN_RETURN_IF_ERROR(CheckSameType(ctx, 0, i));
      all.push_back(i);
    }
    KILN_RETURN_IF_ERROR(CheckType(ctx, 0, c));
    return SetBroadcastOutput(ctx, all, ctx.in(0).dtype);
  };
}

// BitShift: unsigned integers up to opset 27, every integer type from 28 (signed: an arithmetic right shift);
// `direction` is LEFT or RIGHT.
Status BitShiftShape(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::string dir, ctx.node.attr_string("direction", ""));
  if (dir != "LEFT" && dir != "RIGHT")
    return Err(StatusCode::kInvalidModel, "{}: direction must be LEFT or RIGHT, not '{}'", ctx.node.Where(), dir);
  return Arith(ctx.node.opset >= 28 ? Cat::kInteger : Cat::kUnsigned, nullptr)(ctx);
}

Status PowShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const DataType b = ctx.in(0).dtype;
  if (!(IsPlainFloat(b) || b == DataType::kInt32 || b == DataType::kInt64))
    return Err(StatusCode::kInvalidModel, "{}: Pow base has type {}, expected float16/bfloat16/float/double/"
               "int32/int64", ctx.node.Where(), DataTypeName(b));
  KILN_RETURN_IF_ERROR(CheckType(ctx, 1, Cat::kNumeric));
  return SetBroadcastOutput(ctx, {0, 1}, b);
}

// Mod of two non-negative dims (the only known dims): floored and truncated remainders agree there.
Dim DimMod(const Dim& a, const Dim& b) {
  if (a.known() && b.known() && b.value != 0) return Dim(a.value % b.value);
  if (b.known() && b.value == 1) return Dim(0);
  if (a.same(b) && !a.unknown()) return Dim(0);
  return Dim::Unknown();
}

// Mod (opsets 10, 13): same-type numeric inputs, broadcast; fmod is 0 or 1, and float inputs need fmod=1.
Status ModShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_RETURN_IF_ERROR(CheckType(ctx, 0, Cat::kNumeric));
  KILN_RETURN_IF_ERROR(CheckSameType(ctx, 0, 1));
  KILN_ASSIGN_OR_RETURN(int64_t fmod, ctx.node.attr_int("fmod", 0));
  if (fmod != 0 && fmod != 1)
    return Err(StatusCode::kInvalidModel, "{}: Mod attribute fmod must be 0 or 1, got {}", ctx.node.Where(), fmod);
  if (fmod == 0 && IsPlainFloat(ctx.in(0).dtype) && ctx.node.opset < 28)
    return Err(StatusCode::kInvalidModel, "{}: Mod with float inputs requires fmod=1 before opset 28 (got {} inputs, "
               "fmod=0 at opset {})", ctx.node.Where(), DataTypeName(ctx.in(0).dtype), ctx.node.opset);
  KILN_RETURN_IF_ERROR(SetBroadcastOutput(ctx, {0, 1}, ctx.in(0).dtype));
  PropagateSymArith(ctx, DimMod);
  return Status::Ok();
}

Status ClipShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  KILN_RETURN_IF_ERROR(CheckType(ctx, 0, Cat::kNumeric));
  for (size_t i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const TensorInfo& b = ctx.in(i);
    if (!InCat(b.dtype, Cat::kNumeric))
      return Err(StatusCode::kInvalidModel, "{}: bound input {} has type {}", ctx.node.Where(), i,
                 DataTypeName(b.dtype));
    if (b.has_shape) {
      auto ne = NumElements(b.shape);
      if (ne && *ne != 1)
        return Err(StatusCode::kInvalidModel, "{}: min/max input {} must be a scalar, has shape {}",
                   ctx.node.Where(), i, ShapeToString(b.shape));
    }
  }
  SetSameShape(ctx, 0, ctx.in(0).dtype);
  return Status::Ok();
}

// Equal over shape elements (exporters' expand(-1) handling: Where(Equal(shape, -1), 1, shape)): a dim is never
// negative, equal to itself, and known dims compare; the result is then known (sym_value of 0/1 on a bool output,
// which inference makes a constant).
ShapeFn EqualShape() {
  return [](InferContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(Compare(Cat::kAll)(ctx));
    if (!ctx.in(0).sym_value && !ctx.in(1).sym_value) return Status::Ok();
    // Elements as (constant value) or (dim): constants are read directly, since Dim(-1) reads as unknown.
    struct Elem {
      std::optional<int64_t> c;
      Dim d;
    };
    auto elems = [&](size_t i) -> std::optional<std::vector<Elem>> {
      if (!ctx.has_input(i) || ctx.in(i).dtype != DataType::kInt64) return std::nullopt;
      std::vector<Elem> r;
      if (const Tensor* v = ctx.value(i)) {
        if (v->rank() > 1 || v->numel() > 64) return std::nullopt;
        for (int64_t k = 0; k < v->numel(); ++k) r.push_back({v->GetAsInt(k), Dim()});
      } else if (ctx.in(i).sym_value) {
        for (const Dim& d : *ctx.in(i).sym_value) r.push_back({ContentValue(d), d});
      } else {
        return std::nullopt;
      }
      return r;
    };
    auto a = elems(0);
    auto b = elems(1);
    if (!a || !b || !ctx.out(0).has_shape || ctx.out(0).shape.size() > 1) return Status::Ok();
    const size_t n = std::max(a->size(), b->size());
    if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return Status::Ok();
    std::vector<Dim> r(n);
    for (size_t k = 0; k < n; ++k) {
      const Elem& x = (*a)[a->size() == 1 ? 0 : k];
      const Elem& y = (*b)[b->size() == 1 ? 0 : k];
      if (x.c && y.c) r[k] = Dim(*x.c == *y.c ? 1 : 0);
      else if (!x.c && !y.c && x.d.symbolic() && x.d.same(y.d)) r[k] = Dim(1);
      else if ((!x.c && NonNegativeDim(x.d) && y.c && *y.c < 0) || (!y.c && NonNegativeDim(y.d) && x.c && *x.c < 0))
        r[k] = Dim(0);
      else return Status::Ok();
    }
    ctx.out(0).sym_value = std::move(r);
    return Status::Ok();
  };
}

Status WhereShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_RETURN_IF_ERROR(CheckType(ctx, 0, Cat::kBool));
  KILN_RETURN_IF_ERROR(CheckType(ctx, 1, Cat::kAll));
  KILN_RETURN_IF_ERROR(CheckSameType(ctx, 1, 2));
  KILN_RETURN_IF_ERROR(SetBroadcastOutput(ctx, {0, 1, 2}, ctx.in(1).dtype));
  // A known condition over shape elements picks between their symbolic contents.
  const Tensor* cond = ctx.value(0);
  if (!cond || (!ctx.in(1).sym_value && !ctx.in(2).sym_value)) return Status::Ok();
  auto a = SymElements(ctx, 1);
  auto b = SymElements(ctx, 2);
  if (!a || !b || cond->rank() > 1 || !ctx.out(0).has_shape || ctx.out(0).shape.size() > 1) return Status::Ok();
  const size_t c = static_cast<size_t>(cond->numel());
  const size_t n = std::max({a->size(), b->size(), c});
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1) || (c != n && c != 1))
    return Status::Ok();
  std::vector<Dim> r(n);
  for (size_t k = 0; k < n; ++k)
    r[k] = cond->GetAsInt(c == 1 ? 0 : static_cast<int64_t>(k)) != 0 ? (*a)[a->size() == 1 ? 0 : k]
                                                                      : (*b)[b->size() == 1 ? 0 : k];
  ctx.out(0).sym_value = std::move(r);
  return Status::Ok();
}

Status IsInfShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  KILN_RETURN_IF_ERROR(CheckType(ctx, 0, Cat::kFloat));
  KILN_ASSIGN_OR_RETURN(int64_t neg, ctx.node.attr_int("detect_negative", 1));
  KILN_ASSIGN_OR_RETURN(int64_t pos, ctx.node.attr_int("detect_positive", 1));
  (void)neg;
  (void)pos;
  SetSameShape(ctx, 0, DataType::kBool);
  return Status::Ok();
}

Status GeluShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  KILN_RETURN_IF_ERROR(CheckType(ctx, 0, Cat::kFloat));
  KILN_ASSIGN_OR_RETURN(std::string approx, ctx.node.attr_string("approximate", "none"));
  if (approx != "none" && approx != "tanh")
    return Err(StatusCode::kInvalidModel, "{}: approximate must be 'none' or 'tanh', got '{}'", ctx.node.Where(),
               approx);
  SetSameShape(ctx, 0, ctx.in(0).dtype);
  return Status::Ok();
}

bool IsCastable(DataType t) {
  return InCat(t, Cat::kAll) || t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E4M3FNUZ ||
         t == DataType::kFloat8E5M2 || t == DataType::kFloat8E5M2FNUZ || t == DataType::kFloat4E2M1 ||
         t == DataType::kFloat8E8M0;  // int4/uint4 and int2/uint2: IsIntegerType, in kAll
}

Status CastCommon(InferContext& ctx, DataType to) {
  if (!IsCastable(to))
    return Err(StatusCode::kUnsupported, "{}: cannot cast to type {} ({})", ctx.node.Where(),
               static_cast<int>(to), DataTypeName(to));
  if (!IsCastable(ctx.in(0).dtype))
    return Err(StatusCode::kUnsupported, "{}: cannot cast from type {}", ctx.node.Where(),
               DataTypeName(ctx.in(0).dtype));
  KILN_ASSIGN_OR_RETURN(int64_t sat, ctx.node.attr_int("saturate", 1));
  (void)sat;
  // Cast-24 / CastLike-24: how a cast to float8e8m0 rounds (the other types ignore it).
  KILN_ASSIGN_OR_RETURN(std::string round_mode, ctx.node.attr_string("round_mode", "up"));
  if (round_mode != "up" && round_mode != "down" && round_mode != "nearest")
    return Err(StatusCode::kInvalidModel, "{}: round_mode must be 'up', 'down' or 'nearest', got '{}'",
               ctx.node.Where(), round_mode);
  SetSameShape(ctx, 0, to);
  if (to == DataType::kInt64 && ctx.in(0).sym_value) ctx.out(0).sym_value = ctx.in(0).sym_value;
  return Status::Ok();
}

Status CastShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  if (!ctx.node.has_attr("to"))
    return Err(StatusCode::kInvalidModel, "{}: attribute 'to' is required", ctx.node.Where());
  KILN_ASSIGN_OR_RETURN(int64_t to, ctx.node.attr_int("to", 0));
  return CastCommon(ctx, static_cast<DataType>(to));
}

Status CastLikeShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  return CastCommon(ctx, ctx.in(1).dtype);
}

// BitCast-26: the input's bits read as `to`, a type of the same width; the shape is unchanged.
Status BitCastShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  if (!n.has_attr("to")) return Err(StatusCode::kInvalidModel, "{}: attribute 'to' is required", n.Where());
  KILN_ASSIGN_OR_RETURN(int64_t code, n.attr_int("to", 0));
  const DataType to = static_cast<DataType>(code), from = ctx.in(0).dtype;
  if (!IsSupportedType(to))
    return Err(StatusCode::kUnsupported, "{}: cannot bitcast to type {} ({})", n.Where(), code, DataTypeName(to));
  if (from != DataType::kUndefined && !IsSupportedType(from))
    return Err(StatusCode::kUnsupported, "{}: cannot bitcast from type {}", n.Where(), DataTypeName(from));
  if (from != DataType::kUndefined && ElementBits(from) != ElementBits(to))
    return Err(StatusCode::kInvalidModel, "{}: BitCast needs types of the same width: {} has {} bits, {} has {}",
               n.Where(), DataTypeName(from), ElementBits(from), DataTypeName(to), ElementBits(to));
  SetSameShape(ctx, 0, to);
  return Status::Ok();
}

bool IsFloat8(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2 ||
         t == DataType::kFloat8E5M2FNUZ;
}

// QuantizeLinear's / DequantizeLinear's scale (input 1): float32, float16, bfloat16, float64, or (opset 24) the MX
// scale type float8e8m0.
Status CheckScaleType(const InferContext& ctx) {
  if (ctx.in(1).dtype == DataType::kFloat8E8M0) return Status::Ok();
  return CheckType(ctx, 1, Cat::kFloat);
}

// Checks that a scale / zero point fits x: per tensor, per axis (1-D along `axis`) or blocked.
Status CheckQuantParam(const InferContext& ctx, size_t i, const char* what) {
  const TensorInfo& x = ctx.in(0);
  const TensorInfo& p = ctx.in(i);
  if (!x.has_shape || !p.has_shape) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.attr_int("axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t block, ctx.node.attr_int("block_size", 0));
  auto ne = NumElements(p.shape);
  if (block <= 0 && ((ne && *ne == 1) || p.shape.empty())) return Status::Ok();
  auto axis = NormalizeAxis(axis_attr, x.rank());
  if (!axis)
    return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for input of rank {}", ctx.node.Where(),
               axis_attr, x.rank());
  const Dim& d = x.shape[*axis];
  if (block <= 0) {
    if (p.shape.size() != 1 || (p.shape[0].known() && d.known() && p.shape[0].value != d.value))
      return Err(StatusCode::kInvalidModel, "{}: {} of shape {} does not match axis {} of input {}",
                 ctx.node.Where(), what, ShapeToString(p.shape), *axis, ShapeToString(x.shape));
    return Status::Ok();
  }
  if (p.shape.size() != x.shape.size())
    return Err(StatusCode::kInvalidModel, "{}: blocked {} must have the rank of the input: {} vs {}",
               ctx.node.Where(), what, ShapeToString(p.shape), ShapeToString(x.shape));
  for (size_t k = 0; k < p.shape.size(); ++k) {
    const Dim& pd = p.shape[k];
    const Dim& xd = x.shape[k];
    if (!pd.known() || !xd.known()) continue;
    const int64_t want = static_cast<int64_t>(k) == *axis ? (xd.value + block - 1) / block : xd.value;
    if (pd.value != want)
      return Err(StatusCode::kInvalidModel, "{}: {} of shape {} does not fit blocked quantization of {} "
                 "(block_size {}, axis {})", ctx.node.Where(), what, ShapeToString(p.shape),
                 ShapeToString(x.shape), block, *axis);
  }
  return Status::Ok();
}

Status QuantizeShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const DataType xt = ctx.in(0).dtype;
  if (!(IsPlainFloat(xt) || xt == DataType::kInt32))
    return Err(StatusCode::kInvalidModel, "{}: input has type {}, expected float or int32", ctx.node.Where(),
               DataTypeName(xt));
  KILN_RETURN_IF_ERROR(CheckScaleType(ctx));
  KILN_ASSIGN_OR_RETURN(int64_t out_attr, ctx.node.attr_int("output_dtype", 0));
  KILN_ASSIGN_OR_RETURN(int64_t sat, ctx.node.attr_int("saturate", 1));
  (void)sat;
  KILN_ASSIGN_OR_RETURN(const int64_t precision, ctx.node.attr_int("precision", 0));  // opset 23
  const DataType pt = static_cast<DataType>(precision);
  if (precision != 0 && pt != DataType::kFloat32 && pt != DataType::kFloat16 && pt != DataType::kBFloat16)
    return Err(StatusCode::kUnsupported, "{}: precision {} is not supported: give float (1), float16 (10) or "
               "bfloat16 (16)", ctx.node.Where(), precision);
  DataType out = static_cast<DataType>(out_attr);
  if (ctx.has_input(2)) {
    const DataType zt = ctx.in(2).dtype;
    if (out_attr != 0 && out != zt)
      return Err(StatusCode::kInvalidModel, "{}: output_dtype {} differs from the zero point's type {}",
                 ctx.node.Where(), DataTypeName(out), DataTypeName(zt));
    out = zt;
    KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 2, "zero point"));
  }
  if (out == DataType::kUndefined) out = DataType::kUInt8;
  if (!(out == DataType::kUInt8 || out == DataType::kInt8 || out == DataType::kUInt16 ||
        out == DataType::kInt16 || IsSubByteIntegerType(out) || IsFloat8(out) || out == DataType::kFloat4E2M1))
    return Err(StatusCode::kUnsupported, "{}: quantizing to {} is not supported", ctx.node.Where(),
               DataTypeName(out));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 1, "scale"));
  SetSameShape(ctx, 0, out);
  return Status::Ok();
}

Status DequantizeShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const DataType xt = ctx.in(0).dtype;
  if (!(IsIntegerType(xt) || IsFloat8(xt) || xt == DataType::kFloat4E2M1))
    return Err(StatusCode::kInvalidModel, "{}: input has type {}, expected a quantized integer, float8 or float4e2m1 "
               "type", ctx.node.Where(), DataTypeName(xt));
  KILN_RETURN_IF_ERROR(CheckScaleType(ctx));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 1, "scale"));
  if (ctx.has_input(2)) {
    if (!IsFloat8(xt)) KILN_RETURN_IF_ERROR(CheckSameType(ctx, 0, 2));
    KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 2, "zero point"));
  }
  KILN_ASSIGN_OR_RETURN(const int64_t out_attr, ctx.node.attr_int("output_dtype", 0));  // opset 23
  const DataType out = static_cast<DataType>(out_attr);
  if (out_attr != 0 && out != DataType::kFloat32 && out != DataType::kFloat16 && out != DataType::kBFloat16)
    return Err(StatusCode::kInvalidModel, "{}: output_dtype {} is not float (1), float16 (10) or bfloat16 (16)",
               ctx.node.Where(), out_attr);
  if (out_attr == 0 && ctx.in(1).dtype == DataType::kFloat8E8M0)  // the output takes the scale's type otherwise
    return Err(StatusCode::kInvalidModel, "{}: a float8e8m0 scale needs output_dtype (float, float16 or bfloat16): "
               "the output cannot be float8e8m0", ctx.node.Where());
  SetSameShape(ctx, 0, out_attr != 0 ? out : ctx.in(1).dtype);
  return Status::Ok();
}

// Clip before opset 11 carried min/max as attributes: they become constant inputs 1 and 2, as in later opsets.
Status ConvertClip(ConvertContext& c) {
  if (c.opset >= 11 && !c.node.has_attr("min") && !c.node.has_attr("max")) return Status::Ok();
  const Value* x = c.node.input(0);
  const DataType dt = x ? x->dtype : DataType::kUndefined;
  // Old Clip has exactly one input; the bounds go to slots 1 and 2 (absent bound: input omitted).
  if (c.node.inputs.size() > 1) c.node.inputs.resize(1);
  MoveFloatAttrToInput(c, "min", 1, dt);
  MoveFloatAttrToInput(c, "max", 2, dt);
  return Status::Ok();
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  // unary (x in, same type and shape out): one OpDef per row of KILN_POINTWISE_UNARY_OPS (ops/pointwise_formulas.h),
  // fusable into FusedPointwise chains
  for (const PwOpInfo& p : kPwOps) {
    if (!p.onnx_unary) continue;
    std::vector<const char*> attrs;
    for (const char* a : {p.attr_a, p.attr_b})
      if (*a) attrs.push_back(a);
    const Cat cat = p.types == PwTypes::kSigned    ? Cat::kSigned
                    : p.types == PwTypes::kNumeric ? Cat::kNumeric
                                                   : Cat::kFloat;
    r.Onnx(p.name).Since(p.since).Shape(Unary(cat, std::move(attrs))).LayoutNeutral().Pointwise(p.op, 1);
  }
  r.Onnx("Gelu").Since(20).Shape(GeluShape).LayoutNeutral().Pointwise(PwOp::kGelu, 1);
  r.Onnx("Not").Shape(Unary(Cat::kBool));
  r.Onnx("IsNaN").Since(9).Shape([](InferContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
    KILN_RETURN_IF_ERROR(CheckType(ctx, 0, Cat::kFloat));
    SetSameShape(ctx, 0, DataType::kBool);
    return Status::Ok();
  });
  r.Onnx("IsInf").Since(10).Shape(IsInfShape);
  r.Onnx("Clip").Convert(ConvertClip).Shape(ClipShape).LayoutNeutral().Pointwise(PwOp::kClip, 1);

  // binary and variadic, numpy broadcasting
  // Integer arithmetic of shape contents that hold negative integers (overflow: unknown).
  auto checked = [](bool (*f)(int64_t, int64_t, int64_t*)) {
    return [f](int64_t a, int64_t b) -> std::optional<int64_t> {
      int64_t r = 0;
      if (f(a, b, &r)) return std::nullopt;
      return r;
    };
  };
  auto add = [](int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); };
  auto sub = [](int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); };
  auto mul = [](int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); };
  r.Onnx("Add").Shape(Arith(Cat::kNumeric, DimAdd, checked(add))).LayoutNeutral().Pointwise(PwOp::kAdd, 2);
  r.Onnx("Sub").Shape(Arith(Cat::kNumeric, DimSub, checked(sub))).LayoutNeutral().Pointwise(PwOp::kSub, 2);
  r.Onnx("Mul").Shape(Arith(Cat::kNumeric, DimMul, checked(mul))).LayoutNeutral().Pointwise(PwOp::kMul, 2);
  r.Onnx("Div").Shape(Arith(Cat::kNumeric, DimDiv)).LayoutNeutral().Pointwise(PwOp::kDiv, 2);
  r.Onnx("PRelu").Shape(Arith(Cat::kNumeric, nullptr)).LayoutNeutral().Pointwise(PwOp::kPRelu, 2);
  r.Onnx("Pow").Shape(PowShape).LayoutNeutral().Pointwise(PwOp::kPow, 2);
  // opset 13 only widened Mod's types; fmod (default 0) is read where used
  r.Onnx("Mod").Since(10).Shape(ModShape).LayoutNeutral();
  r.Onnx("Equal").Shape(EqualShape());
  r.Onnx("Less").Shape(Compare(Cat::kNumeric));
  r.Onnx("Greater").Shape(Compare(Cat::kNumeric));
  r.Onnx("LessOrEqual").Since(12).Shape(Compare(Cat::kNumeric));
  r.Onnx("GreaterOrEqual").Since(12).Shape(Compare(Cat::kNumeric));
  for (const char* op : {"And", "Or", "Xor"}) r.Onnx(op).Shape(Compare(Cat::kBool));
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"})
    r.Onnx(op).Since(18).Shape(Arith(Cat::kInteger, nullptr)).LayoutNeutral();
  r.Onnx("BitwiseNot").Since(18).Shape(Unary(Cat::kInteger)).LayoutNeutral();
  r.Onnx("BitShift").Since(11).Shape(BitShiftShape).LayoutNeutral();
  r.Onnx("Where").Since(9).Shape(WhereShape).LayoutNeutral();
  r.Onnx("Min").Shape(Variadic(Cat::kNumeric)).LayoutNeutral().Pointwise(PwOp::kMin, 2);
  r.Onnx("Max").Shape(Variadic(Cat::kNumeric)).LayoutNeutral().Pointwise(PwOp::kMax, 2);
  r.Onnx("Sum").Shape(Variadic(Cat::kFloat)).LayoutNeutral();
  r.Onnx("Mean").Shape(Variadic(Cat::kFloat)).LayoutNeutral();

  // types and quantization: never computed in a reduced float type
  r.Onnx("Cast").Shape(CastShape).LayoutNeutral().KeepsFp32();
  r.Onnx("CastLike").Since(15).Shape(CastLikeShape).KeepsFp32();
  r.Onnx("BitCast").Since(26).Shape(BitCastShape).KeepsFp32();
  r.Onnx("QuantizeLinear").Since(10).Shape(QuantizeShape).KeepsFp32().LayoutNeutralWithScalarParams();
  r.Onnx("DequantizeLinear").Since(10).Shape(DequantizeShape).KeepsFp32().KeepsQuantizedConstant()
      .LayoutNeutralWithScalarParams();
}

}  // namespace kiln
