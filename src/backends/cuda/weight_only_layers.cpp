// CUDA layer of kiln.WeightOnlyMatMul (ops/quantized_ops.h): the packed 4-bit weight is uploaded once, its rows padded
// to 16 bytes, with the scales as float32 and the zero points. Two tactics, timed like any others:
//   "w4-gemv":             the GEMV kernel (weight_only.cu) for up to kGemvMaxRows rows of X — decode steps, where the
//                          GEMM is bound by reading the weight and 4 bits a weight move a quarter of FP16's bytes;
//                          past that many rows, the second tactic's path (a GEMV is the wrong kernel there).
//   "w4-dequant-cublaslt": the weight dequantized into scratch memory in X's type, then cuBLASLt's GEMM (prefill).
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>

#include "backends/cuda/cublaslt_gemm.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/families.h"
#include "backends/cuda/quantized_layer_util.h"
#include "backends/cuda/weight_only_kernels.h"
#include "core/error.h"
#include "ops/quantized_ops.h"

namespace kiln::cuda {
namespace {

constexpr const char* kGemv = "w4-gemv";
constexpr const char* kDequant = "w4-dequant-cublaslt";
constexpr int64_t kGemvMaxRows = 64;
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

using quantized::RowsOf;

struct WoqWeights {
  DeviceBuffer w, scales, zeros;
  WoqArgs base;  // every field but x, rows and y
};

class WoqLayer : public Layer {
 public:
  WoqLayer(std::shared_ptr<WoqWeights> w, bool gemv, std::string where)
      : w_(std::move(w)), gemv_(gemv), where_(std::move(where)) {}
  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    if (UsesGemv(RowsOf(in[0].shape))) return 0;
    return DequantBytes() + kLtWorkspaceBytes;
  }
  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    WoqArgs a = w_->base;
    a.x = in[0].data;
    a.rows = RowsOf(in[0].shape);
    a.y = out[0].data;
    if (a.rows == 0 || a.n == 0) return Status::Ok();
    if (UsesGemv(a.rows)) {
      Status st = KILN_CUDA_STATUS(LaunchWoqGemv(a, ctx.stream));
      return st.ok() ? st : st.WithContext(where_);
    }
    const size_t wd_bytes = DequantBytes();
    if (ctx.workspace_bytes < wd_bytes + kLtWorkspaceBytes)
      return Err(StatusCode::kInternal, "{}: {} bytes of scratch memory, {} needed", where_, ctx.workspace_bytes,
                 wd_bytes + kLtWorkspaceBytes);
    Status st = KILN_CUDA_STATUS(LaunchWoqDequantize(a, ctx.workspace, ctx.stream));
    if (!st.ok()) return st.WithContext(where_);
    LtGemmShape shape;
    shape.dtype = a.x_dtype;
    shape.m = a.rows;
    shape.n = a.n;
    shape.k = a.k;
    shape.trans_b = true;  // the dequantized weight is [N, K]
    LtGemmArgs args;
    args.a = a.x;
    args.b = ctx.workspace;
    args.y = a.y;
    st = LtGemmRun(ctx.cublaslt, shape, args, nullptr, 0, static_cast<char*>(ctx.workspace) + wd_bytes,
                   kLtWorkspaceBytes, ctx.stream);
    return st.ok() ? st : st.WithContext(where_);
  }

 private:
  bool UsesGemv(int64_t rows) const { return gemv_ && rows <= kGemvMaxRows; }
  size_t DequantBytes() const {
    const WoqArgs& b = w_->base;
    return (static_cast<size_t>(b.n * b.k) * DataTypeSize(static_cast<DataType>(b.x_dtype)) + 255) / 256 * 256;
  }
  std::shared_ptr<WoqWeights> w_;
  bool gemv_;
  std::string where_;
};

const Tensor* Const(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v && v->is_const() ? &*v->const_value : nullptr;
}

Result<std::vector<std::string>> WoqTactics(const LayerSpec& spec) {
  const int64_t rows = spec.input_shapes.empty() || spec.input_shapes[0].empty() ? 1 : RowsOf(spec.input_shapes[0]);
  if (rows <= kGemvMaxRows) return std::vector<std::string>{kGemv, kDequant};
  return std::vector<std::string>{kDequant, kGemv};
}

Result<std::unique_ptr<Layer>> CreateWoq(const LayerSpec& spec, const std::string& tactic) {
  const Node& n = spec.node;
  if (tactic != kGemv && tactic != kDequant)
    return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}'", n.Where(), tactic);
  KILN_ASSIGN_OR_RETURN(const woq_attrs::Params p, woq_attrs::Read(n));
  const Value* x = n.input(0);
  const Tensor* w = Const(n, 1);
  const Tensor* s = Const(n, 2);
  const Tensor* z = n.input(3) ? Const(n, 3) : nullptr;
  if (!x || !w || !s || (n.input(3) && !z))
    return Err(StatusCode::kUnsupported, "{}: the packed weight, its scales and zero points must be constants",
               n.Where());
  if (x->dtype != DataType::kFloat32 && x->dtype != DataType::kFloat16 && x->dtype != DataType::kBFloat16)
    return Err(StatusCode::kUnsupported, "{}: X is {}; the CUDA layer runs float32, float16 and bfloat16",
               n.Where(), DataTypeName(x->dtype));
  const int64_t cols = w->dim(0), groups = p.groups(), row_bytes = p.row_bytes();
  if (w->rank() != 2 || w->dim(1) != row_bytes || s->rank() != 2 || s->dim(0) != cols || s->dim(1) != groups)
    return Err(StatusCode::kInvalidModel, "{}: the packed weight {} or scales {} do not fit K = {}", n.Where(),
               w->Describe(), s->Describe(), p.k);
  auto ww = std::make_shared<WoqWeights>();
  const int64_t ldw = (row_bytes + 15) / 16 * 16;
  std::vector<uint8_t> padded(static_cast<size_t>(cols * ldw), 0);
  for (int64_t j = 0; j < cols; ++j)
    std::copy_n(w->data<uint8_t>() + j * row_bytes, row_bytes, padded.begin() + j * ldw);
  KILN_ASSIGN_OR_RETURN(ww->w, UploadToDevice(padded.data(), padded.size(), n.name + "/weight_packed4"));
  std::vector<float> sf(static_cast<size_t>(cols * groups));
  for (int64_t i = 0; i < cols * groups; ++i) sf[i] = static_cast<float>(s->GetAsDouble(i));  // exact
  KILN_ASSIGN_OR_RETURN(ww->scales, UploadToDevice(sf.data(), sf.size() * sizeof(float), n.name + "/weight_scales"));
  if (z) {
    KILN_ASSIGN_OR_RETURN(ww->zeros, UploadToDevice(z->raw(), z->nbytes(), n.name + "/weight_zero_points"));
  }
  WoqArgs& b = ww->base;
  b.x_dtype = static_cast<int>(x->dtype);
  b.w = static_cast<const uint8_t*>(ww->w.get());
  b.ldw = ldw;
  b.scales = static_cast<const float*>(ww->scales.get());
  b.scale_dtype = static_cast<int>(s->dtype());
  b.zeros = z ? static_cast<const int8_t*>(ww->zeros.get()) : nullptr;
  b.w_signed = p.w_type == DataType::kInt4;
  b.n = cols;
  b.k = p.k;
  b.group = p.group_size;
  b.groups = groups;
  if (p.group_size % 32 == 0 && ((p.group_size / 32) & (p.group_size / 32 - 1)) == 0) {
    b.group_shift = 0;
    while ((int64_t{32} << b.group_shift) != p.group_size) ++b.group_shift;
  }
  return std::unique_ptr<Layer>(std::make_unique<WoqLayer>(std::move(ww), tactic == kGemv, n.Where()));
}

}  // namespace

void RegisterWeightOnlyLayers(LayerRegistry& r) {
  LayerFactory f;
  f.tactics = WoqTactics;
  f.create = CreateWoq;
  r.Add("kiln.WeightOnlyMatMul", std::move(f));
}

}  // namespace kiln::cuda
