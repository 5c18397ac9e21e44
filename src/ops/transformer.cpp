// ONNX's transformer building blocks (default domain, opsets 23+): Attention (opsets 23, 24 with
// nonpad_kv_seqlen, 25 with left/right_window_size), RotaryEmbedding (23) and SwiGLU (28, rewritten at import to
// Swish and Mul, which every backend runs). kiln's own attention op (domain kiln, fused.cpp) is a different op.
//
// Attention works on the 4-D view of its operands: Q [B, Hq, Sq, D], K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv]; a 3-D
// operand [B, S, H * d] is that view with H from q_num_heads / kv_num_heads. past_key / past_value [B, Hkv, P, .]
// are prepended to K / V (T = P + Skv keys). Outputs: Y (Q's rank: [B, Hq, Sq, Dv] or [B, Sq, Hq * Dv]),
// present_key [B, Hkv, T, D], present_value [B, Hkv, T, Dv], qk_matmul_output [B, Hq, Sq, T].
#include <cmath>
#include <string>

#include "core/error.h"
#include "ops/families.h"

namespace kiln {
namespace {

bool IsAttentionFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

// attn_mask: bool (true attends), or a number added to the scores.
bool IsMaskType(DataType t) {
  switch (t) {
    case DataType::kBool:
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
    case DataType::kUInt64:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64: return true;
    default: return IsAttentionFloat(t);
  }
}

// The dim the inputs agree on: the first known one (else the first symbolic one, else unknown); an error when two
// known ones differ.
Result<Dim> Agree(const Node& n, const char* what, std::initializer_list<Dim> dims) {
  Dim r = Dim::Unknown();
  for (const Dim& d : dims) {
    if (d.known()) {
      if (r.known() && r.value != d.value)
        return Err(StatusCode::kInvalidModel, "{}: the inputs disagree on {} ({} vs {})", n.Where(), what, r.value,
                   d.value);
      r = d;
    } else if (d.symbolic() && r.unknown()) {
      r = d;
    }
  }
  return r;
}

// An operand's 4-D view [batch, heads, seq, size] (all unknown when its shape is).
struct HeadDims {
  Dim batch, heads, seq, size;
};

// `rank` is Q's, K's and V's (3 or 4); `heads` the num_heads attribute of a 3-D operand.
Result<HeadDims> HeadDimsOf(const Node& n, const char* name, const TensorInfo& x, int64_t rank, int64_t heads) {
  HeadDims h;
  if (!x.has_shape) return h;
  const Shape& s = x.shape;
  if (x.rank() != rank)
    return Err(StatusCode::kInvalidModel, "{}: {} {} must have rank {} like the other inputs", n.Where(), name,
               ShapeToString(s), rank);
  if (rank == 4) return HeadDims{s[0], s[1], s[2], s[3]};
  if (s[2].known() && s[2].value % heads != 0)
    return Err(StatusCode::kInvalidModel, "{}: {} {}: its hidden size {} is not a multiple of its {} heads", n.Where(),
               name, ShapeToString(s), s[2].value, heads);
  return HeadDims{s[0], Dim(heads), s[1], DimDiv(s[2], Dim(heads))};
}

// A past_key / past_value [B, Hkv, P, size].
Result<HeadDims> PastDimsOf(const Node& n, const char* name, const TensorInfo& x) {
  if (!x.has_shape) return HeadDims{};
  if (x.rank() != 4)
    return Err(StatusCode::kInvalidModel, "{}: {} {} must be [batch, kv_num_heads, past_sequence_length, head_size]",
               n.Where(), name, ShapeToString(x.shape));
  return HeadDims{x.shape[0], x.shape[1], x.shape[2], x.shape[3]};
}

Status CheckAttentionAttrs(const Node& n) {
  KILN_ASSIGN_OR_RETURN(const int64_t causal, n.attr_int("is_causal", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t mode, n.attr_int("qk_matmul_output_mode", 0));
  KILN_ASSIGN_OR_RETURN(const float softcap, n.attr_float("softcap", 0.f));
  KILN_ASSIGN_OR_RETURN(const float scale, n.attr_float("scale", 1.f));
  KILN_ASSIGN_OR_RETURN(const int64_t precision, n.attr_int("softmax_precision", 1));
  KILN_ASSIGN_OR_RETURN(const int64_t left, n.attr_int("left_window_size", -1));
  KILN_ASSIGN_OR_RETURN(const int64_t right, n.attr_int("right_window_size", -1));
  if (causal != 0 && causal != 1)
    return Err(StatusCode::kInvalidModel, "{}: is_causal must be 0 or 1, not {}", n.Where(), causal);
  if (mode < 0 || mode > 3)
    return Err(StatusCode::kInvalidModel, "{}: qk_matmul_output_mode must be 0, 1, 2 or 3, not {}", n.Where(), mode);
  if (std::isnan(softcap) || std::isnan(scale))
    return Err(StatusCode::kInvalidModel, "{}: softcap and scale must be numbers", n.Where());
  const auto p = static_cast<DataType>(precision);
  if (!IsAttentionFloat(p))
    return Err(StatusCode::kInvalidModel,
               "{}: softmax_precision must be 1 (float), 10 (float16), 11 (double) or 16 (bfloat16), not {}", n.Where(),
               precision);
  if (left < -1 || right < -1)
    return Err(StatusCode::kInvalidModel,
               "{}: left_window_size and right_window_size must be -1 or >= 0, not {} and {}", n.Where(), left, right);
  return Status::Ok();
}

// Attention-`version` (23, 24 or 25; the attributes the version does not have were refused at import).
Status AttentionShape(InferContext& ctx, int64_t version) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_RETURN_IF_ERROR(CheckAttentionAttrs(n));
  const size_t max_inputs = version >= 24 ? 7 : 6;
  bool extra = n.outputs.size() > 4;
  for (size_t i = max_inputs; i < ctx.num_inputs(); ++i) extra = extra || ctx.has_input(i);
  if (extra)
    return Err(StatusCode::kInvalidModel,
               "{}: Attention-{} takes at most {} inputs (Q, K, V, attn_mask, past_key, past_value{}) and 4 outputs, "
               "not {} and {}",
               n.Where(), version, max_inputs, version >= 24 ? ", nonpad_kv_seqlen" : "", ctx.num_inputs(),
               n.outputs.size());
  for (size_t i = 0; i < 3; ++i)
    if (!ctx.has_input(i)) return Err(StatusCode::kInvalidModel, "{}: Q, K and V are required", n.Where());
  const TensorInfo &q = ctx.in(0), &k = ctx.in(1), &v = ctx.in(2);
  const DataType t1 = q.dtype, t2 = v.dtype;
  if (!IsAttentionFloat(t1) || !IsAttentionFloat(t2))
    return Err(StatusCode::kInvalidModel, "{}: Q, K and V must be float, float16, bfloat16 or double, not {} and {}",
               n.Where(), DataTypeName(t1), DataTypeName(t2));
  const bool has_past = ctx.has_input(4), has_nonpad = ctx.has_input(6);
  if (has_past != ctx.has_input(5))
    return Err(StatusCode::kInvalidModel, "{}: past_key and past_value go together: give both or neither", n.Where());
  if (has_past && has_nonpad)
    return Err(StatusCode::kInvalidModel,
               "{}: nonpad_kv_seqlen (a cache kept outside the op) cannot be combined with past_key/past_value",
               n.Where());
  if (k.dtype != t1 || (has_past && (ctx.in(4).dtype != t1 || ctx.in(5).dtype != t2)))
    return Err(StatusCode::kInvalidModel, "{}: K and past_key must have Q's type {}, past_value V's type {}", n.Where(),
               DataTypeName(t1), DataTypeName(t2));
  if (ctx.has_input(3) && !IsMaskType(ctx.in(3).dtype))
    return Err(StatusCode::kInvalidModel, "{}: attn_mask must be bool or numeric, not {}", n.Where(),
               DataTypeName(ctx.in(3).dtype));
  if (has_nonpad && ctx.in(6).dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: nonpad_kv_seqlen must be int64, not {}", n.Where(),
               DataTypeName(ctx.in(6).dtype));

  // The rank of Q, K and V (3 or 4), from whichever has a shape.
  int64_t rank = 0;
  for (const TensorInfo* x : {&q, &k, &v})
    if (x->has_shape && rank == 0) rank = x->rank();
  if (rank != 0 && rank != 3 && rank != 4)
    return Err(StatusCode::kInvalidModel,
               "{}: Q, K and V must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size], not rank {}",
               n.Where(), rank);
  KILN_ASSIGN_OR_RETURN(const int64_t q_heads, n.attr_int("q_num_heads", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t kv_heads, n.attr_int("kv_num_heads", 0));
  if (rank == 3 && (q_heads <= 0 || kv_heads <= 0))
    return Err(StatusCode::kInvalidModel, "{}: 3-D Q, K and V need q_num_heads and kv_num_heads (> 0), not {} and {}",
               n.Where(), q_heads, kv_heads);
  KILN_ASSIGN_OR_RETURN(const HeadDims qd, HeadDimsOf(n, "Q", q, rank, q_heads));
  KILN_ASSIGN_OR_RETURN(const HeadDims kd, HeadDimsOf(n, "K", k, rank, kv_heads));
  KILN_ASSIGN_OR_RETURN(const HeadDims vd, HeadDimsOf(n, "V", v, rank, kv_heads));
  HeadDims pk, pv;
  if (has_past) {
    KILN_ASSIGN_OR_RETURN(pk, PastDimsOf(n, "past_key", ctx.in(4)));
    KILN_ASSIGN_OR_RETURN(pv, PastDimsOf(n, "past_value", ctx.in(5)));
  }
  Dim nonpad_batch;
  if (has_nonpad && ctx.in(6).has_shape) {
    if (ctx.in(6).rank() != 1)
      return Err(StatusCode::kInvalidModel, "{}: nonpad_kv_seqlen {} must be a vector [batch]", n.Where(),
                 ShapeToString(ctx.in(6).shape));
    nonpad_batch = ctx.in(6).shape[0];
  }
  KILN_ASSIGN_OR_RETURN(const Dim batch,
                        Agree(n, "the batch size", {qd.batch, kd.batch, vd.batch, pk.batch, pv.batch, nonpad_batch}));
  const Dim hq = rank == 3 ? Dim(q_heads) : qd.heads;
  KILN_ASSIGN_OR_RETURN(const Dim hkv,
                        Agree(n, "the number of key/value heads",
                              {rank == 3 ? Dim(kv_heads) : Dim(), kd.heads, vd.heads, pk.heads, pv.heads}));
  if (rank == 4 &&
      ((q_heads > 0 && hq.known() && hq.value != q_heads) || (kv_heads > 0 && hkv.known() && hkv.value != kv_heads)))
    return Err(StatusCode::kInvalidModel, "{}: q_num_heads {} / kv_num_heads {} contradict 4-D Q {} and K {}",
               n.Where(), q_heads, kv_heads, ShapeToString(q.shape), ShapeToString(k.shape));
  if (hq.known() && hkv.known() && (hkv.value == 0 || hq.value % hkv.value != 0))
    return Err(StatusCode::kInvalidModel,
               "{}: Q's {} heads must be a multiple of K's and V's {} heads (grouped-query attention)", n.Where(),
               hq.value, hkv.value);
  KILN_ASSIGN_OR_RETURN(const Dim d, Agree(n, "the Q/K head size", {qd.size, kd.size, pk.size}));
  KILN_ASSIGN_OR_RETURN(const Dim dv, Agree(n, "the V head size", {vd.size, pv.size}));
  KILN_ASSIGN_OR_RETURN(const Dim skv, Agree(n, "the K/V sequence length", {kd.seq, vd.seq}));
  Dim past = Dim(0);
  if (has_past) {
    KILN_ASSIGN_OR_RETURN(past, Agree(n, "the past sequence length", {pk.seq, pv.seq}));
  }
  const Dim total = DimAdd(past, skv);
  const Dim sq = qd.seq;

  // attn_mask broadcasts to the scores [B, Hq, Sq, T]; its last dim may be shorter than T (the rest is masked).
  if (ctx.has_input(3) && ctx.in(3).has_shape) {
    const Shape& m = ctx.in(3).shape;
    const Shape scores = {batch, hq, sq, total};
    bool ok = !m.empty() && m.size() <= 4;
    for (size_t i = 0; ok && i < m.size(); ++i) {
      const Dim& md = m[m.size() - 1 - i];
      const Dim& sd = scores[3 - i];
      if (!md.known() || !sd.known()) continue;
      ok = i == 0 ? md.value <= sd.value : (md.value == 1 || md.value == sd.value);
    }
    if (!ok)
      return Err(StatusCode::kInvalidModel,
                 "{}: attn_mask {} does not broadcast to the scores {} (rank 1 to 4; the last dim may be shorter)",
                 n.Where(), ShapeToString(m), ShapeToString(scores));
  }

  if (rank == 0) {
    ctx.set_output_rank_unknown(0, t1);
  } else if (rank == 4) {
    ctx.set_output(0, t1, {batch, hq, sq, dv});
  } else {
    // Hq * Dv = V's hidden size * (Hq / Hkv), kept symbolic where V's hidden size is.
    const Dim hidden = v.has_shape && hkv.known() ? DimMul(v.shape[2], Dim(hq.value / hkv.value)) : DimMul(hq, dv);
    ctx.set_output(0, t1, {batch, sq, hidden});
  }
  // The optional outputs the node lists (an omitted one gets no buffer).
  if (n.output(1)) ctx.set_output(1, t1, {batch, hkv, total, d});
  if (n.output(2)) ctx.set_output(2, t2, {batch, hkv, total, dv});
  if (n.output(3)) ctx.set_output(3, t1, {batch, hq, sq, total});
  return Status::Ok();
}

// RotaryEmbedding: X [B, H, S, head] or [B, S, H * head] (num_heads), cos_cache / sin_cache [max_pos, rot / 2]
// indexed by position_ids [B, S], or [B, S, rot / 2] without them; Y is X's shape.
Status RotaryEmbeddingShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  if ((ctx.num_inputs() > 4 && ctx.has_input(4)) || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return Err(StatusCode::kInvalidModel,
               "{}: RotaryEmbedding takes X, cos_cache, sin_cache and (optional) position_ids", n.Where());
  KILN_ASSIGN_OR_RETURN(const int64_t interleaved, n.attr_int("interleaved", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t num_heads, n.attr_int("num_heads", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t rot_attr, n.attr_int("rotary_embedding_dim", 0));
  (void)interleaved;
  const TensorInfo &x = ctx.in(0), &cs = ctx.in(1), &sn = ctx.in(2);
  if (!IsAttentionFloat(x.dtype) || cs.dtype != x.dtype || sn.dtype != x.dtype)
    return Err(StatusCode::kInvalidModel, "{}: X, cos_cache and sin_cache must have one float type (got {}, {}, {})",
               n.Where(), DataTypeName(x.dtype), DataTypeName(cs.dtype), DataTypeName(sn.dtype));
  const bool has_pos = ctx.has_input(3);
  if (has_pos && ctx.in(3).dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: position_ids must be int64, not {}", n.Where(),
               DataTypeName(ctx.in(3).dtype));
  if (num_heads < 0 || rot_attr < 0)
    return Err(StatusCode::kInvalidModel, "{}: num_heads and rotary_embedding_dim must be >= 0", n.Where());
  if (x.has_shape) {
    if (x.rank() != 3 && x.rank() != 4)
      return Err(StatusCode::kInvalidModel, "{}: X {} must be [batch, heads, seq, head_size] or [batch, seq, hidden]",
                 n.Where(), ShapeToString(x.shape));
    if (x.rank() == 3 && num_heads == 0)
      return Err(StatusCode::kInvalidModel, "{}: a 3-D X needs the num_heads attribute", n.Where());
    Dim head = x.shape.back();
    if (x.rank() == 3 && head.known()) {
      if (head.value % num_heads != 0)
        return Err(StatusCode::kInvalidModel, "{}: X's hidden size {} is not a multiple of num_heads {}", n.Where(),
                   head.value, num_heads);
      head = Dim(head.value / num_heads);
    }
    if (head.known()) {
      const int64_t rot = rot_attr == 0 ? head.value : rot_attr;
      if (rot % 2 != 0 || rot > head.value)
        return Err(StatusCode::kInvalidModel, "{}: the rotary dimension {} must be even and at most the head size {}",
                   n.Where(), rot, head.value);
      for (const TensorInfo* c : {&cs, &sn})
        if (c->has_shape && !c->shape.empty() && c->shape.back().known() && c->shape.back().value != rot / 2)
          return Err(StatusCode::kInvalidModel, "{}: cos_cache/sin_cache {} must end in rotary dimension / 2 = {}",
                     n.Where(), ShapeToString(c->shape), rot / 2);
    }
  }
  for (const TensorInfo* c : {&cs, &sn})
    if (c->has_shape && c->rank() != (has_pos ? 2 : 3))
      return Err(StatusCode::kInvalidModel, "{}: cos_cache/sin_cache {} must be {}", n.Where(), ShapeToString(c->shape),
                 has_pos ? "[max_position + 1, rotary_dim / 2] with position_ids"
                         : "[batch, seq, rotary_dim / 2] without position_ids");
  if (has_pos && ctx.in(3).has_shape && ctx.in(3).rank() != 2)
    return Err(StatusCode::kInvalidModel, "{}: position_ids {} must be [batch, seq]", n.Where(),
               ShapeToString(ctx.in(3).shape));
  SetOutputLike(ctx, 0, x);
  return Status::Ok();
}

// SwiGLU(A, B) = Swish_alpha(A) * B (same shapes, no broadcast): rewritten to a Swish node and a Mul.
Status ConvertSwiGLU(ConvertContext& c) {
  Node& n = c.node;
  if (n.inputs.size() != 2 || !n.inputs[0] || !n.inputs[1] || n.outputs.size() != 1 || !n.outputs[0])
    return Err(StatusCode::kInvalidModel, "{}: SwiGLU takes A and B and gives Y", n.Where());
  KILN_ASSIGN_OR_RETURN(const float alpha, n.attr_float("alpha", 1.f));
  const Value *a = n.inputs[0], *b = n.inputs[1];
  if (a->dtype != DataType::kUndefined && b->dtype != DataType::kUndefined && a->dtype != b->dtype)
    return Err(StatusCode::kInvalidModel, "{}: A is {} but B is {}", n.Where(), DataTypeName(a->dtype),
               DataTypeName(b->dtype));
  if (a->has_shape && b->has_shape && IsStatic(a->shape) && IsStatic(b->shape) &&
      ToStatic(a->shape) != ToStatic(b->shape))
    return Err(StatusCode::kInvalidModel, "{}: A {} and B {} must have the same shape (SwiGLU does not broadcast)",
               n.Where(), ShapeToString(a->shape), ShapeToString(b->shape));
  Value* gate = c.graph.AddValue(n.name + "::swiglu_gate");
  Node* swish = c.graph.AddNode("Swish", n.name + "::swiglu_swish");
  swish->opset = n.opset;
  swish->inputs = {n.inputs[0]};
  swish->outputs = {gate};
  swish->attrs["alpha"] = Attribute::Float(alpha);
  n.op_type = "Mul";
  n.inputs[0] = gate;
  n.attrs.clear();
  return Status::Ok();
}

// A SwiGLU node built without the importer: Y has A's type and shape.
Status SwiGLUShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const TensorInfo &a = ctx.in(0), &b = ctx.in(1);
  if (!IsAttentionFloat(a.dtype) || b.dtype != a.dtype)
    return Err(StatusCode::kInvalidModel, "{}: A and B must have one float type (got {} and {})", n.Where(),
               DataTypeName(a.dtype), DataTypeName(b.dtype));
  bool same = !a.has_shape || !b.has_shape || a.rank() == b.rank();
  for (size_t i = 0; same && a.has_shape && b.has_shape && i < a.shape.size(); ++i)
    same = !a.shape[i].known() || !b.shape[i].known() || a.shape[i].value == b.shape[i].value;
  if (!same)
    return Err(StatusCode::kInvalidModel, "{}: A {} and B {} must have the same shape (SwiGLU does not broadcast)",
               n.Where(), ShapeToString(a.shape), ShapeToString(b.shape));
  SetOutputLike(ctx, 0, a.has_shape ? a : b);
  return Status::Ok();
}

}  // namespace

void RegisterTransformerOps(OpRegistry& r) {
  r.Onnx("Attention").Since(23).Until(23).Shape([](InferContext& c) { return AttentionShape(c, 23); });
  r.Onnx("Attention").Since(24).Until(24).Shape([](InferContext& c) { return AttentionShape(c, 24); });
  r.Onnx("Attention").Since(25).Shape([](InferContext& c) { return AttentionShape(c, 25); });
  r.Onnx("RotaryEmbedding").Since(23).Shape(RotaryEmbeddingShape);
  r.Onnx("SwiGLU").Since(28).Convert(ConvertSwiGLU).Shape(SwiGLUShape).ImportOnly();
}

}  // namespace kiln
