// CUDA layer of ONNX's Attention (opsets 23-25; kernels in onnx_attention.cu) with the CPU reference's semantics
// (backends/cpu/onnx_attention.cpp): 3-D and 4-D Q/K/V, grouped-query heads, past_key/past_value with the
// present_key/present_value outputs, attn_mask of any numeric type or bool broadcast into the scores (its last dim
// may be shorter), is_causal with the past offset, scale, softcap, softmax_precision, the four qk_matmul_output
// modes, nonpad_kv_seqlen (24) and left/right_window_size (25). Tactics:
//   onnx_attn.rows   one thread block per query row (onnx_attention.cu), every case; rounds where the CPU rounds
//   onnx_attn.flash  kiln's fused flash-style kernels of kiln.Attention (attention_kernels.h: tensor cores for
//                    float16/bfloat16 with d == dv in {32, 64, 80, 96, 128}, else SIMT up to 256), where they fit:
//                    Q, K, V of one type among float32/16, bfloat16, no softcap, no qk_matmul_output, softmax_precision
//                    not double, head sizes up to 256, an attn_mask whose last dim is T or 1. Grouped heads become a
//                    batch dim of the kernel ([B, Hkv, group]) over which K and V broadcast; attn_mask is converted to
//                    Q's type, and is_causal, the windows, nonpad_kv_seqlen and a short mask become a bool keep mask
//                    [B or 1, Sq, T]. Sums and softmax in float (no rounding of the scores to Q's type). A run whose
//                    shapes do not fit takes the row kernel.
// The run-time steps, all enqueued on the stream:
//   1. present_key / present_value = past ++ new (into the outputs, or workspace when past is given but the present
//      outputs are not wanted); without past, K and V are read where they lie;
//   2. attn_mask converted to an additive bias (workspace), the keep mask built (flash);
//   3. the attention kernel.
// kiln's own kiln.Attention (attention_layers.cpp) is another op.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/layer.h"
#include "backends/cuda/onnx_attention_kernels.h"
#include "core/error.h"

namespace kiln::cuda {

void RegisterOnnxAttentionLayers(LayerRegistry& r);

namespace {

constexpr const char* kTacticRows = "onnx_attn.rows";
constexpr const char* kTacticFlash = "onnx_attn.flash";

bool IsFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

struct Attrs {
  int64_t q_heads = 0, kv_heads = 0;
  bool causal = false;
  int64_t mode = 0, left = -1, right = -1;
  float softcap = 0.f;
  bool has_scale = false;
  float scale = 1.f;
  bool has_precision = false;
  DataType precision = DataType::kFloat32;
};

Result<Attrs> ReadAttrs(const Node& n) {
  Attrs a;
  KILN_ASSIGN_OR_RETURN(a.q_heads, n.attr_int("q_num_heads", 0));
  KILN_ASSIGN_OR_RETURN(a.kv_heads, n.attr_int("kv_num_heads", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t causal, n.attr_int("is_causal", 0));
  a.causal = causal != 0;
  KILN_ASSIGN_OR_RETURN(a.mode, n.attr_int("qk_matmul_output_mode", 0));
  KILN_ASSIGN_OR_RETURN(a.left, n.attr_int("left_window_size", -1));
  KILN_ASSIGN_OR_RETURN(a.right, n.attr_int("right_window_size", -1));
  KILN_ASSIGN_OR_RETURN(a.softcap, n.attr_float("softcap", 0.f));
  a.has_scale = n.has_attr("scale");
  KILN_ASSIGN_OR_RETURN(a.scale, n.attr_float("scale", 1.f));
  a.has_precision = n.has_attr("softmax_precision");
  KILN_ASSIGN_OR_RETURN(const int64_t precision, n.attr_int("softmax_precision", 1));
  a.precision = static_cast<DataType>(precision);
  if (a.mode < 0 || a.mode > 3)
    return Err(StatusCode::kInvalidModel, "{}: qk_matmul_output_mode must be 0, 1, 2 or 3, not {}", n.Where(), a.mode);
  if (a.has_precision && !IsFloat(a.precision))
    return Err(StatusCode::kInvalidModel,
               "{}: softmax_precision must be 1 (float), 10 (float16), 11 (double) or 16 (bfloat16), not {}",
               n.Where(), precision);
  if (std::isnan(a.softcap) || std::isnan(a.scale))
    return Err(StatusCode::kInvalidModel, "{}: softcap and scale must be numbers", n.Where());
  return a;
}

// What one run needs: the kernel's parameters, which present tensors to build, and the workspace layout.
struct Plan {
  OnnxAttentionParams p;
  bool three = false;
  int64_t skv = 0;
  bool concat_k = false, concat_v = false;        // build present_key / present_value
  bool k_scratch = false, v_scratch = false;      // ... in the workspace (past given, output not wanted)
  size_t k_off = 0, v_off = 0, bias_off = 0, scores_off = 0, keep_off = 0, bytes = 0;
  int64_t mask_numel = 0;
  float scale = 1.f;
  // The fused kernels' path (tactic onnx_attn.flash, where the run fits them).
  bool flash = false, keep = false;
  int64_t keep_batches = 1, key_limit = 0;
};

const DeviceTensor* Opt(const std::vector<DeviceTensor>& v, size_t i) {
  return i < v.size() && v[i].present() ? &v[i] : nullptr;
}

class OnnxAttentionLayer : public Layer {
 public:
  OnnxAttentionLayer(std::string where, Attrs a, bool flash) : where_(std::move(where)), a_(a), flash_(flash) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>& out) const override {
    auto plan = MakePlan(in, out);
    return plan.ok() ? plan->bytes : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    KILN_ASSIGN_OR_RETURN(Plan plan, MakePlan(in, out));
    if (ctx.workspace_bytes < plan.bytes)
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where_,
                 ctx.workspace_bytes, plan.bytes);
    char* ws = static_cast<char*>(ctx.workspace);
    OnnxAttentionParams& p = plan.p;
    const DeviceTensor &k = in[1], &v = in[2];
    const DeviceTensor *pk = Opt(in, 4), *pv = Opt(in, 5);
    // present = past ++ new, read by the kernel from there ([B, Hkv, T, size]).
    auto concat = [&](const DeviceTensor& x, const DeviceTensor* past, int64_t size, void* dst) -> Status {
      const bool t3 = plan.three;
      const int64_t hkv = p.kv_heads, s = plan.skv;
      const int64_t sb = t3 ? s * hkv * size : hkv * s * size, sh = t3 ? size : s * size, ss = t3 ? hkv * size : size;
      return Launched(LaunchKvConcat(static_cast<int>(DataTypeSize(x.dtype)), past ? past->data : nullptr, x.data, sb,
                                     sh, ss, p.batch, hkv, p.past, s, size, dst, ctx.stream),
                      "present key/value");
    };
    if (plan.concat_k) {
      void* dst = plan.k_scratch ? ws + plan.k_off : out[1].data;
      KILN_RETURN_IF_ERROR(concat(k, pk, p.head, dst));
      if (pk) p.k = dst;
    }
    if (plan.concat_v) {
      void* dst = plan.v_scratch ? ws + plan.v_off : out[2].data;
      KILN_RETURN_IF_ERROR(concat(v, pv, p.v_head, dst));
      if (pv) p.v = dst;
    }
    const DeviceTensor* mask = Opt(in, 3);
    const int bias_type = plan.flash ? p.qk_dtype : static_cast<int>(p.wide ? DataType::kFloat64 : DataType::kFloat32);
    if (mask && plan.mask_numel > 0) {
      KILN_RETURN_IF_ERROR(Launched(LaunchOnnxAttentionMaskBias(static_cast<int>(mask->dtype), mask->data,
                                                                plan.mask_numel, p.qk_dtype, bias_type,
                                                                ws + plan.bias_off, ctx.stream),
                                    "attn_mask"));
      p.bias = ws + plan.bias_off;
    }
    if (!plan.flash) return Launched(LaunchOnnxAttention(p, ws + plan.scores_off, ctx.stream), "attention");
    uint8_t* keep = plan.keep ? reinterpret_cast<uint8_t*>(ws + plan.keep_off) : nullptr;
    if (keep)
      KILN_RETURN_IF_ERROR(Launched(LaunchOnnxAttentionKeep(keep, plan.keep_batches, p.q_len, p.total, p.past, p.nonpad,
                                                            p.causal, p.left, p.right, plan.key_limit, ctx.stream),
                                    "keep mask"));
    if (p.batch * p.q_heads * p.q_len == 0) return Status::Ok();
    const AttentionParams f = FusedParams(plan, keep);
    if (AttentionMmaSupports(p.qk_dtype, p.head, p.v_head))
      return Launched(LaunchAttentionMma(f, p.qk_dtype, ctx.stream), "fused attention (mma)");
    return Launched(LaunchAttentionSimt(f, p.qk_dtype, ctx.stream), "fused attention (simt)");
  }

 private:
  // kiln's fused kernels read Q [B, Hkv, group, Sq, d], K and V [B, Hkv, (1), T, .] (broadcast over the group) and
  // write Y [B, Hkv, group, Sq, dv], all through the row kernel's strides.
  static AttentionParams FusedParams(const Plan& plan, const uint8_t* keep) {
    const OnnxAttentionParams& p = plan.p;
    const int64_t g = p.q_heads / p.kv_heads;
    AttentionParams f;
    f.q = p.q, f.k = p.k, f.v = p.v, f.out = p.y;
    f.mask = p.bias;
    f.keep = keep;
    f.nbd = 3;
    const int64_t dims[3] = {p.batch, p.kv_heads, g};
    const int64_t qs[3] = {p.q_sb, g * p.q_sh, p.q_sh}, ks[3] = {p.k_sb, p.k_sh, 0}, vs[3] = {p.v_sb, p.v_sh, 0};
    const int64_t ys[3] = {p.y_sb, g * p.y_sh, p.y_sh};
    const int64_t ms[3] = {p.bias_stride[0], g * p.bias_stride[1], p.bias_stride[1]};
    const int64_t keep_b = plan.keep_batches > 1 ? p.q_len * p.total : 0;
    f.batch = 1;
    for (int i = 0; i < 3; ++i) {
      f.batch_dims[i] = dims[i];
      f.batch *= dims[i];
      f.q_bstride[i] = qs[i], f.k_bstride[i] = ks[i], f.v_bstride[i] = vs[i], f.out_bstride[i] = ys[i];
      f.mask_bstride[i] = ms[i];
      f.keep_bstride[i] = i == 0 ? keep_b : 0;
    }
    f.sq = p.q_len, f.sk = p.total, f.d = p.head, f.dv = p.v_head;
    f.q_row_stride = p.q_ss, f.k_row_stride = p.k_ss, f.k_dim_stride = 1, f.v_row_stride = p.v_ss;
    f.out_row_stride = p.y_ss;
    f.mask_row = p.bias_stride[2];
    f.mask_col = p.bias_len == 1 ? 0 : p.bias_stride[3];
    f.keep_row = p.total, f.keep_col = 1;
    f.scale = plan.scale;
    f.fill = -INFINITY;
    f.keep_if_true = 1, f.where_first = 0, f.nan_to_zero = 1;
    return f;
  }

 private:
  Status Launched(cudaError_t e, const char* what) const {
    if (e == cudaSuccess) return Status::Ok();
    return Err(StatusCode::kCudaError, "{}: launching the {} kernel failed: {} ({})", where_, what,
               cudaGetErrorString(e), cudaGetErrorName(e));
  }

  Status Bad(const std::string& what) const {
    return Err(StatusCode::kInvalidArgument, "{}: {}", where_, what);
  }

  // Checks the run's tensors against each other (as the CPU reference does) and lays out the work.
  Result<Plan> MakePlan(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>& out) const {
    Plan plan;
    OnnxAttentionParams& p = plan.p;
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return Bad("Attention needs Q, K and V");
    if (out.empty() || !out[0].present()) return Err(StatusCode::kInternal, "{}: Attention has no output Y", where_);
    const DeviceTensor &q = in[0], &k = in[1], &v = in[2];
    const DeviceTensor *mask = Opt(in, 3), *pk = Opt(in, 4), *pv = Opt(in, 5), *nonpad = Opt(in, 6);
    const size_t r = q.shape.size();
    if ((r != 3 && r != 4) || k.shape.size() != r || v.shape.size() != r)
      return Bad("Q " + ShapeToString(q.shape) + ", K " + ShapeToString(k.shape) + " and V " +
                 ShapeToString(v.shape) + " must all be 3-D or all 4-D");
    const DataType t1 = q.dtype, t2 = v.dtype;
    if (!IsFloat(t1) || !IsFloat(t2) || k.dtype != t1 || (pk && pk->dtype != t1) || (pv && pv->dtype != t2))
      return Bad("Q, K and past_key must have one float type, V and past_value one float type");
    plan.three = r == 3;
    int64_t hq, hkv, sq, skv, d, dv;
    if (plan.three) {
      hq = a_.q_heads, hkv = a_.kv_heads;
      if (hq <= 0 || hkv <= 0 || q.shape[2] % hq != 0 || k.shape[2] % hkv != 0 || v.shape[2] % hkv != 0)
        return Bad("3-D Q, K and V need hidden sizes that are multiples of q_num_heads / kv_num_heads");
      sq = q.shape[1], skv = k.shape[1], d = q.shape[2] / hq, dv = v.shape[2] / hkv;
      if (k.shape[2] / hkv != d || v.shape[1] != skv) return Bad("Q, K and V do not line up");
    } else {
      hq = q.shape[1], hkv = k.shape[1], sq = q.shape[2], skv = k.shape[2], d = q.shape[3], dv = v.shape[3];
      if (k.shape[3] != d || v.shape[1] != hkv || v.shape[2] != skv) return Bad("Q, K and V do not line up");
    }
    const int64_t batch = q.shape[0];
    if (k.shape[0] != batch || v.shape[0] != batch || hkv <= 0 || hq % hkv != 0)
      return Bad("Q, K and V need one batch size, and Q's heads a multiple of K's and V's");
    if (d > kOnnxAttnMaxHead)
      return Err(StatusCode::kUnsupported, "{}: head size {} is above {}, the most the CUDA kernel handles", where_, d,
                 kOnnxAttnMaxHead);
    if ((pk == nullptr) != (pv == nullptr) || (pk && nonpad))
      return Bad("past_key and past_value go together, and not with nonpad_kv_seqlen");
    int64_t past = 0;
    if (pk) {
      past = pk->shape.size() == 4 ? pk->shape[2] : -1;
      if (pk->shape != std::vector<int64_t>{batch, hkv, past, d} ||
          pv->shape != std::vector<int64_t>{batch, hkv, past, dv})
        return Bad("past_key " + ShapeToString(pk->shape) + " and past_value " + ShapeToString(pv->shape) +
                   " do not fit K and V");
    }
    const int64_t total = past + skv;
    if (nonpad && (nonpad->dtype != DataType::kInt64 || nonpad->shape != std::vector<int64_t>{batch}))
      return Bad("nonpad_kv_seqlen " + ShapeToString(nonpad->shape) + " must be int64 [batch]");
    const std::vector<int64_t> scores = {batch, hq, sq, total};
    if (mask) {
      const size_t mr = mask->shape.size();
      bool ok = mr >= 1 && mr <= 4 && mask->shape.back() <= total;
      for (size_t i = 1; ok && i < mr; ++i) {
        const int64_t m = mask->shape[mr - 1 - i];
        ok = m == 1 || m == scores[3 - i];
      }
      if (!ok)
        return Bad("attn_mask " + ShapeToString(mask->shape) + " does not broadcast to the scores " +
                   ShapeToString(scores));
      // Right-aligned strides into the scores; 0 where a dim of 1 broadcasts (not the last, which may be short).
      int64_t stride = 1;
      for (size_t i = 0; i < mr; ++i) {
        const int64_t dim = mask->shape[mr - 1 - i];
        p.bias_stride[3 - i] = dim == 1 && i > 0 ? 0 : stride;
        stride *= dim;
      }
      p.bias_len = mask->shape.back();
      plan.mask_numel = mask->numel();
    }
    const std::vector<int64_t> y_shape =
        plan.three ? std::vector<int64_t>{batch, sq, hq * dv} : std::vector<int64_t>{batch, hq, sq, dv};
    if (out[0].shape != y_shape || out[0].dtype != t1)
      return Err(StatusCode::kInternal, "{}: Y is {} {} but Q, K, V give {} {}", where_, DataTypeName(out[0].dtype),
                 ShapeToString(out[0].shape), DataTypeName(t1), ShapeToString(y_shape));
    const DeviceTensor *present_k = Opt(out, 1), *present_v = Opt(out, 2), *qk = Opt(out, 3);
    if ((present_k && present_k->shape != std::vector<int64_t>{batch, hkv, total, d}) ||
        (present_v && present_v->shape != std::vector<int64_t>{batch, hkv, total, dv}) ||
        (qk && qk->shape != scores))
      return Err(StatusCode::kInternal, "{}: the present_key/present_value/qk_matmul_output buffers do not fit", where_);

    p.q = q.data;
    p.k = k.data;
    p.v = v.data;
    p.y = out[0].data;
    p.qk = qk && qk->numel() > 0 ? qk->data : nullptr;
    p.qk_mode = static_cast<int>(a_.mode);
    p.nonpad = nonpad ? static_cast<const int64_t*>(nonpad->data) : nullptr;
    p.qk_dtype = static_cast<int>(t1);
    p.v_dtype = static_cast<int>(t2);
    const DataType softmax_t = a_.has_precision ? a_.precision : t1;
    p.softmax_dtype = static_cast<int>(softmax_t);
    p.wide = t1 == DataType::kFloat64 || t2 == DataType::kFloat64 || softmax_t == DataType::kFloat64;
    p.batch = batch, p.q_heads = hq, p.kv_heads = hkv, p.q_len = sq, p.total = total, p.past = past;
    p.head = static_cast<int>(d), p.v_head = static_cast<int>(dv);
    p.causal = a_.causal ? 1 : 0;
    p.left = a_.left, p.right = a_.right;
    p.softcap = a_.softcap;
    // The default scale, 1 / sqrt(head_size), in float as the CPU reference computes it.
    const float scale = a_.has_scale ? a_.scale : 1.f / std::sqrt(static_cast<float>(d));
    plan.scale = scale;
    p.q_factor = scale >= 0 ? std::sqrt(scale) : scale;
    p.scale_k = scale >= 0 ? 1 : 0;
    // Row strides (elements): 3-D [B, S, H * size], 4-D [B, H, S, size].
    auto view = [&](int64_t heads, int64_t seq, int64_t size, int64_t* sb, int64_t* sh, int64_t* ss) {
      *sb = seq * heads * size;
      *sh = plan.three ? size : seq * size;
      *ss = plan.three ? heads * size : size;
    };
    view(hq, sq, d, &p.q_sb, &p.q_sh, &p.q_ss);
    view(hq, sq, dv, &p.y_sb, &p.y_sh, &p.y_ss);
    plan.skv = skv;
    plan.concat_k = pk || (present_k && present_k->numel() > 0);
    plan.concat_v = pv || (present_v && present_v->numel() > 0);
    plan.k_scratch = pk && !present_k;
    plan.v_scratch = pv && !present_v;
    if (pk) {  // read from present ([B, Hkv, T, size])
      p.k_sb = hkv * total * d, p.k_sh = total * d, p.k_ss = d;
      p.v_sb = hkv * total * dv, p.v_sh = total * dv, p.v_ss = dv;
    } else {
      view(hkv, skv, d, &p.k_sb, &p.k_sh, &p.k_ss);
      view(hkv, skv, dv, &p.v_sb, &p.v_sh, &p.v_ss);
    }

    // The fused kernels' path where this run fits it.
    plan.flash = flash_ && t1 == t2 && t1 != DataType::kFloat64 && softmax_t != DataType::kFloat64 &&
                 !(a_.softcap > 0) && !p.qk && total > 0 && d <= kAttnMaxHeadSize && dv <= kAttnMaxHeadSize &&
                 (!mask || p.bias_len == total || p.bias_len == 1);
    if (plan.flash) {
      plan.key_limit = mask ? p.bias_len : total;
      plan.keep = a_.causal || a_.left >= 0 || a_.right >= 0 || nonpad || plan.key_limit < total;
      plan.keep_batches = nonpad ? batch : 1;
    }

    // Workspace: present scratch, the mask's bias, the scores (row kernel) or the keep mask (fused kernels).
    size_t off = 0;
    if (plan.k_scratch) {
      plan.k_off = off;
      off += Align256(static_cast<size_t>(batch * hkv * total * d) * DataTypeSize(t1));
    }
    if (plan.v_scratch) {
      plan.v_off = off;
      off += Align256(static_cast<size_t>(batch * hkv * total * dv) * DataTypeSize(t2));
    }
    plan.bias_off = off;
    const size_t bias_es = plan.flash ? DataTypeSize(t1) : (p.wide ? sizeof(double) : sizeof(float));
    off += Align256(static_cast<size_t>(plan.mask_numel) * bias_es);
    if (plan.flash) {
      plan.keep_off = off;
      if (plan.keep) off += Align256(static_cast<size_t>(plan.keep_batches * sq * total));
    } else {
      plan.scores_off = off;
      off += Align256(OnnxAttentionScoresBytes(p));
    }
    plan.bytes = off;
    return plan;
  }

  std::string where_;
  Attrs a_;
  bool flash_;
};

// The head size where the tuning shapes tell it (-1 otherwise).
int64_t KnownHeadSize(const LayerSpec& spec, const Attrs& a) {
  if (spec.input_shapes.empty()) return -1;
  const auto& q = spec.input_shapes[0];
  if (q.size() == 4) return q[3];
  if (q.size() == 3 && a.q_heads > 0) return q[2] / a.q_heads;
  return -1;
}

Status CheckNode(const LayerSpec& spec) {
  const Node& n = spec.node;
  if (!n.input(0) || !n.input(1) || !n.input(2))
    return Err(StatusCode::kInvalidModel, "{}: Attention needs Q, K and V", n.Where());
  for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{4}, size_t{5}})
    if (const Value* x = n.input(i); x && !IsFloat(x->dtype))
      return Err(StatusCode::kUnsupported, "{}: the CUDA Attention takes float Q, K, V and past tensors, not {} ({})",
                 n.Where(), DataTypeName(x->dtype), x->name);
  if (n.outputs.size() > 4 || n.inputs.size() > 7)
    return Err(StatusCode::kInvalidModel, "{}: Attention has at most 7 inputs and 4 outputs", n.Where());
  KILN_ASSIGN_OR_RETURN(const Attrs a, ReadAttrs(n));
  const int64_t d = KnownHeadSize(spec, a);
  if (d > kOnnxAttnMaxHead)
    return Err(StatusCode::kUnsupported,
               "{}: head size {} is above {}, the most the CUDA Attention kernel keeps in shared memory; run this node "
               "on the CPU backend",
               n.Where(), d, kOnnxAttnMaxHead);
  return Status::Ok();
}

// Whether the fused kernels may run the node (the run's shapes decide the rest).
bool FlashMayFit(const LayerSpec& spec, const Attrs& a) {
  const Node& n = spec.node;
  const DataType t = n.input(0)->dtype;
  if ((t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16) || n.input(2)->dtype != t)
    return false;
  if (a.softcap > 0 || n.output(3) || (a.has_precision && a.precision == DataType::kFloat64)) return false;
  const int64_t d = KnownHeadSize(spec, a);
  int64_t dv = -1;
  if (spec.input_shapes.size() > 2 && spec.input_shapes[2].size() == 4) dv = spec.input_shapes[2][3];
  if (spec.input_shapes.size() > 2 && spec.input_shapes[2].size() == 3 && a.kv_heads > 0)
    dv = spec.input_shapes[2][2] / a.kv_heads;
  return d <= kAttnMaxHeadSize && dv <= kAttnMaxHeadSize;
}

Result<std::vector<std::string>> OnnxAttentionTactics(const LayerSpec& spec) {
  KILN_RETURN_IF_ERROR(CheckNode(spec));
  KILN_ASSIGN_OR_RETURN(const Attrs a, ReadAttrs(spec.node));
  std::vector<std::string> tactics = {kTacticRows};
  if (FlashMayFit(spec, a)) tactics.push_back(kTacticFlash);
  return tactics;
}

Result<std::unique_ptr<Layer>> CreateOnnxAttention(const LayerSpec& spec, const std::string& tactic) {
  KILN_RETURN_IF_ERROR(CheckNode(spec));
  const Node& n = spec.node;
  const bool flash = tactic == kTacticFlash;
  if (!flash && tactic != kTacticRows && tactic != "default")
    return Err(StatusCode::kInvalidArgument, "{}: unknown Attention tactic '{}' (known: {}, {})", n.Where(), tactic,
               kTacticRows, kTacticFlash);
  KILN_ASSIGN_OR_RETURN(Attrs a, ReadAttrs(n));
  if (flash) {
    // The fused kernels' shared memory limits (above 48 KiB for large heads), raised once outside any capture.
    KILN_CUDA_RETURN_IF_ERROR(PrepareAttentionSimt());
    KILN_CUDA_RETURN_IF_ERROR(PrepareAttentionMma());
  }
  return std::unique_ptr<Layer>(std::make_unique<OnnxAttentionLayer>(n.Where(), a, flash));
}

}  // namespace

void RegisterOnnxAttentionLayers(LayerRegistry& r) {
  LayerFactory f;
  f.tactics = OnnxAttentionTactics;
  f.create = CreateOnnxAttention;
  f.compute_types = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
  r.Add("Attention", std::move(f));
}

}  // namespace kiln::cuda
