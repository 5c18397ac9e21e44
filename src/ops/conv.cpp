// Shape functions of the convolution family: Conv, ConvTranspose, DeformConv, ConvInteger, QLinearConv, MaxPool (with
// Indices), AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool. Geometry lives in conv_geometry.cpp.
#include <cmath>
#include <cstdint>
#include "core/error.h"
#include "ops/conv_geometry.h"
#include "ops/families.h"

namespace kiln {

namespace {

Status CheckFloat(const InferContext& ctx, size_t i, bool allow_int8) {
  const DataType t = ctx.in(i).dtype;
  const bool ok = t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
                  t == DataType::kBFloat16 || (allow_int8 && (t == DataType::kInt8 || t == DataType::kUInt8));
  if (!ok)
    return Err(StatusCode::kInvalidModel, "{}: input {} has element type {}, which this op does not accept",
               ctx.node.Where(), i, DataTypeName(t));
  return Status::Ok();
}

Status CheckRankAtLeast3(const InferContext& ctx, size_t i) {
  if (ctx.in(i).has_shape && ctx.in(i).rank() < 3)
    return Err(StatusCode::kInvalidModel, "{}: input {} must have rank >= 3 ([N, C, spatial...]), got {}",
               ctx.node.Where(), i, ShapeToString(ctx.in(i).shape));
  return Status::Ok();
}

// The output of a convolution (transposed or not) of X (input xi) by W (input wi) with bias input bi (when present),
// of element type out_type: checks the shapes against each other and the window attributes.
Status ConvGeometry(InferContext& ctx, bool transpose, size_t xi, size_t wi, size_t bi, DataType out_type) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, xi));
  KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, wi));
  const TensorInfo& x = ctx.in(xi);
  const TensorInfo& w = ctx.in(wi);
  if (!x.has_shape && !w.has_shape) {
    ctx.set_output_rank_unknown(0, out_type);
    return Status::Ok();
  }
  const int64_t rank = x.has_shape ? x.rank() : w.rank();
  if (x.has_shape && w.has_shape && w.rank() != x.rank())
    return Err(StatusCode::kInvalidModel, "{}: W has rank {} but X has rank {}; they must match", n.Where(), w.rank(),
               x.rank());
  const int64_t nsp = rank - 2;
  std::vector<int64_t> kw(nsp, -1);
  if (w.has_shape)
    for (int64_t i = 0; i < nsp; ++i) kw[i] = w.shape[2 + i].known() ? w.shape[2 + i].value : -1;
  bool kernel_known = true;
  for (int64_t k : kw) kernel_known &= k >= 0;
  std::vector<int64_t> kdefault = kernel_known ? kw : std::vector<int64_t>{};
  if (!n.has_attr("kernel_shape") && !kernel_known) {
    // Rank is known, the spatial extent is not (W's kernel dims are symbolic or unknown).
    Shape out(rank, Dim::Unknown());
    if (x.has_shape) out[0] = x.shape[0];
    if (w.has_shape) out[1] = transpose ? Dim::Unknown() : w.shape[0];
    ctx.set_output(0, out_type, out);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(n, nsp, kernel_known ? kw : kdefault, transpose));
  const int64_t g = p.group;
  // Channel checks.
  const Dim cx = x.has_shape ? x.shape[1] : Dim::Unknown();
  const Dim w0 = w.has_shape ? w.shape[0] : Dim::Unknown();
  const Dim w1 = w.has_shape ? w.shape[1] : Dim::Unknown();
  Dim cout;
  if (!transpose) {
    // X [N, C, ...], W [M, C/group, ...]
    if (cx.known() && w1.known() && cx.value != w1.value * g)
      return Err(StatusCode::kInvalidModel,
                 "{}: X has {} channels but W expects {} (W dim 1 = {} times group = {})", n.Where(), cx.value,
                 w1.value * g, w1.value, g);
    if (cx.known() && cx.value % g != 0)
      return Err(StatusCode::kInvalidModel, "{}: {} input channels are not divisible by group {}", n.Where(),
                 cx.value, g);
    if (w0.known() && w0.value % g != 0)
      return Err(StatusCode::kInvalidModel, "{}: {} output channels (W dim 0) are not divisible by group {}",
                 n.Where(), w0.value, g);
    cout = w0;
  } else {
    // X [N, C, ...], W [C, M/group, ...]
    if (cx.known() && w0.known() && cx.value != w0.value)
      return Err(StatusCode::kInvalidModel, "{}: X has {} channels but W dim 0 is {}; they must match", n.Where(),
                 cx.value, w0.value);
    if (w0.known() && w0.value % g != 0)
      return Err(StatusCode::kInvalidModel, "{}: {} input channels are not divisible by group {}", n.Where(),
                 w0.value, g);
    cout = DimMul(w1, Dim(g));
  }
  if (ctx.has_input(bi)) {
    const TensorInfo& b = ctx.in(bi);
    if (b.has_shape && (b.rank() != 1 || (b.shape[0].known() && cout.known() && b.shape[0].value != cout.value)))
      return Err(StatusCode::kInvalidModel, "{}: bias B must be 1-D of size {}, got {}", n.Where(), cout.ToString(),
                 ShapeToString(b.shape));
  }
  Shape out(rank);
  out[0] = x.has_shape ? x.shape[0] : Dim::Unknown();
  out[1] = cout;
  std::vector<Dim> in_sp(nsp, Dim::Unknown());
  if (x.has_shape) in_sp.assign(x.shape.begin() + 2, x.shape.end());
  std::vector<Dim> osp;
  if (transpose) {
    KILN_ASSIGN_OR_RETURN(osp, TransposeOutputDims(n, p, in_sp));
  } else {
    KILN_ASSIGN_OR_RETURN(osp, ForwardOutputDims(n, p, in_sp));
  }
  for (int64_t i = 0; i < nsp; ++i) out[2 + i] = osp[i];
  ctx.set_output(0, out_type, out);
  return Status::Ok();
}

// Shared by Conv and ConvTranspose: X, W and B of one float type.
Status ConvLike(InferContext& ctx, bool transpose) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_RETURN_IF_ERROR(CheckFloat(ctx, 0, false));
  const TensorInfo& x = ctx.in(0);
  const TensorInfo& w = ctx.in(1);
  if (w.dtype != x.dtype)
    return Err(StatusCode::kInvalidModel, "{}: W has element type {} but X has {}", n.Where(), DataTypeName(w.dtype),
               DataTypeName(x.dtype));
  if (ctx.has_input(2) && ctx.in(2).dtype != x.dtype)
    return Err(StatusCode::kInvalidModel, "{}: B has element type {} but X has {}", n.Where(),
               DataTypeName(ctx.in(2).dtype), DataTypeName(x.dtype));
  return ConvGeometry(ctx, transpose, 0, 1, 2, x.dtype);
}

bool Is8BitInt(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

// Input i is int8 or uint8 (with want: of that type).
Status Check8Bit(const InferContext& ctx, size_t i, const char* what, DataType want = DataType::kUndefined) {
  const DataType t = ctx.in(i).dtype;
  if (!Is8BitInt(t) || (want != DataType::kUndefined && t != want))
    return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must be {}, got {}", ctx.node.Where(), what, i,
               want == DataType::kUndefined ? "int8 or uint8" : DataTypeName(want), DataTypeName(t));
  return Status::Ok();
}

// Input i is a scalar or a one-element tensor (a per-tensor quantization parameter).
Status CheckPerTensor(const InferContext& ctx, size_t i, const char* what) {
  const TensorInfo& t = ctx.in(i);
  if (!t.has_shape) return Status::Ok();
  const auto ne = NumElements(t.shape);
  if (t.rank() > 1 || (ne && *ne != 1))
    return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must be a scalar (per-tensor), got shape {}",
               ctx.node.Where(), what, i, ShapeToString(t.shape));
  return Status::Ok();
}

// DeformConv: X [N, C, D1..Dn], W [M, C/group, k1..kn], offset [N, offset_group * K * n, O1..On] (K = k1 * ... * kn),
// optional B [M] and mask [N, offset_group * K, O1..On] -> Y [N, M, O1..On], O the window geometry of Conv (no
// auto_pad). Where X's spatial size is unknown, offset's gives O.
Status DeformConvShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  for (size_t i = 0; i < 5; ++i) {
    if (!ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(CheckFloat(ctx, i, false));
    if (ctx.in(i).dtype != ctx.in(0).dtype)
      return Err(StatusCode::kInvalidModel, "{}: input {} has element type {} but X has {}; they must match", n.Where(),
                 i, DataTypeName(ctx.in(i).dtype), DataTypeName(ctx.in(0).dtype));
  }
  const TensorInfo& x = ctx.in(0);
  const TensorInfo& w = ctx.in(1);
  const TensorInfo& off = ctx.in(2);
  const TensorInfo* b = ctx.has_input(3) ? &ctx.in(3) : nullptr;
  const TensorInfo* mask = ctx.has_input(4) ? &ctx.in(4) : nullptr;
  KILN_ASSIGN_OR_RETURN(int64_t og, n.attr_int("offset_group", 1));
  if (og < 1) return Err(StatusCode::kInvalidModel, "{}: offset_group must be >= 1, got {}", n.Where(), og);
  int64_t rank = -1;
  for (const TensorInfo* t : {&x, &w, &off, mask}) {
    if (!t || !t->has_shape) continue;
    if (t->rank() < 3)
      return Err(StatusCode::kInvalidModel, "{}: X, W, offset and mask must have rank >= 3, got {}", n.Where(),
                 ShapeToString(t->shape));
    if (rank >= 0 && t->rank() != rank)
      return Err(StatusCode::kInvalidModel, "{}: X, W, offset and mask must have one rank, got {} and {}", n.Where(),
                 rank, t->rank());
    rank = t->rank();
  }
  if (b && b->has_shape && b->rank() != 1)
    return Err(StatusCode::kInvalidModel, "{}: bias B must be 1-D [M], got {}", n.Where(), ShapeToString(b->shape));
  if (rank < 0) {
    ctx.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  const int64_t nsp = rank - 2;
  auto dim = [](const TensorInfo& t, int64_t i) { return t.has_shape ? t.shape[i] : Dim::Unknown(); };
  auto differ = [](const Dim& a, const Dim& c) { return a.known() && c.known() && a.value != c.value; };
  std::vector<int64_t> kw(nsp, -1);
  for (int64_t i = 0; i < nsp; ++i)
    if (dim(w, 2 + i).known()) kw[i] = dim(w, 2 + i).value;
  bool kernel_known = true;
  for (int64_t k : kw) kernel_known &= k >= 0;
  // Output dims: [N, M, spatial...]; spatial from the geometry where it is known, else from offset.
  Shape out(rank, Dim::Unknown());
  out[0] = dim(x, 0).unknown() ? dim(off, 0) : dim(x, 0);
  out[1] = dim(w, 0);
  for (int64_t i = 0; i < nsp; ++i) out[2 + i] = dim(off, 2 + i);
  if (n.has_attr("kernel_shape") || kernel_known) {
    KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(n, nsp, kw, false));
    if (p.auto_pad != "NOTSET" || p.ceil_mode)
      return Err(StatusCode::kInvalidModel, "{}: DeformConv has no auto_pad or ceil_mode", n.Where());
    const int64_t g = p.group;
    const Dim cx = dim(x, 1), w0 = dim(w, 0), w1 = dim(w, 1);
    if (cx.known() && w1.known() && cx.value != w1.value * g)
      return Err(StatusCode::kInvalidModel, "{}: X has {} channels but W expects {} (W dim 1 = {} times group = {})",
                 n.Where(), cx.value, w1.value * g, w1.value, g);
    if (w0.known() && w0.value % g != 0)
      return Err(StatusCode::kInvalidModel, "{}: {} output channels (W dim 0) are not divisible by group {}", n.Where(),
                 w0.value, g);
    if (cx.known() && cx.value % og != 0)
      return Err(StatusCode::kInvalidModel, "{}: {} input channels are not divisible by offset_group {}", n.Where(),
                 cx.value, og);
    int64_t kpoints = 1;
    for (int64_t k : p.kernel) kpoints *= k;
    if (differ(dim(off, 1), Dim(og * kpoints * nsp)))
      return Err(StatusCode::kInvalidModel,
                 "{}: offset has {} channels, expected offset_group * kernel points * spatial dims = {} * {} * {}",
                 n.Where(), dim(off, 1).value, og, kpoints, nsp);
    if (mask && differ(dim(*mask, 1), Dim(og * kpoints)))
      return Err(StatusCode::kInvalidModel, "{}: mask has {} channels, expected offset_group * kernel points = {} * {}",
                 n.Where(), dim(*mask, 1).value, og, kpoints);
    std::vector<Dim> in_sp(nsp, Dim::Unknown());
    for (int64_t i = 0; i < nsp; ++i) in_sp[i] = dim(x, 2 + i);
    KILN_ASSIGN_OR_RETURN(auto osp, ForwardOutputDims(n, p, in_sp));
    for (int64_t i = 0; i < nsp; ++i)
      if (!osp[i].unknown() && !(osp[i].symbolic() && out[2 + i].known())) out[2 + i] = osp[i];
  }
  if (b && b->has_shape && differ(b->shape[0], out[1]))
    return Err(StatusCode::kInvalidModel, "{}: bias B has {} values but W has {} output channels", n.Where(),
               b->shape[0].value, out[1].value);
  // offset and mask cover the output: [N, ..., O1..On].
  for (const TensorInfo* t : {&off, mask}) {
    if (!t || !t->has_shape) continue;
    bool bad = differ(t->shape[0], out[0]);
    for (int64_t i = 0; i < nsp; ++i) bad |= differ(t->shape[2 + i], out[2 + i]);
    if (bad)
      return Err(StatusCode::kInvalidModel,
                 "{}: {} {} does not cover the output {} (batch and spatial dims must match)", n.Where(),
                 t == &off ? "offset" : "mask", ShapeToString(t->shape), ShapeToString(out));
  }
  ctx.set_output(0, x.dtype, out);
  return Status::Ok();
}

// Input i is a scalar or a 1-D tensor of one value per output channel (W's dim 0).
Status CheckPerChannel(const InferContext& ctx, size_t i, size_t wi, const char* what) {
  const TensorInfo& t = ctx.in(i);
  if (!t.has_shape) return Status::Ok();
  const Dim m = ctx.in(wi).has_shape && ctx.in(wi).rank() > 0 ? ctx.in(wi).shape[0] : Dim::Unknown();
  const bool ok = t.rank() == 0 || (t.rank() == 1 && (!t.shape[0].known() || t.shape[0].value == 1 ||
                                                      !m.known() || t.shape[0].value == m.value));
  if (!ok)
    return Err(StatusCode::kInvalidModel,
               "{}: {} (input {}) must be a scalar or 1-D with one value per output channel ({}), got shape {}",
               ctx.node.Where(), what, i, m.ToString(), ShapeToString(t.shape));
  return Status::Ok();
}

// ConvInteger(x, w, x_zero_point?, w_zero_point?): 8-bit operands, an int32 result.
Status ConvIntegerShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_RETURN_IF_ERROR(Check8Bit(ctx, 0, "x"));
  KILN_RETURN_IF_ERROR(Check8Bit(ctx, 1, "w"));
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(Check8Bit(ctx, 2, "x_zero_point", ctx.in(0).dtype));
    KILN_RETURN_IF_ERROR(CheckPerTensor(ctx, 2, "x_zero_point"));
  }
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(Check8Bit(ctx, 3, "w_zero_point", ctx.in(1).dtype));
    KILN_RETURN_IF_ERROR(CheckPerChannel(ctx, 3, 1, "w_zero_point"));
  }
  return ConvGeometry(ctx, false, 0, 1, SIZE_MAX, DataType::kInt32);
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B?): y of y_zero_point's
// type; w's scale and zero point per tensor or per output channel, B int32 per output channel.
Status QLinearConvShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 8));  // all but B
  KILN_RETURN_IF_ERROR(Check8Bit(ctx, 0, "x"));
  KILN_RETURN_IF_ERROR(Check8Bit(ctx, 3, "w"));
  KILN_RETURN_IF_ERROR(Check8Bit(ctx, 2, "x_zero_point", ctx.in(0).dtype));
  KILN_RETURN_IF_ERROR(Check8Bit(ctx, 5, "w_zero_point", ctx.in(3).dtype));
  KILN_RETURN_IF_ERROR(Check8Bit(ctx, 7, "y_zero_point"));
  for (size_t i : {1, 4, 6})
    if (ctx.in(i).dtype != DataType::kFloat32)
      return Err(StatusCode::kInvalidModel, "{}: the scales must be float32, input {} is {}", n.Where(), i,
                 DataTypeName(ctx.in(i).dtype));
  KILN_RETURN_IF_ERROR(CheckPerTensor(ctx, 1, "x_scale"));
  KILN_RETURN_IF_ERROR(CheckPerTensor(ctx, 2, "x_zero_point"));
  KILN_RETURN_IF_ERROR(CheckPerChannel(ctx, 4, 3, "w_scale"));
  KILN_RETURN_IF_ERROR(CheckPerChannel(ctx, 5, 3, "w_zero_point"));
  KILN_RETURN_IF_ERROR(CheckPerTensor(ctx, 6, "y_scale"));
  KILN_RETURN_IF_ERROR(CheckPerTensor(ctx, 7, "y_zero_point"));
  if (ctx.has_input(8) && ctx.in(8).dtype != DataType::kInt32)
    return Err(StatusCode::kInvalidModel, "{}: B (input 8) must be int32, got {}", n.Where(),
               DataTypeName(ctx.in(8).dtype));
  return ConvGeometry(ctx, false, 0, 3, 8, ctx.in(7).dtype);
}

Status Pool(InferContext& ctx, bool allow_int8, bool is_max) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  KILN_RETURN_IF_ERROR(CheckFloat(ctx, 0, allow_int8));
  KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, 0));
  const TensorInfo& x = ctx.in(0);
  if (is_max) {
    KILN_ASSIGN_OR_RETURN(int64_t so, n.attr_int("storage_order", 0));
    if (so != 0 && so != 1)
      return Err(StatusCode::kInvalidModel, "{}: storage_order must be 0 or 1, got {}", n.Where(), so);
  }
  if (n.op_type == "LpPool") {
    KILN_ASSIGN_OR_RETURN(int64_t pv, n.attr_int("p", 2));
    (void)pv;
  }
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, x.dtype);
    if (ctx.outputs.size() > 1) ctx.set_output_rank_unknown(1, DataType::kInt64);
    return Status::Ok();
  }
  const int64_t nsp = x.rank() - 2;
  KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(n, nsp, {}, false));
  // A pad as wide as the window leaves windows with no input at all (onnxruntime refuses these too).
  for (int64_t i = 0; i < nsp && static_cast<size_t>(i + nsp) < p.pads.size(); ++i)
    if (p.pads[i] >= p.kernel[i] || p.pads[i + nsp] >= p.kernel[i])
      return Err(StatusCode::kInvalidModel, "{}: pads {} must be smaller than kernel_shape {} in every dim",
                 n.Where(), p.pads, p.kernel);
  std::vector<Dim> in_sp(x.shape.begin() + 2, x.shape.end());
  KILN_ASSIGN_OR_RETURN(auto osp, ForwardOutputDims(n, p, in_sp));
  Shape out{x.shape[0], x.shape[1]};
  out.insert(out.end(), osp.begin(), osp.end());
  ctx.set_output(0, x.dtype, out);
  if (ctx.outputs.size() > 1 && n.output(1)) ctx.set_output(1, DataType::kInt64, out);
  return Status::Ok();
}

Status GlobalPool(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  KILN_RETURN_IF_ERROR(CheckFloat(ctx, 0, false));
  KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, 0));
  const TensorInfo& x = ctx.in(0);
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  Shape out{x.shape[0], x.shape[1]};
  for (int64_t i = 2; i < x.rank(); ++i) out.emplace_back(1);
  ctx.set_output(0, x.dtype, out);
  return Status::Ok();
}

// kiln_layout = "NHWC" (layout planning, src/plan/layout.h): X and Y are [N,H,W,C]; the NCHW function runs on
// X's permuted shape and Y's shapes are permuted back.
ShapeFn ChannelsLast(ShapeFn fn) {
  return [fn](InferContext& ctx) -> Status {
    const std::string layout = ctx.node.gets("kiln_layout", "NCHW");
    if (layout == "NCHW") return fn(ctx);
    if (layout != "NHWC")
      return Err(StatusCode::kInvalidModel, "{}: kiln_layout must be NCHW or NHWC, got '{}'", ctx.node.Where(),
                 layout);
    if (!ctx.has_input(0) || !ctx.in(0).has_shape || ctx.in(0).rank() != 4)
      return Err(StatusCode::kInvalidModel, "{}: kiln_layout NHWC needs X of rank 4 ([N,H,W,C])", ctx.node.Where());
    const Shape x = ctx.inputs[0]->shape;
    ctx.inputs[0]->shape = {x[0], x[3], x[1], x[2]};
    Status st = fn(ctx);
    ctx.inputs[0]->shape = x;
    KILN_RETURN_IF_ERROR(st);
    for (TensorInfo& o : ctx.outputs)
      if (o.has_shape && o.shape.size() == 4) o.shape = {o.shape[0], o.shape[2], o.shape[3], o.shape[1]};
    return Status::Ok();
  };
}

}  // namespace

// ---- converters ----
// Converters of the convolution/pooling family. All of these keep their attribute form across opsets; the
// kernels read defaults themselves. LpPool-1 gave `p` as a float; it becomes the int of later opsets.
namespace {

Status ConvertLpPool(ConvertContext& c) {
  auto it = c.node.attrs.find("p");
  if (it != c.node.attrs.end() && it->second.kind == Attribute::Kind::kFloat)
    it->second = Attribute::Int(static_cast<int64_t>(std::lround(it->second.f)));
  return Status::Ok();
}

}  // namespace

void RegisterConvOps(OpRegistry& r) {
  r.Onnx("Conv").Shape(ChannelsLast([](InferContext& c) { return ConvLike(c, false); })).Int8Layer();
  r.Onnx("ConvTranspose").Shape([](InferContext& c) { return ConvLike(c, true); });
  r.Onnx("DeformConv").Since(19).Shape(DeformConvShape);  // 22 adds bfloat16
  r.Onnx("ConvInteger").Since(10).Shape(ConvIntegerShape);
  r.Onnx("QLinearConv").Since(10).Shape(QLinearConvShape);
  r.Onnx("MaxPool").Shape(ChannelsLast([](InferContext& c) { return Pool(c, true, true); }));
  r.Onnx("AveragePool").Shape(ChannelsLast([](InferContext& c) { return Pool(c, false, false); }));
  r.Onnx("LpPool").Convert(ConvertLpPool).Shape([](InferContext& c) { return Pool(c, false, false); });
  r.Onnx("GlobalAveragePool").Shape(GlobalPool);
  r.Onnx("GlobalMaxPool").Shape(GlobalPool);
  r.Onnx("GlobalLpPool").Convert(ConvertLpPool).Shape(GlobalPool);
}

}  // namespace kiln
