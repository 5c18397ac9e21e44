// CUDA layer of Resize (kernels in resize.cu). The per-axis geometry comes from shape/resize_plan.h, the same
// plan the CPU reference uses, computed at every Enqueue from the input shape and the host copies of roi, scales
// and sizes (constants, or small integer tensors the runtime mirrors on the host).
#include <cstring>
#include <memory>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/index_layer_util.h"
#include "backends/cuda/resize_kernels.h"
#include "ops/resize_plan.h"

namespace kiln::cuda {

void RegisterResizeLayers(LayerRegistry& r);

namespace {

class ResizeLayer : public Layer {
 public:
  ResizeLayer(Node attrs, ResizeParams base) : node_(std::move(attrs)), base_(base) {}

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const DeviceTensor& x = in[0];
    const std::string where = node_.Where();
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    if (rank == 0) return Err(StatusCode::kInvalidArgument, "{}: X must have rank >= 1", where);
    if (rank > kResizeMaxRank)
      return Err(StatusCode::kUnsupported, "{}: rank {} is above the CUDA kernel's {}", where, rank, kResizeMaxRank);
    // roi, scales, sizes: they must be known on the host (a present input without a host copy is an error).
    const Tensor* operands[3] = {nullptr, nullptr, nullptr};
    for (size_t i = 1; i <= 3; ++i) {
      if (i >= in.size() || !in[i].present() || in[i].numel() == 0) continue;
      if (!in[i].host)
        return Err(StatusCode::kUnsupported, "{}: input {} ({}) is computed on the device; the CUDA Resize needs roi, "
                   "scales and sizes known on the host (constants or shape values)", where, i,
                   i == 1 ? "roi" : (i == 2 ? "scales" : "sizes"));
      operands[i - 1] = in[i].host;
    }
    KILN_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(node_, x.shape, operands[0], operands[1], operands[2]));
    if (out[0].shape != plan.out_shape)
      return Err(StatusCode::kInternal, "{}: output shape {} differs from the planned {}", where,
                 ShapeToString(out[0].shape), ShapeToString(plan.out_shape));
    if (out[0].numel() == 0) return Status::Ok();
    if (x.numel() == 0)
      return Err(StatusCode::kInvalidArgument, "{}: cannot resize the empty tensor {} to {}", where,
                 ShapeToString(x.shape), ShapeToString(plan.out_shape));
    ResizeParams p = base_;
    p.rank = static_cast<int>(rank);
    const bool crop = p.coord_mode == kCoordTfCropAndResize;
    for (int64_t a = 0; a < rank; ++a) {
      p.in_shape[a] = x.shape[a];
      p.out_shape[a] = plan.out_shape[a];
      p.scale[a] = plan.scales[a];
      p.roi_start[a] = plan.roi_start[a];
      p.roi_end[a] = plan.roi_end[a];
      const bool identity = plan.out_shape[a] == x.shape[a] && plan.scales[a] == 1.0 &&
                            (!crop || (plan.roi_start[a] == 0.0 && plan.roi_end[a] == 1.0));
      p.resized[a] = p.mode == kResizeNearest || !identity;
    }
    const Tensor e = Tensor::Scalar(x.dtype, p.extrapolation);
    p.extrapolation_bits = 0;
    std::memcpy(&p.extrapolation_bits, e.raw(), DataTypeSize(x.dtype));
    return KILN_CUDA_STATUS(LaunchResize(x.data, out[0].data, static_cast<int>(x.dtype),
                                         static_cast<int>(DataTypeSize(x.dtype)), p, ctx.stream));
  }

 private:
  Node node_;  // name, op type and attributes only (for PlanResize and messages)
  ResizeParams base_;
};

Result<std::unique_ptr<Layer>> CreateResize(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  if (!n.input(0)) return Err(StatusCode::kInvalidModel, "{}: input X is required", n.Where());
  const DataType dt = n.input(0)->dtype;
  ResizeParams p;
  KILN_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode", "nearest"));
  KILN_ASSIGN_OR_RETURN(std::string ctm, n.attr_string("coordinate_transformation_mode", "half_pixel"));
  KILN_ASSIGN_OR_RETURN(std::string nearest, n.attr_string("nearest_mode", "round_prefer_floor"));
  if (mode == "nearest") p.mode = kResizeNearest;
  else if (mode == "linear") p.mode = kResizeLinear;
  else if (mode == "cubic") p.mode = kResizeCubic;
  else return Err(StatusCode::kInvalidModel, "{}: unknown mode '{}'", n.Where(), mode);
  if (ctm == "half_pixel") p.coord_mode = kCoordHalfPixel;
  else if (ctm == "pytorch_half_pixel") p.coord_mode = kCoordPytorchHalfPixel;
  else if (ctm == "align_corners") p.coord_mode = kCoordAlignCorners;
  else if (ctm == "asymmetric") p.coord_mode = kCoordAsymmetric;
  else if (ctm == "tf_crop_and_resize") p.coord_mode = kCoordTfCropAndResize;
  else if (ctm == "half_pixel_symmetric") p.coord_mode = kCoordHalfPixelSymmetric;
  else return Err(StatusCode::kUnsupported, "{}: coordinate_transformation_mode '{}' is not supported", n.Where(), ctm);
  // The reference treats any other nearest_mode as round_prefer_floor.
  if (nearest == "round_prefer_ceil") p.nearest_mode = kRoundPreferCeil;
  else if (nearest == "floor") p.nearest_mode = kNearestFloor;
  else if (nearest == "ceil") p.nearest_mode = kNearestCeil;
  else p.nearest_mode = kRoundPreferFloor;
  p.cubic_a = static_cast<double>(n.getf("cubic_coeff_a", -0.75f));
  p.exclude_outside = n.geti("exclude_outside", 0) != 0;
  p.antialias = n.geti("antialias", 0) != 0 && p.mode != kResizeNearest;
  p.extrapolation = static_cast<double>(n.getf("extrapolation_value", 0.f));
  if (p.mode == kResizeNearest) {
    const size_t es = DataTypeSize(dt);
    if (es != 1 && es != 2 && es != 4 && es != 8)
      return Err(StatusCode::kUnsupported, "{}: element type {} is not supported by the CUDA kernel; run this node "
                 "on the CPU", n.Where(), DataTypeName(dt));
  } else if (!ResizeInterpolates(static_cast<int>(dt))) {
    return Err(StatusCode::kUnsupported, "{}: mode '{}' on {} data is not supported by the CUDA kernel (float32, "
               "float16, bfloat16, float64); cast the input to float or run this node on the CPU", n.Where(), mode,
               DataTypeName(dt));
  }
  Node attrs;
  attrs.name = n.name;
  attrs.op_type = n.op_type;
  attrs.domain = n.domain;
  attrs.opset = n.opset;
  attrs.attrs = n.attrs;
  return std::unique_ptr<Layer>(new ResizeLayer(std::move(attrs), p));
}

}  // namespace

void RegisterResizeLayers(LayerRegistry& r) { r.Add("Resize", {nullptr, CreateResize}); }

}  // namespace kiln::cuda
