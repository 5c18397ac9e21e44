// The CPU reference executor: infer each node's shapes from concrete inputs, allocate, run the kernel. Sequences and
// optionals (graphs that have them) are kept beside the tensors as OnnxValues.
#include "backends/cpu/executor.h"

#include <unordered_map>

#include "core/error.h"
#include "ops/sequence.h"

namespace kiln::cpu {

Result<std::vector<Tensor>> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs) {
  return EvaluateNodeInto(node, inputs, nullptr);
}

TensorInfo RuntimeInfo(const Value* declared, const OnnxValue& v) {
  TensorInfo info;
  const ValueKind k = declared ? declared->kind : ValueKind::kTensor;
  info.dtype = declared ? declared->dtype : DataType::kUndefined;
  switch (v.kind) {
    case OnnxValue::Kind::kTensor:
      info.kind = HeldKind(k) == ValueKind::kTensor ? k : ValueKind::kTensor;
      info.dtype = v.tensor.dtype();
      info.shape = FromStatic(v.tensor.shape());
      info.has_shape = true;
      info.value = &v.tensor;
      break;
    case OnnxValue::Kind::kSequence:
      // No element shape: the kernels that read sequences size their outputs themselves (and a sequence op in a loop
      // would otherwise compare every element's shape at each step).
      info.kind = HoldsSequence(k) ? k : ValueKind::kSequence;
      if (!v.sequence.empty()) info.dtype = v.sequence[0].dtype();
      break;
    case OnnxValue::Kind::kNone:
      info.kind = IsOptionalKind(k) ? k : OptionalOf(k);
      break;
  }
  return info;
}

namespace {

// Whether a value a kernel made fits output kind `kind` of element type `dtype` (undefined: any).
Status CheckValueOutput(const Node& node, size_t i, ValueKind kind, DataType dtype, const OnnxValue& v) {
  if (!v.has_value())
    return Err(StatusCode::kInternal, "{}: the CPU kernel did not produce output {} ({})", node.Where(), i,
               AValueKind(kind));
  const bool fits = v.is_none() ? IsOptionalKind(kind)
                    : v.is_tensor() ? HeldKind(kind) == ValueKind::kTensor
                                    : HeldKind(kind) == ValueKind::kSequence;
  if (!fits)
    return Err(StatusCode::kInternal, "{}: output {} is {} but the kernel made {}", node.Where(), i,
               AValueKind(kind), v.Describe());
  if (dtype == DataType::kUndefined) return Status::Ok();
  if (v.is_tensor() && v.tensor.dtype() != dtype)
    return Err(StatusCode::kInternal, "{}: output {} is {} but shape inference said {}", node.Where(), i,
               DataTypeName(v.tensor.dtype()), DataTypeName(dtype));
  for (const Tensor& t : v.sequence)
    if (t.dtype() != dtype)
      return Err(StatusCode::kInternal, "{}: output {} holds a {} tensor but shape inference said {}", node.Where(), i,
                 DataTypeName(t.dtype()), DataTypeName(dtype));
  return Status::Ok();
}

}  // namespace

Result<std::vector<Tensor>> EvaluateNodeInto(const Node& node, const std::vector<const Tensor*>& inputs,
                                             const OutputAllocator& alloc, int64_t max_elements, NodeValues* values) {
  const KernelFn* kernel = Kernels().Find(node);
  if (!kernel)
    return Err(StatusCode::kUnsupported, "{}: the CPU backend has no kernel for op type {}", node.Where(), node.op_type);
  InferContext ctx{node, {}, {}};
  ctx.inputs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (values && i < values->inputs.size() && values->inputs[i]) {
      ctx.inputs[i] = RuntimeInfo(node.input(i), *values->inputs[i]);
      continue;
    }
    if (!inputs[i]) continue;
    TensorInfo info;
    info.dtype = inputs[i]->dtype();
    info.shape = FromStatic(inputs[i]->shape());
    info.has_shape = true;
    info.value = inputs[i];
    ctx.inputs[i] = std::move(info);
  }
  ctx.outputs.resize(node.outputs.size());
  KILN_RETURN_IF_ERROR(InferNode(ctx));
  if (values) {
    values->output_kinds.resize(ctx.outputs.size());
    for (size_t i = 0; i < ctx.outputs.size(); ++i) values->output_kinds[i] = ctx.outputs[i].kind;
    values->outputs.assign(ctx.outputs.size(), OnnxValue{});
  } else {
    for (size_t i = 0; i < ctx.outputs.size(); ++i)
      if (ctx.outputs[i].kind != ValueKind::kTensor)
        return Err(StatusCode::kUnsupported, "{}: output {} is {}, which this run holds no place for (tensors only)",
                   node.Where(), i, AValueKind(ctx.outputs[i].kind));
  }

  std::vector<Tensor> outs(node.outputs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const TensorInfo& o = ctx.outputs[i];
    if (o.kind == ValueKind::kTensor && o.has_shape && IsStatic(o.shape) && o.dtype != DataType::kUndefined) {
      if (alloc && node.outputs[i]) {
        outs[i] = alloc(node, i, o.dtype, ToStatic(o.shape));
        if (outs[i].defined()) continue;
      }
      if (max_elements > 0 && NumElements(o.shape).value_or(0) > max_elements)
        return Err(StatusCode::kOutOfRange,
                   "{}: output {} would have shape {}, more than the engine's limit of {} elements per tensor (set "
                   "at build: --maxTensorElements); give smaller inputs",
                   node.Where(), i, ShapeToString(o.shape), max_elements);
      outs[i] = Tensor(o.dtype, ToStatic(o.shape));
      if (outs[i].numel() > 0 && !outs[i].raw())
        return Err(StatusCode::kOutOfRange, "{}: out of memory allocating output {} ({})", node.Where(), i,
                   outs[i].Describe());
    }
  }
  if (outs.empty())  // every op makes at least one output; a kernel would write out(0)
    return Err(StatusCode::kInvalidModel, "{}: the node lists no outputs", node.Where());
  KernelContext kctx{node, inputs, outs};
  if (values) {
    kctx.value_inputs = &values->inputs;
    kctx.output_kinds = &values->output_kinds;
    kctx.value_outputs = &values->outputs;
  }
  Status st = (*kernel)(kctx);
  if (!st.ok()) {
    if (st.message().find(node.name) == std::string::npos) return st.WithContext(node.Where());
    return st;
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!node.outputs[i]) continue;
    const TensorInfo& o = ctx.outputs[i];
    if (o.kind != ValueKind::kTensor) {
      KILN_RETURN_IF_ERROR(CheckValueOutput(node, i, o.kind, o.dtype, values->outputs[i]));
      continue;
    }
    if (!outs[i].defined())
      return Err(StatusCode::kInternal, "{}: the CPU kernel did not produce output {}", node.Where(), i);
    if (o.dtype != DataType::kUndefined && outs[i].dtype() != o.dtype)
      return Err(StatusCode::kInternal, "{}: output {} is {} but shape inference said {}", node.Where(), i,
                 DataTypeName(outs[i].dtype()), DataTypeName(o.dtype));
  }
  return outs;
}

ConstEvaluator MakeConstEvaluator() { return EvaluateNode; }

std::vector<std::string> MissingKernels(const Graph& g) {
  std::vector<std::string> r;
  for (const auto& n : g.nodes())
    if (!Kernels().Find(*n)) r.push_back(n->Where());
  return r;
}

bool HasNonTensorValues(const Graph& g) {
  for (const Value* v : g.inputs)
    if (v->kind != ValueKind::kTensor) return true;
  for (const auto& n : g.nodes()) {
    for (const Value* o : n->outputs)
      if (o && o->kind != ValueKind::kTensor) return true;
    // Ops that make them, should a value's kind not have been inferred.
    if (n->domain.empty() && (n->op_type.rfind("Sequence", 0) == 0 || n->op_type.rfind("Optional", 0) == 0 ||
                              n->op_type == "SplitToSequence"))
      return true;
  }
  return false;
}

namespace {

Status CheckInput(const Value* v, const Tensor& t) {
  if (t.dtype() != v->dtype)
    return Err(StatusCode::kInvalidArgument, "input '{}' must be {} but {} was given", v->name, DataTypeName(v->dtype),
               DataTypeName(t.dtype()));
  if (v->has_shape && v->kind == ValueKind::kTensor) {
    if (static_cast<size_t>(t.rank()) != v->shape.size())
      return Err(StatusCode::kInvalidArgument, "input '{}' must have rank {} (shape {}) but {} was given", v->name,
                 v->shape.size(), ShapeToString(v->shape), ShapeToString(t.shape()));
    for (size_t i = 0; i < v->shape.size(); ++i)
      if (v->shape[i].known() && v->shape[i].value != t.shape()[i])
        return Err(StatusCode::kInvalidArgument, "input '{}' must have shape {} but {} was given", v->name,
                   ShapeToString(v->shape), ShapeToString(t.shape()));
  }
  return Status::Ok();
}

// A sequence or optional given for input v: its kind must fit, and its tensors have v's element type (a sequence's
// elements may differ in shape, so only their type is checked).
Status CheckValueInput(const Value* v, const OnnxValue& x) {
  const bool fits = x.is_none() ? IsOptionalKind(v->kind)
                    : x.is_tensor() ? HeldKind(v->kind) == ValueKind::kTensor
                                    : HeldKind(v->kind) == ValueKind::kSequence;
  if (!fits)
    return Err(StatusCode::kInvalidArgument, "input '{}' is {} but {} was given", v->name, AValueKind(v->kind),
               x.Describe());
  if (x.is_tensor()) return CheckInput(v, x.tensor);
  if (v->dtype != DataType::kUndefined)
    for (const Tensor& t : x.sequence)
      if (t.dtype() != v->dtype)
        return Err(StatusCode::kInvalidArgument, "input '{}' is a sequence of {} but it holds a {} tensor", v->name,
                   DataTypeName(v->dtype), DataTypeName(t.dtype()));
  return Status::Ok();
}

// The values of one run: tensors, and (graphs that have them) sequences and optionals.
struct Env {
  std::unordered_map<const Value*, Tensor> tensors;
  std::unordered_map<const Value*, OnnxValue> values;
};

// Binds graph input v to x.
Status Bind(Env& env, const Value* v, const OnnxValue& x) {
  if (v->kind == ValueKind::kTensor) {
    if (!x.is_tensor() || !x.tensor.defined())
      return Err(StatusCode::kInvalidArgument, "input '{}' is a tensor but {} was given", v->name, x.Describe());
    KILN_RETURN_IF_ERROR(CheckInput(v, x.tensor));
    env.tensors[v] = x.tensor;
    return Status::Ok();
  }
  KILN_RETURN_IF_ERROR(CheckValueInput(v, x));
  env.values[v] = x;
  return Status::Ok();
}

Status ObserveInputs(const Graph& g, const Env& env, const RunOptions& opts) {
  if (!opts.observe_float) return Status::Ok();
  for (const Value* v : g.inputs) {
    auto it = env.tensors.find(v);
    if (it != env.tensors.end() && IsFloatType(v->dtype)) KILN_RETURN_IF_ERROR(opts.observe_float(v->name, it->second));
  }
  return Status::Ok();
}

// Runs every node of g over env (graph inputs bound).
Status RunNodes(const Graph& g, Env& env, const RunOptions& opts) {
  const bool with_values = !env.values.empty() || HasNonTensorValues(g);
  // Last node that reads each value, to free tensors early.
  std::unordered_map<const Value*, size_t> last_use;
  const auto& nodes = g.nodes();
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const Value* in : nodes[k]->inputs)
      if (in) last_use[in] = k;

  NodeValues nv;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = *nodes[k];
    std::vector<const Tensor*> ins(n.inputs.size(), nullptr);
    if (with_values) nv.inputs.assign(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = n.inputs[i];
      if (!v) continue;
      if (v->is_const()) {
        ins[i] = &*v->const_value;
        continue;
      }
      if (auto it = env.tensors.find(v); it != env.tensors.end()) {
        ins[i] = &it->second;
        continue;
      }
      auto it = with_values ? env.values.find(v) : env.values.end();
      if (it == env.values.end())
        return Err(StatusCode::kInternal, "{}: input '{}' has not been computed", n.Where(), v->name);
      nv.inputs[i] = &it->second;
      ins[i] = it->second.is_tensor() ? &it->second.tensor : nullptr;
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, EvaluateNodeInto(n, ins, nullptr, 0, with_values ? &nv : nullptr));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      if (with_values && nv.output_kinds[i] != ValueKind::kTensor) {
        env.values[n.outputs[i]] = std::move(nv.outputs[i]);
        continue;
      }
      if (opts.observe_float && IsFloatType(outs[i].dtype()))
        KILN_RETURN_IF_ERROR(opts.observe_float(n.outputs[i]->name, outs[i]));
      env.tensors[n.outputs[i]] = std::move(outs[i]);
    }
    if (!opts.keep_all) {
      for (const Value* in : n.inputs)
        if (in && !in->is_graph_output && !in->is_const() && last_use[in] == k) {
          env.tensors.erase(in);
          if (with_values) env.values.erase(in);
        }
    }
  }
  return Status::Ok();
}

Status UnknownInput(const Graph& g, const std::string& name) {
  std::string names;
  for (const Value* in : g.inputs) names += (names.empty() ? "" : ", ") + in->name;
  return Err(StatusCode::kInvalidArgument, "the model has no input named '{}' (its inputs: {})", name, names);
}

Status CheckAllGiven(const Graph& g, const Env& env) {
  for (const Value* v : g.inputs)
    if (!env.tensors.count(v) && !env.values.count(v))
      return Err(StatusCode::kInvalidArgument, "input '{}' ({}) was not given", v->name, v->TypeString());
  return Status::Ok();
}

}  // namespace

Result<std::map<std::string, Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                               const RunOptions& opts) {
  Env env;
  for (const auto& [name, t] : inputs) {
    const Value* v = g.FindValue(name);
    if (!v || !v->is_graph_input) return UnknownInput(g, name);
    if (v->kind != ValueKind::kTensor && v->kind != ValueKind::kOptionalTensor)
      return Err(StatusCode::kInvalidArgument, "input '{}' is {} ({}): give it as one (kiln::debug::RunNetworkValues)",
                 v->name, AValueKind(v->kind), v->TypeString());
    KILN_RETURN_IF_ERROR(Bind(env, v, OnnxValue::FromTensor(t)));
  }
  KILN_RETURN_IF_ERROR(CheckAllGiven(g, env));
  KILN_RETURN_IF_ERROR(ObserveInputs(g, env, opts));
  KILN_RETURN_IF_ERROR(RunNodes(g, env, opts));

  std::map<std::string, Tensor> result;
  if (opts.keep_all)
    for (auto& [v, t] : env.tensors) result[v->name] = t;
  for (const Value* o : g.outputs) {
    if (o->is_const()) {
      result[o->name] = *o->const_value;
      continue;
    }
    if (auto it = env.tensors.find(o); it != env.tensors.end()) {
      result[o->name] = it->second;
      continue;
    }
    auto it = env.values.find(o);
    if (it == env.values.end()) return Err(StatusCode::kInternal, "graph output '{}' was not computed", o->name);
    if (!it->second.is_tensor())
      return Err(StatusCode::kInvalidArgument, "graph output '{}' is {}, not a tensor: read it as {} "
                 "(kiln::debug::RunNetworkValues)", o->name, it->second.Describe(), AValueKind(o->kind));
    result[o->name] = it->second.tensor;
  }
  return result;
}

Result<std::map<std::string, OnnxValue>> RunGraphValues(const Graph& g, const std::map<std::string, OnnxValue>& inputs,
                                                        const RunOptions& opts) {
  Env env;
  for (const auto& [name, x] : inputs) {
    const Value* v = g.FindValue(name);
    if (!v || !v->is_graph_input) return UnknownInput(g, name);
    KILN_RETURN_IF_ERROR(Bind(env, v, x));
  }
  KILN_RETURN_IF_ERROR(CheckAllGiven(g, env));
  KILN_RETURN_IF_ERROR(ObserveInputs(g, env, opts));
  KILN_RETURN_IF_ERROR(RunNodes(g, env, opts));

  std::map<std::string, OnnxValue> result;
  if (opts.keep_all) {
    for (auto& [v, t] : env.tensors) result[v->name] = OnnxValue::FromTensor(t);
    for (auto& [v, x] : env.values) result[v->name] = x;
  }
  for (const Value* o : g.outputs) {
    if (o->is_const()) result[o->name] = OnnxValue::FromTensor(*o->const_value);
    else if (auto it = env.tensors.find(o); it != env.tensors.end()) result[o->name] = OnnxValue::FromTensor(it->second);
    else if (auto iv = env.values.find(o); iv != env.values.end()) result[o->name] = iv->second;
    else return Err(StatusCode::kInternal, "graph output '{}' was not computed", o->name);
  }
  return result;
}

Result<std::vector<OnnxValue>> RunBodyGraph(const Graph& body, std::vector<OnnxValue> inputs) {
  if (inputs.size() != body.inputs.size())
    return Err(StatusCode::kInternal, "{} values for a body of {} inputs", inputs.size(), body.inputs.size());
  Env env;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = body.inputs[i];
    if (inputs[i].is_tensor() && v->kind == ValueKind::kTensor) {
      KILN_RETURN_IF_ERROR(CheckInput(v, inputs[i].tensor));
      env.tensors[v] = std::move(inputs[i].tensor);
    } else {
      KILN_RETURN_IF_ERROR(CheckValueInput(v, inputs[i]));
      env.values[v] = std::move(inputs[i]);
    }
  }
  KILN_RETURN_IF_ERROR(RunNodes(body, env, RunOptions{}));
  std::vector<OnnxValue> outs;
  outs.reserve(body.outputs.size());
  for (const Value* o : body.outputs) {
    if (o->is_const()) outs.push_back(OnnxValue::FromTensor(*o->const_value));
    else if (auto it = env.tensors.find(o); it != env.tensors.end()) outs.push_back(OnnxValue::FromTensor(it->second));
    else if (auto iv = env.values.find(o); iv != env.values.end()) outs.push_back(iv->second);
    else return Err(StatusCode::kInternal, "body output '{}' was not computed", o->name);
  }
  return outs;
}

}  // namespace kiln::cpu
