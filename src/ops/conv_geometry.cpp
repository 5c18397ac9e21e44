// Window geometry shared by Conv/ConvTranspose/pooling shape functions and CPU kernels (see conv_geometry.h).
#include "ops/conv_geometry.h"

#include "core/error.h"

namespace kiln {

namespace {

Status CheckLen(const Node& n, const char* name, const std::vector<int64_t>& v, size_t want) {
  if (v.size() != want)
    return Err(StatusCode::kInvalidModel, "{}: attribute '{}' has {} values, expected {}", n.Where(), name,
               v.size(), want);
  return Status::Ok();
}

// Window attributes and spatial sizes are bounded so the geometry below cannot overflow int64:
// every attribute < 2^31 (kernels, strides, dilations, pads), every spatial size <= 2^40.
constexpr int64_t kMaxWindowAttr = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxSpatial = int64_t{1} << 40;

Status CheckBounded(const Node& n, const char* name, const std::vector<int64_t>& v) {
  for (int64_t x : v)
    if (x > kMaxWindowAttr)
      return Err(StatusCode::kInvalidModel, "{}: attribute '{}' value {} is larger than 2^31-1; fix the model's {}",
                 n.Where(), name, x, name);
  return Status::Ok();
}

Status CheckSpatial(const Node& n, int64_t i, int64_t x) {
  if (x > kMaxSpatial)
    return Err(StatusCode::kInvalidArgument, "{}: spatial dim {} of size {} is larger than 2^40", n.Where(), i, x);
  return Status::Ok();
}

int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

Result<WindowParams> ReadWindowParams(const Node& n, int64_t nsp, const std::vector<int64_t>& kernel_from_weight,
                                      bool is_transpose) {
  WindowParams p;
  p.nsp = nsp;
  if (nsp < 1)
    return Err(StatusCode::kInvalidModel, "{}: input must have at least one spatial dim (rank >= 3)", n.Where());
  const size_t ns = static_cast<size_t>(nsp);
  KILN_ASSIGN_OR_RETURN(p.kernel, n.attr_ints("kernel_shape", kernel_from_weight));
  if (p.kernel.empty())
    return Err(StatusCode::kInvalidModel, "{}: attribute 'kernel_shape' is required", n.Where());
  KILN_RETURN_IF_ERROR(CheckLen(n, "kernel_shape", p.kernel, ns));
  if (!kernel_from_weight.empty()) {
    for (size_t i = 0; i < ns; ++i)
      if (kernel_from_weight[i] >= 0 && p.kernel[i] != kernel_from_weight[i])
        return Err(StatusCode::kInvalidModel, "{}: kernel_shape {} does not match the weight's spatial dims {}",
                   n.Where(), fmt::join(p.kernel, ","), fmt::join(kernel_from_weight, ","));
  }
  for (int64_t k : p.kernel)
    if (k < 1) return Err(StatusCode::kInvalidModel, "{}: kernel_shape values must be >= 1", n.Where());
  KILN_RETURN_IF_ERROR(CheckBounded(n, "kernel_shape", p.kernel));
  KILN_ASSIGN_OR_RETURN(p.strides, n.attr_ints("strides", std::vector<int64_t>(ns, 1)));
  KILN_RETURN_IF_ERROR(CheckLen(n, "strides", p.strides, ns));
  KILN_ASSIGN_OR_RETURN(p.dilations, n.attr_ints("dilations", std::vector<int64_t>(ns, 1)));
  KILN_RETURN_IF_ERROR(CheckLen(n, "dilations", p.dilations, ns));
  for (size_t i = 0; i < ns; ++i)
    if (p.strides[i] < 1 || p.dilations[i] < 1)
      return Err(StatusCode::kInvalidModel, "{}: strides and dilations must be >= 1", n.Where());
  KILN_RETURN_IF_ERROR(CheckBounded(n, "strides", p.strides));
  KILN_RETURN_IF_ERROR(CheckBounded(n, "dilations", p.dilations));
  KILN_ASSIGN_OR_RETURN(p.auto_pad, n.attr_string("auto_pad", "NOTSET"));
  if (p.auto_pad != "NOTSET" && p.auto_pad != "SAME_UPPER" && p.auto_pad != "SAME_LOWER" && p.auto_pad != "VALID")
    return Err(StatusCode::kInvalidModel, "{}: unknown auto_pad '{}'", n.Where(), p.auto_pad);
  const bool has_pads = n.has_attr("pads");
  KILN_ASSIGN_OR_RETURN(p.pads, n.attr_ints("pads", std::vector<int64_t>(2 * ns, 0)));
  KILN_RETURN_IF_ERROR(CheckLen(n, "pads", p.pads, 2 * ns));
  for (int64_t v : p.pads)
    if (v < 0) return Err(StatusCode::kInvalidModel, "{}: pads must be >= 0", n.Where());
  KILN_RETURN_IF_ERROR(CheckBounded(n, "pads", p.pads));
  if (has_pads && p.auto_pad != "NOTSET") {
    // Both given: ONNX says auto_pad wins (pads ignored); keep that behaviour.
    p.pads.assign(2 * ns, 0);
  }
  KILN_ASSIGN_OR_RETURN(p.group, n.attr_int("group", 1));
  if (p.group < 1) return Err(StatusCode::kInvalidModel, "{}: group must be >= 1, got {}", n.Where(), p.group);
  KILN_ASSIGN_OR_RETURN(int64_t ceil, n.attr_int("ceil_mode", 0));
  p.ceil_mode = ceil != 0;
  if (is_transpose) {
    KILN_ASSIGN_OR_RETURN(p.output_padding, n.attr_ints("output_padding", std::vector<int64_t>(ns, 0)));
    KILN_RETURN_IF_ERROR(CheckLen(n, "output_padding", p.output_padding, ns));
    for (size_t i = 0; i < ns; ++i)
      if (p.output_padding[i] < 0)
        return Err(StatusCode::kInvalidModel, "{}: output_padding must be >= 0", n.Where());
    KILN_RETURN_IF_ERROR(CheckBounded(n, "output_padding", p.output_padding));
    KILN_ASSIGN_OR_RETURN(p.output_shape, n.attr_ints("output_shape", {}));
    // output_shape may carry the full [N, C, spatial...] shape in some exporters; keep the spatial tail.
    if (p.output_shape.size() == ns + 2) p.output_shape.erase(p.output_shape.begin(), p.output_shape.begin() + 2);
    if (!p.output_shape.empty()) KILN_RETURN_IF_ERROR(CheckLen(n, "output_shape", p.output_shape, ns));
    KILN_RETURN_IF_ERROR(CheckBounded(n, "output_shape", p.output_shape));
    for (int64_t v : p.output_shape)
      if (v < 0) return Err(StatusCode::kInvalidModel, "{}: output_shape values must be >= 0", n.Where());
  }
  return p;
}

Result<std::vector<Dim>> ForwardOutputDims(const Node& n, WindowParams& p, const std::vector<Dim>& in) {
  std::vector<Dim> out(p.nsp);
  const int64_t ns = p.nsp;
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t ek = (p.kernel[i] - 1) * p.dilations[i] + 1;
    const int64_t s = p.strides[i];
    const Dim& x = in[i];
    if (x.known()) KILN_RETURN_IF_ERROR(CheckSpatial(n, i, x.value));
    if (p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER") {
      if (x.known()) {
        const int64_t o = CeilDiv(x.value, s);
        const int64_t total = std::max<int64_t>(0, (o - 1) * s + ek - x.value);
        const int64_t small = total / 2, big = total - small;
        p.pads[i] = p.auto_pad == "SAME_UPPER" ? small : big;
        p.pads[i + ns] = total - p.pads[i];
        out[i] = o;
      } else {
        out[i] = s == 1 ? x : DimDiv(DimAdd(x, Dim(s - 1)), Dim(s));
      }
      continue;
    }
    if (p.auto_pad == "VALID") {
      p.pads[i] = p.pads[i + ns] = 0;
    }
    const int64_t padsum = p.pads[i] + p.pads[i + ns];
    if (x.known()) {
      const int64_t span = x.value + padsum - ek;
      if (span < 0)
        return Err(StatusCode::kInvalidArgument,
                   "{}: window of extent {} does not fit spatial dim {} of size {} (padded {})", n.Where(), ek, i,
                   x.value, x.value + padsum);
      int64_t o = (p.ceil_mode ? CeilDiv(span, s) : span / s) + 1;
      // PyTorch/ORT rule: the last window must start inside the input or the begin padding.
      if (p.ceil_mode && (o - 1) * s >= x.value + p.pads[i]) --o;
      out[i] = o;
    } else {
      const Dim span = DimAdd(x, Dim(padsum - ek));
      if (s == 1) out[i] = DimAdd(span, Dim(1));
      else if (p.ceil_mode) out[i] = DimAdd(DimDiv(DimAdd(span, Dim(s - 1)), Dim(s)), Dim(1));
      else out[i] = DimAdd(DimDiv(span, Dim(s)), Dim(1));
    }
  }
  return out;
}

Result<std::vector<Dim>> TransposeOutputDims(const Node& n, WindowParams& p, const std::vector<Dim>& in) {
  std::vector<Dim> out(p.nsp);
  const int64_t ns = p.nsp;
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t ek = (p.kernel[i] - 1) * p.dilations[i] + 1;
    const int64_t s = p.strides[i];
    const Dim& x = in[i];
    if (x.known()) KILN_RETURN_IF_ERROR(CheckSpatial(n, i, x.value));
    const bool same = p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER";
    if (p.auto_pad == "VALID") p.pads[i] = p.pads[i + ns] = 0;
    if (!p.output_shape.empty() || same) {
      // Target size given (output_shape) or implied (SAME: in * stride); pads follow from it.
      if (!x.known()) {
        out[i] = !p.output_shape.empty() ? Dim(p.output_shape[i]) : DimMul(x, Dim(s));
        continue;
      }
      // In 128 bits: stride (< 2^31) times a spatial size (<= 2^40) can pass int64.
      const __int128 target128 = !p.output_shape.empty() ? __int128{p.output_shape[i]} : __int128{x.value} * s;
      const __int128 total128 = __int128{s} * (x.value - 1) + p.output_padding[i] + ek - target128;
      if (target128 > kMaxSpatial || total128 > kMaxSpatial || total128 < -kMaxSpatial)
        return Err(StatusCode::kInvalidArgument, "{}: output spatial dim {} would be larger than 2^40", n.Where(), i);
      const int64_t target = static_cast<int64_t>(target128);
      const int64_t total = static_cast<int64_t>(total128);
      const int64_t half = FloorDiv(total, 2);
      if (p.auto_pad == "SAME_UPPER") {
        p.pads[i] = half;
        p.pads[i + ns] = total - half;
      } else {
        p.pads[i] = total - half;
        p.pads[i + ns] = half;
      }
      out[i] = target;
      continue;
    }
    const int64_t extra = p.output_padding[i] + ek - p.pads[i] - p.pads[i + ns];
    if (x.known()) {
      const __int128 o128 = __int128{s} * (x.value - 1) + extra;
      if (o128 > kMaxSpatial)
        return Err(StatusCode::kInvalidArgument, "{}: output spatial dim {} would be larger than 2^40", n.Where(), i);
      const int64_t o = static_cast<int64_t>(o128);
      if (o < 0)
        return Err(StatusCode::kInvalidArgument, "{}: pads make spatial dim {} of the output negative ({})",
                   n.Where(), i, o);
      out[i] = o;
    } else {
      out[i] = DimAdd(DimMul(DimSub(x, Dim(1)), Dim(s)), Dim(extra));
    }
  }
  return out;
}

Result<std::vector<int64_t>> ForwardOutputSizes(const Node& n, WindowParams& p, const std::vector<int64_t>& in) {
  KILN_ASSIGN_OR_RETURN(auto d, ForwardOutputDims(n, p, FromStatic(in)));
  return ToStatic(d);
}

Result<std::vector<int64_t>> TransposeOutputSizes(const Node& n, WindowParams& p, const std::vector<int64_t>& in) {
  KILN_ASSIGN_OR_RETURN(auto d, TransposeOutputDims(n, p, FromStatic(in)));
  return ToStatic(d);
}

}  // namespace kiln
