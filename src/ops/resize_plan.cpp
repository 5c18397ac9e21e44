// Resize geometry (see resize_plan.h).
#include "ops/resize_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace kiln {

Result<std::vector<int64_t>> ResizeAxes(const Node& n, int64_t rank) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, n.attr_ints("axes", {}));
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    return axes;
  }
  std::vector<bool> seen(rank, false);
  for (int64_t& a : axes) {
    auto na = NormalizeAxis(a, rank);
    if (!na) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), a, rank);
    if (seen[*na]) return Err(StatusCode::kInvalidModel, "{}: axis {} is repeated in axes", n.Where(), a);
    seen[*na] = true;
    a = *na;
  }
  return axes;
}

Result<ResizePlan> PlanResize(const Node& n, const std::vector<int64_t>& in_shape, const Tensor* roi,
                              const Tensor* scales, const Tensor* sizes) {
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ResizeAxes(n, rank));
  KILN_ASSIGN_OR_RETURN(std::string policy, n.attr_string("keep_aspect_ratio_policy", "stretch"));
  KILN_ASSIGN_OR_RETURN(std::string ctm, n.attr_string("coordinate_transformation_mode", "half_pixel"));
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return Err(StatusCode::kInvalidModel, "{}: unknown keep_aspect_ratio_policy '{}'", n.Where(), policy);
  const size_t naxes = axes.size();
  const bool has_scales = ResizeOperandPresent(scales), has_sizes = ResizeOperandPresent(sizes);
  if (has_scales == has_sizes)
    return Err(StatusCode::kInvalidModel, "{}: exactly one of 'scales' and 'sizes' must be given (got {})", n.Where(),
               has_scales ? "both" : "neither");

  ResizePlan p;
  p.out_shape = in_shape;
  p.scales.assign(rank, 1.0);
  p.roi_start.assign(rank, 0.0);
  p.roi_end.assign(rank, 1.0);

  if (has_scales) {
    if (static_cast<size_t>(scales->numel()) != naxes)
      return Err(StatusCode::kInvalidModel, "{}: scales has {} elements, expected {} (one per resized axis)",
                 n.Where(), scales->numel(), naxes);
    for (size_t i = 0; i < naxes; ++i) {
      const double s = scales->GetAsDouble(static_cast<int64_t>(i));
      if (!(s > 0) || !std::isfinite(s))
        return Err(StatusCode::kInvalidArgument, "{}: scale {} for axis {} must be positive", n.Where(), s, axes[i]);
      const int64_t a = axes[i];
      p.scales[a] = s;
      const double o = std::floor(s * static_cast<double>(in_shape[a]));
      if (o > 1e12) return Err(StatusCode::kInvalidArgument, "{}: scale {} gives a huge output", n.Where(), s);
      p.out_shape[a] = static_cast<int64_t>(o);
    }
  } else {
    if (static_cast<size_t>(sizes->numel()) != naxes)
      return Err(StatusCode::kInvalidModel, "{}: sizes has {} elements, expected {} (one per resized axis)",
                 n.Where(), sizes->numel(), naxes);
    for (size_t i = 0; i < naxes; ++i) {
      const int64_t a = axes[i], sz = sizes->GetAsInt(static_cast<int64_t>(i));
      if (sz < 0) return Err(StatusCode::kInvalidArgument, "{}: size {} for axis {} is negative", n.Where(), sz, a);
      if (in_shape[a] == 0 && sz != 0)
        return Err(StatusCode::kInvalidArgument, "{}: cannot resize an empty axis {} to {}", n.Where(), a, sz);
      p.out_shape[a] = sz;
      p.scales[a] = in_shape[a] == 0 ? 1.0 : static_cast<double>(sz) / static_cast<double>(in_shape[a]);
    }
    if (policy != "stretch") {
      double s = policy == "not_larger" ? 1e300 : 0.0;
      for (int64_t a : axes) s = policy == "not_larger" ? std::min(s, p.scales[a]) : std::max(s, p.scales[a]);
      for (int64_t a : axes) {
        p.scales[a] = s;
        p.out_shape[a] = static_cast<int64_t>(s * static_cast<double>(in_shape[a]) + 0.5);  // round half up
      }
    }
  }

  double total = 1;
  for (int64_t d : p.out_shape) total *= static_cast<double>(d);
  if (total > static_cast<double>(int64_t{1} << 40))
    return Err(StatusCode::kInvalidArgument, "{}: output shape {} is too large", n.Where(), ShapeToString(p.out_shape));

  if (ctm == "tf_crop_and_resize") {
    if (!ResizeOperandPresent(roi))
      return Err(StatusCode::kInvalidModel, "{}: tf_crop_and_resize needs the roi input", n.Where());
    if (static_cast<size_t>(roi->numel()) != 2 * naxes)
      return Err(StatusCode::kInvalidModel, "{}: roi has {} elements, expected {} (starts then ends)", n.Where(),
                 roi->numel(), 2 * naxes);
    for (size_t i = 0; i < naxes; ++i) {
      p.roi_start[axes[i]] = roi->GetAsDouble(static_cast<int64_t>(i));
      p.roi_end[axes[i]] = roi->GetAsDouble(static_cast<int64_t>(naxes + i));
    }
  }
  return p;
}

}  // namespace kiln
