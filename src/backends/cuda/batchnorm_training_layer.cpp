// CUDA layer of BatchNormalization with training_mode = 1 (opset 14+; kernels in norm_training.cu): Y from the
// batch's per-channel mean and biased variance, and the optional running_mean / running_var outputs
// (input_mean * momentum + batch mean * (1 - momentum), the variance likewise), as the CPU reference computes them.
// The inference BatchNormalization layer (norm_layers.cpp) hands training-mode nodes to the functions here.
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backends/cuda/layer.h"
#include "backends/cuda/norm_training_kernels.h"
#include "core/error.h"

namespace kiln::cuda {

Status CheckBatchNormTraining(const Node& n);
Result<std::unique_ptr<Layer>> CreateBatchNormTraining(const LayerSpec& spec);

namespace {

int Code(DataType t) { return static_cast<int>(t); }

bool Given(const std::vector<DeviceTensor>& v, size_t i) { return i < v.size() && v[i].present(); }

class BatchNormTrainingLayer : public Layer {
 public:
  BatchNormTrainingLayer(std::string where, float eps, float momentum)
      : where_(std::move(where)), eps_(eps), momentum_(momentum) {}

  struct Geometry {
    int64_t N = 0, C = 0, inner = 1;
  };
  static Geometry Of(const std::vector<int64_t>& xs) {
    Geometry g;
    if (xs.size() < 2) return g;
    g.N = xs[0];
    g.C = xs[1];
    for (size_t d = 2; d < xs.size(); ++d) g.inner *= xs[d];
    return g;
  }

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    const Geometry g = Of(in[0].shape);
    return BatchNormTrainingWorkspaceBytes(g.N, g.C, g.inner);
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const DeviceTensor& x = in[0];
    if (x.shape.size() < 2)
      return Err(StatusCode::kInvalidArgument, "{}: X must have rank >= 2, its shape is {}", where_,
                 ShapeToString(x.shape));
    const Geometry g = Of(x.shape);
    for (size_t i = 1; i < 5; ++i)
      if (in[i].numel() != g.C)
        return Err(StatusCode::kInvalidArgument, "{}: input {} must have {} elements, its shape is {}", where_, i, g.C,
                   ShapeToString(in[i].shape));
    BatchNormTrainingArgs a;
    a.x = x.data;
    a.y = out[0].data;
    a.dtype = Code(x.dtype);
    a.scale = in[1].data;
    a.scale_dtype = Code(in[1].dtype);
    a.bias = in[2].data;
    a.bias_dtype = Code(in[2].dtype);
    a.input_mean = in[3].data;
    a.input_mean_dtype = Code(in[3].dtype);
    a.input_var = in[4].data;
    a.input_var_dtype = Code(in[4].dtype);
    for (size_t o = 1; o < 3; ++o) {
      if (!Given(out, o)) continue;
      if (out[o].numel() != g.C)
        return Err(StatusCode::kInternal, "{}: output {} has shape {}, not [{}]", where_, o,
                   ShapeToString(out[o].shape), g.C);
      (o == 1 ? a.running_mean : a.running_var) = out[o].data;
      (o == 1 ? a.running_mean_dtype : a.running_var_dtype) = Code(out[o].dtype);
    }
    a.N = g.N;
    a.C = g.C;
    a.inner = g.inner;
    a.eps = eps_;
    a.momentum = momentum_;
    if (g.C == 0) return Status::Ok();
    const size_t need = BatchNormTrainingWorkspaceBytes(g.N, g.C, g.inner);
    if (ctx.workspace_bytes < need || !ctx.workspace)
      return Err(StatusCode::kInternal, "{}: the workspace has {} bytes, {} are needed", where_, ctx.workspace_bytes,
                 need);
    const cudaError_t e = LaunchBatchNormTraining(a, ctx.workspace, ctx.workspace_bytes, ctx.stream);
    if (e != cudaSuccess)
      return Err(StatusCode::kCudaError, "{}: launching the BatchNormalization training kernels failed: {} ({})",
                 where_, cudaGetErrorString(e), cudaGetErrorName(e));
    return Status::Ok();
  }

 private:
  std::string where_;
  float eps_, momentum_;
};

}  // namespace

Status CheckBatchNormTraining(const Node& n) {
  const Value* x = n.input(0);
  if (!x) return Err(StatusCode::kInvalidModel, "{}: input X is missing", n.Where());
  static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i)
    if (!n.input(i)) return Err(StatusCode::kInvalidModel, "{}: input {} ({}) is missing", n.Where(), i, kNames[i]);
  for (size_t i = 0; i < 5; ++i)
    if (!BatchNormTrainingSupports(Code(x->dtype), Code(n.input(i)->dtype)))
      return Err(StatusCode::kUnsupported,
                 "{}: {} (input {}) has type {}; the CUDA BatchNormalization takes float32, float16, bfloat16 or "
                 "float64 in training mode; run the node on the CPU or cast its inputs",
                 n.Where(), kNames[i], i, DataTypeName(n.input(i)->dtype));
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (n.outputs[o] && (o > 2 || !BatchNormTrainingSupports(Code(x->dtype), Code(n.outputs[o]->dtype))))
      return Err(StatusCode::kUnsupported, "{}: output {} ({}) is not one the CUDA BatchNormalization writes",
                 n.Where(), o, n.outputs[o]->TypeString());
  KILN_ASSIGN_OR_RETURN(const int64_t spatial, n.attr_int("spatial", 1));
  if (spatial != 1)
    return Err(StatusCode::kInvalidModel, "{}: spatial = {} (an attribute of opsets before 9) with training_mode",
               n.Where(), spatial);
  return Status::Ok();
}

Result<std::unique_ptr<Layer>> CreateBatchNormTraining(const LayerSpec& spec) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckBatchNormTraining(n));
  KILN_ASSIGN_OR_RETURN(const float eps, n.attr_float("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(const float momentum, n.attr_float("momentum", 0.9f));
  return std::unique_ptr<Layer>(new BatchNormTrainingLayer(n.Where(), eps, momentum));
}

}  // namespace kiln::cuda
