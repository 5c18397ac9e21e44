// CUDA layers of GridSample (every mode and padding mode of the CPU reference, 1 to 3 spatial dims) and AffineGrid
// (2-D and 3-D), kernels in grid_sample.cu. X, grid and theta may be float32, float16, bfloat16 or float64 (X and
// the grid independently); both compute in double as the CPU reference does.
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/grid_kernels.h"
#include "backends/cuda/layer.h"
#include "core/error.h"

namespace kiln::cuda {

void RegisterGridLayers(LayerRegistry& r);

namespace {

Status CheckFloat(const Node& n, size_t i, const char* what) {
  const Value* v = n.input(i);
  if (!v) return Err(StatusCode::kInvalidModel, "{}: input {} ({}) is required", n.Where(), i, what);
  if (!GridSampleSupports(static_cast<int>(v->dtype)))
    return Err(StatusCode::kUnsupported,
               "{}: {} of type {} is not supported by the CUDA {} (float32, float16, bfloat16, float64); cast it or "
               "run the node on the CPU",
               n.Where(), what, DataTypeName(v->dtype), n.op_type);
  return Status::Ok();
}

Status Launched(const std::string& where, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Err(StatusCode::kCudaError, "{}: launching the {} kernel failed: {} ({})", where, what,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

Status RankSupported(const std::string& where, int64_t spatial) {
  if (spatial >= 1 && spatial <= kGridSampleMaxDims) return Status::Ok();
  return Err(StatusCode::kUnsupported,
             "{}: GridSample over {} spatial dims is not supported by the CUDA kernel, which samples 1 to {} (lines, "
             "images, volumes); run the node on the CPU",
             where, spatial, kGridSampleMaxDims);
}

// ---- GridSample ----

Result<std::unique_ptr<Layer>> CreateGridSample(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckFloat(n, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckFloat(n, 1, "grid"));
  GridSampleArgs base;
  KILN_ASSIGN_OR_RETURN(const std::string mode, n.attr_string("mode", n.opset >= 20 ? "linear" : "bilinear"));
  if (mode == "nearest") base.mode = kGridNearest;
  else if (mode == "linear" || mode == "bilinear") base.mode = kGridLinear;
  else if (mode == "cubic" || mode == "bicubic") base.mode = kGridCubic;
  else return Err(StatusCode::kInvalidModel, "{}: mode '{}' is not linear, nearest or cubic", n.Where(), mode);
  KILN_ASSIGN_OR_RETURN(const std::string pad, n.attr_string("padding_mode", "zeros"));
  if (pad == "zeros") base.pad = kGridPadZeros;
  else if (pad == "border") base.pad = kGridPadBorder;
  else if (pad == "reflection") base.pad = kGridPadReflection;
  else
    return Err(StatusCode::kInvalidModel, "{}: padding_mode '{}' is not zeros, border or reflection", n.Where(), pad);
  KILN_ASSIGN_OR_RETURN(const int64_t align, n.attr_int("align_corners", 0));
  base.align_corners = align != 0;
  const Value* x = n.input(0);
  if (x->has_shape) KILN_RETURN_IF_ERROR(RankSupported(n.Where(), static_cast<int64_t>(x->shape.size()) - 2));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [where, base](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                    std::vector<DeviceTensor>& out) -> Status {
        const DeviceTensor& x = in[0];
        const DeviceTensor& grid = in[1];
        const int64_t r = static_cast<int64_t>(x.shape.size()) - 2;
        if (r < 1 || grid.shape.size() != x.shape.size() || grid.shape[0] != x.shape[0] || grid.shape.back() != r)
          return Err(StatusCode::kInvalidArgument,
                     "{}: X {} and grid {} must be [N, C, spatial...] and [N, spatial..., {}]", where,
                     ShapeToString(x.shape), ShapeToString(grid.shape), r);
        KILN_RETURN_IF_ERROR(RankSupported(where, r));
        GridSampleArgs a = base;
        a.x = x.data;
        a.grid = grid.data;
        a.y = out[0].data;
        a.x_dtype = static_cast<int>(x.dtype);
        a.grid_dtype = static_cast<int>(grid.dtype);
        a.rank = static_cast<int>(r);
        a.n = x.shape[0];
        a.c = x.shape[1];
        for (int64_t d = 0; d < r; ++d) {
          a.in[d] = x.shape[static_cast<size_t>(2 + d)];
          a.out[d] = grid.shape[static_cast<size_t>(1 + d)];
        }
        return Launched(where, LaunchGridSample(a, ctx.stream), "GridSample");
      }));
}

// ---- AffineGrid ----

Result<std::unique_ptr<Layer>> CreateAffineGrid(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckFloat(n, 0, "theta"));
  KILN_ASSIGN_OR_RETURN(const int64_t align, n.attr_int("align_corners", 0));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [where, align](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                     std::vector<DeviceTensor>& out) -> Status {
        const DeviceTensor& theta = in[0];
        const DeviceTensor& y = out[0];
        // y is [N, (D,) H, W, r] (its shape came from the size input).
        const int64_t r = y.shape.empty() ? 0 : y.shape.back();
        if ((r != 2 && r != 3) || static_cast<int64_t>(y.shape.size()) != r + 2 || theta.shape.size() != 3 ||
            theta.shape[0] != y.shape[0] || theta.shape[1] != r || theta.shape[2] != r + 1)
          return Err(StatusCode::kInvalidArgument, "{}: theta {} does not fit the grid {} (theta must be [N, 2, 3] "
                     "or [N, 3, 4])", where, ShapeToString(theta.shape), ShapeToString(y.shape));
        const std::vector<int64_t> dims(y.shape.begin() + 1, y.shape.end() - 1);
        return Launched(where,
                        LaunchAffineGrid(static_cast<int>(theta.dtype), theta.data, out[0].data, y.shape[0],
                                         static_cast<int>(r), dims.data(), align != 0, ctx.stream),
                        "AffineGrid");
      }));
}

}  // namespace

void RegisterGridLayers(LayerRegistry& r) {
  LayerFactory grid_sample, affine_grid;
  grid_sample.create = CreateGridSample;
  affine_grid.create = CreateAffineGrid;
  r.Add("GridSample", std::move(grid_sample));
  r.Add("AffineGrid", std::move(affine_grid));
}

}  // namespace kiln::cuda
