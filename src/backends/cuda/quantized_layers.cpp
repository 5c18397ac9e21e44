// CUDA layers of kiln.QMatMul (ops/quantized_ops.h): cuBLASLt's int8 tensor-core GEMM with the epilogue kernel, and
// the tiled int8 GEMM of quantized.cu (tactic "int8-tiled": exact int32 sums, the epilogue fused), the GPU's
// reference for INT8; Hopper's CUTLASS GEMM for int8 and float8 (FP8: float32 sums; "fp8-tiled" its reference). The
// weight is uploaded once, transposed to [N, K] so both operands run along K, with its scales. kiln.QConv's layers are in quantized_conv_layers.cpp.
#include <cuda_runtime.h>

#include <memory>
#include <optional>

#include "backends/cuda/cublaslt_gemm.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/families.h"
#include "backends/cuda/quantized_kernels.h"
#include "backends/cuda/quantized_layer_util.h"
#include "core/error.h"
#include "ops/conv_geometry.h"
#include "ops/quantized_ops.h"

#if defined(KILN_HAVE_CUTLASS_SM90)
#include "backends/cuda/cutlass/qgemm_sm90.h"
#endif

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
    SetResidual(a, in);
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
  int64_t Rows(const DeviceTensor& x) const { return RowsOf(x.shape); }
  std::shared_ptr<QWeights> w_;
  QGemmArgs base_;
  LtAlgo algo_;
  size_t algo_ws_;
  std::string where_;
};

// A float8 QMatMul (ops/quantized_ops.h).
bool IsFp8(const Node& n) { return n.input(0) && n.input(0)->dtype == DataType::kFloat8E4M3FN; }

#if defined(KILN_HAVE_CUTLASS_SM90)

// Whether the GEMM's epilogue applies GELU (its instances have an 8-bit output and no residual).
bool GemmGelu(const Node& n, const quant_attrs::Params& p) {
  return p.activation == fused::Act::kGelu &&
         p.y_type == (IsFp8(n) ? DataType::kFloat8E4M3FN : DataType::kInt8) && n.input(3) == nullptr;
}

// QMatMul on the Hopper int8 or float8 GEMM with the epilogue fused (cutlass/qgemm_sm90.h): symmetric int8 x with a
// float32, float16 or symmetric int8 output, or float8e4m3fn x with a float32, float16 or float8 output (which takes
// no residual); activation None / Relu / Clip (or GELU with an 8-bit output and no residual), K a multiple of 16 and N
// of 16 (8-bit out), 8 (float16) or 4.
bool GemmEligible(const Node& n) {
  if (!Sm90Device()) return false;
  const Value* x = n.input(0);
  const Tensor* w = ConstWeight(n);
  const bool fp8 = IsFp8(n);
  if (!x || (x->dtype != DataType::kInt8 && !fp8) || !w || w->rank() != 2) return false;
  auto p = quant_attrs::Read(n);
  float lo, hi;
  if (!p.ok() || p->x_zero_point != 0 || !(ClampOf(*p, &lo, &hi) || GemmGelu(n, *p))) return false;
  const DataType q8 = fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8;
  if (p->y_type != DataType::kFloat32 && p->y_type != DataType::kFloat16 &&
      !(p->y_type == q8 && p->y_zero_point == 0))
    return false;
  if (fp8 && p->y_type == q8 && n.input(3)) return false;  // a float8 output takes no residual
  const int64_t align = p->y_type == q8 ? 16 : p->y_type == DataType::kFloat16 ? 8 : 4;
  return w->dim(0) % 16 == 0 && w->dim(1) % align == 0 && w->dim(1) > 0;
}

class QMatMulSm90Layer : public Layer {
 public:
  QMatMulSm90Layer(std::shared_ptr<QWeights> w, QGemmArgs base, cutlass_sm90::GemmTile tile, DeviceBuffer scale,
                   float lo, float hi, bool gelu, std::string where)
      : w_(std::move(w)), base_(base), tile_(tile), scale_(std::move(scale)), lo_(lo), hi_(hi), gelu_(gelu),
        where_(std::move(where)) {}
  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    const bool residual = in.size() > 3 && in[3].present();
    const cutlass_sm90::QGemmProblem p =
        Problem(RowsOf(in[0].shape), residual, residual && in[3].dtype == DataType::kFloat16);
    return cutlass_sm90::Unsupported(p, tile_) ? 0 : cutlass_sm90::WorkspaceBytes(p, tile_);
  }
  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    QGemmArgs a = base_;
    a.o = RowsOf(in[0].shape);
    a.x = in[0].data;
    a.bias = OptionalFloat(in, 2);
    SetResidual(a, in);
    a.y = out[0].data;
    if (a.o == 0 || a.m == 0) return Status::Ok();
    const cutlass_sm90::QGemmProblem p =
        Problem(a.o, a.residual != nullptr || a.residual_i8 != nullptr || a.residual_f16 != nullptr,
                a.residual_f16 != nullptr);
    if (!TensorCoreAligned(a) || cutlass_sm90::Unsupported(p, tile_) ||
        ctx.workspace_bytes < cutlass_sm90::WorkspaceBytes(p, tile_)) {
      Status st = KILN_CUDA_STATUS(LaunchQGemm(a, ctx.stream));  // the tiled kernel takes any shape
      return st.ok() ? st : st.WithContext(where_);
    }
    const auto o = TensorCoreOperands<cutlass_sm90::QGemmOperands>(a, a.w, scale_.get(), lo_, hi_);
    if (const char* e = cutlass_sm90::Run(p, tile_, o, ctx.workspace, ctx.stream))
      return Err(StatusCode::kCudaError, "{}: {} ({})", where_, e, cudaGetErrorString(cudaGetLastError()));
    return Status::Ok();
  }

 private:
  cutlass_sm90::QGemmProblem Problem(int64_t rows, bool residual, bool residual_half) const {
    cutlass_sm90::QGemmProblem p;
    p.m = rows;
    p.n = static_cast<int>(base_.m);
    p.k = static_cast<int>(base_.k);
    p.int8_output = base_.y_dtype == static_cast<int>(DataType::kInt8);
    p.half_output = base_.y_dtype == static_cast<int>(DataType::kFloat16);
    p.fp8 = base_.fp8;
    p.fp8_output = base_.y_dtype == static_cast<int>(DataType::kFloat8E4M3FN);
    p.residual = residual;
    p.residual_int8 = residual && base_.r_scale > 0;
    p.residual_half = residual_half;
    p.gelu = gelu_;
    return p;
  }
  std::shared_ptr<QWeights> w_;
  QGemmArgs base_;
  cutlass_sm90::GemmTile tile_;
  DeviceBuffer scale_;
  float lo_, hi_;
  bool gelu_;
  std::string where_;
};

#endif  // KILN_HAVE_CUTLASS_SM90

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
    const int64_t rows = RowsOf(spec.input_shapes[0]);
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
#if defined(KILN_HAVE_CUTLASS_SM90)
  if (GemmEligible(n)) {
    const Tensor& w = *n.input(1)->const_value;
    KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
    cutlass_sm90::QGemmProblem gp;
    gp.m = spec.input_shapes.empty() ? 1 : std::max<int64_t>(RowsOf(spec.input_shapes[0]), 1);
    gp.n = static_cast<int>(w.dim(1));
    gp.k = static_cast<int>(w.dim(0));
    gp.int8_output = p.y_type == DataType::kInt8;
    gp.half_output = p.y_type == DataType::kFloat16;
    gp.fp8 = IsFp8(n);
    gp.fp8_output = p.y_type == DataType::kFloat8E4M3FN;
    gp.residual = n.input(3) != nullptr;
    gp.residual_int8 = gp.residual && p.r_scale > 0;
    gp.residual_half = gp.residual && n.input(3)->dtype == DataType::kFloat16;
    gp.gelu = GemmGelu(n, p);
    for (int i = 0; i < cutlass_sm90::kNumGemmTiles; ++i)
      if (!cutlass_sm90::Unsupported(gp, kGemmTiles[i])) tactics.push_back((gp.fp8 ? kFp8GemmTactics : kGemmTactics)[i]);
  }
#endif
  tactics.push_back(IsFp8(n) ? kFp8Tactic : kTactic);
  return tactics;
}

Result<std::unique_ptr<Layer>> CreateQMatMul(const LayerSpec& spec, const std::string& tactic) {
  const Node& n = spec.node;
  const bool fp8 = IsFp8(n);
  const std::optional<LtAlgo> lt_algo = LtAlgoFromTactic(tactic);
#if defined(KILN_HAVE_CUTLASS_SM90)
  const std::optional<cutlass_sm90::GemmTile> gemm = GemmTileOf(tactic, fp8);
  if (gemm && !GemmEligible(n))
    return Err(StatusCode::kInvalidArgument, "{}: tactic '{}' needs a compute capability 9.0 GPU, symmetric int8 x "
               "(or float8e4m3fn x), a float32, float16 or symmetric 8-bit output of x's kind, Relu / Clip / no "
               "activation (or GELU with an 8-bit output and no residual), K a multiple of 16 and N of 16 (8-bit "
               "output), 8 (float16) or 4", n.Where(), tactic);
  const bool sm90 = gemm.has_value();
#else
  const bool sm90 = false;
#endif
  if (tactic != (fp8 ? kFp8Tactic : kTactic) && !lt_algo && !sm90)
    return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}'", n.Where(), tactic);
  if (lt_algo && !LtEligible(n))
    return Err(StatusCode::kInvalidArgument, "{}: tactic '{}' needs int8 x and K, N multiples of 4", n.Where(),
               tactic);
  KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
  const Tensor* w = ConstWeight(n);
  if (!w || w->rank() != 2)
    return Unsupported(n, "a weight that is not a constant [K, N] matrix of int8 (float8e4m3fn for float8 x)");
  const int64_t k = w->dim(0), cols = w->dim(1);
  Tensor wt(w->dtype(), {cols, k});  // [N, K] (one-byte elements)
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < cols; ++j) wt.data<uint8_t>()[j * k + i] = w->data<uint8_t>()[i * cols + j];
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<QWeights> q, Upload(n, wt, p.w_scales));
  KILN_ASSIGN_OR_RETURN(QGemmArgs base, BaseArgs(n, p, *q));
  base.m = cols;
  base.k = k;
#if defined(KILN_HAVE_CUTLASS_SM90)
  if (gemm) {
    std::vector<float> scale(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) scale[j] = p.x_scale * p.w_scale(j);  // the CPU's float product
    KILN_ASSIGN_OR_RETURN(DeviceBuffer sd, UploadToDevice(scale.data(), scale.size() * sizeof(float),
                                                          n.name + "/column_scale"));
    float lo = 0, hi = 0;
    ClampOf(p, &lo, &hi);
    return std::unique_ptr<Layer>(
        std::make_unique<QMatMulSm90Layer>(q, base, *gemm, std::move(sd), lo, hi, GemmGelu(n, p), n.Where()));
  }
#endif
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
    const int64_t rows = spec.input_shapes.empty() ? 1 : RowsOf(spec.input_shapes[0]);
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
        a.o = RowsOf(in[0].shape);  // rows from X's shape (K may be 0: the epilogue still writes every row)
        a.bias = OptionalFloat(in, 2);
        SetResidual(a, in);
        a.y = out[0].data;
        Status st = KILN_CUDA_STATUS(LaunchQGemm(a, ctx.stream));
        return st.ok() ? st : st.WithContext(where);
      }));
}

}  // namespace

std::string quantized::Fp8GemmUnavailable() {
#if defined(KILN_HAVE_CUTLASS_SM90)
  return Sm90Device() ? std::string() : "its FP8 GEMM needs a compute capability 9.0 GPU (Hopper)";
#else
  return "this build has no FP8 GEMM (CUTLASS was not found when it was configured: scripts/deps installs it)";
#endif
}

void RegisterQuantizedLayers(LayerRegistry& r) {
  r.Add("kiln.QConv", QConvFactory());
  LayerFactory qmm = QFactory(CreateQMatMul, QMatMulTactics);
  // On cuBLASLt's int8 tensor cores (and Hopper's fused GEMM where it fits); float8 on Hopper's GEMM only.
  qmm.preferred_for = [](const Node& n) {
#if defined(KILN_HAVE_CUTLASS_SM90)
    if (IsFp8(n)) return GemmEligible(n);
#else
    if (IsFp8(n)) return false;
#endif
    return LtEligible(n);
  };
  // Its epilogue writes float16 and reads a float16 residual (plan/fold_quantized_casts.cpp asks; the precision
  // planner never lowers it: the op keeps float32).
  qmm.compute_types = {DataType::kFloat32, DataType::kFloat16};
  r.Add("kiln.QMatMul", std::move(qmm));
}

}  // namespace kiln::cuda
