// CUDA layers of kiln.QMatMul (ops/quantized_ops.h): cuBLASLt's int8 tensor-core GEMM with the epilogue kernel, and
// the tiled int8 GEMM of quantized.cu (tactic "int8-tiled": exact int32 sums, the epilogue fused), the GPU's
// reference for INT8. The weight is uploaded once, transposed to [N, K] so both operands run along K, with its
// scales. kiln.QConv's layers are in quantized_conv_layers.cpp.
#include <memory>

#include "backends/cuda/cublaslt_gemm.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/families.h"
#include "backends/cuda/quantized_kernels.h"
#include "backends/cuda/quantized_layer_util.h"
#include "core/error.h"
#include "ops/conv_geometry.h"
#include "ops/quantized_ops.h"

namespace kiln::cuda {
namespace {

using namespace quantized;

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

}  // namespace

void RegisterQuantizedLayers(LayerRegistry& r) {
  r.Add("kiln.QConv", QConvFactory());
  LayerFactory qmm = QFactory(CreateQMatMul, QMatMulTactics);
  qmm.preferred_for = LtEligible;  // on cuBLASLt's int8 tensor cores
  r.Add("kiln.QMatMul", std::move(qmm));
}

}  // namespace kiln::cuda
