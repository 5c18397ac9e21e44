// CUDA layers of LRN and MeanVarianceNormalization (kernels in lrn_mvn.cu), with the CPU reference's semantics
// (backends/cpu/tensor_more_ops.cpp): float32, float16, bfloat16 and float64 data. LRN computes in float32
// (float64 for float64 data); MVN's statistics are double, as on the CPU.
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/layer.h"
#include "backends/cuda/lrn_mvn_kernels.h"
#include "core/error.h"

namespace kiln::cuda {

void RegisterLrnMvnLayers(LayerRegistry& r);

namespace {

bool IsFloatData(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

Status CheckFloatInput(const Node& n) {
  const Value* x = n.input(0);
  if (!x) return Err(StatusCode::kInvalidModel, "{}: input X is missing", n.Where());
  if (!IsFloatData(x->dtype))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA {} takes float32, float16, bfloat16 or float64 input, not {}; cast the input or run the "
               "node on the CPU",
               n.Where(), n.op_type, DataTypeName(x->dtype));
  return Status::Ok();
}

Status Launched(const std::string& where, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Err(StatusCode::kCudaError, "{}: launching the {} kernels failed: {} ({})", where, what,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

// ---- LRN ----

Result<std::unique_ptr<Layer>> CreateLrn(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckFloatInput(n));
  KILN_ASSIGN_OR_RETURN(const int64_t size, n.attr_int("size", 0));
  if (size < 1) return Err(StatusCode::kInvalidModel, "{}: attribute size must be at least 1, got {}", n.Where(), size);
  KILN_ASSIGN_OR_RETURN(const float alpha, n.attr_float("alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(const float beta, n.attr_float("beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(const float bias, n.attr_float("bias", 1.f));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        const DeviceTensor& x = in[0];
        if (x.shape.size() < 3)
          return Err(StatusCode::kInvalidArgument, "{}: LRN needs N, C and spatial dims, got {}", where,
                     ShapeToString(x.shape));
        int64_t spatial = 1;
        for (size_t d = 2; d < x.shape.size(); ++d) spatial *= x.shape[d];
        return Launched(where,
                        LaunchLrn(static_cast<int>(x.dtype), x.data, out[0].data, x.shape[0], x.shape[1], spatial,
                                  size, alpha, beta, bias, ctx.stream),
                        "LRN");
      }));
}

// ---- MeanVarianceNormalization ----

class MvnLayer : public Layer {
 public:
  MvnLayer(std::string where, std::vector<int64_t> axes) : where_(std::move(where)), axes_(std::move(axes)) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    auto a = Args(in[0]);
    return a.ok() ? MvnWorkspaceBytes(*a) : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    KILN_ASSIGN_OR_RETURN(MvnArgs a, Args(in[0]));
    a.x = in[0].data;
    a.y = out[0].data;
    if (ctx.workspace_bytes < MvnWorkspaceBytes(a))
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where_,
                 ctx.workspace_bytes, MvnWorkspaceBytes(a));
    return Launched(where_, LaunchMvn(a, ctx.workspace, ctx.workspace_bytes, ctx.stream), "MeanVarianceNormalization");
  }

 private:
  // The kernel's view of x: unit dims dropped, neighbouring dims of the same kind (normalized or kept) merged.
  Result<MvnArgs> Args(const DeviceTensor& x) const {
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    std::vector<bool> reduced(static_cast<size_t>(rank), false);
    for (int64_t a : axes_) {
      if (a < -rank || a >= rank)
        return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for the input {}", where_, a,
                   ShapeToString(x.shape));
      reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
    }
    std::vector<int64_t> dims;
    std::vector<bool> kinds;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t e = x.shape[static_cast<size_t>(d)];
      if (e == 1) continue;
      const bool r = reduced[static_cast<size_t>(d)];
      if (!dims.empty() && kinds.back() == r) dims.back() *= e;
      else dims.push_back(e), kinds.push_back(r);
    }
    if (dims.empty()) dims.push_back(1), kinds.push_back(true);
    if (dims.size() > 8)
      return Err(StatusCode::kUnsupported,
                 "{}: the input {} with axes {} alternates normalized and kept dims {} times, above the CUDA "
                 "kernel's 8",
                 where_, ShapeToString(x.shape), ShapeToString(axes_), dims.size());
    MvnArgs a;
    a.dtype = static_cast<int>(x.dtype);
    a.rank = static_cast<int>(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      a.dims[d] = dims[d];
      a.reduced[d] = kinds[d];
    }
    return a;
  }

  std::string where_;
  std::vector<int64_t> axes_;
};

Result<std::unique_ptr<Layer>> CreateMvn(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckFloatInput(n));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, n.attr_ints("axes", {0, 2, 3}));
  return std::unique_ptr<Layer>(std::make_unique<MvnLayer>(n.Where(), std::move(axes)));
}

}  // namespace

void RegisterLrnMvnLayers(LayerRegistry& r) {
  LayerFactory lrn, mvn;
  lrn.create = CreateLrn;
  mvn.create = CreateMvn;
  r.Add("LRN", std::move(lrn));
  r.Add("MeanVarianceNormalization", std::move(mvn));
}

}  // namespace kiln::cuda
