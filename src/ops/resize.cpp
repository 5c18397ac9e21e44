// Shape inference for Resize (Upsample is rewritten to Resize by its converter). The output size comes from
// `sizes` or floor(scale * input) per axis; with symbolic input dims, integer scales keep the dims symbolic
// (YOLO-style [batch,256,h,w] x2 -> [batch,256,2*h,2*w]).
#include <cmath>
#include <string>

#include "core/error.h"
#include "ops/families.h"
#include "ops/resize_plan.h"

namespace kiln {
namespace {

Status CheckResizeAttrs(const Node& n) {
  KILN_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode", "nearest"));
  KILN_ASSIGN_OR_RETURN(std::string ctm, n.attr_string("coordinate_transformation_mode", "half_pixel"));
  KILN_ASSIGN_OR_RETURN(std::string nearest, n.attr_string("nearest_mode", "round_prefer_floor"));
  KILN_ASSIGN_OR_RETURN(int64_t antialias, n.attr_int("antialias", 0));
  KILN_ASSIGN_OR_RETURN(float a, n.attr_float("cubic_coeff_a", -0.75f));
  KILN_ASSIGN_OR_RETURN(int64_t excl, n.attr_int("exclude_outside", 0));
  KILN_ASSIGN_OR_RETURN(float extrap, n.attr_float("extrapolation_value", 0.f));
  (void)a, (void)excl, (void)extrap;
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return Err(StatusCode::kInvalidModel, "{}: unknown mode '{}' (nearest, linear, cubic)", n.Where(), mode);
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "align_corners" && ctm != "asymmetric" &&
      ctm != "tf_crop_and_resize" && ctm != "half_pixel_symmetric")
    return Err(StatusCode::kInvalidModel, "{}: unknown coordinate_transformation_mode '{}'", n.Where(), ctm);
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" && nearest != "ceil")
    return Err(StatusCode::kInvalidModel, "{}: unknown nearest_mode '{}'", n.Where(), nearest);
  if (antialias != 0 && mode == "nearest")
    return Err(StatusCode::kUnsupported, "{}: antialias is not defined for mode 'nearest'", n.Where());
  return Status::Ok();
}

Status ResizeShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(CheckResizeAttrs(n));
  const TensorInfo& x = ctx.in(0);
  for (size_t i : {1, 2, 3})
    if (ctx.has_input(i) && ctx.in(i).has_shape && ctx.in(i).rank() > 1)
      return Err(StatusCode::kInvalidModel, "{}: input {} (roi/scales/sizes) must be 1-D, got {}", n.Where(), i,
                 ShapeToString(ctx.in(i).shape));
  if (ctx.has_input(3) && ctx.in(3).dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: sizes must be int64", n.Where());
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  if (x.rank() == 0) return Err(StatusCode::kInvalidModel, "{}: X must have rank >= 1", n.Where());
  const Tensor* roi = ctx.value(1);
  const Tensor* scales = ctx.value(2);
  const Tensor* sizes = ctx.value(3);
  // A present operand whose contents are not known yet: is it empty (opset 11's placeholder)?
  auto known_empty = [&](size_t i) {
    return ctx.has_input(i) && ctx.in(i).has_shape && ctx.in(i).rank() == 1 && ctx.in(i).shape[0].known() &&
           ctx.in(i).shape[0].value == 0;
  };
  const bool scales_given = ctx.has_input(2) && !known_empty(2);
  const bool sizes_given = ctx.has_input(3) && !known_empty(3);
  if (!scales_given && !sizes_given)
    return Err(StatusCode::kInvalidModel, "{}: one of 'scales' and 'sizes' must be given", n.Where());

  KILN_ASSIGN_OR_RETURN(std::string ctm, n.attr_string("coordinate_transformation_mode", "half_pixel"));
  const bool roi_ready = roi || ctm != "tf_crop_and_resize";
  if (IsStatic(x.shape) && roi_ready && ((scales_given && scales) || (sizes_given && sizes))) {
    KILN_ASSIGN_OR_RETURN(ResizePlan p, PlanResize(n, ToStatic(x.shape), roi, scales_given ? scales : nullptr,
                                                   sizes_given ? sizes : nullptr));
    ctx.set_output(0, x.dtype, FromStatic(p.out_shape));
    return Status::Ok();
  }

  // Partially known: work axis by axis.
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ResizeAxes(n, x.rank()));
  KILN_ASSIGN_OR_RETURN(std::string policy, n.attr_string("keep_aspect_ratio_policy", "stretch"));
  Shape out = x.shape;
  for (int64_t a : axes) out[a] = Dim::Unknown();
  if (scales_given && scales) {
    if (static_cast<size_t>(scales->numel()) != axes.size())
      return Err(StatusCode::kInvalidModel, "{}: scales has {} elements, expected {}", n.Where(), scales->numel(),
                 axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      const double s = scales->GetAsDouble(static_cast<int64_t>(i));
      if (!(s > 0)) return Err(StatusCode::kInvalidArgument, "{}: scale {} must be positive", n.Where(), s);
      const Dim& d = x.shape[axes[i]];
      if (d.known()) {
        const double o = std::floor(s * static_cast<double>(d.value));
        if (o > 1e12) return Err(StatusCode::kInvalidArgument, "{}: scale {} gives a huge output", n.Where(), s);
        out[axes[i]] = Dim(static_cast<int64_t>(o));
      }
      else if (s == 1.0) out[axes[i]] = d;
      else if (s == std::floor(s) && s < 1e6) out[axes[i]] = DimMul(Dim(static_cast<int64_t>(s)), d);
    }
  } else if (sizes_given && policy == "stretch") {
    std::optional<std::vector<Dim>> sv = ctx.in(3).sym_value;
    if (sv)
      for (Dim& d : *sv)
        if (IsNegativeContent(d)) d = Dim::Unknown();
    if (sizes) {
      sv.emplace();
      for (int64_t i = 0; i < sizes->numel(); ++i) sv->emplace_back(sizes->GetAsInt(i));
    }
    if (sv) {
      if (sv->size() != axes.size())
        return Err(StatusCode::kInvalidModel, "{}: sizes has {} elements, expected {}", n.Where(), sv->size(),
                   axes.size());
      for (size_t i = 0; i < axes.size(); ++i) out[axes[i]] = (*sv)[i];
    }
  }
  ctx.set_output(0, x.dtype, out);
  return Status::Ok();
}

// Upsample is rewritten to Resize by its converter; this covers a node that was not (scales from the
// opset 7 attribute or the opset 9 input): out = floor(in * scale).
Status UpsampleShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const TensorInfo& x = ctx.in(0);
  std::vector<double> scales;
  if (ctx.node.has_attr("scales")) {
    KILN_ASSIGN_OR_RETURN(std::vector<float> s, ctx.node.attr_floats("scales"));
    scales.assign(s.begin(), s.end());
  } else if (const Tensor* t = ctx.value(1)) {
    for (int64_t i = 0; i < t->numel(); ++i) scales.push_back(t->GetAsDouble(i));
  }
  if (!x.has_shape) {
    ctx.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  Shape out(x.shape.size(), Dim::Unknown());
  if (!scales.empty()) {
    if (static_cast<int64_t>(scales.size()) != x.rank())
      return Err(StatusCode::kInvalidModel, "{}: scales has {} elements for an input of rank {}", ctx.node.Where(),
                 scales.size(), x.rank());
    for (size_t i = 0; i < out.size(); ++i) {
      if (!(scales[i] > 0)) return Err(StatusCode::kInvalidModel, "{}: scales must be positive", ctx.node.Where());
      if (x.shape[i].known() && scales[i] * x.shape[i].value < 1e12)
        out[i] = Dim(static_cast<int64_t>(std::floor(scales[i] * x.shape[i].value)));
      else if (scales[i] == 1.0) out[i] = x.shape[i];
    }
  }
  ctx.set_output(0, x.dtype, out);
  return Status::Ok();
}

}  // namespace

// ---- converters ----
// Converters for Resize and Upsample. Both end as Resize with inputs (X, roi, scales, sizes):
//  - Resize-10 (X, scales) moves scales to slot 2 and spells out its fixed behaviour (asymmetric
//    coordinates, nearest rounds down);
//  - Upsample-7 (scales attribute) and Upsample-9 (scales input) become Resize with asymmetric coordinates
//    and nearest_mode floor (output(i) = input(floor(i / scale))).
namespace {

Status ConvertResize(ConvertContext& c) {
  Node& n = c.node;
  const int64_t opset = n.opset > 0 ? n.opset : c.opset;
  if (opset < 11) {
    if (n.inputs.size() < 2 || !n.inputs[1])
      return Err(StatusCode::kInvalidModel, "{}: Resize-10 needs inputs (X, scales)", n.Where());
    Value* scales = n.inputs[1];
    n.inputs.resize(1);
    SetInput(n, 1, nullptr);
    SetInput(n, 2, scales);
    n.attrs["coordinate_transformation_mode"] = Attribute::String("asymmetric");
    n.attrs["nearest_mode"] = Attribute::String("floor");
  }
  return Status::Ok();
}

Status ConvertUpsample(ConvertContext& c) {
  Node& n = c.node;
  const int64_t opset = n.opset > 0 ? n.opset : c.opset;
  std::string mode = n.gets("mode", "nearest");
  if (mode == "bilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear")
    return Err(StatusCode::kUnsupported, "{}: Upsample mode '{}' is not supported (nearest, linear)", n.Where(), mode);
  Value* scales = nullptr;
  if (opset < 9 || n.has_attr("scales")) {
    auto it = n.attrs.find("scales");
    if (it == n.attrs.end() || it->second.kind != Attribute::Kind::kFloats)
      return Err(StatusCode::kInvalidModel, "{}: Upsample-{} needs a 'scales' float-list attribute", n.Where(), opset);
    std::vector<float> s = it->second.floats;
    n.attrs.erase(it);
    scales = c.graph.AddConstant(n.name + "_scales", Tensor::FromFloat(s, {static_cast<int64_t>(s.size())}));
  } else {
    if (n.inputs.size() < 2 || !n.inputs[1])
      return Err(StatusCode::kInvalidModel, "{}: Upsample-9 needs inputs (X, scales)", n.Where());
    scales = n.inputs[1];
  }
  n.op_type = "Resize";
  n.inputs.resize(1);
  SetInput(n, 1, nullptr);
  SetInput(n, 2, scales);
  n.attrs.clear();
  n.attrs["mode"] = Attribute::String(mode);
  n.attrs["coordinate_transformation_mode"] = Attribute::String("asymmetric");
  n.attrs["nearest_mode"] = Attribute::String("floor");
  return Status::Ok();
}

}  // namespace

namespace {

// GridSample: X [N, C, D1..Dr] sampled at grid [N, H1..Hr, r] gives Y [N, C, H1..Hr].
Status GridSampleShape(InferContext& c) {
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  const TensorInfo& x = c.in(0);
  const TensorInfo& g = c.in(1);
  for (const TensorInfo* t : {&x, &g})
    if (t->dtype != DataType::kUndefined && !IsFloatType(t->dtype))
      return Err(StatusCode::kInvalidModel, "{}: X and grid must be float types, got {}", c.node.Where(),
                 DataTypeName(t->dtype));
  const std::string mode = c.node.gets("mode", c.node.opset >= 20 ? "linear" : "bilinear");
  if (mode != "linear" && mode != "bilinear" && mode != "nearest" && mode != "cubic" && mode != "bicubic")
    return Err(StatusCode::kInvalidModel, "{}: mode '{}' is not linear, nearest or cubic", c.node.Where(), mode);
  const std::string pad = c.node.gets("padding_mode", "zeros");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    return Err(StatusCode::kInvalidModel, "{}: padding_mode '{}' is not zeros, border or reflection", c.node.Where(),
               pad);
  if (!x.has_shape || !g.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  if (x.rank() < 3 || g.rank() != x.rank())
    return Err(StatusCode::kInvalidModel, "{}: X {} and grid {} must be [N, C, spatial...] and [N, spatial..., r]",
               c.node.Where(), ShapeToString(x.shape), ShapeToString(g.shape));
  if (g.shape.back().known() && g.shape.back().value != static_cast<int64_t>(x.rank()) - 2)
    return Err(StatusCode::kInvalidModel, "{}: grid's last dim must be {} (the spatial rank), got {}", c.node.Where(),
               x.rank() - 2, g.shape.back().value);
  Shape out = {x.shape[0], x.shape[1]};
  out.insert(out.end(), g.shape.begin() + 1, g.shape.end() - 1);
  c.set_output(0, x.dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterResizeOps(OpRegistry& r) {
  r.Onnx("GridSample").Since(16).Shape(GridSampleShape);
  // roi and scales are parameters: they stay float32 in an FP16/BF16 engine
  r.Onnx("Resize").Since(10).Convert(ConvertResize).Shape(ResizeShape).ParameterInputsFrom(1);
  r.Onnx("Upsample").Since(7).Convert(ConvertUpsample).Shape(UpsampleShape).ParameterInputsFrom(1).ImportOnly();
}

}  // namespace kiln
