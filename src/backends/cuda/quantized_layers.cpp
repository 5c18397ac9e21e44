// CUDA layers of the quantized ops (ops/quantized_ops.h): kiln.QConv and kiln.QMatMul on the tiled int8 GEMM of
// quantized.cu (tactic "int8-tiled"): exact int32 sums, the epilogue fused. Without tensor cores they are the GPU's
// reference for INT8, not yet built into engines (LayerFactory::optimizer_may_create). Weights are uploaded once (QMatMul's
// transposed to [N, K], so both operands run along K), with their scales.
#include <memory>

#include "backends/cuda/cublaslt_gemm.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/families.h"
#include "backends/cuda/quantized_kernels.h"
#include "core/error.h"
#include "ops/conv_geometry.h"
#include "ops/quantized_ops.h"

namespace kiln::cuda {
namespace {

constexpr const char* kTactic = "int8-tiled";

struct QWeights {
  DeviceBuffer w, scales, zeros;
};

Status Unsupported(const Node& n, const std::string& what) {
  return Err(StatusCode::kUnsupported, "{}: the CUDA layer does not support {}", n.Where(), what);
}

int DTypeOf(DataType t) { return static_cast<int>(t); }

// The parts of QGemmArgs that do not depend on the run's shapes.
Result<QGemmArgs> BaseArgs(const Node& n, const quant_attrs::Params& p, const QWeights& w) {
  QGemmArgs a;
  a.w = static_cast<const int8_t*>(w.w.get());
  a.x_zero_point = static_cast<int>(p.x_zero_point);
  a.x_scale = p.x_scale;
  a.w_scales = static_cast<const float*>(w.scales.get());
  a.per_channel = p.w_scales.size() > 1;
  a.act.act = static_cast<GemmAct>(static_cast<int>(p.activation));
  a.act.alpha = p.act_alpha;
  a.act.beta = p.act_beta;
  a.y_dtype = DTypeOf(p.y_type);
  a.y_scale = p.y_type == DataType::kFloat32 ? 1.f : p.y_scale;
  a.y_zero_point = static_cast<int>(p.y_zero_point);
  return a;
}

Result<std::shared_ptr<QWeights>> Upload(const Node& n, const Tensor& w, const std::vector<float>& scales) {
  auto q = std::make_shared<QWeights>();
  KILN_ASSIGN_OR_RETURN(q->w, UploadToDevice(w.raw(), w.nbytes(), n.name + "/weight_int8"));
  KILN_ASSIGN_OR_RETURN(q->scales, UploadToDevice(scales.data(), scales.size() * sizeof(float), n.name + "/w_scales"));
  return q;
}

const Tensor* ConstWeight(const Node& n) {
  const Value* w = n.input(1);
  return w && w->is_const() && w->dtype == DataType::kInt8 ? &*w->const_value : nullptr;
}

const float* OptionalFloat(const std::vector<DeviceTensor>& in, size_t i) {
  return i < in.size() && in[i].present() ? static_cast<const float*>(in[i].data) : nullptr;
}

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxLtTactics = 4;

// QMatMul on cuBLASLt's int8 tensor-core GEMM (int32 sums into scratch memory), then the epilogue kernel.
class QMatMulLtLayer : public Layer {
 public:
  QMatMulLtLayer(std::shared_ptr<QWeights> w, QGemmArgs base, LtAlgo algo, size_t algo_ws, std::string where)
      : w_(std::move(w)), base_(base), algo_(algo), algo_ws_(algo_ws), where_(std::move(where)) {}
  static size_t AccBytes(int64_t rows, int64_t cols) {
    return (static_cast<size_t>(rows * cols) * sizeof(int32_t) + 255) / 256 * 256;
  }
  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    return AccBytes(Rows(in[0]), base_.m) + kLtWorkspaceBytes;
  }
  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    QGemmArgs a = base_;
    a.o = Rows(in[0]);
    if (a.o == 0 || a.m == 0) return Status::Ok();
    a.x = in[0].data;
    a.bias = OptionalFloat(in, 2);
    a.residual = OptionalFloat(in, 3);
    a.y = out[0].data;
    const size_t acc_bytes = AccBytes(a.o, a.m);
    if (ctx.workspace_bytes < acc_bytes + kLtWorkspaceBytes)
      return Err(StatusCode::kInternal, "{}: {} bytes of scratch memory, {} needed", where_, ctx.workspace_bytes,
                 acc_bytes + kLtWorkspaceBytes);
    auto* acc = static_cast<int32_t*>(ctx.workspace);
    LtGemmShape shape;
    shape.dtype = static_cast<int>(DataType::kInt8);
    shape.m = a.o;
    shape.n = a.m;
    shape.k = a.k;
    shape.trans_b = true;  // W stored [N, K]
    LtGemmArgs args;
    args.a = a.x;
    args.b = a.w;
    args.y = acc;
    Status st = LtGemmRun(ctx.cublaslt, shape, args, &algo_, algo_ws_, static_cast<char*>(ctx.workspace) + acc_bytes,
                          kLtWorkspaceBytes, ctx.stream);
    if (!st.ok()) return st.WithContext(where_);
    st = KILN_CUDA_STATUS(LaunchQMatMulEpilogue(a, acc, static_cast<const int32_t*>(w_->zeros.get()), ctx.stream));
    return st.ok() ? st : st.WithContext(where_);
  }

 private:
  int64_t Rows(const DeviceTensor& x) const {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < x.shape.size(); ++d) rows *= x.shape[d];
    return rows;
  }
  std::shared_ptr<QWeights> w_;
  QGemmArgs base_;
  LtAlgo algo_;
  size_t algo_ws_;
  std::string where_;
};

// cuBLASLt's int8 GEMM takes int8 x (uint8 runs on the tiled kernel) with K and N multiples of 4.
bool LtEligible(const Node& n) {
  const Value* x = n.input(0);
  const Value* w = n.input(1);
  if (!x || x->dtype != DataType::kInt8 || !w || !w->is_const() || w->const_value->rank() != 2) return false;
  return w->const_value->dim(0) > 0 && w->const_value->dim(0) % 4 == 0 && w->const_value->dim(1) % 4 == 0;
}

Result<std::vector<std::string>> QMatMulTactics(const LayerSpec& spec) {
  std::vector<std::string> tactics;
  const Node& n = spec.node;
  if (LtEligible(n) && !spec.input_shapes.empty() && !spec.input_shapes[0].empty()) {
    const Tensor& w = *n.input(1)->const_value;
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < spec.input_shapes[0].size(); ++d) rows *= spec.input_shapes[0][d];
    if (rows > 0) {
      LtGemmShape shape;
      shape.dtype = static_cast<int>(DataType::kInt8);
      shape.m = rows;
      shape.n = w.dim(1);
      shape.k = w.dim(0);
      shape.trans_b = true;
      KILN_ASSIGN_OR_RETURN(cublasLtContext * h, SharedLtHandle());
      KILN_ASSIGN_OR_RETURN(auto algos, LtHeuristicAlgos(h, shape, kLtWorkspaceBytes, kMaxLtTactics,
                                                         LtTunedAlignment(shape)));
      for (const auto& a : algos) tactics.push_back(LtAlgoToTactic(a));
    }
  }
  tactics.push_back(kTactic);
  return tactics;
}

Result<std::unique_ptr<Layer>> CreateQMatMul(const LayerSpec& spec, const std::string& tactic) {
  const Node& n = spec.node;
  const std::optional<LtAlgo> lt_algo = LtAlgoFromTactic(tactic);
  if (tactic != kTactic && !lt_algo)
    return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}'", n.Where(), tactic);
  if (lt_algo && !LtEligible(n))
    return Err(StatusCode::kInvalidArgument, "{}: tactic '{}' needs int8 x and K, N multiples of 4", n.Where(),
               tactic);
  KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
  const Tensor* w = ConstWeight(n);
  if (!w || w->rank() != 2) return Unsupported(n, "a weight that is not a constant int8 [K, N] matrix");
  const int64_t k = w->dim(0), cols = w->dim(1);
  Tensor wt(DataType::kInt8, {cols, k});  // [N, K]
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < cols; ++j) wt.data<int8_t>()[j * k + i] = w->data<int8_t>()[i * cols + j];
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<QWeights> q, Upload(n, wt, p.w_scales));
  KILN_ASSIGN_OR_RETURN(QGemmArgs base, BaseArgs(n, p, *q));
  base.m = cols;
  base.k = k;
  if (lt_algo) {
    // The zero point's share, subtracted in the epilogue: x_zero_point * sum over k of W[k][n].
    if (p.x_zero_point != 0) {
      std::vector<int32_t> colsum(static_cast<size_t>(cols), 0);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < cols; ++j) colsum[j] += w->data<int8_t>()[i * cols + j];
      KILN_ASSIGN_OR_RETURN(q->zeros, UploadToDevice(colsum.data(), colsum.size() * sizeof(int32_t),
                                                     n.name + "/w_colsum"));
    }
    LtGemmShape shape;
    shape.dtype = static_cast<int>(DataType::kInt8);
    shape.m = 1;
    int64_t rows = 1;
    if (!spec.input_shapes.empty() && !spec.input_shapes[0].empty())
      for (size_t d = 0; d + 1 < spec.input_shapes[0].size(); ++d) rows *= spec.input_shapes[0][d];
    shape.m = std::max<int64_t>(rows, 1);
    shape.n = cols;
    shape.k = k;
    shape.trans_b = true;
    KILN_ASSIGN_OR_RETURN(cublasLtContext * h, SharedLtHandle());
    KILN_ASSIGN_OR_RETURN(const size_t ws, LtCheckAlgo(h, shape, *lt_algo));
    if (ws > kLtWorkspaceBytes)
      return Err(StatusCode::kInvalidArgument, "{}: tactic needs {} bytes of workspace", n.Where(), ws);
    base.x_unsigned = false;
    return std::unique_ptr<Layer>(std::make_unique<QMatMulLtLayer>(q, base, *lt_algo, ws, n.Where()));
  }
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [q, base, where](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                       std::vector<DeviceTensor>& out) -> Status {
        QGemmArgs a = base;
        a.x = in[0].data;
        a.x_unsigned = in[0].dtype == DataType::kUInt8;
        a.o = 1;  // rows from X's shape (K may be 0: the epilogue still writes every row)
        for (size_t d = 0; d + 1 < in[0].shape.size(); ++d) a.o *= in[0].shape[d];
        a.bias = OptionalFloat(in, 2);
        a.residual = OptionalFloat(in, 3);
        a.y = out[0].data;
        Status st = KILN_CUDA_STATUS(LaunchQGemm(a, ctx.stream));
        return st.ok() ? st : st.WithContext(where);
      }));
}

Result<std::unique_ptr<Layer>> CreateQConv(const LayerSpec& spec, const std::string& tactic) {
  const Node& n = spec.node;
  if (tactic != kTactic) return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}'", n.Where(), tactic);
  KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
  const Tensor* w = ConstWeight(n);
  if (!w || w->rank() < 3) return Unsupported(n, "a weight that is not a constant int8 [M, C/group, kernel...]");
  const int64_t nsp = w->rank() - 2;
  if (nsp > 3) return Unsupported(n, fmt::format("{} spatial dims (at most 3)", nsp));
  std::vector<int64_t> kw(w->shape().begin() + 2, w->shape().end());
  KILN_ASSIGN_OR_RETURN(const WindowParams wp, ReadWindowParams(n, nsp, kw, false));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<QWeights> q, Upload(n, *w, p.w_scales));
  KILN_ASSIGN_OR_RETURN(QGemmArgs base, BaseArgs(n, p, *q));
  base.conv = true;
  base.groups = wp.group;
  base.out_channels = w->dim(0);
  base.m = w->dim(0) / wp.group;
  base.k = w->numel() / std::max<int64_t>(1, w->dim(0));
  const int off = 3 - static_cast<int>(nsp);
  for (int64_t d = 0; d < nsp; ++d) {
    base.kernel[off + d] = static_cast<int>(kw[d]);
    base.stride[off + d] = static_cast<int>(wp.strides[d]);
    base.dil[off + d] = static_cast<int>(wp.dilations[d]);
  }
  const std::string where = n.Where();
  // The node's attributes (no graph links) for resolving auto_pad at each run's input size.
  auto attrs = std::make_shared<Node>();
  attrs->name = n.name;
  attrs->op_type = n.op_type;
  attrs->domain = n.domain;
  attrs->attrs = n.attrs;
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [q, base, wp, nsp, off, where, attrs](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                            std::vector<DeviceTensor>& out) -> Status {
        QGemmArgs a = base;
        const auto& xs = in[0].shape;
        const auto& ys = out[0].shape;
        if (static_cast<int64_t>(xs.size()) != nsp + 2 || ys.size() != xs.size())
          return Err(StatusCode::kInvalidArgument, "{}: input {} and output {} do not have rank {}", where,
                     ShapeToString(xs), ShapeToString(ys), nsp + 2);
        WindowParams w = wp;  // begin pads as the CPU reference resolves them (auto_pad included) at this size
        KILN_RETURN_IF_ERROR(ForwardOutputSizes(*attrs, w, std::vector<int64_t>(xs.begin() + 2, xs.end())).status());
        a.x = in[0].data;
        a.x_unsigned = in[0].dtype == DataType::kUInt8;
        a.batch = xs[0];
        a.channels = xs[1];
        a.o = 1;
        for (int64_t d = 0; d < nsp; ++d) {
          a.in[off + d] = static_cast<int>(xs[2 + d]);
          a.out[off + d] = static_cast<int>(ys[2 + d]);
          a.pad[off + d] = static_cast<int>(w.pads[d]);
          a.o *= ys[2 + d];
        }
        a.bias = OptionalFloat(in, 2);
        a.residual = OptionalFloat(in, 3);
        a.y = out[0].data;
        Status st = KILN_CUDA_STATUS(LaunchQGemm(a, ctx.stream));
        return st.ok() ? st : st.WithContext(where);
      }));
}

LayerFactory QFactory(Result<std::unique_ptr<Layer>> (*create)(const LayerSpec&, const std::string&),
                      Result<std::vector<std::string>> (*tactics)(const LayerSpec&) = nullptr) {
  LayerFactory f;
  if (tactics) f.tactics = tactics;
  else f.tactics = [](const LayerSpec&) -> Result<std::vector<std::string>> { return std::vector<std::string>{kTactic}; };
  f.create = create;
  f.compute_types = {DataType::kFloat32};
  // Exact but without tensor cores (ResNet-50 INT8 at batch 64 on an H200: 93 ms against FP16's 2.1 ms): the
  // reference the tensor-core INT8 tactics will be checked against, not yet what the optimizer builds.
  f.optimizer_may_create = false;
  return f;
}

}  // namespace

void RegisterQuantizedLayers(LayerRegistry& r) {
  r.Add("kiln.QConv", QFactory(CreateQConv));
  LayerFactory qmm = QFactory(CreateQMatMul, QMatMulTactics);
  qmm.preferred_for = LtEligible;  // on cuBLASLt's int8 tensor cores
  r.Add("kiln.QMatMul", std::move(qmm));
}

}  // namespace kiln::cuda
