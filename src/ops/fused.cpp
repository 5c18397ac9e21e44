// Shape functions of the internal ops the optimizer creates (domain kiln; see shape/fused_ops.h):
// FusedConv / FusedGemm (the base op's shape function plus the activation attributes), FusedMatMul,
// FusedPointwise (broadcast of the inputs), Attention and Reformat.
#include "core/error.h"
#include "ops/families.h"
#include "ops/fused_ops.h"
#include "ops/quantized_ops.h"

namespace kiln {
namespace {

Status CheckActivation(const Node& n) {
  KILN_ASSIGN_OR_RETURN(std::string act, n.attr_string("kiln_activation", "None"));
  KILN_ASSIGN_OR_RETURN(float alpha, n.attr_float("kiln_activation_alpha", 0.f));
  KILN_ASSIGN_OR_RETURN(float beta, n.attr_float("kiln_activation_beta", 0.f));
  (void)alpha;
  (void)beta;
  if (!fused::ParseActivation(act))
    return Err(StatusCode::kInvalidModel,
               "{}: kiln_activation '{}' is not one of None, Relu, LeakyRelu, Sigmoid, Tanh, Clip, HardSigmoid, "
               "SiLU, Gelu, GeluTanh",
               n.Where(), act);
  return Status::Ok();
}

bool IsFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

// The optional residual of FusedConv / FusedGemm / FusedMatMul (input 3, see fused_ops.h): exactly the output's
// type and shape (no broadcast); where the output's dims are unknown, the residual's fill them in.
constexpr size_t kResidualInput = 3;

Status CheckResidual(InferContext& ctx) {
  if (!ctx.has_input(kResidualInput) || ctx.outputs.empty()) return Status::Ok();
  const Node& n = ctx.node;
  const TensorInfo& r = ctx.in(kResidualInput);
  TensorInfo& y = ctx.out(0);
  if (r.dtype != y.dtype)
    return Err(StatusCode::kInvalidModel, "{}: the residual is {} but the output is {}", n.Where(),
               DataTypeName(r.dtype), DataTypeName(y.dtype));
  if (!r.has_shape || !y.has_shape) return Status::Ok();
  bool ok = r.rank() == static_cast<int64_t>(y.shape.size());
  for (size_t d = 0; ok && d < y.shape.size(); ++d) {
    const Dim &a = y.shape[d], &b = r.shape[d];
    if (a.known() && b.known()) ok = a.value == b.value;
    else if (!a.known() && b.known()) y.shape[d] = b;
  }
  if (!ok)
    return Err(StatusCode::kInvalidModel, "{}: the residual {} must have exactly the output's shape {}", n.Where(),
               ShapeToString(r.shape), ShapeToString(y.shape));
  return Status::Ok();
}

// Runs the shape function of `base` on this node (the fused node carries the base op's attributes).
Status Delegate(InferContext& ctx, const char* base) {
  const OpDef* def = FindOp(kOnnxDomain, base);
  const ShapeFn* fn = def ? &def->infer : nullptr;
  if (!fn) return Err(StatusCode::kInternal, "{}: no shape function for {}", ctx.node.Where(), base);
  KILN_RETURN_IF_ERROR(CheckActivation(ctx.node));
  KILN_RETURN_IF_ERROR((*fn)(ctx));
  if (!ctx.outputs.empty() && ctx.outputs[0].dtype != DataType::kUndefined && !IsFloat(ctx.outputs[0].dtype))
    return Err(StatusCode::kUnsupported, "{}: fused activations need a float type, not {}", ctx.node.Where(),
               DataTypeName(ctx.outputs[0].dtype));
  return CheckResidual(ctx);
}

Status FusedMatMulShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_RETURN_IF_ERROR(CheckActivation(n));
  InferContext mm{n, {ctx.inputs[0], ctx.inputs[1]}, {}};
  mm.outputs.resize(1);
  const OpDef* def = FindOp(kOnnxDomain, "MatMul");
  const ShapeFn* fn = def ? &def->infer : nullptr;
  if (!fn) return Err(StatusCode::kInternal, "{}: no shape function for MatMul", n.Where());
  KILN_RETURN_IF_ERROR((*fn)(mm));
  const TensorInfo& y = mm.outputs[0];
  const TensorInfo& b = ctx.in(2);
  if (!IsFloat(y.dtype))
    return Err(StatusCode::kUnsupported, "{}: FusedMatMul needs a float type, not {}", n.Where(), DataTypeName(y.dtype));
  if (b.dtype != y.dtype)
    return Err(StatusCode::kInvalidModel, "{}: bias is {} but the product is {}", n.Where(), DataTypeName(b.dtype),
               DataTypeName(y.dtype));
  if (b.has_shape && (b.rank() != 1 || (y.has_shape && !y.shape.empty() && y.shape.back().known() &&
                                        b.shape[0].known() && b.shape[0].value != y.shape.back().value)))
    return Err(StatusCode::kInvalidModel, "{}: bias must be a vector over the last axis of the product {}, not {}",
               n.Where(), y.has_shape ? ShapeToString(y.shape) : "[?]", ShapeToString(b.shape));
  if (y.has_shape && y.shape.empty())
    return Err(StatusCode::kInvalidModel, "{}: the product is a scalar; a bias over its last axis needs rank >= 1",
               n.Where());
  SetOutputLike(ctx, 0, y);
  return CheckResidual(ctx);
}

Status FusedPointwiseShape(InferContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.num_inputs() == 0)
    return Err(StatusCode::kInvalidModel, "{}: FusedPointwise needs at least one input", n.Where());
  KILN_RETURN_IF_ERROR(fused::ParseProgram(n, ctx.num_inputs()).status());
  DataType t = DataType::kUndefined;
  Shape out;
  bool known = true, first = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return Err(StatusCode::kInvalidModel, "{}: input {} is missing", n.Where(), i);
    const TensorInfo& in = ctx.in(i);
    if (i == 0) t = in.dtype;
    if (in.dtype != t)
      return Err(StatusCode::kInvalidModel, "{}: input {} is {} but input 0 is {}", n.Where(), i,
                 DataTypeName(in.dtype), DataTypeName(t));
    if (!in.has_shape) {
      known = false;
      continue;
    }
    if (first) {
      out = in.shape;
    } else {
      KILN_ASSIGN_OR_RETURN(out, BroadcastShapes(n, out, in.shape));
    }
    first = false;
  }
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return Err(StatusCode::kUnsupported, "{}: FusedPointwise runs float32/float16/bfloat16, not {}", n.Where(),
               DataTypeName(t));
  if (known) ctx.set_output(0, t, out);
  else ctx.set_output_rank_unknown(0, t);
  return Status::Ok();
}

// Attention(Q [..., Sq, d], K [..., Sk, d] (K^T [..., d, Sk] when kiln_k_transposed), V [..., Sk, dv],
// mask [.., Sq, Sk] (additive, optional, may be empty-omitted), keep [.., Sq, Sk] (bool, optional))
// -> [batch..., Sq, dv] with batch the broadcast of Q's, K's and V's leading dims. kiln_{q,k,v,out}_layout =
// "BSHD": that tensor has its axes -3 and -2 swapped (see ApplyAttentionLayout).
// A kiln_*_layout attribute of Attention: "BHSD" (default) leaves `shape` as is, "BSHD" swaps its axes -3 and -2
// (the logical shape of a BSHD input, or the physical shape of a BSHD output), "BS3HD" (inputs only: Q, K and V
// packed as [.., S, 3, H, D]) drops axis -3 and swaps.
Status ApplyAttentionLayout(const Node& n, const char* name, Shape* shape) {
  KILN_ASSIGN_OR_RETURN(const fused::AttnLayout l, fused::ReadAttentionLayout(n, name));
  if (l == fused::AttnLayout::kBHSD) return Status::Ok();
  if (l == fused::AttnLayout::kBS3HD) {
    if (shape->size() < 4 || ((*shape)[shape->size() - 3].known() && (*shape)[shape->size() - 3].value != 3))
      return Err(StatusCode::kInvalidModel, "{}: {} = BS3HD needs [.., S, 3, H, D], not {}", n.Where(), name,
                 ShapeToString(*shape));
    shape->erase(shape->end() - 3);
  }
  if (shape->size() < 3)
    return Err(StatusCode::kInvalidModel, "{}: {} = BSHD needs rank >= 3, not {}", n.Where(), name,
               ShapeToString(*shape));
  std::swap((*shape)[shape->size() - 3], (*shape)[shape->size() - 2]);
  return Status::Ok();
}

Status AttentionShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_ASSIGN_OR_RETURN(float scale, n.attr_float("scale", 1.f));
  KILN_ASSIGN_OR_RETURN(int64_t kt, n.attr_int("kiln_k_transposed", 0));
  KILN_ASSIGN_OR_RETURN(float fill, n.attr_float("kiln_mask_fill", 0.f));
  KILN_ASSIGN_OR_RETURN(int64_t keep_true, n.attr_int("kiln_keep_if_true", 1));
  KILN_ASSIGN_OR_RETURN(int64_t where_first, n.attr_int("kiln_where_first", 0));
  (void)scale, (void)fill, (void)keep_true, (void)where_first;
  const TensorInfo &q = ctx.in(0), &k = ctx.in(1), &v = ctx.in(2);
  const DataType t = q.dtype;
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return Err(StatusCode::kUnsupported, "{}: Attention runs float32/float16/bfloat16, not {}", n.Where(),
               DataTypeName(t));
  if (k.dtype != t || v.dtype != t)
    return Err(StatusCode::kInvalidModel, "{}: Q, K and V must have one type (got {}, {}, {})", n.Where(),
               DataTypeName(t), DataTypeName(k.dtype), DataTypeName(v.dtype));
  if (ctx.has_input(3) && ctx.in(3).dtype != t)
    return Err(StatusCode::kInvalidModel, "{}: the additive mask is {} but Q is {}", n.Where(),
               DataTypeName(ctx.in(3).dtype), DataTypeName(t));
  if (ctx.has_input(4) && ctx.in(4).dtype != DataType::kBool)
    return Err(StatusCode::kInvalidModel, "{}: the keep mask must be bool, not {}", n.Where(),
               DataTypeName(ctx.in(4).dtype));
  if (!q.has_shape || !k.has_shape || !v.has_shape) {
    ctx.set_output_rank_unknown(0, t);
    return Status::Ok();
  }
  for (const TensorInfo* x : {&q, &k, &v})
    if (x->rank() < 2)
      return Err(StatusCode::kInvalidModel, "{}: Q, K and V must have rank >= 2 (shapes {}, {}, {})", n.Where(),
                 ShapeToString(q.shape), ShapeToString(k.shape), ShapeToString(v.shape));
  // kiln_{q,k,v}_layout = "BSHD": the input is the logical operand with axes -3 and -2 swapped ([B, S, H, D] for
  // [B, H, S, D]); everything below works on the logical shapes.
  Shape qsh = q.shape, ksh = k.shape, vsh = v.shape;
  KILN_RETURN_IF_ERROR(ApplyAttentionLayout(n, fused::kAttentionInputLayouts[0], &qsh));
  KILN_RETURN_IF_ERROR(ApplyAttentionLayout(n, fused::kAttentionInputLayouts[1], &ksh));
  KILN_RETURN_IF_ERROR(ApplyAttentionLayout(n, fused::kAttentionInputLayouts[2], &vsh));
  const Dim d_q = qsh.back();
  const Dim d_k = kt ? ksh[ksh.size() - 2] : ksh.back();
  const Dim s_k = kt ? ksh.back() : ksh[ksh.size() - 2];
  const Dim s_v = vsh[vsh.size() - 2];
  auto clash = [](const Dim& a, const Dim& b) { return a.known() && b.known() && a.value != b.value; };
  if (clash(d_q, d_k) || clash(s_k, s_v))
    return Err(StatusCode::kInvalidModel,
               "{}: Q {}, K{} {} and V {} do not line up (head size {} vs {}, key length {} vs {})", n.Where(),
               ShapeToString(qsh), kt ? "^T" : "", ShapeToString(ksh), ShapeToString(vsh),
               d_q.ToString(), d_k.ToString(), s_k.ToString(), s_v.ToString());
  Shape bq(qsh.begin(), qsh.end() - 2), bk(ksh.begin(), ksh.end() - 2),
      bv(vsh.begin(), vsh.end() - 2);
  KILN_ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(n, bq, bk));
  KILN_ASSIGN_OR_RETURN(batch, BroadcastShapes(n, batch, bv));
  Shape scores = batch;
  scores.push_back(qsh[qsh.size() - 2]);
  scores.push_back(s_k);
  for (size_t i = 3; i < 5; ++i) {
    if (!ctx.has_input(i) || !ctx.in(i).has_shape) continue;
    KILN_ASSIGN_OR_RETURN(Shape s, BroadcastShapes(n, scores, ctx.in(i).shape));
    bool grows = s.size() != scores.size();
    for (size_t d = 0; !grows && d < s.size(); ++d)
      grows = s[d].known() && scores[d].known() && s[d].value != scores[d].value;
    if (grows)
      return Err(StatusCode::kInvalidModel, "{}: the {} mask {} does not broadcast into the scores {}", n.Where(),
                 i == 3 ? "additive" : "keep", ShapeToString(ctx.in(i).shape), ShapeToString(scores));
  }
  Shape out = batch;
  out.push_back(qsh[qsh.size() - 2]);
  out.push_back(vsh.back());
  KILN_RETURN_IF_ERROR(ApplyAttentionLayout(n, fused::kAttentionOutputLayout, &out));  // "BSHD": written as [.., Sq, H, dv]
  DataType out_t = t;
  if (n.has_attr(quant_attrs::kQType)) {  // Y written quantized (plan/fold_quantized_casts.cpp)
    KILN_ASSIGN_OR_RETURN(const quant_attrs::QuantizedCopy c, quant_attrs::ReadQuantizedCopy(n));
    out_t = c.type;
  }
  ctx.set_output(0, out_t, out);
  return Status::Ok();
}

// Reformat(X): X's dims permuted, the last one zero-padded to kiln_pad_last (fused_ops.h).
Status ReformatShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const TensorInfo& x = ctx.in(0);
  if (!x.has_shape) {
    KILN_ASSIGN_OR_RETURN(const int64_t to, n.attr_int("to", static_cast<int64_t>(x.dtype)));
    ctx.set_output_rank_unknown(0, static_cast<DataType>(to));
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(const fused::ReformatParams p, fused::ReadReformat(n, x.dtype, x.rank()));
  Shape y;
  for (int64_t a : p.perm) y.push_back(x.shape[a]);
  if (p.pad_last > 0) {
    if (y.back().known() && y.back().value > p.pad_last)
      return Err(StatusCode::kInvalidModel, "{}: the last output axis has {} entries, more than kiln_pad_last {}",
                 n.Where(), y.back().value, p.pad_last);
    y.back() = Dim(p.pad_last);
  }
  ctx.set_output(0, p.to, std::move(y));
  return Status::Ok();
}

}  // namespace

void RegisterFusedOps(OpRegistry& r) {
  r.Kiln("FusedConv").Shape([](InferContext& c) { return Delegate(c, "Conv"); });
  r.Kiln("FusedGemm").Shape([](InferContext& c) { return Delegate(c, "Gemm"); });
  r.Kiln("FusedMatMul").Shape(FusedMatMulShape);
  r.Kiln("FusedPointwise").Shape(FusedPointwiseShape).LayoutNeutral();
  r.Kiln("Attention").Shape(AttentionShape);
  r.Kiln("Reformat").Shape(ReformatShape).KeepsFp32();  // its `to` says its types, as Cast's does
}

}  // namespace kiln
