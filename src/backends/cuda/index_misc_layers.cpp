// CUDA layers of OneHot, NonZero, NonMaxSuppression and Compress (kernels in index_misc.cu, nms.cu and compress.cu).
// NonZero, NonMaxSuppression and Compress have data-dependent output sizes: they report an upper bound
// (MaxOutputElements), synchronize their stream to read the real count, and set the output's shape. Compress with a
// condition known on the host (a constant) has a known output shape and does not synchronize.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "backends/cuda/compress_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/index_layer_util.h"
#include "backends/cuda/index_misc_kernels.h"
#include "backends/cuda/nms_kernels.h"

namespace kiln::cuda {

void RegisterIndexMiscLayers(LayerRegistry& r);

namespace {

using index_util::Prod;

// ---- OneHot ----

Result<std::unique_ptr<Layer>> CreateOneHot(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  const Value* ind = n.input(0);
  const Value* values = n.input(2);
  if (!ind || !n.input(1) || !values)
    return Err(StatusCode::kInvalidModel, "{}: indices, depth and values are required", n.Where());
  if (!OneHotSupportsIndexType(static_cast<int>(ind->dtype)))
    return Err(StatusCode::kUnsupported, "{}: indices of type {} are not supported by the CUDA kernel; cast them to "
               "int64 or run this node on the CPU", n.Where(), DataTypeName(ind->dtype));
  const size_t es = DataTypeSize(values->dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return Err(StatusCode::kUnsupported, "{}: values of type {} are not supported by the CUDA kernel (1/2/4/8-byte "
               "types only); run this node on the CPU", n.Where(), DataTypeName(values->dtype));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.attr_int("axis", -1));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(new FnLayer([where, axis_attr](const LaunchContext& ctx,
                                                               const std::vector<DeviceTensor>& in,
                                                               std::vector<DeviceTensor>& out) -> Status {
    const DeviceTensor& ind = in[0];
    const DeviceTensor& values = in[2];
    DeviceTensor& o = out[0];
    if (values.numel() != 2)
      return Err(StatusCode::kInvalidArgument, "{}: values must hold [off, on], got shape {}", where,
                 ShapeToString(values.shape));
    const int64_t out_rank = static_cast<int64_t>(ind.shape.size()) + 1;
    auto axis = NormalizeAxis(axis_attr, out_rank);
    if (!axis)
      return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", where, axis_attr, out_rank);
    if (static_cast<int64_t>(o.shape.size()) != out_rank)
      return Err(StatusCode::kInternal, "{}: output shape {} does not have rank {}", where, ShapeToString(o.shape),
                 out_rank);
    const int64_t depth = o.shape[*axis];  // shape inference read it from the depth input
    if (o.numel() == 0) return Status::Ok();
    const int64_t outer = Prod(ind.shape, 0, *axis), inner = Prod(ind.shape, *axis, ind.shape.size());
    return KILN_CUDA_STATUS(LaunchOneHot(ind.data, static_cast<int>(ind.dtype), values.data,
                                         static_cast<int>(DataTypeSize(values.dtype)), o.data, outer, depth, inner,
                                         ctx.stream));
  }));
}

// ---- NonZero ----

class NonZeroLayer : public Layer {
 public:
  explicit NonZeroLayer(std::string where) : where_(std::move(where)) {}
  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    return NonZeroWorkspaceBytes(in[0].numel());
  }
  int64_t MaxOutputElements(size_t i, const std::vector<DeviceTensor>& in) const override {
    return std::max<int64_t>(1, static_cast<int64_t>(in[0].shape.size())) * in[0].numel();
  }
  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const DeviceTensor& x = in[0];
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(x.shape.size()));
    if (x.shape.size() > 8)
      return Err(StatusCode::kUnsupported, "{}: rank {} is above the CUDA kernel's 8", where_, x.shape.size());
    const int64_t n = x.numel();
    if (ctx.workspace_bytes < NonZeroWorkspaceBytes(n))
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where_,
                 ctx.workspace_bytes, NonZeroWorkspaceBytes(n));
    int64_t count = 0;
    KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(RunNonZero(x.data, static_cast<int>(x.dtype), n,
                                                     static_cast<int>(x.shape.size()), x.shape.data(), ctx.workspace,
                                                     ctx.workspace_bytes, static_cast<int64_t*>(out[0].data), &count,
                                                     ctx.stream)));
    out[0].shape = {rows, count};
    return Status::Ok();
  }

 private:
  std::string where_;
};

Result<std::unique_ptr<Layer>> CreateNonZero(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  if (!n.input(0)) return Err(StatusCode::kInvalidModel, "{}: input X is required", n.Where());
  if (!NonZeroSupportsType(static_cast<int>(n.input(0)->dtype)))
    return Err(StatusCode::kUnsupported, "{}: input type {} is not supported by the CUDA kernel; run this node on the "
               "CPU", n.Where(), DataTypeName(n.input(0)->dtype));
  return std::unique_ptr<Layer>(new NonZeroLayer(n.Where()));
}

// ---- NonMaxSuppression ----

// Element 0 of an optional scalar input: from its host copy, else read from the device (this layer synchronizes
// anyway). nullopt when the input is omitted or empty.
Result<std::optional<Tensor>> ReadScalar(const DeviceTensor& t, cudaStream_t stream) {
  if (!t.present() || t.numel() == 0) return std::optional<Tensor>();
  Tensor h(t.dtype, {1});
  if (t.host) {
    std::memcpy(h.raw(), t.host->raw(), DataTypeSize(t.dtype));
  } else {
    KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(
        cudaMemcpyAsync(h.raw(), t.data, DataTypeSize(t.dtype), cudaMemcpyDeviceToHost, stream)));
    KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(cudaStreamSynchronize(stream)));
  }
  return std::optional<Tensor>(std::move(h));
}

bool IsNmsFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

class NmsLayer : public Layer {
 public:
  NmsLayer(std::string where, bool center) : where_(std::move(where)), center_(center) {}

  // Upper bound of max_output_boxes_per_class from what the host knows (the box count when unknown).
  static int64_t MaxPerClassBound(const std::vector<DeviceTensor>& in) {
    const int64_t nboxes = in[0].shape.size() == 3 ? in[0].shape[1] : 0;
    if (in.size() > 2 && in[2].present() && in[2].numel() > 0 && in[2].host)
      return std::clamp<int64_t>(in[2].host->GetAsInt(0), 0, nboxes);
    if (in.size() <= 2 || !in[2].present() || in[2].numel() == 0) return 0;  // omitted: no box is selected
    return nboxes;
  }
  static NmsParams Geometry(const std::vector<DeviceTensor>& in) {
    NmsParams p;
    if (in[0].shape.size() == 3 && in[1].shape.size() == 3) {
      p.batches = in[0].shape[0];
      p.num_boxes = in[0].shape[1];
      p.classes = in[1].shape[1];
    }
    return p;
  }
  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    NmsParams p = Geometry(in);
    p.max_output_boxes_per_class = MaxPerClassBound(in);
    return NmsWorkspaceBytes(p);
  }
  int64_t MaxOutputElements(size_t i, const std::vector<DeviceTensor>& in) const override {
    const NmsParams p = Geometry(in);
    return p.batches * p.classes * MaxPerClassBound(in) * 3;
  }
  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const DeviceTensor& boxes = in[0];
    const DeviceTensor& scores = in[1];
    const auto& bs = boxes.shape;
    const auto& ss = scores.shape;
    if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || bs[0] != ss[0] || bs[1] != ss[2])
      return Err(StatusCode::kInvalidArgument,
                 "{}: boxes must be [batch, boxes, 4] and scores [batch, classes, boxes], got {} and {}", where_,
                 ShapeToString(bs), ShapeToString(ss));
    NmsParams p = Geometry(in);
    p.center_point_box = center_;
    auto input = [&](size_t i) { return i < in.size() ? in[i] : DeviceTensor{}; };
    KILN_ASSIGN_OR_RETURN(auto max_out, ReadScalar(input(2), ctx.stream));
    KILN_ASSIGN_OR_RETURN(auto iou, ReadScalar(input(3), ctx.stream));
    KILN_ASSIGN_OR_RETURN(auto score, ReadScalar(input(4), ctx.stream));
    p.max_output_boxes_per_class = max_out ? std::max<int64_t>(0, max_out->GetAsInt(0)) : 0;
    p.iou_threshold = iou ? static_cast<float>(iou->GetAsDouble(0)) : 0.f;
    p.has_score_threshold = score.has_value();
    p.score_threshold = score ? static_cast<float>(score->GetAsDouble(0)) : 0.f;
    if (p.iou_threshold < 0.f || p.iou_threshold > 1.f)
      return Err(StatusCode::kInvalidArgument, "{}: iou_threshold {} must be in [0, 1]", where_, p.iou_threshold);
    if (p.batches * p.classes * p.num_boxes > kNmsMaxItems)
      return Err(StatusCode::kUnsupported, "{}: {} batches x {} classes x {} boxes is above the CUDA kernel's limit "
                 "of {} scores", where_, p.batches, p.classes, p.num_boxes, kNmsMaxItems);
    const size_t need = NmsWorkspaceBytes(p);
    if (ctx.workspace_bytes < need)
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where_,
                 ctx.workspace_bytes, need);
    int64_t selected = 0;
    KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(RunNms(boxes.data, static_cast<int>(boxes.dtype), scores.data,
                                                 static_cast<int>(scores.dtype), p, ctx.workspace, ctx.workspace_bytes,
                                                 static_cast<int64_t*>(out[0].data), &selected, ctx.stream)));
    out[0].shape = {selected, 3};
    return Status::Ok();
  }

 private:
  std::string where_;
  bool center_;
};

Result<std::unique_ptr<Layer>> CreateNms(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  if (!n.input(0) || !n.input(1)) return Err(StatusCode::kInvalidModel, "{}: boxes and scores are required", n.Where());
  for (size_t i : {0, 1})
    if (!IsNmsFloat(n.input(i)->dtype))
      return Err(StatusCode::kUnsupported, "{}: {} of type {} are not supported by the CUDA kernel (float32, float16, "
                 "bfloat16); cast them or run this node on the CPU", n.Where(), i == 0 ? "boxes" : "scores",
                 DataTypeName(n.input(i)->dtype));
  KILN_ASSIGN_OR_RETURN(int64_t cpb, n.attr_int("center_point_box", 0));
  if (cpb != 0 && cpb != 1)
    return Err(StatusCode::kInvalidModel, "{}: center_point_box must be 0 or 1, got {}", n.Where(), cpb);
  return std::unique_ptr<Layer>(new NmsLayer(n.Where(), cpb == 1));
}

// ---- Compress ----

// The input seen as [outer, dim, row] with `dim` the compressed axis (the whole flattened input without an axis),
// and the condition entries that count: the first min(condition length, dim), as the CPU reference takes them.
struct CompressGeometry {
  int64_t outer = 1, dim = 0, row = 1, used = 0;
  int axis = -1;  // normalized; -1: flattened
};

class CompressLayer : public Layer {
 public:
  CompressLayer(std::string where, std::optional<int64_t> axis) : where_(std::move(where)), axis_(axis) {}

  Result<CompressGeometry> Geometry(const std::vector<DeviceTensor>& in) const {
    const DeviceTensor& x = in[0];
    const DeviceTensor& cond = in[1];
    if (cond.shape.size() != 1)
      return Err(StatusCode::kInvalidArgument, "{}: condition must be a 1-D bool tensor, got shape {}", where_,
                 ShapeToString(cond.shape));
    CompressGeometry g;
    if (!axis_) {
      g.dim = x.numel();
    } else {
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      if (*axis_ < -rank || *axis_ >= rank)
        return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for shape {}", where_, *axis_,
                   ShapeToString(x.shape));
      g.axis = static_cast<int>(*axis_ < 0 ? *axis_ + rank : *axis_);
      const size_t a = static_cast<size_t>(g.axis);
      g.outer = Prod(x.shape, 0, a);
      g.dim = x.shape[a];
      g.row = Prod(x.shape, a + 1, x.shape.size());
    }
    g.used = std::min(cond.shape[0], g.dim);
    return g;
  }
  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    auto g = Geometry(in);
    return CompressWorkspaceBytes(g.ok() ? g->used : 0);
  }
  // A condition known on the host gives the output's shape at inference; otherwise every used entry may be true.
  int64_t MaxOutputElements(size_t i, const std::vector<DeviceTensor>& in) const override {
    if (i != 0 || in[1].host) return -1;
    auto g = Geometry(in);
    return g.ok() ? g->outer * g->used * g->row : 0;
  }
  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const DeviceTensor& x = in[0];
    const DeviceTensor& cond = in[1];
    KILN_ASSIGN_OR_RETURN(const CompressGeometry g, Geometry(in));
    if (ctx.workspace_bytes < CompressWorkspaceBytes(g.used) || !ctx.workspace)
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where_,
                 ctx.workspace_bytes, CompressWorkspaceBytes(g.used));
    int64_t* selected = CompressSelected(ctx.workspace);
    int64_t* count_on_device = CompressCount(ctx.workspace, g.used);
    int64_t count = 0;
    if (g.used > 0) {
      KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(LaunchCompressSelect(cond.data, g.used, selected, count_on_device,
                                                                 ctx.stream)));
      if (cond.host) {  // no synchronization: the count is known here
        if (cond.host->dtype() != DataType::kBool || cond.host->numel() < g.used)
          return Err(StatusCode::kInternal, "{}: the host copy of the condition is {}", where_,
                     cond.host->Describe());
        for (int64_t j = 0; j < g.used; ++j) count += cond.host->data<bool>()[j] ? 1 : 0;
      } else {
        KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(
            cudaMemcpyAsync(&count, count_on_device, sizeof(int64_t), cudaMemcpyDeviceToHost, ctx.stream)));
        KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(cudaStreamSynchronize(ctx.stream)));
      }
    }
    std::vector<int64_t> shape = {count};
    if (g.axis >= 0) {
      shape = x.shape;
      shape[static_cast<size_t>(g.axis)] = count;
    }
    // An output whose shape inference gave was allocated at that size; an open one (empty shape) at the bound.
    const int64_t elems = g.outer * count * g.row;
    const int64_t room = out[0].shape.empty() ? g.outer * g.used * g.row : out[0].numel();
    if (elems > room)
      return Err(StatusCode::kInternal, "{}: the output needs {} elements but was given room for {}", where_, elems,
                 room);
    out[0].shape = std::move(shape);
    if (elems == 0) return Status::Ok();
    const int64_t row_bytes = g.row * static_cast<int64_t>(DataTypeSize(x.dtype));
    return KILN_CUDA_STATUS(
        LaunchCompressGather(x.data, out[0].data, selected, g.outer, g.dim, count, row_bytes, ctx.stream));
  }

 private:
  std::string where_;
  std::optional<int64_t> axis_;  // absent: the input is flattened
};

Result<std::unique_ptr<Layer>> CreateCompress(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  if (!n.input(0) || !n.input(1))
    return Err(StatusCode::kInvalidModel, "{}: input and condition are required", n.Where());
  if (n.input(1)->dtype != DataType::kBool)
    return Err(StatusCode::kInvalidModel, "{}: condition must be bool, got {}", n.Where(),
               DataTypeName(n.input(1)->dtype));
  if (DataTypeSize(n.input(0)->dtype) == 0)
    return Err(StatusCode::kUnsupported, "{}: input type {} is not supported by the CUDA kernel; run this node on the "
               "CPU", n.Where(), DataTypeName(n.input(0)->dtype));
  std::optional<int64_t> axis;
  if (n.attrs.count("axis")) {
    KILN_ASSIGN_OR_RETURN(const int64_t a, n.attr_int("axis", 0));
    axis = a;
  }
  return std::unique_ptr<Layer>(new CompressLayer(n.Where(), axis));
}

}  // namespace

void RegisterIndexMiscLayers(LayerRegistry& r) {
  r.Add("OneHot", {nullptr, CreateOneHot});
  r.Add("NonZero", {nullptr, CreateNonZero});
  r.Add("NonMaxSuppression", {nullptr, CreateNms});
  LayerFactory compress;
  compress.create = CreateCompress;
  r.Add("Compress", std::move(compress));
}

}  // namespace kiln::cuda
