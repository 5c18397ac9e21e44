// The CPU reference executor: infer each node's shapes from concrete inputs, allocate, run the kernel.
#include "backends/cpu/executor.h"

#include <unordered_map>

#include "core/error.h"

namespace kiln::cpu {

Result<std::vector<Tensor>> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs) {
  return EvaluateNodeInto(node, inputs, nullptr);
}

Result<std::vector<Tensor>> EvaluateNodeInto(const Node& node, const std::vector<const Tensor*>& inputs,
                                             const OutputAllocator& alloc, int64_t max_elements) {
  const KernelFn* kernel = Kernels().Find(node);
  if (!kernel)
    return Err(StatusCode::kUnsupported, "{}: the CPU backend has no kernel for op type {}", node.Where(), node.op_type);
  InferContext ctx{node, {}, {}};
  ctx.inputs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
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

  std::vector<Tensor> outs(node.outputs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const TensorInfo& o = ctx.outputs[i];
    if (o.has_shape && IsStatic(o.shape) && o.dtype != DataType::kUndefined) {
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
  Status st = (*kernel)(kctx);
  if (!st.ok()) {
    if (st.message().find(node.name) == std::string::npos) return st.WithContext(node.Where());
    return st;
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!node.outputs[i]) continue;
    if (!outs[i].defined())
      return Err(StatusCode::kInternal, "{}: the CPU kernel did not produce output {}", node.Where(), i);
    const TensorInfo& o = ctx.outputs[i];
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

namespace {
Status CheckInput(const Value* v, const Tensor& t) {
  if (t.dtype() != v->dtype)
    return Err(StatusCode::kInvalidArgument, "input '{}' must be {} but {} was given", v->name, DataTypeName(v->dtype),
               DataTypeName(t.dtype()));
  if (v->has_shape) {
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
}  // namespace

Result<std::map<std::string, Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                               const RunOptions& opts) {
  std::unordered_map<const Value*, Tensor> env;
  for (const auto& [name, t] : inputs) {
    const Value* v = g.FindValue(name);
    if (!v || !v->is_graph_input) {
      std::string names;
      for (const Value* in : g.inputs) names += (names.empty() ? "" : ", ") + in->name;
      return Err(StatusCode::kInvalidArgument, "the model has no input named '{}' (its inputs: {})", name, names);
    }
    KILN_RETURN_IF_ERROR(CheckInput(v, t));
    env[v] = t;
  }
  for (const Value* v : g.inputs)
    if (!env.count(v))
      return Err(StatusCode::kInvalidArgument, "input '{}' ({}) was not given", v->name, v->TypeString());
  if (opts.observe_float)
    for (const Value* v : g.inputs)
      if (IsFloatType(v->dtype)) KILN_RETURN_IF_ERROR(opts.observe_float(v->name, env[v]));

  // Last node that reads each value, to free tensors early.
  std::unordered_map<const Value*, size_t> last_use;
  const auto& nodes = g.nodes();
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const Value* in : nodes[k]->inputs)
      if (in) last_use[in] = k;

  auto lookup = [&](const Value* v) -> const Tensor* {
    if (v->is_const()) return &*v->const_value;
    auto it = env.find(v);
    return it == env.end() ? nullptr : &it->second;
  };

  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = *nodes[k];
    std::vector<const Tensor*> ins(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!n.inputs[i]) continue;
      ins[i] = lookup(n.inputs[i]);
      if (!ins[i])
        return Err(StatusCode::kInternal, "{}: input '{}' has not been computed", n.Where(), n.inputs[i]->name);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, EvaluateNode(n, ins));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      if (opts.observe_float && IsFloatType(outs[i].dtype()))
        KILN_RETURN_IF_ERROR(opts.observe_float(n.outputs[i]->name, outs[i]));
      env[n.outputs[i]] = std::move(outs[i]);
    }
    if (!opts.keep_all) {
      for (const Value* in : n.inputs)
        if (in && !in->is_graph_output && !in->is_const() && last_use[in] == k) env.erase(in);
    }
  }

  std::map<std::string, Tensor> result;
  if (opts.keep_all)
    for (auto& [v, t] : env) result[v->name] = t;
  for (const Value* o : g.outputs) {
    const Tensor* t = lookup(o);
    if (!t) return Err(StatusCode::kInternal, "graph output '{}' was not computed", o->name);
    result[o->name] = *t;
  }
  return result;
}

}  // namespace kiln::cpu
