// The shape-inference driver: runs every node's shape function in topological order and folds nodes whose
// inputs are all known into constants (which evaluates shape subgraphs such as Shape->Gather->Concat->Reshape).
#include "ops/infer.h"

#include <algorithm>

#include "core/error.h"
#include "ops/control_flow.h"
#include "ops/families.h"
#include "ops/op_def.h"
#include "ops/sequence.h"

namespace kiln {

Result<Shape> BroadcastShapes(const Node& n, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim da = i < rank - a.size() ? Dim(1) : a[i - (rank - a.size())];
    const Dim db = i < rank - b.size() ? Dim(1) : b[i - (rank - b.size())];
    if (da.known() && da.value == 1) {
      r[i] = db;
    } else if (db.known() && db.value == 1) {
      r[i] = da;
    } else if (da.known() && db.known()) {
      if (da.value != db.value)
        return Err(StatusCode::kInvalidModel, "{}: input shapes {} and {} cannot be broadcast together (dimension {})",
                   n.Where(), ShapeToString(a), ShapeToString(b), i);
      r[i] = da;
    } else if (da.known()) {
      r[i] = da;  // a symbolic dim broadcast against a fixed one must equal it (or be 1)
    } else if (db.known()) {
      r[i] = db;
    } else if (da.same(db)) {
      r[i] = da;
    } else {
      r[i] = Dim::Unknown();
    }
  }
  return r;
}

Status RequireInputs(const InferContext& ctx, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!ctx.has_input(i))
      return Err(StatusCode::kInvalidModel, "{}: needs at least {} inputs, input {} is missing", ctx.node.Where(),
                 count, i);
  return Status::Ok();
}

Status RequireFloat(const InferContext& ctx, size_t i) {
  const DataType t = ctx.in(i).dtype;
  if (!IsFloatType(t))
    return Err(StatusCode::kInvalidModel, "{}: input {} must be a floating-point tensor, but it is {}",
               ctx.node.Where(), i, DataTypeName(t));
  return Status::Ok();
}

void SetOutputLike(InferContext& ctx, size_t i, const TensorInfo& x) {
  if (x.has_shape) ctx.set_output(i, x.dtype, x.shape);
  else ctx.set_output_rank_unknown(i, x.dtype);
}

Status InferNode(InferContext& ctx) {
  const OpDef* def = FindOp(ctx.node);
  if (!def || !def->infer)
    return Err(StatusCode::kUnsupported, "{}: kiln has no shape inference for op type {}", ctx.node.Where(),
               ctx.node.domain.empty() ? ctx.node.op_type : ctx.node.domain + "." + ctx.node.op_type);
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i] && ctx.inputs[i]->dtype == DataType::kUndefined)
      return Err(StatusCode::kInvalidModel, "{}: the type of input {} ('{}') is unknown", ctx.node.Where(), i,
                 ctx.node.inputs[i] ? ctx.node.inputs[i]->name : "");
  // Sequences and optionals go only to the ops that take them (ops/sequence.h).
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i] && ctx.inputs[i]->kind != ValueKind::kTensor && !TakesNonTensorInputs(ctx.node))
      return Err(StatusCode::kInvalidModel, "{}: input {} ('{}') is {}, but {} takes tensors", ctx.node.Where(), i,
                 ctx.node.input(i) ? ctx.node.input(i)->name : "", AValueKind(ctx.inputs[i]->kind),
                 ctx.node.op_type);
  return def->infer(ctx);
}

namespace {

// Keeps what the model declared where inference could not do better (value_info, graph outputs).
void MergeDeclared(Value* v, const TensorInfo& inferred) {
  if (inferred.dtype != DataType::kUndefined) v->dtype = inferred.dtype;
  // A value declared an optional (or not) keeps that where inference gives the same content the other way (a Loop
  // whose optional sequence state comes out a sequence); otherwise the inferred kind stands.
  if (v->kind == ValueKind::kTensor || HeldKind(v->kind) != HeldKind(inferred.kind)) v->kind = inferred.kind;
  if (!inferred.has_shape) return;  // keep the declared shape, if any
  if (v->has_shape && v->shape.size() == inferred.shape.size()) {
    Shape merged = inferred.shape;
    for (size_t i = 0; i < merged.size(); ++i)
      if (merged[i].unknown() || (merged[i].symbolic() && v->shape[i].known())) merged[i] = v->shape[i];
    v->shape = std::move(merged);
  } else {
    v->shape = inferred.shape;
  }
  v->has_shape = true;
}

bool AllInputsConst(const Node& n) {
  bool any = false;
  for (Value* in : n.inputs) {
    if (!in) continue;
    if (!in->is_const()) return false;
    any = true;
  }
  return any;
}

}  // namespace

InferContext ContextFromGraph(const Node& n) {
  InferContext ctx{n, {}, {}};
  ctx.inputs.resize(n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* v = n.inputs[i];
    if (!v) continue;
    TensorInfo info;
    info.dtype = v->dtype;
    info.shape = v->shape;
    info.has_shape = v->has_shape;
    info.value = v->is_const() ? &*v->const_value : nullptr;
    info.sym_value = v->sym_value;
    info.kind = v->kind;
    ctx.inputs[i] = std::move(info);
  }
  ctx.outputs.resize(n.outputs.size());
  return ctx;
}

Status InferGraph(Graph& g, const InferOptions& opts) {
  for (const auto& node_ptr : g.nodes()) {
    Node& n = *node_ptr;
    if (HasSubgraphs(n)) KILN_RETURN_IF_ERROR(InferBodies(n, opts));  // If/Loop/Scan: type the bodies first
    InferContext ctx = ContextFromGraph(n);
    KILN_RETURN_IF_ERROR(InferNode(ctx));

    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value* o = n.outputs[i];
      if (!o) continue;
      MergeDeclared(o, ctx.outputs[i]);
      o->sym_value = ctx.outputs[i].sym_value;
      // A shape tensor whose contents are all known is a constant (Shape of a static tensor, and so on); a bool one
      // too (Equal of shape elements, 0/1).
      if (o->sym_value && o->dtype == DataType::kBool && o->has_shape && o->shape.size() <= 1 &&
          std::all_of(o->sym_value->begin(), o->sym_value->end(), [](const Dim& d) { return d.known(); })) {
        Tensor t(DataType::kBool, o->shape.empty() ? std::vector<int64_t>{}
                                                   : std::vector<int64_t>{static_cast<int64_t>(o->sym_value->size())});
        if (t.numel() == static_cast<int64_t>(o->sym_value->size())) {
          for (int64_t k = 0; k < t.numel(); ++k) static_cast<uint8_t*>(t.raw())[k] = (*o->sym_value)[k].value != 0;
          o->const_value = std::move(t);
        }
        o->sym_value.reset();
      }
      if (o->sym_value && o->dtype == DataType::kInt64) {
        bool all_known = std::all_of(o->sym_value->begin(), o->sym_value->end(),
                                     [](const Dim& d) { return ContentValue(d).has_value(); });
        if (all_known && o->has_shape && o->shape.size() <= 1) {
          std::vector<int64_t> vals;
          for (const Dim& d : *o->sym_value) vals.push_back(*ContentValue(d));
          std::vector<int64_t> shape = o->shape.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{(int64_t)vals.size()};
          if (NumElements(shape) == static_cast<int64_t>(vals.size())) o->const_value = Tensor::FromInt64(vals, shape);
        }
      }
    }

    // Constant folding (a quantized weight's DequantizeLinear stays: the INT8 layers read the weight as it is; a
    // sequence or optional is no constant).
    if (!opts.evaluator || !AllInputsConst(n) || KeepsQuantizedConstant(n)) continue;
    if (std::any_of(ctx.outputs.begin(), ctx.outputs.end(),
                    [](const TensorInfo& o) { return o.kind != ValueKind::kTensor; }))
      continue;
    bool all_out_const = true;
    int64_t out_elems = 0;
    for (Value* o : n.outputs) {
      if (!o) continue;
      all_out_const = all_out_const && o->is_const();
      auto ne = o->has_shape ? NumElements(o->shape) : std::nullopt;
      out_elems += ne ? *ne : 0;
    }
    if (all_out_const || out_elems > opts.max_fold_elements) continue;
    std::vector<const Tensor*> ins;
    for (Value* in : n.inputs) ins.push_back(in ? &*in->const_value : nullptr);
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, opts.evaluator(n, ins));
    for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i) {
      Value* o = n.outputs[i];
      if (!o || !outs[i].defined()) continue;
      o->dtype = outs[i].dtype();
      o->shape = FromStatic(outs[i].shape());
      o->has_shape = true;
      o->const_value = std::move(outs[i]);
    }
  }
  return Status::Ok();
}

}  // namespace kiln
