// CUDA layers of RoiAlign (roi_align.cu) and DeformConv (deform_conv.cu) with the CPU reference's semantics
// (backends/cpu/roi_align.cpp, deform_conv.cpp). RoiAlign: avg and max, half_pixel and output_half_pixel (opset 10's
// default), any sampling_ratio, X and rois of float32/16, bfloat16 or float64 (independently), int32 or int64 batch
// indices; computed in double. DeformConv: 1 to 6 spatial dims, group, offset_group, optional bias and mask, one
// float type for every input.
#include <algorithm>
#include <cctype>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "backends/cuda/vision_kernels.h"
#include "core/error.h"
#include "ops/conv_geometry.h"

namespace kiln::cuda {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

Status CheckFloatInput(const Node& n, size_t i, const char* what, bool required) {
  const Value* v = n.input(i);
  if (!v) {
    if (!required) return Status::Ok();
    return Err(StatusCode::kInvalidModel, "{}: input {} ({}) is required", n.Where(), i, what);
  }
  if (!RoiAlignSupports(static_cast<int>(v->dtype)))
    return Err(StatusCode::kUnsupported,
               "{}: {} of type {} is not supported by the CUDA {} (float32, float16, bfloat16, float64); cast it or "
               "run the node on the CPU",
               n.Where(), what, DataTypeName(v->dtype), n.op_type);
  return Status::Ok();
}

Status Launched(const std::string& where, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Err(StatusCode::kCudaError, "{}: launching the {} kernels failed: {} ({})", where, what,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

const DeviceTensor* In(const std::vector<DeviceTensor>& in, size_t i) {
  return i < in.size() && in[i].present() ? &in[i] : nullptr;
}

// ---- RoiAlign ----

Result<std::unique_ptr<Layer>> CreateRoiAlign(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckFloatInput(n, 0, "X", true));
  KILN_RETURN_IF_ERROR(CheckFloatInput(n, 1, "rois", true));
  const Value* bi = n.input(2);
  if (!bi || (bi->dtype != DataType::kInt32 && bi->dtype != DataType::kInt64))
    return Err(StatusCode::kInvalidModel, "{}: batch_indices (input 2) must be an int32 or int64 tensor", n.Where());
  RoiAlignArgs base;
  KILN_ASSIGN_OR_RETURN(const std::string mode, n.attr_string("mode", "avg"));
  base.max_mode = Lower(mode) == "max";
  if (!base.max_mode && Lower(mode) != "avg")
    return Err(StatusCode::kInvalidModel, "{}: mode must be 'avg' or 'max', got '{}'", n.Where(), mode);
  KILN_ASSIGN_OR_RETURN(const std::string ctm,
                        n.attr_string("coordinate_transformation_mode",
                                      n.opset != 0 && n.opset < 16 ? "output_half_pixel" : "half_pixel"));
  base.half_pixel = Lower(ctm) == "half_pixel";
  if (!base.half_pixel && Lower(ctm) != "output_half_pixel")
    return Err(StatusCode::kInvalidModel,
               "{}: coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel', got '{}'", n.Where(),
               ctm);
  KILN_ASSIGN_OR_RETURN(base.out_h, n.attr_int("output_height", 1));
  KILN_ASSIGN_OR_RETURN(base.out_w, n.attr_int("output_width", 1));
  KILN_ASSIGN_OR_RETURN(base.sampling_ratio, n.attr_int("sampling_ratio", 0));
  KILN_ASSIGN_OR_RETURN(const float scale, n.attr_float("spatial_scale", 1.0f));
  base.spatial_scale = static_cast<double>(scale);
  if (base.out_h < 1 || base.out_w < 1 || base.sampling_ratio < 0)
    return Err(StatusCode::kInvalidModel, "{}: output_height/width must be >= 1 and sampling_ratio >= 0", n.Where());
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        const DeviceTensor* x = In(in, 0);
        const DeviceTensor* rois = In(in, 1);
        const DeviceTensor* bi = In(in, 2);
        if (!x || !rois || !bi || x->shape.size() != 4 || rois->shape.size() != 2 || rois->shape[1] != 4 ||
            bi->shape.size() != 1 || bi->shape[0] != rois->shape[0])
          return Err(StatusCode::kInvalidArgument,
                     "{}: X must be [N, C, H, W], rois [num_rois, 4] and batch_indices [num_rois]", where);
        RoiAlignArgs a = base;
        a.x_dtype = static_cast<int>(x->dtype);
        a.rois_dtype = static_cast<int>(rois->dtype);
        a.index_dtype = static_cast<int>(bi->dtype);
        a.n = x->shape[0];
        a.c = x->shape[1];
        a.h = x->shape[2];
        a.w = x->shape[3];
        a.num_rois = rois->shape[0];
        if (bi->host)  // known on the host: checked as the CPU reference checks it
          for (int64_t r = 0; r < a.num_rois; ++r) {
            const int64_t image = bi->host->GetAsInt(r);
            if (image < 0 || image >= a.n)
              return Err(StatusCode::kOutOfRange, "{}: batch_indices[{}] = {} is outside [0, {}) (X's batch)", where,
                         r, image, a.n);
          }
        a.x = x->data;
        a.rois = rois->data;
        a.batch_indices = bi->data;
        a.y = out[0].data;
        return Launched(where, LaunchRoiAlign(a, ctx.stream), "RoiAlign");
      }));
}

// ---- DeformConv ----

class DeformConvLayer : public Layer {
 public:
  DeformConvLayer(std::string where, WindowParams p, bool kernel_attr, int64_t offset_group)
      : where_(std::move(where)), p_(std::move(p)), kernel_attr_(kernel_attr), og_(offset_group) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    auto a = Args(in);
    return a.ok() ? DeformConvWorkspaceBytes(*a) : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    KILN_ASSIGN_OR_RETURN(DeformConvArgs a, Args(in));
    std::vector<int64_t> want = {a.batch, a.out_channels};
    want.insert(want.end(), a.out_sp, a.out_sp + a.nsp);
    if (out.empty() || out[0].shape != want)
      return Err(StatusCode::kInternal, "{}: the output is {} where {} was computed", where_,
                 out.empty() ? std::string("missing") : ShapeToString(out[0].shape), ShapeToString(want));
    a.y = out[0].data;
    const size_t need = DeformConvWorkspaceBytes(a);
    if (ctx.workspace_bytes < need)
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where_,
                 ctx.workspace_bytes, need);
    return Launched(where_, LaunchDeformConv(a, ctx.workspace, ctx.workspace_bytes, ctx.stream), "DeformConv");
  }

 private:
  // The kernels' arguments at these inputs, checked as the CPU reference checks them.
  Result<DeformConvArgs> Args(const std::vector<DeviceTensor>& in) const {
    const DeviceTensor* x = In(in, 0);
    const DeviceTensor* w = In(in, 1);
    const DeviceTensor* off = In(in, 2);
    const DeviceTensor* bias = In(in, 3);
    const DeviceTensor* mask = In(in, 4);
    if (!x || !w || !off) return Err(StatusCode::kInvalidArgument, "{}: X, W and offset are required", where_);
    const size_t rank = x->shape.size();
    const int64_t nsp = static_cast<int64_t>(rank) - 2;
    if (nsp < 1 || nsp != p_.nsp || w->shape.size() != rank || off->shape.size() != rank ||
        (mask && mask->shape.size() != rank) || (bias && bias->shape.size() != 1))
      return Err(StatusCode::kInvalidArgument, "{}: X {}, W {} and offset {} (and mask) must share a rank of {}",
                 where_, ShapeToString(x->shape), ShapeToString(w->shape), ShapeToString(off->shape), p_.nsp + 2);
    for (const DeviceTensor* t : {w, off, bias, mask})
      if (t && t->dtype != x->dtype)
        return Err(StatusCode::kInvalidArgument, "{}: every input must have X's type {}, one is {}", where_,
                   DataTypeName(x->dtype), DataTypeName(t->dtype));
    DeformConvArgs a;
    a.dtype = static_cast<int>(x->dtype);
    a.nsp = static_cast<int>(nsp);
    a.batch = x->shape[0];
    a.channels = x->shape[1];
    a.out_channels = w->shape[0];
    a.group = p_.group;
    a.offset_group = og_;
    int64_t kpoints = 1;
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t k = w->shape[static_cast<size_t>(2 + d)];
      if (kernel_attr_ && k != p_.kernel[static_cast<size_t>(d)])
        return Err(StatusCode::kInvalidArgument, "{}: W {} does not match kernel_shape {}", where_,
                   ShapeToString(w->shape), ShapeToString(p_.kernel));
      const size_t ds = static_cast<size_t>(d);
      const int64_t in_d = x->shape[ds + 2];
      const int64_t extent = (k - 1) * p_.dilations[ds] + 1;
      const int64_t padded = in_d + p_.pads[ds] + p_.pads[ds + static_cast<size_t>(nsp)];
      if (k < 1 || padded < extent)
        return Err(StatusCode::kInvalidArgument, "{}: the kernel {} does not fit the padded input {}", where_,
                   ShapeToString(w->shape), ShapeToString(x->shape));
      a.in_sp[d] = in_d;
      a.kernel[d] = k;
      a.out_sp[d] = (padded - extent) / p_.strides[ds] + 1;
      a.strides[d] = p_.strides[ds];
      a.pads[d] = p_.pads[ds];
      a.dilations[d] = p_.dilations[ds];
      kpoints *= k;
    }
    const int64_t og = og_, group = p_.group;
    if (og < 1 || a.channels % og != 0 || a.channels != w->shape[1] * group || a.out_channels % group != 0)
      return Err(StatusCode::kInvalidArgument, "{}: X {} and W {} do not fit group {} and offset_group {}", where_,
                 ShapeToString(x->shape), ShapeToString(w->shape), group, og);
    std::vector<int64_t> want_off = {a.batch, og * kpoints * nsp}, want_mask = {a.batch, og * kpoints};
    want_off.insert(want_off.end(), a.out_sp, a.out_sp + nsp);
    want_mask.insert(want_mask.end(), a.out_sp, a.out_sp + nsp);
    if (off->shape != want_off || (mask && mask->shape != want_mask) || (bias && bias->shape[0] != a.out_channels))
      return Err(StatusCode::kInvalidArgument, "{}: offset {} must be {}, mask {} and bias [{}]", where_,
                 ShapeToString(off->shape), ShapeToString(want_off), ShapeToString(want_mask), a.out_channels);
    a.x = x->data;
    a.w = w->data;
    a.offset = off->data;
    a.bias = bias ? bias->data : nullptr;
    a.mask = mask ? mask->data : nullptr;
    return a;
  }

  std::string where_;
  WindowParams p_;
  bool kernel_attr_;
  int64_t og_;
};

Result<std::unique_ptr<Layer>> CreateDeformConv(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  static const char* kNames[] = {"X", "W", "offset", "B", "mask"};
  for (size_t i = 0; i < 5; ++i) KILN_RETURN_IF_ERROR(CheckFloatInput(n, i, kNames[i], i < 3));
  // The rank: X's, else W's or offset's.
  int64_t rank = -1;
  for (size_t i : {0, 1, 2})
    if (rank < 0 && n.input(i)->has_shape) rank = static_cast<int64_t>(n.input(i)->shape.size());
  if (rank < 0)
    return Err(StatusCode::kUnsupported, "{}: the CUDA DeformConv needs the rank of X, W or offset at build time",
               n.Where());
  const int64_t nsp = rank - 2;
  if (nsp < 1 || nsp > kDeformConvMaxDims)
    return Err(StatusCode::kUnsupported,
               "{}: DeformConv over {} spatial dims is not supported by the CUDA kernels (1 to {}); run the node on "
               "the CPU",
               n.Where(), nsp, kDeformConvMaxDims);
  // The kernel extent from W where its dims are known (run time checks the rest against kernel_shape, if given).
  const Value* w = n.input(1);
  const bool kernel_attr = n.has_attr("kernel_shape");
  std::vector<int64_t> kw(static_cast<size_t>(nsp), kernel_attr ? -1 : 1);
  if (w->has_shape && static_cast<int64_t>(w->shape.size()) == rank)
    for (int64_t d = 0; d < nsp; ++d)
      if (w->shape[static_cast<size_t>(2 + d)].known()) kw[static_cast<size_t>(d)] = w->shape[static_cast<size_t>(2 + d)].value;
  KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(n, nsp, kw, false));
  if (p.auto_pad != "NOTSET" || p.ceil_mode)
    return Err(StatusCode::kInvalidModel, "{}: DeformConv has no auto_pad or ceil_mode", n.Where());
  KILN_ASSIGN_OR_RETURN(const int64_t og, n.attr_int("offset_group", 1));
  if (og < 1) return Err(StatusCode::kInvalidModel, "{}: offset_group must be >= 1, got {}", n.Where(), og);
  return std::unique_ptr<Layer>(std::make_unique<DeformConvLayer>(n.Where(), std::move(p), kernel_attr, og));
}

}  // namespace

void RegisterVisionLayers(LayerRegistry& r) {
  LayerFactory roi, deform;
  roi.create = CreateRoiAlign;
  deform.create = CreateDeformConv;
  r.Add("RoiAlign", std::move(roi));
  r.Add("DeformConv", std::move(deform));
}

}  // namespace kiln::cuda
