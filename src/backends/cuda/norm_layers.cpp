// CUDA layers of the normalization family: LayerNormalization (optional B, Mean and InvStdDev outputs),
// GroupNormalization (scale/bias per channel, or per group with kiln_scale_per_group = 1),
// InstanceNormalization and BatchNormalization (inference; training mode in batchnorm_training_layer.cpp). Kernels
// are in norm.cu. Data may be float32, float16 or bfloat16; statistics and the affine math are float32. Constant
// LayerNorm Scale/B and constant BatchNorm parameters are folded into float32 tables uploaded when the layer is
// created; runtime ones are converted into the workspace on every run.
#include <cmath>
#include <optional>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/families.h"
#include "backends/cuda/norm_kernels.h"
#include "core/error.h"
#include "ops/quantized_ops.h"

namespace kiln::cuda {

// BatchNormalization with training_mode = 1 (batchnorm_training_layer.cpp).
Status CheckBatchNormTraining(const Node& n);
Result<std::unique_ptr<Layer>> CreateBatchNormTraining(const LayerSpec& spec);

namespace {

constexpr size_t kWsAlign = 256;
size_t AlignUp(size_t v) { return (v + kWsAlign - 1) / kWsAlign * kWsAlign; }

bool IsDataType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}
bool IsParamType(DataType t) { return IsDataType(t) || t == DataType::kFloat64; }
int Code(DataType t) { return static_cast<int>(t); }

Status CheckData(const Node& n) {
  const Value* x = n.input(0);
  if (!x) return Err(StatusCode::kInvalidModel, "{}: input X is missing", n.Where());
  if (!IsDataType(x->dtype))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA {} supports float32, float16 and bfloat16 inputs, not {}; run the node on the CPU "
               "or cast its input",
               n.Where(), n.op_type, DataTypeName(x->dtype));
  return Status::Ok();
}

Status CheckParam(const Node& n, size_t i, const char* what, bool required) {
  const Value* v = n.input(i);
  if (!v) {
    if (required) return Err(StatusCode::kInvalidModel, "{}: input {} ({}) is missing", n.Where(), i, what);
    return Status::Ok();
  }
  if (!IsParamType(v->dtype))
    return Err(StatusCode::kUnsupported, "{}: {} (input {}) has type {}; the CUDA {} takes floating-point parameters",
               n.Where(), what, i, DataTypeName(v->dtype), n.op_type);
  return Status::Ok();
}

// The concrete shape of input i at creation time (tuning shape, else a static declared shape).
std::optional<std::vector<int64_t>> KnownShape(const LayerSpec& spec, size_t i) {
  if (i < spec.input_shapes.size() && !spec.input_shapes[i].empty()) return spec.input_shapes[i];
  const Value* v = spec.node.input(i);
  if (v && v->has_shape && IsStatic(v->shape)) return ToStatic(v->shape);
  return std::nullopt;
}

Status EnqueueError(const std::string& where, cudaError_t e, const char* what) {
  return Err(StatusCode::kCudaError, "{}: launching the {} kernel failed: {} ({})", where, what,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

Status UploadFloats(const std::vector<float>& v, DeviceBuffer* buf) {
  if (v.empty()) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(*buf, UploadToDevice(v.data(), v.size() * sizeof(float), "folded scale/bias table"));
  return Status::Ok();
}

// ---- LayerNormalization ----

// How a Scale/B tensor of shape `pshape` maps onto the normalized dims `norm`: src offset of column j is
// sum_d index_d(j) * strides[d] over dims (row-major). Same-size parameters map as one contiguous dim.
struct ParamMap {
  std::vector<int64_t> dims, strides;
};

Result<ParamMap> MapParam(const std::string& where, const std::vector<int64_t>& pshape,
                          const std::vector<int64_t>& norm, const char* what) {
  std::vector<int64_t> s = pshape;
  while (s.size() > norm.size() && !s.empty() && s.front() == 1) s.erase(s.begin());
  bool ok = s.size() <= norm.size();
  const size_t off = norm.size() - std::min(s.size(), norm.size());
  for (size_t d = 0; ok && d < s.size(); ++d) ok = s[d] == 1 || s[d] == norm[off + d];
  if (!ok)
    return Err(StatusCode::kInvalidArgument, "{}: {} shape {} does not broadcast to the normalized shape {}", where,
               what, ShapeToString(pshape), ShapeToString(norm));
  const int64_t cols = NumElements(norm);
  if (NumElements(s) == cols) return ParamMap{{cols}, {1}};
  if (norm.size() > 8)
    return Err(StatusCode::kUnsupported,
               "{}: broadcasting {} over {} normalized dims is not supported on the GPU (at most 8); give it the "
               "full normalized shape {}",
               where, what, norm.size(), ShapeToString(norm));
  ParamMap m{norm, std::vector<int64_t>(norm.size(), 0)};
  int64_t stride = 1;
  for (size_t d = s.size(); d-- > 0;) {
    if (s[d] != 1) m.strides[off + d] = stride;
    stride *= s[d];
  }
  return m;
}

// A constant parameter expanded on the host to `cols` floats.
Result<std::vector<float>> ExpandOnHost(const std::string& where, const Tensor& t, const std::vector<int64_t>& norm,
                                        const char* what) {
  KILN_ASSIGN_OR_RETURN(ParamMap m, MapParam(where, t.shape(), norm, what));
  const int64_t cols = NumElements(norm);
  std::vector<float> r(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) {
    int64_t rem = j, off = 0;
    for (size_t d = m.dims.size(); d-- > 0;) {
      off += (rem % m.dims[d]) * m.strides[d];
      rem /= m.dims[d];
    }
    r[static_cast<size_t>(j)] = static_cast<float>(t.GetAsDouble(off));
  }
  return r;
}

struct LnGeometry {
  int64_t rows = 1, cols = 1;
  std::vector<int64_t> norm;
};

Result<LnGeometry> LnGeo(const std::string& where, int64_t axis, const std::vector<int64_t>& xs) {
  const int64_t rank = static_cast<int64_t>(xs.size());
  auto na = NormalizeAxis(axis, rank);
  if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", where, axis, rank);
  LnGeometry g;
  g.norm.assign(xs.begin() + *na, xs.end());
  for (int64_t d = 0; d < *na; ++d) g.rows *= xs[d];
  g.cols = NumElements(g.norm);
  return g;
}

class LayerNormLayer : public Layer {
 public:
  std::string where;
  int64_t axis = -1;
  float eps = 1e-5f;
  bool has_bias = false;
  float q_scale = 1.f;  // output 3 (Y quantized per tensor), when the node has it
  int q_zero_point = 0;
  bool q_unsigned = false;
  bool q_fp8 = false;
  bool rms = false;  // RMSNormalization
  std::vector<int64_t> folded_norm;  // non-empty: `folded` holds [gamma | beta] for these normalized dims
  DeviceBuffer folded;

  bool Folded(const LnGeometry& g) const { return !folded_norm.empty() && g.norm == folded_norm; }

  size_t ParamBytes(int64_t cols) const { return AlignUp(static_cast<size_t>(cols) * sizeof(float)); }

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& inputs, const std::vector<DeviceTensor>&) const override {
    auto g = LnGeo(where, axis, inputs[0].shape);
    if (!g.ok() || Folded(*g) || g->cols == 0) return 0;
    return 2 * ParamBytes(g->cols);
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    const DeviceTensor& x = inputs[0];
    KILN_ASSIGN_OR_RETURN(LnGeometry g, LnGeo(where, axis, x.shape));
    LayerNormArgs a;
    a.x = x.data;
    a.y = outputs[0].data;
    a.dtype = Code(x.dtype);
    a.rows = g.rows;
    a.rms = rms;
    a.cols = g.cols;
    a.eps = eps;
    for (size_t o = 1; o < 3; ++o) {
      if (o >= outputs.size() || !outputs[o].present() || !outputs[o].data) continue;
      (o == 1 ? a.mean : a.inv_std) = outputs[o].data;
      a.stash_dtype = Code(outputs[o].dtype);
      if (!IsParamType(outputs[o].dtype))
        return Err(StatusCode::kUnsupported, "{}: stash_type {} is not supported on the GPU", where,
                   DataTypeName(outputs[o].dtype));
    }
    if (outputs.size() > 3 && outputs[3].present() && outputs[3].data) {
      a.yq = outputs[3].data;
      a.q_scale = q_scale;
      a.q_zero_point = q_zero_point;
      a.q_unsigned = q_unsigned;
      a.q_fp8 = q_fp8;
    }
    if (a.rows == 0) return Status::Ok();
    if (g.cols > 0 && Folded(g)) {
      a.gamma = static_cast<const float*>(folded.get());
      if (has_bias) a.beta = a.gamma + g.cols;
    } else if (g.cols > 0) {
      if (ctx.workspace_bytes < 2 * ParamBytes(g.cols) || !ctx.workspace)
        return Err(StatusCode::kInternal, "{}: the workspace has {} bytes, {} are needed", where, ctx.workspace_bytes,
                   2 * ParamBytes(g.cols));
      float* gamma = static_cast<float*>(ctx.workspace);
      float* beta = reinterpret_cast<float*>(static_cast<char*>(ctx.workspace) + ParamBytes(g.cols));
      for (size_t i = 1; i < 3; ++i) {
        if (i == 2 && !has_bias) break;
        const DeviceTensor& p = inputs[i];
        KILN_ASSIGN_OR_RETURN(ParamMap m, MapParam(where, p.shape, g.norm, i == 1 ? "Scale" : "B"));
        float* dst = i == 1 ? gamma : beta;
        cudaError_t e = LaunchExpandToF32(p.data, Code(p.dtype), m.dims.data(), m.strides.data(),
                                          static_cast<int>(m.dims.size()), g.cols, dst, ctx.stream);
        if (e != cudaSuccess) return EnqueueError(where, e, "LayerNormalization parameter");
      }
      a.gamma = gamma;
      if (has_bias) a.beta = beta;
    }
    cudaError_t e = LaunchLayerNorm(a, ctx.stream);
    if (e != cudaSuccess) return EnqueueError(where, e, "LayerNormalization");
    return KILN_CUDA_STATUS(cudaGetLastError());
  }
};

Status CheckLayerNorm(const Node& n) {
  KILN_RETURN_IF_ERROR(CheckData(n));
  KILN_RETURN_IF_ERROR(CheckParam(n, 1, "Scale", true));
  KILN_RETURN_IF_ERROR(CheckParam(n, 2, "B", false));
  const DataType stash = static_cast<DataType>(n.geti("stash_type", 1));
  const bool wants_stats = n.output(1) != nullptr || n.output(2) != nullptr;
  if (wants_stats && !IsParamType(stash))
    return Err(StatusCode::kUnsupported, "{}: stash_type {} is not supported on the GPU (use float32)", n.Where(),
               DataTypeName(stash));
  return Status::Ok();
}

Result<std::unique_ptr<Layer>> CreateLayerNorm(const LayerSpec& spec) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckLayerNorm(n));
  auto l = std::make_unique<LayerNormLayer>();
  l->where = n.Where();
  l->axis = n.geti("axis", -1);
  l->eps = n.getf("epsilon", 1e-5f);
  l->has_bias = n.input(2) != nullptr;
  l->rms = n.op_type == "RMSNormalization";
  if (n.output(3)) {
    KILN_ASSIGN_OR_RETURN(const quant_attrs::QuantizedCopy c, quant_attrs::ReadQuantizedCopy(n));
    l->q_scale = c.scale;
    l->q_zero_point = static_cast<int>(c.zero_point);
    l->q_unsigned = c.type == DataType::kUInt8;
    l->q_fp8 = c.type == DataType::kFloat8E4M3FN;
  }
  // Fold constant Scale/B into one float32 table when the normalized dims are known now.
  const Value* scale = n.input(1);
  const Value* bias = n.input(2);
  auto xs = KnownShape(spec, 0);
  if (xs && scale->is_const() && (!bias || bias->is_const())) {
    KILN_ASSIGN_OR_RETURN(LnGeometry g, LnGeo(l->where, l->axis, *xs));
    if (g.cols > 0) {
      KILN_ASSIGN_OR_RETURN(std::vector<float> table, ExpandOnHost(l->where, *scale->const_value, g.norm, "Scale"));
      if (bias) {
        KILN_ASSIGN_OR_RETURN(std::vector<float> b, ExpandOnHost(l->where, *bias->const_value, g.norm, "B"));
        table.insert(table.end(), b.begin(), b.end());
      }
      KILN_RETURN_IF_ERROR(UploadFloats(table, &l->folded));
      l->folded_norm = g.norm;
    }
  }
  return std::unique_ptr<Layer>(std::move(l));
}

// ---- Group / Instance normalization ----

class GroupNormLayer : public Layer {
 public:
  std::string where;
  int64_t groups = 0;  // 0: InstanceNormalization (one group per channel)
  bool per_group = false;
  float eps = 1e-5f;

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    const DeviceTensor& x = inputs[0];
    if (x.shape.size() < 2)
      return Err(StatusCode::kInvalidArgument, "{}: input must have rank >= 2, its shape is {}", where,
                 ShapeToString(x.shape));
    GroupNormArgs a;
    a.N = x.shape[0];
    a.C = x.shape[1];
    a.inner = 1;
    for (size_t d = 2; d < x.shape.size(); ++d) a.inner *= x.shape[d];
    a.G = groups > 0 ? groups : a.C;
    if (a.N * a.C == 0) return Status::Ok();
    if (a.G <= 0 || a.C % a.G != 0)
      return Err(StatusCode::kInvalidArgument, "{}: {} channels do not split into num_groups = {}", where, a.C, a.G);
    a.per_group = per_group;
    const int64_t P = per_group ? a.G : a.C;
    for (size_t i = 1; i < 3; ++i)
      if (inputs[i].numel() != P)
        return Err(StatusCode::kInvalidArgument, "{}: {} must have {} elements (one per {}), its shape is {}", where,
                   i == 1 ? "scale" : "bias", P, per_group ? "group" : "channel", ShapeToString(inputs[i].shape));
    a.x = x.data;
    a.y = outputs[0].data;
    a.dtype = Code(x.dtype);
    a.scale = inputs[1].data;
    a.scale_dtype = Code(inputs[1].dtype);
    a.bias = inputs[2].data;
    a.bias_dtype = Code(inputs[2].dtype);
    a.eps = eps;
    cudaError_t e = LaunchGroupNorm(a, ctx.stream);
    if (e != cudaSuccess) return EnqueueError(where, e, "GroupNormalization");
    return KILN_CUDA_STATUS(cudaGetLastError());
  }
};

Status CheckGroupNorm(const Node& n, bool instance) {
  KILN_RETURN_IF_ERROR(CheckData(n));
  KILN_RETURN_IF_ERROR(CheckParam(n, 1, "scale", true));
  KILN_RETURN_IF_ERROR(CheckParam(n, 2, instance ? "B" : "bias", true));
  if (!instance && n.geti("num_groups", 0) <= 0)
    return Err(StatusCode::kInvalidModel, "{}: num_groups must be positive, it is {}", n.Where(),
               n.geti("num_groups", 0));
  return Status::Ok();
}

Result<std::unique_ptr<Layer>> CreateGroupNorm(const LayerSpec& spec, bool instance) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckGroupNorm(n, instance));
  auto l = std::make_unique<GroupNormLayer>();
  l->where = n.Where();
  l->groups = instance ? 0 : n.geti("num_groups", 0);
  l->per_group = !instance && n.geti("kiln_scale_per_group", 0) != 0;
  l->eps = n.getf("epsilon", 1e-5f);
  return std::unique_ptr<Layer>(std::move(l));
}

// ---- BatchNormalization (inference) ----

class BatchNormLayer : public Layer {
 public:
  std::string where;
  bool per_element = false;  // spatial = 0: parameters per (c, spatial position)
  float eps = 1e-5f;
  int64_t folded_p = -1;  // >= 0: `folded` holds [a | b] for this many parameters
  DeviceBuffer folded;

  static size_t ParamBytes(int64_t p) { return AlignUp(static_cast<size_t>(p) * sizeof(float)); }
  int64_t ParamCount(const std::vector<int64_t>& xs) const {
    if (xs.size() < 2) return 0;
    int64_t inner = 1;
    for (size_t d = 2; d < xs.size(); ++d) inner *= xs[d];
    return per_element ? xs[1] * inner : xs[1];
  }

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& inputs, const std::vector<DeviceTensor>&) const override {
    const int64_t p = ParamCount(inputs[0].shape);
    return p == folded_p || p == 0 ? 0 : 2 * ParamBytes(p);
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    const DeviceTensor& x = inputs[0];
    if (x.shape.size() < 2)
      return Err(StatusCode::kInvalidArgument, "{}: X must have rank >= 2, its shape is {}", where,
                 ShapeToString(x.shape));
    BatchNormArgs a;
    a.x = x.data;
    a.y = outputs[0].data;
    a.dtype = Code(x.dtype);
    a.total = x.numel();
    a.C = x.shape[1];
    a.inner = 1;
    for (size_t d = 2; d < x.shape.size(); ++d) a.inner *= x.shape[d];
    a.per_element = per_element;
    if (a.total == 0) return Status::Ok();
    const int64_t P = ParamCount(x.shape);
    if (P == folded_p) {
      a.a = static_cast<const float*>(folded.get());
      a.b = a.a + P;
    } else {
      for (size_t i = 1; i < 5; ++i)
        if (inputs[i].numel() != P)
          return Err(StatusCode::kInvalidArgument, "{}: input {} must have {} elements, its shape is {}", where, i, P,
                     ShapeToString(inputs[i].shape));
      if (ctx.workspace_bytes < 2 * ParamBytes(P) || !ctx.workspace)
        return Err(StatusCode::kInternal, "{}: the workspace has {} bytes, {} are needed", where, ctx.workspace_bytes,
                   2 * ParamBytes(P));
      float* ca = static_cast<float*>(ctx.workspace);
      float* cb = reinterpret_cast<float*>(static_cast<char*>(ctx.workspace) + ParamBytes(P));
      cudaError_t e = LaunchBatchNormCoefficients(inputs[1].data, Code(inputs[1].dtype), inputs[2].data,
                                                  Code(inputs[2].dtype), inputs[3].data, Code(inputs[3].dtype),
                                                  inputs[4].data, Code(inputs[4].dtype), eps, P, ca, cb, ctx.stream);
      if (e != cudaSuccess) return EnqueueError(where, e, "BatchNormalization coefficient");
      a.a = ca;
      a.b = cb;
    }
    cudaError_t e = LaunchBatchNormApply(a, ctx.stream);
    if (e != cudaSuccess) return EnqueueError(where, e, "BatchNormalization");
    return KILN_CUDA_STATUS(cudaGetLastError());
  }
};

Status CheckBatchNorm(const Node& n) {
  if (n.geti("training_mode", 0) != 0) return CheckBatchNormTraining(n);
  KILN_RETURN_IF_ERROR(CheckData(n));
  static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) KILN_RETURN_IF_ERROR(CheckParam(n, i, kNames[i], true));
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (n.outputs[o])
      return Err(StatusCode::kUnsupported, "{}: output {} is only produced in training mode", n.Where(), o);
  return Status::Ok();
}

Result<std::unique_ptr<Layer>> CreateBatchNorm(const LayerSpec& spec) {
  const Node& n = spec.node;
  if (n.geti("training_mode", 0) != 0) return CreateBatchNormTraining(spec);
  KILN_RETURN_IF_ERROR(CheckBatchNorm(n));
  auto l = std::make_unique<BatchNormLayer>();
  l->where = n.Where();
  l->per_element = n.geti("spatial", 1) == 0;
  l->eps = n.getf("epsilon", 1e-5f);
  bool all_const = true;
  for (size_t i = 1; i < 5; ++i) all_const = all_const && n.input(i)->is_const();
  if (all_const) {
    // a = scale / sqrt(var + eps), b = bias - mean * a, in double like the CPU reference.
    const Tensor* t[5] = {nullptr};
    for (size_t i = 1; i < 5; ++i) t[i] = &*n.input(i)->const_value;
    const int64_t P = t[1]->numel();
    bool same = true;
    for (size_t i = 2; i < 5; ++i) same = same && t[i]->numel() == P;
    if (same && P > 0) {
      std::vector<float> table(static_cast<size_t>(2 * P));
      const double eps = l->eps;
      for (int64_t p = 0; p < P; ++p) {
        const double av = t[1]->GetAsDouble(p) / std::sqrt(t[4]->GetAsDouble(p) + eps);
        table[static_cast<size_t>(p)] = static_cast<float>(av);
        table[static_cast<size_t>(P + p)] = static_cast<float>(t[2]->GetAsDouble(p) - t[3]->GetAsDouble(p) * av);
      }
      KILN_RETURN_IF_ERROR(UploadFloats(table, &l->folded));
      l->folded_p = P;
    }
  }
  return std::unique_ptr<Layer>(std::move(l));
}

template <typename CheckFn, typename CreateFn>
LayerFactory Factory(CheckFn check, CreateFn create) {
  LayerFactory f;
  f.tactics = [check](const LayerSpec& spec) -> Result<std::vector<std::string>> {
    KILN_RETURN_IF_ERROR(check(spec.node));
    return std::vector<std::string>{"default"};
  };
  f.create = [create](const LayerSpec& spec, const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    if (tactic != "default")
      return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}' (this layer has only 'default')",
                 spec.node.Where(), tactic);
    return create(spec);
  };
  return f;
}

}  // namespace

void RegisterLrnMvnLayers(LayerRegistry& r);  // lrn_mvn_layers.cpp

void RegisterNormLayers(LayerRegistry& r) {
  r.Add("LayerNormalization", Factory(CheckLayerNorm, CreateLayerNorm));
  r.Add("RMSNormalization", Factory(CheckLayerNorm, CreateLayerNorm));
  r.Add("GroupNormalization", Factory([](const Node& n) { return CheckGroupNorm(n, false); },
                                      [](const LayerSpec& s) { return CreateGroupNorm(s, false); }));
  r.Add("InstanceNormalization", Factory([](const Node& n) { return CheckGroupNorm(n, true); },
                                         [](const LayerSpec& s) { return CreateGroupNorm(s, true); }));
  r.Add("BatchNormalization", Factory(CheckBatchNorm, CreateBatchNorm));
  RegisterLrnMvnLayers(r);
}

}  // namespace kiln::cuda
