// CUDA layers of the attention family: kiln.Attention (Q, K, V, [mask], [keep]) as one fused flash-style kernel
// (semantics: shape/fused_ops.h, cpu/fused_attention.cpp). Tactics:
//   attn.mma   float16/bfloat16 on tensor cores, head size d == dv in {32, 64, 80, 96, 128} (other head sizes
//              met at run time go to the SIMT kernel); blocks of 1, 2, 4 or 8 warps picked by the grid size
//              (attn.mma.w1, .w2, .w4, .w8 force one; not listed for tuning)
//   attn.simt  float32/float16/bfloat16, head sizes up to 256
// The leading (batch) dims of Q, K and V broadcast against each other; the masks broadcast into the scores
// [batch..., Sq, Sk]. Both are resolved here into per-dim element strides passed by value to the kernel, as are
// the layouts kiln_{q,k,v,out}_layout = "BSHD" (the tensor's axes -3 and -2 swapped: [B, S, H, D] for the
// logical [B, H, S, D]), so the head split and merge Transposes cost no copy, and "BS3HD" for Q, K and V (one
// packed tensor [B, S, 3, H, D] from a single QKV GEMM: part 0, 1 or 2 of it, read through strides and an offset).
// With kiln_q_* (plan/fold_quantized_casts.cpp) both kernels write the output quantized, one byte per element.
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "core/error.h"
#include "ops/quantized_ops.h"

namespace kiln::cuda {
namespace {

constexpr const char* kTacticMma = "attn.mma";
constexpr const char* kTacticSimt = "attn.simt";

struct AttentionAttrs {
  float scale = 1.f, fill = 0.f;
  bool k_transposed = false, keep_if_true = true, where_first = false, nan_to_zero = false;
  bool q_bshd = false, k_bshd = false, v_bshd = false, out_bshd = false;  // kiln_*_layout == "BSHD" or "BS3HD"
  bool q_packed = false, k_packed = false, v_packed = false;              // kiln_*_layout == "BS3HD"
  // kiln_q_* (ops/quantized_ops.h): the output written quantized.
  bool quantized = false;
  quant_attrs::QuantizedCopy q;
};

// Whether the layout is BSHD (or BS3HD, which sets *packed; inputs only).
Result<bool> ReadLayout(const Node& n, const char* name, bool* packed = nullptr) {
  const Result<std::string> l = n.attr_string(name, "BHSD");
  if (!l.ok()) return l.status();
  if (*l == "BHSD") return false;
  if (*l == "BSHD") return true;
  if (*l == "BS3HD" && packed) return *packed = true;
  return Err(StatusCode::kInvalidModel, "{}: {} is '{}'; expected BHSD or BSHD{}", n.Where(), name, *l,
             packed ? " or BS3HD" : "");
}

Result<AttentionAttrs> ReadAttrs(const Node& n) {
  AttentionAttrs a;
  KILN_ASSIGN_OR_RETURN(a.scale, n.attr_float("scale", 1.f));
  KILN_ASSIGN_OR_RETURN(a.fill, n.attr_float("kiln_mask_fill", 0.f));
  KILN_ASSIGN_OR_RETURN(int64_t kt, n.attr_int("kiln_k_transposed", 0));
  KILN_ASSIGN_OR_RETURN(int64_t keep_true, n.attr_int("kiln_keep_if_true", 1));
  KILN_ASSIGN_OR_RETURN(int64_t where_first, n.attr_int("kiln_where_first", 0));
  KILN_ASSIGN_OR_RETURN(int64_t nan_to_zero, n.attr_int("kiln_nan_to_zero", 0));
  a.k_transposed = kt != 0;
  a.keep_if_true = keep_true != 0;
  a.where_first = where_first != 0;
  a.nan_to_zero = nan_to_zero != 0;
  KILN_ASSIGN_OR_RETURN(a.q_bshd, ReadLayout(n, "kiln_q_layout", &a.q_packed));
  KILN_ASSIGN_OR_RETURN(a.k_bshd, ReadLayout(n, "kiln_k_layout", &a.k_packed));
  KILN_ASSIGN_OR_RETURN(a.v_bshd, ReadLayout(n, "kiln_v_layout", &a.v_packed));
  if (a.k_packed && a.k_transposed)
    return Err(StatusCode::kInvalidModel, "{}: a packed (BS3HD) K cannot be transposed", n.Where());
  KILN_ASSIGN_OR_RETURN(a.out_bshd, ReadLayout(n, "kiln_out_layout"));
  if (n.has_attr(quant_attrs::kQType)) {
    KILN_ASSIGN_OR_RETURN(a.q, quant_attrs::ReadQuantizedCopy(n));
    a.quantized = true;
  }
  return a;
}

bool IsAttentionFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

std::string ShapeStr(const std::vector<int64_t>& s) { return ShapeToString(s); }

// Numpy broadcast of two shapes (right-aligned); false when they do not broadcast.
bool Broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    (*out)[i] = x == 1 ? y : x;
  }
  return true;
}

// Element strides, per dim of `target`, of a contiguous tensor of `shape` read broadcast (right-aligned) into
// `target` (0 where it broadcasts); false when `shape` does not broadcast into `target` without enlarging it.
bool StridesInto(const std::vector<int64_t>& shape, const std::vector<int64_t>& target, std::vector<int64_t>* st) {
  if (shape.size() > target.size()) return false;
  const size_t off = target.size() - shape.size();
  st->assign(target.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    const int64_t dim = shape[i], want = target[off + i];
    if (dim != want && dim != 1) return false;
    (*st)[off + i] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return true;
}

// Swaps axes -3 and -2 (a "BSHD" tensor's logical shape or strides); false when the rank is below 3.
bool SwapHeadAxes(std::vector<int64_t>* v) {
  const size_t r = v->size();
  if (r < 3) return false;
  std::swap((*v)[r - 3], (*v)[r - 2]);
  return true;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

// One operand as the kernel reads it: the logical shape, its element strides (physical layout applied) and the
// element offset of its first element.
struct Operand {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
};
// `slot` >= 0: the physical tensor is BS3HD [.., S, 3, H, D] and the operand is its part `slot` (bshd is set).
bool MakeOperand(const std::vector<int64_t>& physical, bool bshd, Operand* o, int slot = -1) {
  o->shape = physical;
  o->strides = ContiguousStrides(physical);
  o->offset = 0;
  if (slot >= 0) {
    const size_t r = physical.size();
    if (r < 4 || physical[r - 3] != 3) return false;
    o->offset = slot * o->strides[r - 3];
    o->shape.erase(o->shape.end() - 3);
    o->strides.erase(o->strides.end() - 3);
  }
  if (!bshd) return true;
  return SwapHeadAxes(&o->shape) && SwapHeadAxes(&o->strides);
}

// Per dim of `batch` (right-aligned): the operand's stride over its leading dims (0 where it broadcasts).
std::vector<int64_t> BatchStrides(const Operand& o, const std::vector<int64_t>& batch) {
  const size_t lead = o.shape.size() - 2, off = batch.size() - lead;
  std::vector<int64_t> st(batch.size(), 0);
  for (size_t i = 0; i < lead; ++i) st[off + i] = o.shape[i] == 1 ? 0 : o.strides[i];
  return st;
}

class AttentionLayer : public Layer {
 public:
  AttentionLayer(std::string where, AttentionAttrs attrs, bool mma, int mma_warps)
      : where_(std::move(where)), attrs_(attrs), mma_(mma), mma_warps_(mma_warps) {}

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    AttentionParams p;
    KILN_RETURN_IF_ERROR(MakeParams(inputs, outputs, &p));
    if (outputs[0].numel() == 0) return Status::Ok();
    const int dtype = static_cast<int>(inputs[0].dtype);
    if (mma_ && AttentionMmaSupports(dtype, p.d, p.dv))
      return KILN_CUDA_STATUS(LaunchAttentionMma(p, dtype, ctx.stream, mma_warps_));
    return KILN_CUDA_STATUS(LaunchAttentionSimt(p, dtype, ctx.stream));
  }

 private:
  Status MakeParams(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>& out,
                    AttentionParams* p) const {
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return Err(StatusCode::kInvalidArgument, "{}: Attention needs Q, K and V", where_);
    if (out.empty() || !out[0].present())
      return Err(StatusCode::kInternal, "{}: Attention has no output tensor", where_);
    const DeviceTensor &q = in[0], &k = in[1], &v = in[2];
    const DeviceTensor* mask = in.size() > 3 && in[3].present() ? &in[3] : nullptr;
    const DeviceTensor* keep = in.size() > 4 && in[4].present() ? &in[4] : nullptr;
    const DataType t = q.dtype;
    const DataType out_t = attrs_.quantized ? attrs_.q.type : t;
    if (!IsAttentionFloat(t) || k.dtype != t || v.dtype != t || (mask && mask->dtype != t) || out[0].dtype != out_t)
      return Err(StatusCode::kUnsupported,
                 "{}: the CUDA Attention needs Q, K, V, the additive mask and the output of one type among float32, "
                 "float16, bfloat16 (got Q {}, K {}, V {}, output {})",
                 where_, DataTypeName(t), DataTypeName(k.dtype), DataTypeName(v.dtype), DataTypeName(out[0].dtype));
    if (keep && keep->dtype != DataType::kBool)
      return Err(StatusCode::kInvalidArgument, "{}: the keep mask must be bool, not {}", where_,
                 DataTypeName(keep->dtype));
    for (const DeviceTensor* x : {&q, &k, &v})
      if (x->shape.size() < 2 || x->shape.size() > 2 + kAttnMaxBatchDims)
        return Err(StatusCode::kUnsupported, "{}: Q, K and V must have rank 2..{} (shapes {}, {}, {})", where_,
                   2 + kAttnMaxBatchDims, ShapeStr(q.shape), ShapeStr(k.shape), ShapeStr(v.shape));
    Operand qo, ko, vo;
    if (!MakeOperand(q.shape, attrs_.q_bshd, &qo, attrs_.q_packed ? 0 : -1) ||
        !MakeOperand(k.shape, attrs_.k_bshd, &ko, attrs_.k_packed ? 1 : -1) ||
        !MakeOperand(v.shape, attrs_.v_bshd, &vo, attrs_.v_packed ? 2 : -1))
      return Err(StatusCode::kInvalidArgument,
                 "{}: a BSHD layout needs rank >= 3, a BS3HD one [.., S, 3, H, D] (Q {}, K {}, V {})", where_,
                 ShapeStr(q.shape), ShapeStr(k.shape), ShapeStr(v.shape));
    const auto& qs = qo.shape;
    const auto& ks = ko.shape;
    const auto& vs = vo.shape;
    const size_t qr = qs.size(), kr = ks.size(), vr = vs.size();
    const int64_t sq = qs[qr - 2], d = qs[qr - 1];
    const int64_t sk = attrs_.k_transposed ? ks[kr - 1] : ks[kr - 2];
    const int64_t dk = attrs_.k_transposed ? ks[kr - 2] : ks[kr - 1];
    const int64_t dv = vs[vr - 1];
    if (dk != d || vs[vr - 2] != sk)
      return Err(StatusCode::kInvalidArgument, "{}: Q {}, K{} {} and V {} do not line up", where_, ShapeStr(qs),
                 attrs_.k_transposed ? "^T" : "", ShapeStr(ks), ShapeStr(vs));
    if (d > kAttnMaxHeadSize || dv > kAttnMaxHeadSize)
      return Err(StatusCode::kUnsupported,
                 "{}: head size {} (values {}) is above {}, the most the CUDA attention kernels handle; run this "
                 "node on the CPU backend",
                 where_, d, dv, kAttnMaxHeadSize);
    const std::vector<int64_t> bq(qs.begin(), qs.end() - 2), bk(ks.begin(), ks.end() - 2),
        bv(vs.begin(), vs.end() - 2);
    std::vector<int64_t> batch, tmp;
    if (!Broadcast(bq, bk, &tmp) || !Broadcast(tmp, bv, &batch))
      return Err(StatusCode::kInvalidArgument, "{}: the batch dims of Q {}, K {} and V {} do not broadcast", where_,
                 ShapeStr(qs), ShapeStr(ks), ShapeStr(vs));
    if (batch.size() > static_cast<size_t>(kAttnMaxBatchDims))
      return Err(StatusCode::kUnsupported, "{}: {} batch dims; the CUDA Attention handles up to {}", where_,
                 batch.size(), kAttnMaxBatchDims);
    std::vector<int64_t> out_shape = batch;
    out_shape.push_back(sq);
    out_shape.push_back(dv);
    Operand oo;
    if (!MakeOperand(out_shape, attrs_.out_bshd, &oo))
      return Err(StatusCode::kInvalidArgument, "{}: the BSHD output layout needs rank >= 3 (output {})", where_,
                 ShapeStr(out_shape));
    // oo: the physical output shape (the swap is its own inverse) with the logical order's strides.
    std::vector<int64_t> out_phys = oo.shape;
    if (out[0].shape != out_phys)
      return Err(StatusCode::kInternal, "{}: the output is {} but Q, K, V give {}", where_, ShapeStr(out[0].shape),
                 ShapeStr(out_phys));
    Operand yo;
    MakeOperand(out_phys, attrs_.out_bshd, &yo);  // logical shape, strides into the physical output

    // Batch strides: each operand's leading dims read broadcast into `batch`.
    const std::vector<int64_t> sq_st = BatchStrides(qo, batch), sk_st = BatchStrides(ko, batch),
                               sv_st = BatchStrides(vo, batch), so_st = BatchStrides(yo, batch);
    std::vector<int64_t> scores = batch;
    scores.push_back(sq);
    scores.push_back(sk);
    std::vector<int64_t> mask_st(scores.size(), 0), keep_st(scores.size(), 0);
    if (mask && !StridesInto(mask->shape, scores, &mask_st))
      return Err(StatusCode::kInvalidArgument, "{}: the additive mask {} does not broadcast into the scores {}",
                 where_, ShapeStr(mask->shape), ShapeStr(scores));
    if (keep && !StridesInto(keep->shape, scores, &keep_st))
      return Err(StatusCode::kInvalidArgument, "{}: the keep mask {} does not broadcast into the scores {}", where_,
                 ShapeStr(keep->shape), ShapeStr(scores));

    const int64_t es = static_cast<int64_t>(DataTypeSize(t));
    p->q = static_cast<const char*>(q.data) + qo.offset * es;
    p->k = static_cast<const char*>(k.data) + ko.offset * es;
    p->v = static_cast<const char*>(v.data) + vo.offset * es;
    p->mask = mask ? mask->data : nullptr;
    p->keep = keep ? static_cast<const uint8_t*>(keep->data) : nullptr;
    p->out = out[0].data;
    if (attrs_.quantized) {
      p->q_kind = attrs_.q.type == DataType::kFloat8E4M3FN ? 2 : attrs_.q.type == DataType::kUInt8 ? 1 : 0;
      p->q_inv_scale = 1.f / attrs_.q.scale;  // the CPU's float reciprocal (cpu/fused_attention.cpp)
      p->q_zero_point = static_cast<int>(attrs_.q.zero_point);
    }
    p->nbd = static_cast<int>(batch.size());
    p->batch = 1;
    for (size_t i = 0; i < batch.size(); ++i) {
      p->batch_dims[i] = batch[i];
      p->batch *= batch[i];
      p->q_bstride[i] = sq_st[i];
      p->k_bstride[i] = sk_st[i];
      p->v_bstride[i] = sv_st[i];
      p->out_bstride[i] = so_st[i];
      p->mask_bstride[i] = mask_st[i];
      p->keep_bstride[i] = keep_st[i];
    }
    const size_t nb = batch.size();
    p->sq = sq;
    p->sk = sk;
    p->d = static_cast<int>(d);
    p->dv = static_cast<int>(dv);
    const size_t krk = ko.strides.size();
    p->q_row_stride = qo.strides[qr - 2];
    p->v_row_stride = vo.strides[vr - 2];
    p->out_row_stride = yo.strides[yo.strides.size() - 2];
    p->k_row_stride = attrs_.k_transposed ? ko.strides[krk - 1] : ko.strides[krk - 2];
    p->k_dim_stride = attrs_.k_transposed ? ko.strides[krk - 2] : ko.strides[krk - 1];
    if (qo.strides[qr - 1] != 1 || vo.strides[vr - 1] != 1)
      return Err(StatusCode::kInternal, "{}: Q's and V's head dims must be contiguous", where_);
    p->mask_row = mask_st[nb];
    p->mask_col = mask_st[nb + 1];
    p->keep_row = keep_st[nb];
    p->keep_col = keep_st[nb + 1];
    p->scale = attrs_.scale;
    p->fill = attrs_.fill;
    p->keep_if_true = attrs_.keep_if_true ? 1 : 0;
    p->where_first = attrs_.where_first ? 1 : 0;
    p->nan_to_zero = attrs_.nan_to_zero ? 1 : 0;
    return Status::Ok();
  }

  std::string where_;
  AttentionAttrs attrs_;
  bool mma_;
  int mma_warps_;  // warps per block of the tensor-core kernel; 0: by the grid size
};

// Checks what can be checked at build time: input count and types, attributes, head sizes where known.
Status CheckNode(const LayerSpec& spec) {
  const Node& n = spec.node;
  if (!n.input(0) || !n.input(1) || !n.input(2))
    return Err(StatusCode::kInvalidModel, "{}: Attention needs Q, K and V", n.Where());
  const DataType t = n.input(0)->dtype;
  if (!IsAttentionFloat(t))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA Attention runs float32, float16 or bfloat16, not {}; cast Q, K and V or run the node "
               "on the CPU backend",
               n.Where(), DataTypeName(t));
  KILN_RETURN_IF_ERROR(ReadAttrs(n).status());
  const bool kt = n.geti("kiln_k_transposed", 0) != 0;
  int64_t d = -1, dv = -1;
  if (spec.input_shapes.size() > 0 && spec.input_shapes[0].size() >= 2) d = spec.input_shapes[0].back();
  if (spec.input_shapes.size() > 1 && spec.input_shapes[1].size() >= 2 && d < 0) {
    const auto& ks = spec.input_shapes[1];
    d = kt ? ks[ks.size() - 2] : ks.back();
  }
  if (spec.input_shapes.size() > 2 && spec.input_shapes[2].size() >= 2) dv = spec.input_shapes[2].back();
  if (d > kAttnMaxHeadSize || dv > kAttnMaxHeadSize)
    return Err(StatusCode::kUnsupported,
               "{}: head size {} (values {}) is above {}, the most the CUDA attention kernels handle; run this node "
               "on the CPU backend",
               n.Where(), d, dv, kAttnMaxHeadSize);
  return Status::Ok();
}

Result<std::vector<std::string>> AttentionTactics(const LayerSpec& spec) {
  KILN_RETURN_IF_ERROR(CheckNode(spec));
  const DataType t = spec.node.input(0)->dtype;
  std::vector<std::string> tactics;
  if (t == DataType::kFloat16 || t == DataType::kBFloat16) {
    // Known head sizes must suit the tensor-core kernel; unknown ones may (it falls back to SIMT otherwise).
    int64_t d = -1, dv = -1;
    if (!spec.input_shapes.empty() && !spec.input_shapes[0].empty()) d = spec.input_shapes[0].back();
    if (spec.input_shapes.size() > 2 && !spec.input_shapes[2].empty()) dv = spec.input_shapes[2].back();
    if (d < 0 || dv < 0 || AttentionMmaSupports(static_cast<int>(t), static_cast<int>(d), static_cast<int>(dv)))
      tactics.push_back(kTacticMma);
  }
  tactics.push_back(kTacticSimt);
  return tactics;
}

Result<std::unique_ptr<Layer>> CreateAttention(const LayerSpec& spec, const std::string& tactic) {
  KILN_RETURN_IF_ERROR(CheckNode(spec));
  const Node& n = spec.node;
  const DataType t = n.input(0)->dtype;
  bool mma = false;
  int warps = 0;
  for (int w : {1, 2, 4, 8})
    if (tactic == std::string(kTacticMma) + ".w" + std::to_string(w)) warps = w;
  if (tactic == kTacticMma || warps != 0) {
    if (t != DataType::kFloat16 && t != DataType::kBFloat16)
      return Err(StatusCode::kInvalidArgument,
                 "{}: tactic {} runs float16/bfloat16 only, not {}; use tactic {}", n.Where(), tactic,
                 DataTypeName(t), kTacticSimt);
    mma = true;
  } else if (tactic != kTacticSimt && tactic != "default") {
    return Err(StatusCode::kInvalidArgument, "{}: unknown Attention tactic '{}' (known: {}, {}.w1/.w2/.w4/.w8, {})",
               n.Where(), tactic, kTacticMma, kTacticMma, kTacticSimt);
  }
  KILN_ASSIGN_OR_RETURN(AttentionAttrs attrs, ReadAttrs(n));
  // The SIMT kernel needs more than 48 KiB of shared memory for large heads (and the mma layer may fall back to it).
  KILN_CUDA_RETURN_IF_ERROR(PrepareAttentionSimt());
  if (mma) KILN_CUDA_RETURN_IF_ERROR(PrepareAttentionMma());
  return std::unique_ptr<Layer>(std::make_unique<AttentionLayer>(n.Where(), attrs, mma, warps));
}

}  // namespace

void RegisterOnnxAttentionLayers(LayerRegistry& r);  // onnx_attention_layers.cpp
void RegisterLlmLayers(LayerRegistry& r);           // llm_layers.cpp

void RegisterAttentionLayers(LayerRegistry& r) {
  LayerFactory f;
  f.tactics = AttentionTactics;
  f.create = CreateAttention;
  r.Add("kiln.Attention", std::move(f));
  RegisterOnnxAttentionLayers(r);
  RegisterLlmLayers(r);
}

}  // namespace kiln::cuda
