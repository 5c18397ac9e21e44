// Shape functions of the recurrent LLM ops of opset 27: LinearAttention (linear / gated / delta / gated_delta state
// recurrences, grouped-query heads) and CausalConvWithState (a depthwise causal 1-D convolution carrying its last k-1
// inputs). Each checks its inputs against the spec and gives both outputs' types and shapes.
#include <string>

#include "core/error.h"
#include "ops/families.h"

namespace kiln {
namespace {

// The element types these ops take (T, and LinearAttention's state type S).
bool IsLlmFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16; }

Status CheckLlmFloat(const InferContext& ctx, size_t i, const char* what) {
  if (!IsLlmFloat(ctx.in(i).dtype))
    return Err(StatusCode::kInvalidModel, "{}: {} must be float32, float16 or bfloat16, got {}", ctx.node.Where(), what,
               DataTypeName(ctx.in(i).dtype));
  return Status::Ok();
}

Status CheckRank(const InferContext& ctx, size_t i, const char* what, int64_t rank, const char* layout) {
  const TensorInfo& t = ctx.in(i);
  if (t.has_shape && t.rank() != rank)
    return Err(StatusCode::kInvalidModel, "{}: {} must be {}-D {}, got {}", ctx.node.Where(), what, rank, layout,
               ShapeToString(t.shape));
  return Status::Ok();
}

Dim DimOf(const TensorInfo& t, int64_t i) { return t.has_shape ? t.shape[i] : Dim::Unknown(); }
bool Differ(const Dim& a, const Dim& b) { return a.known() && b.known() && a.value != b.value; }
// The better-known of two dims that must be equal.
Dim Pick(const Dim& a, const Dim& b) { return a.known() || (a.symbolic() && !b.known()) ? a : b; }

// LinearAttention: query [B, T, Hq*dk], key [B, T, Hkv*dk], value [B, T, Hkv*dv], past_state [B, Hkv, dk, dv],
// decay [B, T, Hkv*dk or Hkv], beta [B, T, Hkv or 1] -> output [B, T, Hq*dv], present_state [B, Hkv, dk, dv] (S: the
// past_state's type, else T).
Status LinearAttentionShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_ASSIGN_OR_RETURN(int64_t hq, n.attr_int("q_num_heads", 0));
  KILN_ASSIGN_OR_RETURN(int64_t hkv, n.attr_int("kv_num_heads", 0));
  if (!n.has_attr("q_num_heads") || !n.has_attr("kv_num_heads"))
    return Err(StatusCode::kInvalidModel, "{}: attributes q_num_heads and kv_num_heads are required", n.Where());
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
    return Err(StatusCode::kInvalidModel, "{}: q_num_heads ({}) must be a positive multiple of kv_num_heads ({})",
               n.Where(), hq, hkv);
  KILN_ASSIGN_OR_RETURN(std::string rule, n.attr_string("update_rule", "gated_delta"));
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    return Err(StatusCode::kInvalidModel,
               "{}: update_rule must be 'linear', 'gated', 'delta' or 'gated_delta', got '{}'", n.Where(), rule);
  KILN_ASSIGN_OR_RETURN(float scale, n.attr_float("scale", 0.0f));
  KILN_ASSIGN_OR_RETURN(int64_t chunk, n.attr_int("chunk_size", 64));  // a tuning hint: no effect on the result
  (void)scale;
  (void)chunk;
  const bool gated = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  if (gated != ctx.has_input(4))
    return Err(StatusCode::kInvalidModel, "{}: update_rule '{}' {} the decay input (4)", n.Where(), rule,
               gated ? "requires" : "takes no");
  if (delta != ctx.has_input(5))
    return Err(StatusCode::kInvalidModel, "{}: update_rule '{}' {} the beta input (5)", n.Where(), rule,
               delta ? "requires" : "takes no");

  const char* names[] = {"query", "key", "value", "past_state", "decay", "beta"};
  for (size_t i = 0; i < 6; ++i) {
    if (!ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(CheckLlmFloat(ctx, i, names[i]));
    if (i != 3 && ctx.in(i).dtype != ctx.in(0).dtype)
      return Err(StatusCode::kInvalidModel, "{}: {} is {} but query is {}; they must match", n.Where(), names[i],
                 DataTypeName(ctx.in(i).dtype), DataTypeName(ctx.in(0).dtype));
    KILN_RETURN_IF_ERROR(CheckRank(ctx, i, names[i], i == 3 ? 4 : 3, i == 3 ? "(B, H_kv, d_k, d_v)" : "(B, T, H*D)"));
  }
  const TensorInfo& q = ctx.in(0);
  const TensorInfo& k = ctx.in(1);
  const TensorInfo& v = ctx.in(2);
  // Batch and sequence length agree over query, key, value, decay and beta.
  Dim b = DimOf(q, 0), t = DimOf(q, 1);
  for (size_t i : {size_t{1}, size_t{2}, size_t{4}, size_t{5}}) {
    if (!ctx.has_input(i) || !ctx.in(i).has_shape) continue;
    const TensorInfo& x = ctx.in(i);
    if (Differ(b, x.shape[0]) || Differ(t, x.shape[1]))
      return Err(StatusCode::kInvalidModel, "{}: {} {} and query {} disagree on batch or sequence length", n.Where(),
                 names[i], ShapeToString(x.shape), ShapeToString(q.shape));
    b = Pick(b, x.shape[0]);
    t = Pick(t, x.shape[1]);
  }
  // Head sizes: d_k from query (and key), d_v from value.
  auto per_head = [&](const Dim& packed, int64_t heads, const char* what) -> Result<Dim> {
    if (packed.known() && packed.value % heads != 0)
      return Err(StatusCode::kInvalidModel, "{}: the last dim of {} ({}) is not divisible by its {} heads", n.Where(),
                 what, packed.value, heads);
    return DimDiv(packed, Dim(heads));
  };
  KILN_ASSIGN_OR_RETURN(Dim dk, per_head(DimOf(q, 2), hq, "query"));
  KILN_ASSIGN_OR_RETURN(Dim dk_key, per_head(DimOf(k, 2), hkv, "key"));
  KILN_ASSIGN_OR_RETURN(Dim dv, per_head(DimOf(v, 2), hkv, "value"));
  if (Differ(dk, dk_key))
    return Err(StatusCode::kInvalidModel, "{}: query's head size {} (last dim / q_num_heads) differs from key's {}",
               n.Where(), dk.value, dk_key.value);
  dk = Pick(dk, dk_key);
  if (ctx.has_input(4) && ctx.in(4).has_shape) {
    const Dim last = ctx.in(4).shape[2];
    if (last.known() && last.value != hkv && !(dk.known() && last.value == hkv * dk.value))
      return Err(StatusCode::kInvalidModel,
                 "{}: decay's last dim {} must be kv_num_heads ({}) or kv_num_heads * d_k ({})", n.Where(), last.value,
                 hkv, DimMul(Dim(hkv), dk).ToString());
  }
  if (ctx.has_input(5) && ctx.in(5).has_shape) {
    const Dim last = ctx.in(5).shape[2];
    if (last.known() && last.value != hkv && last.value != 1)
      return Err(StatusCode::kInvalidModel, "{}: beta's last dim {} must be kv_num_heads ({}) or 1", n.Where(),
                 last.value, hkv);
  }
  Shape state = {b, Dim(hkv), dk, dv};
  DataType state_type = q.dtype;
  if (ctx.has_input(3)) {
    const TensorInfo& past = ctx.in(3);
    state_type = past.dtype;
    if (past.has_shape) {
      for (size_t i = 0; i < 4; ++i)
        if (Differ(past.shape[i], state[i]))
          return Err(StatusCode::kInvalidModel, "{}: past_state {} must be (B, H_kv, d_k, d_v) = {}", n.Where(),
                     ShapeToString(past.shape), ShapeToString(state));
      for (size_t i = 0; i < 4; ++i) state[i] = Pick(state[i], past.shape[i]);
    }
  }
  ctx.set_output(0, q.dtype, {state[0], t, DimMul(Dim(hq), state[3])});
  ctx.set_output(1, state_type, state);
  return Status::Ok();
}

// CausalConvWithState: input [B, C, L], weight [C, 1, k], bias [C], past_state [B, C, k-1] -> output [B, C, L],
// present_state [B, C, k-1].
Status CausalConvWithStateShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  KILN_ASSIGN_OR_RETURN(std::string act, n.attr_string("activation", "none"));
  if (act != "none" && act != "silu" && act != "swish")
    return Err(StatusCode::kInvalidModel, "{}: activation must be 'none', 'silu' or 'swish', got '{}'", n.Where(), act);
  const char* names[] = {"input", "weight", "bias", "past_state"};
  const int64_t ranks[] = {3, 3, 1, 3};
  const char* layouts[] = {"(batch, channels, length)", "(channels, 1, k)", "(channels)", "(batch, channels, k - 1)"};
  for (size_t i = 0; i < 4; ++i) {
    if (!ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(CheckLlmFloat(ctx, i, names[i]));
    if (ctx.in(i).dtype != ctx.in(0).dtype)
      return Err(StatusCode::kInvalidModel, "{}: {} is {} but input is {}; they must match", n.Where(), names[i],
                 DataTypeName(ctx.in(i).dtype), DataTypeName(ctx.in(0).dtype));
    KILN_RETURN_IF_ERROR(CheckRank(ctx, i, names[i], ranks[i], layouts[i]));
  }
  const TensorInfo& x = ctx.in(0);
  const TensorInfo& w = ctx.in(1);
  Dim b = DimOf(x, 0), c = DimOf(x, 1);
  if (Differ(c, DimOf(w, 0)) || Differ(DimOf(w, 1), Dim(1)))
    return Err(StatusCode::kInvalidModel, "{}: weight {} must be (channels, 1, k) for input {}", n.Where(),
               ShapeToString(w.shape), ShapeToString(x.shape));
  c = Pick(c, DimOf(w, 0));
  const Dim k = DimOf(w, 2);
  if (k.known() && k.value < 1)
    return Err(StatusCode::kInvalidModel, "{}: the kernel size (weight dim 2) must be >= 1, got 0", n.Where());
  Dim keep = k.known() ? Dim(k.value - 1) : (k.symbolic() ? DimSub(k, Dim(1)) : Dim::Unknown());
  if (ctx.has_input(2)) {
    const Dim bc = DimOf(ctx.in(2), 0);
    if (Differ(bc, c))
      return Err(StatusCode::kInvalidModel, "{}: bias has {} values for {} channels", n.Where(), bc.value, c.value);
    c = Pick(c, bc);
  }
  if (ctx.has_input(3) && ctx.in(3).has_shape) {
    const TensorInfo& past = ctx.in(3);
    if (Differ(past.shape[0], b) || Differ(past.shape[1], c) || Differ(past.shape[2], keep))
      return Err(StatusCode::kInvalidModel, "{}: past_state {} must be (batch, channels, k - 1) = [{},{},{}]",
                 n.Where(), ShapeToString(past.shape), b.ToString(), c.ToString(), keep.ToString());
    b = Pick(b, past.shape[0]);
    c = Pick(c, past.shape[1]);
    keep = Pick(keep, past.shape[2]);
  }
  ctx.set_output(0, x.dtype, {b, c, DimOf(x, 2)});
  ctx.set_output(1, x.dtype, {b, c, keep});
  return Status::Ok();
}

}  // namespace

void RegisterLlmOps(OpRegistry& r) {
  r.Onnx("LinearAttention").Since(27).Shape(LinearAttentionShape);
  r.Onnx("CausalConvWithState").Since(27).Shape(CausalConvWithStateShape);
}

}  // namespace kiln
