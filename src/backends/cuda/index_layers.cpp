// CUDA layers of the index family: Gather, GatherElements, GatherND, ScatterElements, ScatterND here (kernels in
// gather_scatter.cu); OneHot, NonZero and NonMaxSuppression in index_misc_layers.cpp; Resize in resize_layers.cpp.
//
// Indices known on the host (constants) are checked in create() and reported like the CPU reference does. Indices
// computed on the device cannot raise an error: after wrapping negatives, gathers clamp an out-of-range index into
// the axis and scatters skip its update. Shapes are checked on the host before every launch (as the CPU does), so
// a bad shape is an error and never an out-of-bounds access.
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "backends/cuda/gather_scatter_kernels.h"
#include "backends/cuda/index_layer_util.h"

namespace kiln::cuda {

void RegisterIndexMiscLayers(LayerRegistry& r);  // index_misc_layers.cpp
void RegisterResizeLayers(LayerRegistry& r);     // resize_layers.cpp
void RegisterGridLayers(LayerRegistry& r);       // grid_layers.cpp: GridSample, AffineGrid

namespace {

using index_util::CheckIndexRange;
using index_util::ConstInput;
using index_util::IsIndexType;
using index_util::KnownInputShape;
using index_util::Prod;

std::vector<int64_t> StridesOf(const std::vector<int64_t>& s) {
  std::vector<int64_t> r(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d) r[d] = r[d + 1] * s[d + 1];
  return r;
}

// Data (input 0) and indices (input `idx_input`) types every gather/scatter layer checks.
Status CheckTypes(const Node& n, size_t idx_input) {
  const Value* data = n.input(0);
  const Value* idx = n.input(idx_input);
  if (!data || !idx)
    return Err(StatusCode::kInvalidModel, "{}: data and indices inputs are required", n.Where());
  const size_t es = DataTypeSize(data->dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return Err(StatusCode::kUnsupported, "{}: element type {} is not supported by the CUDA kernel; cast the data to a "
               "1/2/4/8-byte type or run this node on the CPU", n.Where(), DataTypeName(data->dtype));
  if (!IsIndexType(idx->dtype))
    return Err(StatusCode::kInvalidModel, "{}: indices must be int32 or int64, got {}", n.Where(),
               DataTypeName(idx->dtype));
  return Status::Ok();
}

Result<int64_t> AxisFor(const std::string& where, int64_t axis, int64_t rank) {
  auto a = NormalizeAxis(axis, rank);
  if (!a) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", where, axis, rank);
  return *a;
}

Status CheckRank(const std::string& where, const char* what, size_t rank) {
  if (rank > static_cast<size_t>(kIndexMaxRank))
    return Err(StatusCode::kUnsupported, "{}: {} has rank {}; the CUDA kernel supports rank <= {}", where, what, rank,
               kIndexMaxRank);
  return Status::Ok();
}

Result<int> ReductionOf(const Node& n) {
  KILN_ASSIGN_OR_RETURN(std::string s, n.attr_string("reduction", "none"));
  if (s == "none") return static_cast<int>(kScatterNone);
  if (s == "add") return static_cast<int>(kScatterAdd);
  if (s == "mul") return static_cast<int>(kScatterMul);
  if (s == "max") return static_cast<int>(kScatterMax);
  if (s == "min") return static_cast<int>(kScatterMin);
  return Err(StatusCode::kInvalidModel, "{}: unknown reduction '{}' (none, add, mul, max, min)", n.Where(), s);
}

Status CopyData(const DeviceTensor& data, DeviceTensor& out, cudaStream_t stream) {
  if (data.nbytes() == 0 || out.data == data.data) return Status::Ok();
  return KILN_CUDA_STATUS(cudaMemcpyAsync(out.data, data.data, data.nbytes(), cudaMemcpyDeviceToDevice, stream));
}

// ---- Gather ----

Result<std::unique_ptr<Layer>> CreateGather(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckTypes(n, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.attr_int("axis", 0));
  const std::string where = n.Where();
  if (const Tensor* idx = ConstInput(n, 1); idx && KnownInputShape(spec, 0)) {
    const auto& ds = *KnownInputShape(spec, 0);
    KILN_ASSIGN_OR_RETURN(int64_t axis, AxisFor(where, axis_attr, static_cast<int64_t>(ds.size())));
    KILN_RETURN_IF_ERROR(CheckIndexRange(n, *idx, {ds[axis]}, {axis}));
  }
  return std::unique_ptr<Layer>(new FnLayer([where, axis_attr](const LaunchContext& ctx,
                                                               const std::vector<DeviceTensor>& in,
                                                               std::vector<DeviceTensor>& out) -> Status {
    const DeviceTensor& data = in[0];
    const DeviceTensor& idx = in[1];
    if (data.shape.empty()) return Err(StatusCode::kInvalidArgument, "{}: data must have rank >= 1", where);
    KILN_ASSIGN_OR_RETURN(int64_t axis, AxisFor(where, axis_attr, static_cast<int64_t>(data.shape.size())));
    if (out[0].numel() == 0) return Status::Ok();
    const auto& ds = data.shape;
    const int64_t dim = ds[axis];
    if (dim == 0)
      return Err(StatusCode::kOutOfRange, "{}: cannot gather {} indices from the empty axis {} of data {}", where,
                 idx.numel(), axis, ShapeToString(ds));
    return KILN_CUDA_STATUS(LaunchGather(data.data, out[0].data, idx.data, idx.dtype == DataType::kInt64,
                                         Prod(ds, 0, axis), dim, Prod(ds, axis + 1, ds.size()), idx.numel(),
                                         static_cast<int>(DataTypeSize(data.dtype)), ctx.stream));
  }));
}

// ---- GatherElements / ScatterElements ----

// Geometry of an Elements op after the reference's shape checks. `updates`: the scatter's updates (or nullptr).
Result<ElementsGeometry> ElementsGeometryOf(const std::string& where, int64_t axis_attr, const DeviceTensor& data,
                                            const DeviceTensor& idx, const DeviceTensor* updates) {
  const auto& ds = data.shape;
  const auto& is = idx.shape;
  if (ds.empty() || ds.size() != is.size() || (updates && (updates->shape != is || updates->dtype != data.dtype)))
    return Err(StatusCode::kInvalidArgument, "{}: data {}, indices {}{}{} do not fit together", where,
               ShapeToString(ds), ShapeToString(is), updates ? " and updates " : "",
               updates ? ShapeToString(updates->shape) : "");
  KILN_RETURN_IF_ERROR(CheckRank(where, "data", ds.size()));
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisFor(where, axis_attr, static_cast<int64_t>(ds.size())));
  for (size_t d = 0; d < ds.size(); ++d)
    if (static_cast<int64_t>(d) != axis && is[d] > ds[d])
      return Err(StatusCode::kInvalidArgument, "{}: indices {} exceed data {} on axis {}", where, ShapeToString(is),
                 ShapeToString(ds), d);
  if (ds[axis] == 0 && idx.numel() > 0)
    return Err(StatusCode::kOutOfRange, "{}: indices {} point into the empty axis {} of data {}", where,
               ShapeToString(is), axis, ShapeToString(ds));
  ElementsGeometry g;
  g.rank = static_cast<int>(ds.size());
  g.axis = static_cast<int>(axis);
  g.axis_dim = ds[axis];
  const auto strides = StridesOf(ds);
  for (size_t d = 0; d < ds.size(); ++d) {
    g.index_shape[d] = is[d];
    g.data_strides[d] = strides[d];
  }
  return g;
}

// Checks constant indices of an Elements op against the data's axis.
Status CheckElementsConstIndices(const LayerSpec& spec, int64_t axis_attr) {
  const Node& n = spec.node;
  const Tensor* idx = ConstInput(n, 1);
  const auto* ds = KnownInputShape(spec, 0);
  if (!idx || !ds) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisFor(n.Where(), axis_attr, static_cast<int64_t>(ds->size())));
  return CheckIndexRange(n, *idx, {(*ds)[axis]}, {axis});
}

Result<std::unique_ptr<Layer>> CreateGatherElements(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckTypes(n, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.attr_int("axis", 0));
  KILN_RETURN_IF_ERROR(CheckElementsConstIndices(spec, axis_attr));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(new FnLayer([where, axis_attr](const LaunchContext& ctx,
                                                               const std::vector<DeviceTensor>& in,
                                                               std::vector<DeviceTensor>& out) -> Status {
    const DeviceTensor& data = in[0];
    const DeviceTensor& idx = in[1];
    KILN_ASSIGN_OR_RETURN(ElementsGeometry g, ElementsGeometryOf(where, axis_attr, data, idx, nullptr));
    if (idx.numel() == 0) return Status::Ok();
    return KILN_CUDA_STATUS(LaunchGatherElements(data.data, out[0].data, idx.data, idx.dtype == DataType::kInt64, g,
                                                 idx.numel(), static_cast<int>(DataTypeSize(data.dtype)),
                                                 ctx.stream));
  }));
}

Result<std::unique_ptr<Layer>> CreateScatterElements(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckTypes(n, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.attr_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int red, ReductionOf(n));
  const DataType dt = n.input(0)->dtype;
  if (!ScatterSupports(static_cast<int>(dt), red))
    return Err(StatusCode::kUnsupported, "{}: reduction '{}' on {} data is not supported by the CUDA kernel; use "
               "float32/float16/bfloat16/float64, an integer type or bool, or run this node on the CPU", n.Where(),
               n.gets("reduction", "none"), DataTypeName(dt));
  KILN_RETURN_IF_ERROR(CheckElementsConstIndices(spec, axis_attr));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(new FnLayer([where, axis_attr, red](const LaunchContext& ctx,
                                                                    const std::vector<DeviceTensor>& in,
                                                                    std::vector<DeviceTensor>& out) -> Status {
    const DeviceTensor& data = in[0];
    const DeviceTensor& idx = in[1];
    const DeviceTensor& upd = in[2];
    KILN_ASSIGN_OR_RETURN(ElementsGeometry g, ElementsGeometryOf(where, axis_attr, data, idx, &upd));
    KILN_RETURN_IF_ERROR(CopyData(data, out[0], ctx.stream));
    if (idx.numel() == 0) return Status::Ok();
    return KILN_CUDA_STATUS(LaunchScatterElements(out[0].data, out[0].numel(), upd.data, idx.data,
                                                  idx.dtype == DataType::kInt64, g, idx.numel(),
                                                  static_cast<int>(data.dtype), red, ctx.stream));
  }));
}

// ---- GatherND / ScatterND ----

// Constant indices of a ND op: component j of each tuple against data.shape[batch_dims + j].
Status CheckNDConstIndices(const LayerSpec& spec, int64_t batch_dims) {
  const Node& n = spec.node;
  const Tensor* idx = ConstInput(n, 1);
  const auto* ds = KnownInputShape(spec, 0);
  if (!idx || !ds || idx->rank() < 1) return Status::Ok();
  const int64_t k = idx->shape().back();
  if (k < 1 || batch_dims < 0 || batch_dims + k > static_cast<int64_t>(ds->size())) return Status::Ok();
  std::vector<int64_t> dims, axes;
  for (int64_t j = 0; j < k; ++j) {
    dims.push_back((*ds)[batch_dims + j]);
    axes.push_back(batch_dims + j);
  }
  return CheckIndexRange(n, *idx, dims, axes);
}

Result<std::unique_ptr<Layer>> CreateGatherND(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckTypes(n, 1));
  KILN_ASSIGN_OR_RETURN(int64_t b, n.attr_int("batch_dims", 0));
  KILN_RETURN_IF_ERROR(CheckNDConstIndices(spec, b));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(new FnLayer([where, b](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                                       std::vector<DeviceTensor>& out) -> Status {
    const DeviceTensor& data = in[0];
    const DeviceTensor& idx = in[1];
    const auto& ds = data.shape;
    const auto& is = idx.shape;
    const int64_t r = static_cast<int64_t>(ds.size()), q = static_cast<int64_t>(is.size());
    if (q < 1 || b < 0 || b >= std::min(r, q))
      return Err(StatusCode::kInvalidArgument, "{}: batch_dims {} is invalid for data {} and indices {}", where, b,
                 ShapeToString(ds), ShapeToString(is));
    const int64_t k = is.back();
    if (k < 1 || k > r - b)
      return Err(StatusCode::kInvalidArgument, "{}: indices.shape[-1] = {} must be in [1, {}]", where, k, r - b);
    KILN_RETURN_IF_ERROR(CheckRank(where, "indices.shape[-1]", static_cast<size_t>(k)));
    for (int64_t i = 0; i < b; ++i)
      if (ds[i] != is[i])
        return Err(StatusCode::kInvalidArgument, "{}: batch dimension {} differs: data {} vs indices {}", where, i,
                   ShapeToString(ds), ShapeToString(is));
    if (out[0].numel() == 0) return Status::Ok();
    GatherNDGeometry g;
    g.k = static_cast<int>(k);
    g.rows_per_batch = Prod(is, b, q - 1);
    g.slices_per_batch = Prod(ds, b, b + k);
    for (int64_t j = 0; j < k; ++j) {
      g.dims[j] = ds[b + j];
      g.slice_strides[j] = Prod(ds, b + j + 1, b + k);
      if (g.dims[j] == 0)
        return Err(StatusCode::kOutOfRange, "{}: indices {} point into the empty axis {} of data {}", where,
                   ShapeToString(is), b + j, ShapeToString(ds));
    }
    return KILN_CUDA_STATUS(LaunchGatherND(data.data, out[0].data, idx.data, idx.dtype == DataType::kInt64, g,
                                           Prod(is, 0, q - 1), Prod(ds, b + k, r),
                                           static_cast<int>(DataTypeSize(data.dtype)), ctx.stream));
  }));
}

Result<std::unique_ptr<Layer>> CreateScatterND(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckTypes(n, 1));
  KILN_ASSIGN_OR_RETURN(int red, ReductionOf(n));
  const DataType dt = n.input(0)->dtype;
  if (!ScatterSupports(static_cast<int>(dt), red))
    return Err(StatusCode::kUnsupported, "{}: reduction '{}' on {} data is not supported by the CUDA kernel; use "
               "float32/float16/bfloat16/float64, an integer type or bool, or run this node on the CPU", n.Where(),
               n.gets("reduction", "none"), DataTypeName(dt));
  KILN_RETURN_IF_ERROR(CheckNDConstIndices(spec, 0));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(new FnLayer([where, red](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                                         std::vector<DeviceTensor>& out) -> Status {
    const DeviceTensor& data = in[0];
    const DeviceTensor& idx = in[1];
    const DeviceTensor& upd = in[2];
    const auto& ds = data.shape;
    const auto& is = idx.shape;
    if (is.empty() || upd.dtype != data.dtype)
      return Err(StatusCode::kInvalidArgument, "{}: invalid indices {} or updates {}", where, ShapeToString(is),
                 DataTypeName(upd.dtype));
    const int64_t k = is.back();
    if (k < 0 || k > static_cast<int64_t>(ds.size()))
      return Err(StatusCode::kInvalidArgument, "{}: indices.shape[-1] = {} exceeds the rank of data {}", where, k,
                 ShapeToString(ds));
    KILN_RETURN_IF_ERROR(CheckRank(where, "indices.shape[-1]", static_cast<size_t>(k)));
    std::vector<int64_t> us(is.begin(), is.end() - 1);
    us.insert(us.end(), ds.begin() + k, ds.end());
    if (upd.shape != us)
      return Err(StatusCode::kInvalidArgument, "{}: updates {} must have shape {}", where, ShapeToString(upd.shape),
                 ShapeToString(us));
    KILN_RETURN_IF_ERROR(CopyData(data, out[0], ctx.stream));
    const int64_t rows = Prod(is, 0, is.size() - 1), slice = Prod(ds, k, ds.size());
    if (rows == 0 || slice == 0) return Status::Ok();
    ScatterNDGeometry g;
    g.k = static_cast<int>(k);
    for (int64_t j = 0; j < k; ++j) {
      g.dims[j] = ds[j];
      g.slice_strides[j] = Prod(ds, j + 1, k);
      if (g.dims[j] == 0)
        return Err(StatusCode::kOutOfRange, "{}: indices {} point into the empty axis {} of data {}", where,
                   ShapeToString(is), j, ShapeToString(ds));
    }
    return KILN_CUDA_STATUS(LaunchScatterND(out[0].data, out[0].numel(), upd.data, idx.data,
                                            idx.dtype == DataType::kInt64, g, rows, slice,
                                            static_cast<int>(data.dtype), red, ctx.stream));
  }));
}

}  // namespace

void RegisterIndexLayers(LayerRegistry& r) {
  r.Add("Gather", {nullptr, CreateGather});
  r.Add("GatherElements", {nullptr, CreateGatherElements});
  r.Add("GatherND", {nullptr, CreateGatherND});
  r.Add("ScatterElements", {nullptr, CreateScatterElements});
  r.Add("ScatterND", {nullptr, CreateScatterND});
  RegisterIndexMiscLayers(r);
  RegisterResizeLayers(r);
  RegisterGridLayers(r);
}

}  // namespace kiln::cuda
