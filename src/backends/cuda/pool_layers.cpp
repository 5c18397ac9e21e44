// CUDA layers of the pooling family: MaxPool (with the optional int64 Indices output and storage_order),
// AveragePool (count_include_pad), LpPool, over 1..6 spatial dims with strides, pads, dilations, auto_pad and
// ceil_mode; GlobalMaxPool, GlobalAveragePool, GlobalLpPool. Kernels are in pool.cu. Window geometry (pads for
// auto_pad) is resolved at every run from the input's shape; output sizes come from shape inference.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "backends/cuda/pool_kernels.h"
#include "core/error.h"
#include "ops/conv_geometry.h"

namespace kiln::cuda {

namespace {

bool IsFloatData(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// The rank of input 0 known at creation time, or -1.
int64_t KnownRank(const LayerSpec& spec) {
  if (!spec.input_shapes.empty() && !spec.input_shapes[0].empty())
    return static_cast<int64_t>(spec.input_shapes[0].size());
  const Value* x = spec.node.input(0);
  if (x && x->has_shape) return static_cast<int64_t>(x->shape.size());
  return -1;
}

Status CheckPool(const LayerSpec& spec, int kind) {
  const Node& n = spec.node;
  const Value* x = n.input(0);
  if (!x) return Err(StatusCode::kInvalidModel, "{}: input X is missing", n.Where());
  const bool int_ok = kind == kPoolMax && (x->dtype == DataType::kInt8 || x->dtype == DataType::kUInt8);
  if (!IsFloatData(x->dtype) && !int_ok)
    return Err(StatusCode::kUnsupported, "{}: the CUDA {} supports float32, float16, bfloat16{} inputs, not {}",
               n.Where(), n.op_type, kind == kPoolMax ? ", int8 and uint8" : "", DataTypeName(x->dtype));
  const int64_t rank = KnownRank(spec);
  if (rank >= 0 && (rank < 3 || rank > 2 + kPoolMaxSpatialDims))
    return Err(StatusCode::kUnsupported, "{}: the CUDA {} supports inputs of rank 3 to {}, this one has rank {}",
               n.Where(), n.op_type, 2 + kPoolMaxSpatialDims, rank);
  if (kind == kPoolLp && n.geti("p", 2) < 1)
    return Err(StatusCode::kInvalidArgument, "{}: p must be >= 1, got {}", n.Where(), n.geti("p", 2));
  return Status::Ok();
}

// ---- Windowed pools ----

class WindowPoolLayer : public Layer {
 public:
  std::string where;
  int kind = kPoolMax;
  WindowParams w;  // attributes as given (pads before any auto_pad resolution)
  bool count_include_pad = false;
  bool uncount_overhang = false;  // AveragePool-22 (ops/conv_geometry.h: UncountsPoolOverhang)
  int p = 2;
  bool column_major_indices = false;
  bool nhwc = false;  // kiln_layout = "NHWC": X and Y are [N, H, W, C]

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    const DeviceTensor& x = inputs[0];
    const DeviceTensor& y = outputs[0];
    const int64_t nsp = w.nsp;
    if (static_cast<int64_t>(x.shape.size()) != nsp + 2 || y.shape.size() != x.shape.size())
      return Err(StatusCode::kInvalidArgument, "{}: X {} and Y {} must both have rank {}", where,
                 ShapeToString(x.shape), ShapeToString(y.shape), nsp + 2);
    PoolWindowArgs a;
    a.x = x.data;
    a.y = y.data;
    a.dtype = static_cast<int>(x.dtype);
    a.kind = kind;
    a.nsp = static_cast<int>(nsp);
    const int64_t ch = nhwc ? x.shape.back() : x.shape[1];
    const int64_t sp0 = nhwc ? 1 : 2;  // first spatial dim
    a.planes = x.shape[0] * ch;
    if (nhwc) a.channels_last = ch;
    a.in_size = a.out_size = a.ksize = 1;
    const bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER";
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t in = x.shape[sp0 + d], s = w.strides[d];
      const int64_t ek = (w.kernel[d] - 1) * w.dilations[d] + 1;
      a.in[d] = in;
      a.out[d] = y.shape[sp0 + d];
      a.kernel[d] = w.kernel[d];
      a.stride[d] = s;
      a.dilation[d] = w.dilations[d];
      if (same) {  // as ForwardOutputDims in shape/conv_geometry.cpp
        const int64_t o = (in + s - 1) / s;
        const int64_t total = std::max<int64_t>(0, (o - 1) * s + ek - in);
        const int64_t small = total / 2;
        a.pad_begin[d] = w.auto_pad == "SAME_UPPER" ? small : total - small;
      } else if (w.auto_pad == "VALID") {
        a.pad_begin[d] = 0;
      } else {
        a.pad_begin[d] = w.pads[d];
        a.pad_end[d] = w.pads[nsp + d];
      }
      a.in_size *= a.in[d];
      a.out_size *= a.out[d];
      a.ksize *= a.kernel[d];
    }
    if (outputs.size() > 1 && outputs[1].present() && outputs[1].data) {
      if (outputs[1].dtype != DataType::kInt64)
        return Err(StatusCode::kInvalidArgument, "{}: Indices must be int64, not {}", where,
                   DataTypeName(outputs[1].dtype));
      if (nhwc)
        return Err(StatusCode::kUnsupported, "{}: the channels-last (NHWC) MaxPool has no Indices output", where);
      a.indices = static_cast<int64_t*>(outputs[1].data);
    }
    a.count_include_pad = count_include_pad;
    a.uncount_overhang = uncount_overhang;
    a.p = p;
    a.column_major_indices = column_major_indices;
    if (a.planes * a.out_size == 0) return Status::Ok();
    cudaError_t e = LaunchWindowPool(a, ctx.stream);
    if (e != cudaSuccess)
      return Err(StatusCode::kCudaError, "{}: launching the {} kernel failed: {} ({})", where,
                 kind == kPoolMax ? "MaxPool" : kind == kPoolAvg ? "AveragePool" : "LpPool", cudaGetErrorString(e),
                 cudaGetErrorName(e));
    return KILN_CUDA_STATUS(cudaGetLastError());
  }
};

Result<std::unique_ptr<Layer>> CreateWindowPool(const LayerSpec& spec, int kind) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckPool(spec, kind));
  const int64_t rank = KnownRank(spec);
  if (rank < 0)
    return Err(StatusCode::kUnsupported, "{}: the rank of X must be known to create the CUDA {}", n.Where(),
               n.op_type);
  auto l = std::make_unique<WindowPoolLayer>();
  l->where = n.Where();
  l->kind = kind;
  KILN_ASSIGN_OR_RETURN(l->w, ReadWindowParams(n, rank - 2, {}, false));
  l->count_include_pad = n.geti("count_include_pad", 0) != 0;
  l->uncount_overhang = UncountsPoolOverhang(n, l->w);
  l->p = static_cast<int>(n.geti("p", 2));
  l->column_major_indices = kind == kPoolMax && n.geti("storage_order", 0) == 1;
  const std::string layout = n.gets("kiln_layout", "NCHW");
  if (layout != "NCHW" && (layout != "NHWC" || rank != 4 || kind == kPoolLp))
    return Err(StatusCode::kUnsupported, "{}: kiln_layout '{}' is not supported here (NHWC: rank-4 Max/AveragePool)",
               n.Where(), layout);
  l->nhwc = layout == "NHWC";
  return std::unique_ptr<Layer>(std::move(l));
}

// ---- Global pools ----

Result<std::unique_ptr<Layer>> CreateGlobalPool(const LayerSpec& spec, int kind) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckPool(spec, kind));
  const std::string where = n.Where();
  const int p = static_cast<int>(n.geti("p", 2));
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [where, kind, p](const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                       std::vector<DeviceTensor>& outputs) -> Status {
        const DeviceTensor& x = inputs[0];
        if (x.shape.size() < 3)
          return Err(StatusCode::kInvalidArgument, "{}: X {} must have rank >= 3", where, ShapeToString(x.shape));
        const int64_t planes = x.shape[0] * x.shape[1];
        int64_t plane_size = 1;
        for (size_t d = 2; d < x.shape.size(); ++d) plane_size *= x.shape[d];
        if (planes == 0) return Status::Ok();
        cudaError_t e = LaunchGlobalPool(x.data, outputs[0].data, static_cast<int>(x.dtype), kind, p, planes,
                                         plane_size, ctx.stream);
        if (e != cudaSuccess)
          return Err(StatusCode::kCudaError, "{}: launching the global pool kernel failed: {} ({})", where,
                     cudaGetErrorString(e), cudaGetErrorName(e));
        return KILN_CUDA_STATUS(cudaGetLastError());
      }));
}

LayerFactory PoolFactory(int kind, bool global) {
  LayerFactory f;
  f.tactics = [kind](const LayerSpec& spec) -> Result<std::vector<std::string>> {
    KILN_RETURN_IF_ERROR(CheckPool(spec, kind));
    return std::vector<std::string>{"default"};
  };
  f.create = [kind, global](const LayerSpec& spec, const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    if (tactic != "default")
      return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}' (this layer has only 'default')",
                 spec.node.Where(), tactic);
    return global ? CreateGlobalPool(spec, kind) : CreateWindowPool(spec, kind);
  };
  return f;
}

}  // namespace

void RegisterPoolLayers(LayerRegistry& r) {
  r.Add("MaxPool", PoolFactory(kPoolMax, false));
  r.Add("AveragePool", PoolFactory(kPoolAvg, false));
  r.Add("LpPool", PoolFactory(kPoolLp, false));
  r.Add("GlobalMaxPool", PoolFactory(kPoolMax, true));
  r.Add("GlobalAveragePool", PoolFactory(kPoolAvg, true));
  r.Add("GlobalLpPool", PoolFactory(kPoolLp, true));
}

}  // namespace kiln::cuda
