// Shape inference for the indexing ops: Gather, GatherElements, GatherND, ScatterND, ScatterElements,
// OneHot, NonZero, NonMaxSuppression, RoiAlign, TensorScatter. Gather also propagates symbolic contents of small shape
// tensors
// (Shape -> Gather -> Concat -> Reshape with symbolic dims).
#include <algorithm>
#include <cctype>
#include <string>

#include "core/error.h"
#include "ops/families.h"

namespace kiln {
namespace {

bool IsIndexType(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }

Status CheckIndexType(const InferContext& ctx, size_t i, const char* what) {
  if (!IsIndexType(ctx.in(i).dtype))
    return Err(StatusCode::kInvalidModel, "{}: {} must be int32 or int64, got {}", ctx.node.Where(), what,
               DataTypeName(ctx.in(i).dtype));
  return Status::Ok();
}

// Normalizes `axis` against `rank` or returns an error naming the node.
Result<int64_t> Axis(const InferContext& ctx, int64_t axis, int64_t rank) {
  auto a = NormalizeAxis(axis, rank);
  if (!a)
    return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", ctx.node.Where(), axis, rank);
  return *a;
}

// Checks every element of a known index tensor against [-dim, dim).
Status CheckIndexValues(const InferContext& ctx, const Tensor& idx, const Dim& dim, const char* what) {
  if (!dim.known()) return Status::Ok();
  const int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = idx.GetAsInt(i);
    if (v < -dim.value || v >= dim.value)
      return Err(StatusCode::kOutOfRange, "{}: {} {} (element {}) is out of range for a dimension of size {}",
                 ctx.node.Where(), what, v, i, dim.value);
  }
  return Status::Ok();
}

// Symbolic contents of input i when it is a small 1-D/0-D integer tensor: its sym_value, or its constant value.
std::optional<std::vector<Dim>> SymContents(const InferContext& ctx, size_t i) {
  if (ctx.in(i).sym_value) return ctx.in(i).sym_value;
  const Tensor* t = ctx.value(i);
  if (!t || !IsIndexType(t->dtype()) || t->rank() > 1 || t->numel() > 64) return std::nullopt;
  std::vector<Dim> r;
  for (int64_t k = 0; k < t->numel(); ++k) r.push_back(ContentDim(t->GetAsInt(k)));
  return r;
}

// Gather/GatherElements: checks data (input 0) and integer indices (input 1); returns the axis attribute.
Result<int64_t> GatherAxisAttr(const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_RETURN_IF_ERROR(CheckIndexType(ctx, 1, "indices"));
  return ctx.node.attr_int("axis", 0);
}

Status GatherShape(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, GatherAxisAttr(ctx));
  const TensorInfo& data = ctx.in(0);
  const TensorInfo& idx = ctx.in(1);
  if (!data.has_shape || !idx.has_shape) {
    ctx.set_output_rank_unknown(0, data.dtype);
    return Status::Ok();
  }
  if (data.rank() == 0)
    return Err(StatusCode::kInvalidModel, "{}: data must have rank >= 1", ctx.node.Where());
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, axis_attr, data.rank()));
  if (const Tensor* iv = ctx.value(1)) KILN_RETURN_IF_ERROR(CheckIndexValues(ctx, *iv, data.shape[axis], "index"));
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  ctx.set_output(0, data.dtype, out);

  // Symbolic contents: a 1-D shape tensor gathered with known indices.
  if (data.rank() == 1 && idx.rank() <= 1 && ctx.value(1) && data.dtype == DataType::kInt64) {
    auto src = SymContents(ctx, 0);
    if (src) {
      const Tensor& iv = *ctx.value(1);
      const int64_t n = static_cast<int64_t>(src->size());
      std::vector<Dim> r;
      for (int64_t k = 0; k < iv.numel(); ++k) {
        int64_t j = iv.GetAsInt(k);
        if (j < 0) j += n;
        if (j < 0 || j >= n) return Err(StatusCode::kOutOfRange, "{}: index {} is out of range for {} elements",
                                        ctx.node.Where(), iv.GetAsInt(k), n);
        r.push_back((*src)[j]);
      }
      ctx.out(0).sym_value = std::move(r);
    }
  }
  return Status::Ok();
}

Status GatherElementsShape(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, GatherAxisAttr(ctx));
  const TensorInfo& data = ctx.in(0);
  const TensorInfo& idx = ctx.in(1);
  if (!data.has_shape || !idx.has_shape) {
    ctx.set_output_rank_unknown(0, data.dtype);
    if (idx.has_shape) ctx.set_output(0, data.dtype, idx.shape);
    return Status::Ok();
  }
  if (data.rank() == 0 || data.rank() != idx.rank())
    return Err(StatusCode::kInvalidModel, "{}: data {} and indices {} must have the same rank >= 1",
               ctx.node.Where(), ShapeToString(data.shape), ShapeToString(idx.shape));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, axis_attr, data.rank()));
  if (const Tensor* iv = ctx.value(1)) KILN_RETURN_IF_ERROR(CheckIndexValues(ctx, *iv, data.shape[axis], "index"));
  ctx.set_output(0, data.dtype, idx.shape);
  return Status::Ok();
}

Status GatherNDShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  if (ctx.in(1).dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: indices must be int64, got {}", ctx.node.Where(),
               DataTypeName(ctx.in(1).dtype));
  KILN_ASSIGN_OR_RETURN(int64_t b, ctx.node.attr_int("batch_dims", 0));
  const TensorInfo& data = ctx.in(0);
  const TensorInfo& idx = ctx.in(1);
  if (!data.has_shape || !idx.has_shape || idx.rank() == 0 || !idx.shape.back().known()) {
    if (data.has_shape && idx.has_shape && idx.rank() == 0)
      return Err(StatusCode::kInvalidModel, "{}: indices must have rank >= 1", ctx.node.Where());
    ctx.set_output_rank_unknown(0, data.dtype);
    return Status::Ok();
  }
  const int64_t r = data.rank(), q = idx.rank(), k = idx.shape.back().value;
  if (r < 1 || b < 0 || b >= std::min(r, q))
    return Err(StatusCode::kInvalidModel, "{}: batch_dims {} must be in [0, min(rank(data)={}, rank(indices)={}))",
               ctx.node.Where(), b, r, q);
  if (k < 1 || k > r - b)
    return Err(StatusCode::kInvalidModel, "{}: indices.shape[-1] = {} must be in [1, rank(data) - batch_dims = {}]",
               ctx.node.Where(), k, r - b);
  for (int64_t i = 0; i < b; ++i)
    if (data.shape[i].known() && idx.shape[i].known() && data.shape[i].value != idx.shape[i].value)
      return Err(StatusCode::kInvalidModel, "{}: batch dimension {} differs between data {} and indices {}",
                 ctx.node.Where(), i, ShapeToString(data.shape), ShapeToString(idx.shape));
  Shape out(idx.shape.begin(), idx.shape.end() - 1);
  out.insert(out.end(), data.shape.begin() + b + k, data.shape.end());
  ctx.set_output(0, data.dtype, out);
  return Status::Ok();
}

Status CheckReduction(const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::string red, ctx.node.attr_string("reduction", "none"));
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return Err(StatusCode::kInvalidModel, "{}: unknown reduction '{}' (none, add, mul, max, min)", ctx.node.Where(),
               red);
  return Status::Ok();
}

Status ScatterNDShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_RETURN_IF_ERROR(CheckReduction(ctx));
  if (ctx.in(1).dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: indices must be int64", ctx.node.Where());
  if (ctx.in(2).dtype != ctx.in(0).dtype)
    return Err(StatusCode::kInvalidModel, "{}: updates type {} differs from data type {}", ctx.node.Where(),
               DataTypeName(ctx.in(2).dtype), DataTypeName(ctx.in(0).dtype));
  const TensorInfo& data = ctx.in(0);
  const TensorInfo& idx = ctx.in(1);
  const TensorInfo& upd = ctx.in(2);
  if (data.has_shape && idx.has_shape && upd.has_shape && idx.rank() >= 1 && idx.shape.back().known()) {
    const int64_t k = idx.shape.back().value;
    if (k > data.rank())
      return Err(StatusCode::kInvalidModel, "{}: indices.shape[-1] = {} exceeds rank(data) = {}", ctx.node.Where(), k,
                 data.rank());
    const int64_t expect_rank = idx.rank() - 1 + data.rank() - k;
    if (upd.rank() != expect_rank)
      return Err(StatusCode::kInvalidModel, "{}: updates {} must have rank {} (indices {}, data {})", ctx.node.Where(),
                 ShapeToString(upd.shape), expect_rank, ShapeToString(idx.shape), ShapeToString(data.shape));
  }
  SetOutputLike(ctx, 0, data);
  return Status::Ok();
}

Status ScatterElementsShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_RETURN_IF_ERROR(CheckReduction(ctx));
  KILN_RETURN_IF_ERROR(CheckIndexType(ctx, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.attr_int("axis", 0));
  const TensorInfo& data = ctx.in(0);
  const TensorInfo& idx = ctx.in(1);
  const TensorInfo& upd = ctx.in(2);
  if (upd.dtype != data.dtype)
    return Err(StatusCode::kInvalidModel, "{}: updates type {} differs from data type {}", ctx.node.Where(),
               DataTypeName(upd.dtype), DataTypeName(data.dtype));
  if (data.has_shape) {
    if (data.rank() == 0) return Err(StatusCode::kInvalidModel, "{}: data must have rank >= 1", ctx.node.Where());
    KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, axis_attr, data.rank()));
    if (idx.has_shape && idx.rank() != data.rank())
      return Err(StatusCode::kInvalidModel, "{}: indices {} must have the rank of data {}", ctx.node.Where(),
                 ShapeToString(idx.shape), ShapeToString(data.shape));
    if (idx.has_shape && upd.has_shape) {
      for (int64_t i = 0; i < idx.rank() && i < upd.rank(); ++i)
        if (idx.shape[i].known() && upd.shape[i].known() && idx.shape[i].value != upd.shape[i].value)
          return Err(StatusCode::kInvalidModel, "{}: indices {} and updates {} must have the same shape",
                     ctx.node.Where(), ShapeToString(idx.shape), ShapeToString(upd.shape));
    }
    if (const Tensor* iv = ctx.value(1)) KILN_RETURN_IF_ERROR(CheckIndexValues(ctx, *iv, data.shape[axis], "index"));
    ctx.set_output(0, data.dtype, data.shape);
  } else {
    ctx.set_output_rank_unknown(0, data.dtype);
  }
  return Status::Ok();
}

Status OneHotShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.attr_int("axis", -1));
  const TensorInfo& idx = ctx.in(0);
  const DataType out_type = ctx.in(2).dtype;
  if (ctx.in(1).has_shape && ctx.in(1).rank() > 1)
    return Err(StatusCode::kInvalidModel, "{}: depth must be a scalar or a 1-element tensor", ctx.node.Where());
  if (ctx.in(2).has_shape && (ctx.in(2).rank() != 1 || (ctx.in(2).shape[0].known() && ctx.in(2).shape[0].value != 2)))
    return Err(StatusCode::kInvalidModel, "{}: values must be a 2-element tensor [off, on], got {}",
               ctx.node.Where(), ShapeToString(ctx.in(2).shape));
  if (!idx.has_shape) {
    ctx.set_output_rank_unknown(0, out_type);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, axis_attr, idx.rank() + 1));
  Dim depth = Dim::Unknown();
  if (const Tensor* d = ctx.value(1)) {
    if (d->numel() != 1)
      return Err(StatusCode::kInvalidModel, "{}: depth must hold one value, got {}", ctx.node.Where(), d->Describe());
    const double dv = d->GetAsDouble(0);
    if (!(dv >= 1) || dv > 1e12)
      return Err(StatusCode::kInvalidArgument, "{}: depth must be >= 1, got {}", ctx.node.Where(), dv);
    depth = Dim(static_cast<int64_t>(dv));
  } else if (ctx.in(1).sym_value && ctx.in(1).sym_value->size() == 1 &&
             !IsNegativeContent((*ctx.in(1).sym_value)[0])) {
    depth = (*ctx.in(1).sym_value)[0];
  }
  if (depth.known()) {
    double total = static_cast<double>(depth.value);
    for (const Dim& d : idx.shape) total *= d.known() ? static_cast<double>(d.value) : 1.0;
    if (total > static_cast<double>(int64_t{1} << 40))
      return Err(StatusCode::kInvalidArgument, "{}: depth {} gives a too large output", ctx.node.Where(), depth.value);
  }
  Shape out = idx.shape;
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, out_type, out);
  return Status::Ok();
}

Status NonZeroShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const TensorInfo& x = ctx.in(0);
  if (!x.has_shape) {
    ctx.set_output(0, DataType::kInt64, {Dim::Unknown(), Dim::Unknown()});
    return Status::Ok();
  }
  const int64_t rows = x.rank() == 0 ? 1 : x.rank();  // a scalar is treated as a 1-element vector
  Dim count = Dim::Unknown();
  if (const Tensor* v = ctx.value(0)) {
    int64_t c = 0;
    for (int64_t i = 0; i < v->numel(); ++i) c += v->GetAsDouble(i) != 0.0;
    count = Dim(c);
  }
  ctx.set_output(0, DataType::kInt64, {Dim(rows), count});
  return Status::Ok();
}

Status NonMaxSuppressionShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_ASSIGN_OR_RETURN(int64_t cpb, ctx.node.attr_int("center_point_box", 0));
  if (cpb != 0 && cpb != 1)
    return Err(StatusCode::kInvalidModel, "{}: center_point_box must be 0 or 1, got {}", ctx.node.Where(), cpb);
  const TensorInfo& boxes = ctx.in(0);
  const TensorInfo& scores = ctx.in(1);
  if (!IsFloatType(boxes.dtype) || !IsFloatType(scores.dtype))
    return Err(StatusCode::kInvalidModel, "{}: boxes and scores must be floating point", ctx.node.Where());
  if (boxes.has_shape && (boxes.rank() != 3 || (boxes.shape[2].known() && boxes.shape[2].value != 4)))
    return Err(StatusCode::kInvalidModel, "{}: boxes must have shape [batch, boxes, 4], got {}", ctx.node.Where(),
               ShapeToString(boxes.shape));
  if (scores.has_shape && scores.rank() != 3)
    return Err(StatusCode::kInvalidModel, "{}: scores must have shape [batch, classes, boxes], got {}",
               ctx.node.Where(), ShapeToString(scores.shape));
  if (boxes.has_shape && scores.has_shape) {
    for (auto [bi, si] : {std::pair<int, int>{0, 0}, {1, 2}})
      if (boxes.shape[bi].known() && scores.shape[si].known() && boxes.shape[bi].value != scores.shape[si].value)
        return Err(StatusCode::kInvalidModel, "{}: boxes {} and scores {} disagree on batch or box count",
                   ctx.node.Where(), ShapeToString(boxes.shape), ShapeToString(scores.shape));
  }
  ctx.set_output(0, DataType::kInt64, {Dim::Unknown(), Dim(3)});
  return Status::Ok();
}

// RoiAlign: X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R] -> Y [R, C, output_height, output_width].
// rois may keep float32 where X is reduced (a parameter input: box coordinates need the precision).
Status RoiAlignShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  const TensorInfo& x = ctx.in(0);
  const TensorInfo& rois = ctx.in(1);
  const TensorInfo& bi = ctx.in(2);
  auto is_t1 = [](DataType t) {
    return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 || t == DataType::kBFloat16;
  };
  if (!is_t1(x.dtype) || !is_t1(rois.dtype))
    return Err(StatusCode::kInvalidModel, "{}: X and rois must be float16, bfloat16, float32 or float64, got {} and {}",
               n.Where(), DataTypeName(x.dtype), DataTypeName(rois.dtype));
  KILN_RETURN_IF_ERROR(CheckIndexType(ctx, 2, "batch_indices"));
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return s;
  };
  KILN_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode", "avg"));
  if (lower(mode) != "avg" && lower(mode) != "max")
    return Err(StatusCode::kInvalidModel, "{}: mode must be 'avg' or 'max', got '{}'", n.Where(), mode);
  // Opset 10 had no coordinate_transformation_mode: it behaved as output_half_pixel (the default became half_pixel
  // in opset 16).
  KILN_ASSIGN_OR_RETURN(std::string ctm,
                        n.attr_string("coordinate_transformation_mode",
                                      n.opset != 0 && n.opset < 16 ? "output_half_pixel" : "half_pixel"));
  if (lower(ctm) != "half_pixel" && lower(ctm) != "output_half_pixel")
    return Err(StatusCode::kInvalidModel,
               "{}: coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel', got '{}'", n.Where(),
               ctm);
  KILN_ASSIGN_OR_RETURN(int64_t oh, n.attr_int("output_height", 1));
  KILN_ASSIGN_OR_RETURN(int64_t ow, n.attr_int("output_width", 1));
  KILN_ASSIGN_OR_RETURN(int64_t sr, n.attr_int("sampling_ratio", 0));
  KILN_ASSIGN_OR_RETURN(float scale, n.attr_float("spatial_scale", 1.0f));
  (void)scale;
  if (oh < 1 || ow < 1)
    return Err(StatusCode::kInvalidModel, "{}: output_height and output_width must be >= 1, got {} and {}", n.Where(),
               oh, ow);
  if (sr < 0)
    return Err(StatusCode::kInvalidModel, "{}: sampling_ratio must be >= 0 (0: adaptive), got {}", n.Where(), sr);
  if (x.has_shape && x.rank() != 4)
    return Err(StatusCode::kInvalidModel, "{}: X must be 4-D [N, C, H, W], got {}", n.Where(), ShapeToString(x.shape));
  if (rois.has_shape && (rois.rank() != 2 || (rois.shape[1].known() && rois.shape[1].value != 4)))
    return Err(StatusCode::kInvalidModel, "{}: rois must have shape [num_rois, 4], got {}", n.Where(),
               ShapeToString(rois.shape));
  if (bi.has_shape && bi.rank() != 1)
    return Err(StatusCode::kInvalidModel, "{}: batch_indices must be 1-D [num_rois], got {}", n.Where(),
               ShapeToString(bi.shape));
  Dim r = Dim::Unknown();
  if (rois.has_shape) r = rois.shape[0];
  if (bi.has_shape) {
    if (r.known() && bi.shape[0].known() && r.value != bi.shape[0].value)
      return Err(StatusCode::kInvalidModel, "{}: rois {} and batch_indices {} disagree on the number of rois",
                 n.Where(), ShapeToString(rois.shape), ShapeToString(bi.shape));
    if (!r.known() && !bi.shape[0].unknown()) r = bi.shape[0];
  }
  if (const Tensor* v = ctx.value(2); v && x.has_shape && x.shape[0].known())
    for (int64_t i = 0; i < v->numel(); ++i)
      if (v->GetAsInt(i) < 0 || v->GetAsInt(i) >= x.shape[0].value)
        return Err(StatusCode::kOutOfRange, "{}: batch_indices[{}] = {} is outside [0, {}) (X's batch)", n.Where(), i,
                   v->GetAsInt(i), x.shape[0].value);
  const Dim c = x.has_shape ? x.shape[1] : Dim::Unknown();
  ctx.set_output(0, x.dtype, {r, c, Dim(oh), Dim(ow)});
  return Status::Ok();
}

// TensorScatter-24 (a KV-cache update): past_cache with update's rows written at write_indices along `axis` (not 0, the
// batch); the output is past_cache's type and shape, update differs from it only in the axis dim (not longer).
Status TensorScatterShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_ASSIGN_OR_RETURN(const std::string mode, n.attr_string("mode", "linear"));
  if (mode != "linear" && mode != "circular")
    return Err(StatusCode::kInvalidModel, "{}: mode must be 'linear' or 'circular', got '{}'", n.Where(), mode);
  KILN_ASSIGN_OR_RETURN(const int64_t axis_attr, n.attr_int("axis", -2));
  const TensorInfo& past = ctx.in(0);
  const TensorInfo& update = ctx.in(1);
  if (update.dtype != past.dtype)
    return Err(StatusCode::kInvalidModel, "{}: update is {} but past_cache is {}", n.Where(),
               DataTypeName(update.dtype), DataTypeName(past.dtype));
  if (ctx.has_input(2) && ctx.in(2).dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: write_indices must be int64, got {}", n.Where(),
               DataTypeName(ctx.in(2).dtype));
  if (past.has_shape) {
    const int64_t rank = past.rank();
    const auto axis = NormalizeAxis(axis_attr, rank);
    if (!axis || *axis == 0)
      return Err(StatusCode::kInvalidModel, "{}: axis {} must name a dim of past_cache {} other than 0 (the batch)",
                 n.Where(), axis_attr, ShapeToString(past.shape));
    if (update.has_shape) {
      bool ok = update.rank() == rank;
      for (int64_t d = 0; ok && d < rank; ++d) {
        const Dim &p = past.shape[d], &u = update.shape[d];
        if (p.known() && u.known()) ok = d == *axis ? u.value <= p.value : u.value == p.value;
      }
      if (!ok)
        return Err(StatusCode::kInvalidModel,
                   "{}: update {} must match past_cache {} in every dim but axis {}, and be no longer there",
                   n.Where(), ShapeToString(update.shape), ShapeToString(past.shape), *axis);
    }
    if (ctx.has_input(2) && ctx.in(2).has_shape) {
      const TensorInfo& wi = ctx.in(2);
      if (wi.rank() != 1 || (wi.shape[0].known() && past.shape[0].known() && wi.shape[0].value != past.shape[0].value))
        return Err(StatusCode::kInvalidModel, "{}: write_indices {} must be 1-D with one index per batch ({})",
                   n.Where(), ShapeToString(wi.shape), past.shape[0].ToString());
    }
  }
  SetOutputLike(ctx, 0, past);
  return Status::Ok();
}

}  // namespace

// ---- converters ----
namespace {
// The deprecated opset 9-10 "Scatter" is ScatterElements under another name.
Status ConvertScatter(ConvertContext& c) {
  c.node.op_type = "ScatterElements";
  return Status::Ok();
}
}  // namespace

void RegisterIndexOps(OpRegistry& r) {
  r.Onnx("Gather").Shape(GatherShape);
  r.Onnx("GatherElements").Since(11).Shape(GatherElementsShape);
  r.Onnx("GatherND").Since(11).Shape(GatherNDShape);
  r.Onnx("ScatterND").Since(11).Shape(ScatterNDShape);
  r.Onnx("ScatterElements").Since(11).Shape(ScatterElementsShape);
  // opset 9-10's name for ScatterElements; the converter renames it
  r.Onnx("Scatter").Since(9).Convert(ConvertScatter).Shape(ScatterElementsShape).ImportOnly();
  r.Onnx("OneHot").Since(9).Shape(OneHotShape);
  r.Onnx("NonZero").Since(9).Shape(NonZeroShape).KeepsFp32();
  r.Onnx("NonMaxSuppression").Since(10).Shape(NonMaxSuppressionShape).KeepsFp32();
  // Opset 16 added coordinate_transformation_mode (read by the kernel under the node's opset), 22 bfloat16.
  r.Onnx("RoiAlign").Since(10).Shape(RoiAlignShape).ParameterInputsFrom(1);
  r.Onnx("TensorScatter").Since(24).Shape(TensorScatterShape);
}

}  // namespace kiln
