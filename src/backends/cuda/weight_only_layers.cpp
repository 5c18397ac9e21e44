// CUDA layer of kiln.WeightOnlyMatMul (ops/quantized_ops.h): the packed 4-bit weight is uploaded once, with its scales
// and zero points. Three tactics, timed like any others:
//   "w4-mma":              the tensor-core GEMV (weight_only_mma.cu), for float16 or bfloat16 X whose scales have X's
//                          type and group sizes that are multiples of 16 (what quantizers write for such models); the
//                          weight is rearranged on the device into the kernel's fragment layout.
//   "w4-gemv":             the CUDA-core GEMV kernel (weight_only.cu), every type and group size; rows padded to 16
//                          bytes, scales as float32.
//   "w4-dequant-cublaslt": the weight dequantized into scratch memory in X's type, then cuBLASLt's GEMM (prefill).
// The two GEMVs serve up to kGemvMaxRows rows of X (decode steps, where the GEMM is bound by reading the weight and
// 4 bits a weight move a quarter of FP16's bytes); past that, they dequantize from their own layout for cuBLASLt.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "backends/cuda/cublaslt_gemm.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/families.h"
#include "backends/cuda/quantized_layer_util.h"
#include "backends/cuda/weight_only_kernels.h"
#include "core/dtype.h"
#include "core/error.h"
#include "ops/quantized_ops.h"

namespace kiln::cuda {
namespace {

constexpr const char* kMma = "w4-mma";
constexpr const char* kGemv = "w4-gemv";
constexpr const char* kDequant = "w4-dequant-cublaslt";
constexpr int64_t kGemvMaxRows = 64;
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

using quantized::RowsOf;

enum class Mode { kMma, kGemv, kDequant };

struct WoqWeights {
  DeviceBuffer w, scales, zeros;  // kGemv, kDequant: the row layout
  DeviceBuffer wm, sb;            // kMma: the fragment layout, (scale, bias) pairs
  WoqArgs base;    // every field but x, rows and y
  WoqMmaArgs mma;  // the same for kMma
};

class WoqLayer : public Layer {
 public:
  WoqLayer(std::shared_ptr<WoqWeights> w, Mode mode, std::string where)
      : w_(std::move(w)), mode_(mode), where_(std::move(where)) {}
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
    WoqMmaArgs m = w_->mma;
    m.x = a.x;
    m.rows = a.rows;
    m.y = a.y;
    if (UsesGemv(a.rows)) {
      Status st = KILN_CUDA_STATUS(mode_ == Mode::kMma ? LaunchWoqMma(m, ctx.stream) : LaunchWoqGemv(a, ctx.stream));
      return st.ok() ? st : st.WithContext(where_);
    }
    const size_t wd_bytes = DequantBytes();
    if (ctx.workspace_bytes < wd_bytes + kLtWorkspaceBytes)
      return Err(StatusCode::kInternal, "{}: {} bytes of scratch memory, {} needed", where_, ctx.workspace_bytes,
                 wd_bytes + kLtWorkspaceBytes);
    Status st = KILN_CUDA_STATUS(mode_ == Mode::kMma ? LaunchWoqMmaDequantize(m, ctx.workspace, ctx.stream)
                                                     : LaunchWoqDequantize(a, ctx.workspace, ctx.stream));
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
  bool UsesGemv(int64_t rows) const { return mode_ != Mode::kDequant && rows <= kGemvMaxRows; }
  size_t DequantBytes() const {
    const WoqArgs& b = w_->base;
    return (static_cast<size_t>(b.n * b.k) * DataTypeSize(static_cast<DataType>(b.x_dtype)) + 255) / 256 * 256;
  }
  std::shared_ptr<WoqWeights> w_;
  Mode mode_;
  std::string where_;
};

// log2(group / unit) where the group size is `unit` times a power of two, else -1 (the kernels' group_shift).
int Log2OfMultiple(int64_t group, int64_t unit) {
  if (group <= 0 || group % unit != 0) return -1;
  const int64_t m = group / unit;
  if ((m & (m - 1)) != 0) return -1;
  int shift = 0;
  while ((int64_t{1} << shift) != m) ++shift;
  return shift;
}

const Tensor* Const(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v && v->is_const() ? &*v->const_value : nullptr;
}

// Why the tensor-core GEMV cannot take this node ("" where it can): it makes each weight in X's 16-bit type by pair
// arithmetic that is exact only for scales of X's type and zero points within the 4-bit type's range, and takes
// groups whole per 16-wide K step.
std::string MmaRefusal(const Node& n, const woq_attrs::Params& p) {
  const Value* x = n.input(0);
  const Tensor* s = Const(n, 2);
  if (!x || (x->dtype != DataType::kFloat16 && x->dtype != DataType::kBFloat16)) return "X is not float16 or bfloat16";
  if (!s || s->dtype() != x->dtype) return "the scales' type is not X's";
  if (p.group_size % 16 != 0) return "the group size is not a multiple of 16";
  if (n.input(3)) {
    const Tensor* z = Const(n, 3);
    if (!z) return "the zero points are not constant";
    const auto [lo, hi] = p.w_type == DataType::kInt4 ? std::pair{-8, 7} : std::pair{0, 15};
    for (int64_t i = 0; i < z->numel(); ++i)
      if (z->data<int8_t>()[i] < lo || z->data<int8_t>()[i] > hi) return "a zero point is outside the weight's range";
  }
  return "";
}

Result<std::vector<std::string>> WoqTactics(const LayerSpec& spec) {
  KILN_ASSIGN_OR_RETURN(const woq_attrs::Params p, woq_attrs::Read(spec.node));
  const int64_t rows = spec.input_shapes.empty() || spec.input_shapes[0].empty() ? 1 : RowsOf(spec.input_shapes[0]);
  std::vector<std::string> t = rows <= kGemvMaxRows ? std::vector<std::string>{kGemv, kDequant}
                                                    : std::vector<std::string>{kDequant, kGemv};
  if (MmaRefusal(spec.node, p).empty()) t.insert(rows <= kGemvMaxRows ? t.begin() : t.end(), kMma);
  return t;
}

// The fragment layout of the tensor-core GEMV, made on the device from the row layout (uploaded for the purpose and
// freed), and its (scale, bias) pairs.
Status UploadMma(const Node& n, const woq_attrs::Params& p, const std::vector<uint8_t>& padded, WoqWeights& ww) {
  const Tensor* s = Const(n, 2);
  const Tensor* z = n.input(3) ? Const(n, 3) : nullptr;
  const DataType xt = n.input(0)->dtype;
  const int64_t cols = ww.base.n, groups = p.groups(), npad = (cols + 15) / 16 * 16, ktiles = (p.k + 63) / 64;
  WoqMmaArgs& m = ww.mma;
  {
    KILN_ASSIGN_OR_RETURN(DeviceBuffer rows_layout, UploadToDevice(padded.data(), padded.size(),
                                                                   n.name + "/weight_packed4"));
    KILN_ASSIGN_OR_RETURN(ww.wm, DeviceBuffer::Allocate(static_cast<size_t>(npad / 16 * ktiles * 32) * 16));
    DeviceBuffer zeros;  // the zero points, for the weight the layout gives K past k
    if (z) {
      KILN_ASSIGN_OR_RETURN(zeros, UploadToDevice(z->raw(), z->nbytes(), n.name + "/weight_zero_points"));
    }
    WoqArgs a = ww.base;
    a.w = static_cast<const uint8_t*>(rows_layout.get());
    a.zeros = z ? static_cast<const int8_t*>(zeros.get()) : nullptr;
    KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(LaunchWoqMmaLayout(a, ktiles, static_cast<uint4*>(ww.wm.get()), nullptr)));
    KILN_RETURN_IF_ERROR(KILN_CUDA_STATUS(cudaStreamSynchronize(nullptr)));  // before the uploads are freed
  }
  std::vector<uint32_t> sb(static_cast<size_t>(groups * npad), 0);
  const float base = (xt == DataType::kFloat16 ? 1024.f : 128.f) + (p.w_type == DataType::kInt4 ? 8.f : 0.f);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t g = 0; g < groups; ++g) {
      const float bias = base + (z ? z->data<int8_t>()[j * groups + g] : 0);  // an integer: exact in either type
      const uint16_t bias_bits = xt == DataType::kFloat16 ? FloatToHalf(bias) : FloatToBFloat16(bias);
      const uint16_t scale_bits = s->data<uint16_t>()[j * groups + g];  // X's type already
      sb[g * npad + j] = scale_bits | (uint32_t{bias_bits} << 16);
    }
  KILN_ASSIGN_OR_RETURN(ww.sb, UploadToDevice(sb.data(), sb.size() * sizeof(uint32_t), n.name + "/weight_scales"));
  m.x_dtype = static_cast<int>(xt);
  m.w = static_cast<const uint4*>(ww.wm.get());
  m.sb = static_cast<const uint32_t*>(ww.sb.get());
  m.n = cols;
  m.k = p.k;
  m.ktiles = ktiles;
  m.npad = npad;
  m.group = p.group_size;
  m.group_shift = Log2OfMultiple(p.group_size, 16);
  return Status::Ok();
}

Result<std::unique_ptr<Layer>> CreateWoq(const LayerSpec& spec, const std::string& tactic) {
  const Node& n = spec.node;
  if (tactic != kMma && tactic != kGemv && tactic != kDequant)
    return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}'", n.Where(), tactic);
  const Mode mode = tactic == kMma ? Mode::kMma : tactic == kGemv ? Mode::kGemv : Mode::kDequant;
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
  if (mode == Mode::kMma) {
    const std::string why = MmaRefusal(n, p);
    if (!why.empty()) return Err(StatusCode::kUnsupported, "{}: tactic '{}' does not run it: {}", n.Where(), kMma, why);
  }
  auto ww = std::make_shared<WoqWeights>();
  const int64_t ldw = (row_bytes + 15) / 16 * 16;
  std::vector<uint8_t> padded(static_cast<size_t>(cols * ldw), 0);
  for (int64_t j = 0; j < cols; ++j)
    std::copy_n(w->data<uint8_t>() + j * row_bytes, row_bytes, padded.begin() + j * ldw);
  WoqArgs& b = ww->base;
  b.x_dtype = static_cast<int>(x->dtype);
  b.ldw = ldw;
  b.scale_dtype = static_cast<int>(s->dtype());
  b.w_signed = p.w_type == DataType::kInt4;
  b.n = cols;
  b.k = p.k;
  b.group = p.group_size;
  b.groups = groups;
  if (mode == Mode::kMma) {
    KILN_RETURN_IF_ERROR(UploadMma(n, p, padded, *ww));
    return std::unique_ptr<Layer>(std::make_unique<WoqLayer>(std::move(ww), mode, n.Where()));
  }
  KILN_ASSIGN_OR_RETURN(ww->w, UploadToDevice(padded.data(), padded.size(), n.name + "/weight_packed4"));
  std::vector<float> sf(static_cast<size_t>(cols * groups));
  for (int64_t i = 0; i < cols * groups; ++i) sf[i] = static_cast<float>(s->GetAsDouble(i));  // exact
  KILN_ASSIGN_OR_RETURN(ww->scales, UploadToDevice(sf.data(), sf.size() * sizeof(float), n.name + "/weight_scales"));
  if (z) {
    KILN_ASSIGN_OR_RETURN(ww->zeros, UploadToDevice(z->raw(), z->nbytes(), n.name + "/weight_zero_points"));
  }
  b.w = static_cast<const uint8_t*>(ww->w.get());
  b.scales = static_cast<const float*>(ww->scales.get());
  b.zeros = z ? static_cast<const int8_t*>(ww->zeros.get()) : nullptr;
  b.group_shift = Log2OfMultiple(p.group_size, 32);
  return std::unique_ptr<Layer>(std::make_unique<WoqLayer>(std::move(ww), mode, n.Where()));
}

}  // namespace

void RegisterWeightOnlyLayers(LayerRegistry& r) {
  LayerFactory f;
  f.tactics = WoqTactics;
  f.create = CreateWoq;
  r.Add("kiln.WeightOnlyMatMul", std::move(f));
}

}  // namespace kiln::cuda
