// CUDA layers of the ONNX integer matmuls and convolutions and of Det (kernels in integer_ops.cu), with the CPU
// reference's semantics (backends/cpu/linalg_integer.cpp, conv_integer.cpp, tensor_more_ops.cpp):
//  - MatMulInteger, QLinearMatMul: int8/uint8 operands, numpy matmul broadcasting (up to 8 batch dims); zero points
//    and scales per tensor, or 1-D per row of A / per column of B; QLinearMatMul's scales float32, float16 or
//    bfloat16 (opset 21), y_scale and y_zero_point per tensor. The float8 operands of QLinearMatMul-21 are refused
//    (as on the CPU).
//  - ConvInteger, QLinearConv: 1 to 3 spatial dims (the CPU takes more: such nodes run there), groups, pads/auto_pad,
//    strides, dilations; x's zero point (and scale) per tensor, w's per tensor or per output channel; QLinearConv's
//    float32 scales and optional int32 bias.
//  - Det: float32, float16, bfloat16, float64 [..., M, M] -> [...].
// Zero points and scales are read on the device, so they may be constants or computed tensors alike.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "backends/cuda/integer_ops_kernels.h"
#include "core/error.h"
#include "ops/conv_geometry.h"

namespace kiln::cuda {
namespace {

constexpr const char* kGemmTactic = "int8-tiled";
constexpr const char* kConvTactic = "int8-implicit-gemm";
constexpr const char* kDetTactic = "lu-block";
constexpr int64_t kMaxConvExtent = int64_t{1} << 30;  // the convolution kernel indexes its geometry in 32 bits

bool Is8Bit(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }
bool IsScaleType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

Status Launched(const std::string& where, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Err(StatusCode::kCudaError, "{}: launching the {} kernel failed: {} ({})", where, what,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

// ---- build-time checks (tactics): what the node's values say where known ----

Status RequireInput(const Node& n, size_t i, const char* what) {
  if (!n.input(i)) return Err(StatusCode::kInvalidModel, "{}: {} (input {}) is required", n.Where(), what, i);
  return Status::Ok();
}

// An optional or required input's element type, where known: 8-bit integer, a scale type (float32 only where
// `f32_only`), or int32.
enum class Kind { k8Bit, kScale, kScaleF32, kInt32 };

Status RequireType(const Node& n, size_t i, const char* what, Kind kind) {
  const Value* v = n.input(i);
  if (!v || v->dtype == DataType::kUndefined) return Status::Ok();
  const DataType t = v->dtype;
  const bool ok = kind == Kind::k8Bit      ? Is8Bit(t)
                  : kind == Kind::kScale   ? IsScaleType(t)
                  : kind == Kind::kScaleF32 ? t == DataType::kFloat32
                                           : t == DataType::kInt32;
  if (ok) return Status::Ok();
  const char* want = kind == Kind::k8Bit      ? "int8 or uint8"
                     : kind == Kind::kScale   ? "float32, float16 or bfloat16"
                     : kind == Kind::kScaleF32 ? "float32"
                                              : "int32";
  return Err(StatusCode::kUnsupported, "{}: the CUDA {} takes {} {} (input {}), not {}; the node runs on the CPU",
             n.Where(), n.op_type, want, what, i, DataTypeName(t));
}

// A zero point or scale of known shape: one element, or (where `vector_ok`) a 1-D tensor.
Status RequireParamShape(const Node& n, size_t i, const char* what, bool vector_ok) {
  const Value* v = n.input(i);
  if (!v || !v->has_shape || !IsStatic(v->shape)) return Status::Ok();
  const std::vector<int64_t> s = ToStatic(v->shape);
  if (NumElements(s) == 1 || (vector_ok && s.size() == 1)) return Status::Ok();
  return Err(StatusCode::kUnsupported, "{}: {} (input {}) of shape {} must be {}, as the CPU reference takes it",
             n.Where(), what, i, ShapeToString(s), vector_ok ? "a scalar or 1-D" : "a scalar (per tensor)");
}

// ---- run-time parameters ----

// A zero point or scale as the kernels read it: omitted (count 0), per tensor (one element), or `len` values along a
// 1-D tensor (len < 0: per tensor only).
Result<IntParam> ParamOf(const std::string& where, const std::vector<DeviceTensor>& in, size_t i, int64_t len,
                         const char* what, Kind kind) {
  IntParam p;
  if (i >= in.size() || !in[i].present()) return p;
  const DeviceTensor& t = in[i];
  const bool type_ok = kind == Kind::k8Bit ? Is8Bit(t.dtype) : kind == Kind::kScaleF32 ? t.dtype == DataType::kFloat32
                                                                                       : IsScaleType(t.dtype);
  if (!type_ok)
    return Err(StatusCode::kInvalidArgument, "{}: {} (input {}) has the unexpected element type {}", where, what, i,
               DataTypeName(t.dtype));
  p.data = t.data;
  p.dtype = static_cast<int>(t.dtype);
  const int64_t n = t.numel();
  if (n == 1) {
    p.count = 1;
  } else if (len >= 0 && t.shape.size() == 1 && n == len) {
    p.count = len;
  } else {
    return Err(StatusCode::kInvalidArgument, "{}: {} (input {}) must be a scalar{}, got shape {}", where, what, i,
               len >= 0 ? fmt::format(" or hold {} values", len) : std::string(" (per tensor)"),
               ShapeToString(t.shape));
  }
  return p;
}

// ---- MatMulInteger / QLinearMatMul ----

// The GEMM's geometry of A and B (numpy matmul: a 1-D A is a row, a 1-D B a column; batch dims broadcast).
Status PlanMatMul(const std::string& where, std::vector<int64_t> sa, std::vector<int64_t> sb, IntMatMulArgs& a) {
  if (sa.empty() || sb.empty())
    return Err(StatusCode::kInvalidArgument, "{}: the operands must have rank >= 1, got {} and {}", where,
               ShapeToString(sa), ShapeToString(sb));
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  a.m = sa[sa.size() - 2];
  a.k = sa.back();
  a.n = sb.back();
  if (sb[sb.size() - 2] != a.k)
    return Err(StatusCode::kInvalidArgument, "{}: inner dimensions differ ({} vs {})", where, a.k, sb[sb.size() - 2]);
  const size_t ra = sa.size() - 2, rb = sb.size() - 2, r = std::max(ra, rb);
  if (r > static_cast<size_t>(kIntMatMulMaxBatchDims))
    return Err(StatusCode::kUnsupported, "{}: the CUDA integer matmul takes up to {} batch dims, got {}", where,
               kIntMatMulMaxBatchDims, r);
  a.batch_rank = static_cast<int>(r);
  a.batches = 1;
  int64_t sta = a.m * a.k, stb = a.k * a.n;  // elements per step of the innermost batch dim of A and B
  for (size_t j = 0; j < r; ++j) {           // j: from the innermost batch dim outwards
    const size_t d = r - 1 - j;
    const int64_t da = j < ra ? sa[ra - 1 - j] : 1, db = j < rb ? sb[rb - 1 - j] : 1;
    if (da != db && da != 1 && db != 1)
      return Err(StatusCode::kInvalidArgument, "{}: batch dims {} and {} do not broadcast", where, da, db);
    a.batch[d] = da == 1 ? db : da;
    a.a_stride[d] = da == 1 ? 0 : sta;
    a.b_stride[d] = db == 1 ? 0 : stb;
    sta *= da;
    stb *= db;
    a.batches *= a.batch[d];
  }
  return Status::Ok();
}

class IntMatMulLayer : public Layer {
 public:
  IntMatMulLayer(std::string where, bool qlinear) : where_(std::move(where)), qlinear_(qlinear) {}

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const size_t ia = 0, ib = qlinear_ ? 3 : 1, iazp = 2, ibzp = qlinear_ ? 5 : 3;
    if (in.size() <= ib || !in[ia].present() || !in[ib].present())
      return Err(StatusCode::kInvalidArgument, "{}: A and B are required", where_);
    IntMatMulArgs a;
    KILN_RETURN_IF_ERROR(PlanMatMul(where_, in[ia].shape, in[ib].shape, a));
    if (out[0].numel() != a.batches * a.m * a.n)
      return Err(StatusCode::kInternal, "{}: the output {} does not hold the {} x {} x {} product", where_,
                 ShapeToString(out[0].shape), a.batches, a.m, a.n);
    a.a = in[ia].data;
    a.a_dtype = static_cast<int>(in[ia].dtype);
    a.b = in[ib].data;
    a.b_dtype = static_cast<int>(in[ib].dtype);
    if (!Is8Bit(in[ia].dtype) || !Is8Bit(in[ib].dtype))
      return Err(StatusCode::kInvalidArgument, "{}: A and B must be int8 or uint8, got {} and {}", where_,
                 DataTypeName(in[ia].dtype), DataTypeName(in[ib].dtype));
    KILN_ASSIGN_OR_RETURN(a.a_zp, ParamOf(where_, in, iazp, a.m, "a_zero_point", Kind::k8Bit));
    KILN_ASSIGN_OR_RETURN(a.b_zp, ParamOf(where_, in, ibzp, a.n, "b_zero_point", Kind::k8Bit));
    a.y = out[0].data;
    a.y_dtype = static_cast<int>(out[0].dtype);
    if (qlinear_) {
      a.requant = true;
      KILN_ASSIGN_OR_RETURN(a.a_scale, ParamOf(where_, in, 1, a.m, "a_scale", Kind::kScale));
      KILN_ASSIGN_OR_RETURN(a.b_scale, ParamOf(where_, in, 4, a.n, "b_scale", Kind::kScale));
      KILN_ASSIGN_OR_RETURN(a.y_scale, ParamOf(where_, in, 6, -1, "y_scale", Kind::kScale));
      KILN_ASSIGN_OR_RETURN(a.y_zp, ParamOf(where_, in, 7, -1, "y_zero_point", Kind::k8Bit));
      if (!a.a_scale.count || !a.b_scale.count || !a.y_scale.count || !a.y_zp.count)
        return Err(StatusCode::kInvalidArgument, "{}: the scales and y_zero_point are required", where_);
      if (!Is8Bit(out[0].dtype))
        return Err(StatusCode::kInvalidArgument, "{}: y must be int8 or uint8, got {}", where_,
                   DataTypeName(out[0].dtype));
    } else if (out[0].dtype != DataType::kInt32) {
      return Err(StatusCode::kInvalidArgument, "{}: Y must be int32, got {}", where_, DataTypeName(out[0].dtype));
    }
    return Launched(where_, LaunchIntMatMul(a, ctx.stream), qlinear_ ? "QLinearMatMul" : "MatMulInteger");
  }

 private:
  std::string where_;
  bool qlinear_;
};

Result<std::vector<std::string>> MatMulIntegerTactics(const LayerSpec& spec) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(RequireInput(n, 0, "A"));
  KILN_RETURN_IF_ERROR(RequireInput(n, 1, "B"));
  const char* names[] = {"A", "B", "a_zero_point", "b_zero_point"};
  for (size_t i = 0; i < 4; ++i) KILN_RETURN_IF_ERROR(RequireType(n, i, names[i], Kind::k8Bit));
  KILN_RETURN_IF_ERROR(RequireParamShape(n, 2, "a_zero_point", true));
  KILN_RETURN_IF_ERROR(RequireParamShape(n, 3, "b_zero_point", true));
  return std::vector<std::string>{kGemmTactic};
}

Result<std::vector<std::string>> QLinearMatMulTactics(const LayerSpec& spec) {
  const Node& n = spec.node;
  const char* names[] = {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"};
  for (size_t i = 0; i < 8; ++i) {
    KILN_RETURN_IF_ERROR(RequireInput(n, i, names[i]));
    KILN_RETURN_IF_ERROR(RequireType(n, i, names[i], i == 1 || i == 4 || i == 6 ? Kind::kScale : Kind::k8Bit));
  }
  for (size_t i : {1, 2, 4, 5}) KILN_RETURN_IF_ERROR(RequireParamShape(n, i, names[i], true));
  for (size_t i : {6, 7}) KILN_RETURN_IF_ERROR(RequireParamShape(n, i, names[i], false));
  return std::vector<std::string>{kGemmTactic};
}

// ---- ConvInteger / QLinearConv ----

class IntConvLayer : public Layer {
 public:
  IntConvLayer(std::string where, bool qlinear, std::shared_ptr<Node> attrs)
      : where_(std::move(where)), qlinear_(qlinear), attrs_(std::move(attrs)) {}

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const size_t iw = qlinear_ ? 3 : 1;
    if (in.size() <= iw || !in[0].present() || !in[iw].present())
      return Err(StatusCode::kInvalidArgument, "{}: x and w are required", where_);
    const DeviceTensor& x = in[0];
    const DeviceTensor& w = in[iw];
    if (!Is8Bit(x.dtype) || !Is8Bit(w.dtype))
      return Err(StatusCode::kInvalidArgument, "{}: x and w must be int8 or uint8, got {} and {}", where_,
                 DataTypeName(x.dtype), DataTypeName(w.dtype));
    if (x.shape.size() < 3 || w.shape.size() != x.shape.size())
      return Err(StatusCode::kInvalidArgument, "{}: x {} and w {} must have the same rank >= 3", where_,
                 ShapeToString(x.shape), ShapeToString(w.shape));
    const int64_t nsp = static_cast<int64_t>(x.shape.size()) - 2;
    if (nsp > 3)
      return Err(StatusCode::kUnsupported, "{}: the CUDA {} takes 1 to 3 spatial dims, got {}", where_,
                 attrs_->op_type, nsp);
    const std::vector<int64_t> kw(w.shape.begin() + 2, w.shape.end()), in_sp(x.shape.begin() + 2, x.shape.end());
    KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(*attrs_, nsp, kw, false));
    IntConvArgs a;
    a.batch = x.shape[0];
    a.channels = x.shape[1];
    a.out_channels = w.shape[0];
    a.groups = p.group;
    if (p.kernel != kw || p.group < 1 || w.shape[1] * p.group != a.channels || a.out_channels % p.group != 0)
      return Err(StatusCode::kInvalidArgument, "{}: x {} and w {} do not match (group {}, kernel_shape {})", where_,
                 ShapeToString(x.shape), ShapeToString(w.shape), p.group, ShapeToString(p.kernel));
    KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> out_sp, ForwardOutputSizes(*attrs_, p, in_sp));
    std::vector<int64_t> want = {a.batch, a.out_channels};
    want.insert(want.end(), out_sp.begin(), out_sp.end());
    if (out[0].shape != want)
      return Err(StatusCode::kInternal, "{}: the output is {}, the convolution gives {}", where_,
                 ShapeToString(out[0].shape), ShapeToString(want));
    const int64_t off = 3 - nsp;
    for (int64_t d = 0; d < nsp; ++d) {
      const size_t s = static_cast<size_t>(d), t = static_cast<size_t>(off + d);
      a.in[t] = in_sp[s];
      a.out[t] = out_sp[s];
      a.kernel[t] = kw[s];
      a.stride[t] = p.strides[s];
      a.dil[t] = p.dilations[s];
      a.pad[t] = p.pads[s];
    }
    int64_t out_size = 1;
    for (int64_t o : out_sp) out_size *= o;
    for (int64_t v : {a.in[0], a.in[1], a.in[2], a.out[0], a.out[1], a.out[2], a.kernel[0] * a.kernel[1] * a.kernel[2],
                      a.stride[0], a.stride[1], a.stride[2], a.dil[0], a.dil[1], a.dil[2], a.pad[0], a.pad[1], a.pad[2],
                      out_size, w.numel() / std::max<int64_t>(1, a.out_channels)})
      if (v >= kMaxConvExtent)
        return Err(StatusCode::kUnsupported, "{}: x {} and w {} are too large for the CUDA {} (32-bit geometry)",
                   where_, ShapeToString(x.shape), ShapeToString(w.shape), attrs_->op_type);
    a.x = x.data;
    a.x_dtype = static_cast<int>(x.dtype);
    a.w = w.data;
    a.w_dtype = static_cast<int>(w.dtype);
    KILN_ASSIGN_OR_RETURN(a.x_zp, ParamOf(where_, in, 2, -1, "x_zero_point", Kind::k8Bit));
    KILN_ASSIGN_OR_RETURN(a.w_zp, ParamOf(where_, in, qlinear_ ? 5 : 3, a.out_channels, "w_zero_point", Kind::k8Bit));
    a.y = out[0].data;
    a.y_dtype = static_cast<int>(out[0].dtype);
    if (qlinear_) {
      a.requant = true;
      KILN_ASSIGN_OR_RETURN(a.x_scale, ParamOf(where_, in, 1, -1, "x_scale", Kind::kScaleF32));
      KILN_ASSIGN_OR_RETURN(a.w_scale, ParamOf(where_, in, 4, a.out_channels, "w_scale", Kind::kScaleF32));
      KILN_ASSIGN_OR_RETURN(a.y_scale, ParamOf(where_, in, 6, -1, "y_scale", Kind::kScaleF32));
      KILN_ASSIGN_OR_RETURN(a.y_zp, ParamOf(where_, in, 7, -1, "y_zero_point", Kind::k8Bit));
      if (!a.x_scale.count || !a.x_zp.count || !a.w_scale.count || !a.w_zp.count || !a.y_scale.count || !a.y_zp.count)
        return Err(StatusCode::kInvalidArgument, "{}: the scales and zero points are required", where_);
      if (!Is8Bit(out[0].dtype))
        return Err(StatusCode::kInvalidArgument, "{}: y must be int8 or uint8, got {}", where_,
                   DataTypeName(out[0].dtype));
      if (in.size() > 8 && in[8].present()) {
        if (in[8].dtype != DataType::kInt32 || in[8].numel() != a.out_channels)
          return Err(StatusCode::kInvalidArgument, "{}: B {} {} must be int32[{}]", where_, DataTypeName(in[8].dtype),
                     ShapeToString(in[8].shape), a.out_channels);
        a.bias = static_cast<const int32_t*>(in[8].data);
      }
    } else if (out[0].dtype != DataType::kInt32) {
      return Err(StatusCode::kInvalidArgument, "{}: y must be int32, got {}", where_, DataTypeName(out[0].dtype));
    }
    if (out[0].numel() == 0) return Status::Ok();
    return Launched(where_, LaunchIntConv(a, ctx.stream), attrs_->op_type.c_str());
  }

 private:
  std::string where_;
  bool qlinear_;
  std::shared_ptr<Node> attrs_;  // the node's attributes (no graph links), for auto_pad at each run's size
};

// x and w of known rank: 1 to 3 spatial dims.
Status RequireConvRank(const Node& n, size_t iw) {
  for (size_t i : {size_t{0}, iw}) {
    const Value* v = n.input(i);
    if (!v || !v->has_shape) continue;
    const size_t r = v->shape.size();
    if (r < 3 || r > 5)
      return Err(StatusCode::kUnsupported,
                 "{}: the CUDA {} takes 1 to 3 spatial dims (rank 3 to 5), input {} has rank {}; the node runs on "
                 "the CPU",
                 n.Where(), n.op_type, i, r);
  }
  return Status::Ok();
}

Result<std::vector<std::string>> ConvIntegerTactics(const LayerSpec& spec) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(RequireInput(n, 0, "x"));
  KILN_RETURN_IF_ERROR(RequireInput(n, 1, "w"));
  const char* names[] = {"x", "w", "x_zero_point", "w_zero_point"};
  for (size_t i = 0; i < 4; ++i) KILN_RETURN_IF_ERROR(RequireType(n, i, names[i], Kind::k8Bit));
  KILN_RETURN_IF_ERROR(RequireParamShape(n, 2, "x_zero_point", false));
  KILN_RETURN_IF_ERROR(RequireParamShape(n, 3, "w_zero_point", true));
  KILN_RETURN_IF_ERROR(RequireConvRank(n, 1));
  return std::vector<std::string>{kConvTactic};
}

Result<std::vector<std::string>> QLinearConvTactics(const LayerSpec& spec) {
  const Node& n = spec.node;
  const char* names[] = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"};
  for (size_t i = 0; i < 8; ++i) {
    KILN_RETURN_IF_ERROR(RequireInput(n, i, names[i]));
    KILN_RETURN_IF_ERROR(RequireType(n, i, names[i], i == 1 || i == 4 || i == 6 ? Kind::kScaleF32 : Kind::k8Bit));
  }
  KILN_RETURN_IF_ERROR(RequireType(n, 8, "B", Kind::kInt32));
  for (size_t i : {1, 2, 6, 7}) KILN_RETURN_IF_ERROR(RequireParamShape(n, i, names[i], false));
  for (size_t i : {4, 5}) KILN_RETURN_IF_ERROR(RequireParamShape(n, i, names[i], true));
  KILN_RETURN_IF_ERROR(RequireConvRank(n, 3));
  return std::vector<std::string>{kConvTactic};
}

// A copy of the node's attributes (no graph links) that the layer keeps for ReadWindowParams at each run.
std::shared_ptr<Node> AttrsOf(const Node& n) {
  auto c = std::make_shared<Node>();
  c->name = n.name;
  c->op_type = n.op_type;
  c->domain = n.domain;
  c->opset = n.opset;
  c->attrs = n.attrs;
  return c;
}

// ---- Det ----

struct DetShape {
  int64_t count = 1, m = 0;
};

Result<DetShape> DetShapeOf(const std::string& where, const std::vector<int64_t>& s) {
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
    return Err(StatusCode::kInvalidArgument, "{}: needs square matrices [..., M, M], got {}", where,
               ShapeToString(s));
  DetShape d;
  d.m = s.back();
  for (size_t i = 0; i + 2 < s.size(); ++i) d.count *= s[i];
  return d;
}

class DetLayer : public Layer {
 public:
  explicit DetLayer(std::string where) : where_(std::move(where)) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    auto d = DetShapeOf(where_, in[0].shape);
    return d.ok() ? DetWorkspaceBytes(d->count, d->m) : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const DeviceTensor& x = in[0];
    KILN_ASSIGN_OR_RETURN(const DetShape d, DetShapeOf(where_, x.shape));
    if (out[0].numel() != d.count || out[0].dtype != x.dtype)
      return Err(StatusCode::kInternal, "{}: the output {} {} does not hold {} determinants of {}", where_,
                 DataTypeName(out[0].dtype), ShapeToString(out[0].shape), d.count, DataTypeName(x.dtype));
    const size_t need = DetWorkspaceBytes(d.count, d.m);
    if (ctx.workspace_bytes < need)
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where_,
                 ctx.workspace_bytes, need);
    return Launched(where_,
                    LaunchDet(static_cast<int>(x.dtype), x.data, out[0].data, d.count, d.m, ctx.workspace, ctx.stream),
                    "Det");
  }

 private:
  std::string where_;
};

Result<std::vector<std::string>> DetTactics(const LayerSpec& spec) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(RequireInput(n, 0, "X"));
  const DataType t = n.input(0)->dtype;
  if (t != DataType::kUndefined && !DetSupports(static_cast<int>(t)))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA Det takes float32, float16, bfloat16 or float64, not {}; the node runs on the CPU",
               n.Where(), DataTypeName(t));
  return std::vector<std::string>{kDetTactic};
}

LayerFactory Factory(Result<std::vector<std::string>> (*tactics)(const LayerSpec&),
                     std::function<Result<std::unique_ptr<Layer>>(const LayerSpec&, const std::string&)> create) {
  LayerFactory f;
  f.tactics = tactics;
  f.create = std::move(create);
  // Scales stay float32 (the requantization rounds as the CPU's float32 arithmetic); Det keeps float32 for range
  // (a product of M pivots).
  f.compute_types = {DataType::kFloat32};
  return f;
}

}  // namespace

void RegisterIntegerOpLayers(LayerRegistry& r) {
  auto matmul = [](bool q) {
    return [q](const LayerSpec& spec, const std::string&) -> Result<std::unique_ptr<Layer>> {
      KILN_RETURN_IF_ERROR((q ? QLinearMatMulTactics : MatMulIntegerTactics)(spec).status());
      return std::unique_ptr<Layer>(std::make_unique<IntMatMulLayer>(spec.node.Where(), q));
    };
  };
  auto conv = [](bool q) {
    return [q](const LayerSpec& spec, const std::string&) -> Result<std::unique_ptr<Layer>> {
      KILN_RETURN_IF_ERROR((q ? QLinearConvTactics : ConvIntegerTactics)(spec).status());
      return std::unique_ptr<Layer>(std::make_unique<IntConvLayer>(spec.node.Where(), q, AttrsOf(spec.node)));
    };
  };
  r.Add("MatMulInteger", Factory(MatMulIntegerTactics, matmul(false)));
  r.Add("QLinearMatMul", Factory(QLinearMatMulTactics, matmul(true)));
  r.Add("ConvInteger", Factory(ConvIntegerTactics, conv(false)));
  r.Add("QLinearConv", Factory(QLinearConvTactics, conv(true)));
  r.Add("Det", Factory(DetTactics, [](const LayerSpec& spec, const std::string&) -> Result<std::unique_ptr<Layer>> {
          KILN_RETURN_IF_ERROR(DetTactics(spec).status());
          return std::unique_ptr<Layer>(std::make_unique<DetLayer>(spec.node.Where()));
        }));
}

}  // namespace kiln::cuda
