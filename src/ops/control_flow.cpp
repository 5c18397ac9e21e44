// If, Loop and Scan: shape functions that read the typed bodies, body typing (InferBodies) and constant-If inlining.
#include "ops/control_flow.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "ops/families.h"
#include "ops/sequence.h"

namespace kiln {

bool HasSubgraphs(const Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.kind == Attribute::Kind::kGraph) return true;
  return false;
}

const Graph* BodyOf(const Node& n, const char* attr) {
  auto it = n.attrs.find(attr);
  return it == n.attrs.end() || it->second.kind != Attribute::Kind::kGraph ? nullptr : it->second.g.get();
}

bool LoopBodyKeepsCondition(const Graph& g) {
  if (g.outputs.empty() || g.inputs.size() < 2) return false;
  const Value* c = g.outputs[0];
  while (c && c->producer && c->producer->op_type == "Identity" && c->producer->inputs.size() == 1)
    c = c->producer->inputs[0];
  if (c && c->is_const() && c->const_value->numel() == 1) return c->const_value->GetAsDouble(0) != 0;
  return c == g.inputs[1];
}

size_t CapturedInputCount(const Node& n) {
  const int64_t k = n.geti(kCapturedInputsAttr, 0);
  return k < 0 || static_cast<size_t>(k) > n.inputs.size() ? 0 : static_cast<size_t>(k);
}

namespace {

// A value's type: its kind (tensor, sequence, optional), element type and (elements') shape.
struct TypeOf {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  bool has_shape = false;
  ValueKind kind = ValueKind::kTensor;
  // A captured outer value's contents where the enclosing graph knows them (a constant): bodies fold with them.
  const Tensor* value = nullptr;
};

TypeOf FromValue(const Value* v) { return v ? TypeOf{v->dtype, v->shape, v->has_shape, v->kind} : TypeOf{}; }

// The type two values may both have: dims that agree are kept, others become unknown; a different rank leaves the
// rank unknown. A tensor and an optional tensor (a sequence and an optional sequence) may both be the optional.
TypeOf Merge(const TypeOf& a, const TypeOf& b) {
  TypeOf r;
  r.dtype = a.dtype != DataType::kUndefined ? a.dtype : b.dtype;
  r.kind = a.kind == b.kind || HeldKind(a.kind) != HeldKind(b.kind) ? a.kind : OptionalOf(a.kind);
  if (!a.has_shape || !b.has_shape || a.shape.size() != b.shape.size()) return r;
  r.has_shape = true;
  for (size_t i = 0; i < a.shape.size(); ++i) r.shape.push_back(a.shape[i].same(b.shape[i]) ? a.shape[i] : Dim::Unknown());
  return r;
}

bool SameType(const TypeOf& a, const TypeOf& b) {
  if (a.dtype != b.dtype || a.has_shape != b.has_shape || a.kind != b.kind) return false;
  if (!a.has_shape) return true;
  if (a.shape.size() != b.shape.size()) return false;
  for (size_t i = 0; i < a.shape.size(); ++i)
    if (!a.shape[i].same(b.shape[i]) && !(a.shape[i].unknown() && b.shape[i].unknown())) return false;
  return true;
}

void SetOut(InferContext& c, size_t i, const TypeOf& t) {
  if (i >= c.outputs.size()) return;
  if (t.has_shape) c.set_output(i, t.dtype, t.shape);
  else c.set_output_rank_unknown(i, t.dtype);
  c.outputs[i].kind = t.kind;
}

TypeOf InputType(const InferContext& c, size_t i) {
  if (!c.has_input(i)) return {};
  return TypeOf{c.in(i).dtype, c.in(i).shape, c.in(i).has_shape, c.in(i).kind};
}

// Inputs first..first+count-1 of a control-flow node are tensors (its trip count, condition, scan inputs: only
// Loop-carried values, captured values and If's outputs may be sequences or optionals).
Status RequireTensors(const InferContext& c, size_t first, size_t count) {
  for (size_t i = first; i < first + count && i < c.num_inputs(); ++i)
    if (c.has_input(i) && c.in(i).kind != ValueKind::kTensor)
      return Err(StatusCode::kInvalidModel, "{}: input {} is {}; it must be a tensor", c.node.Where(), i,
                 AValueKind(c.in(i).kind));
  return Status::Ok();
}

// Body outputs first..first+count-1 are tensors (scan outputs are stacked tensors).
Status RequireTensorOutputs(const Node& n, const Graph& body, size_t first, size_t count) {
  for (size_t j = first; j < first + count && j < body.outputs.size(); ++j)
    if (body.outputs[j]->kind != ValueKind::kTensor)
      return Err(StatusCode::kInvalidModel, "{}: body output {} ('{}') is {}; scan outputs must be tensors",
                 n.Where(), j, body.outputs[j]->name, AValueKind(body.outputs[j]->kind));
  return Status::Ok();
}

// Whether values of kinds a and b may flow into one another (the same content, optional or not).
bool KindsMeet(ValueKind a, ValueKind b) { return HeldKind(a) == HeldKind(b); }

Result<const Graph*> RequireBody(const Node& n, const char* attr) {
  const Graph* g = BodyOf(n, attr);
  if (!g) return Err(StatusCode::kInvalidModel, "{}: needs the graph attribute '{}'", n.Where(), attr);
  return g;
}

// Counts of a Loop: N loop-carried values, K captured values, S scan outputs.
struct LoopCounts {
  size_t n = 0, k = 0, s = 0;
};
Result<LoopCounts> CountLoop(const Node& node, const Graph& body) {
  LoopCounts c;
  c.k = CapturedInputCount(node);
  if (node.inputs.size() < 2 + c.k)
    return Err(StatusCode::kInvalidModel, "{}: needs the inputs M and cond (either may be empty)", node.Where());
  c.n = node.inputs.size() - 2 - c.k;
  if (body.inputs.size() != 2 + c.n + c.k)
    return Err(StatusCode::kInvalidModel, "{}: the body takes {} inputs; with {} loop-carried values it must take {} "
               "(iteration number, condition, then the loop-carried values)", node.Where(), body.inputs.size() - c.k,
               c.n, 2 + c.n);
  if (body.outputs.size() < 1 + c.n)
    return Err(StatusCode::kInvalidModel, "{}: the body has {} outputs; it must give the condition and the {} "
               "loop-carried values first", node.Where(), body.outputs.size(), c.n);
  c.s = body.outputs.size() - 1 - c.n;
  if (node.outputs.size() > c.n + c.s)
    return Err(StatusCode::kInvalidModel, "{}: has {} outputs but its body makes only {} ({} loop-carried, {} scan)",
               node.Where(), node.outputs.size(), c.n + c.s, c.n, c.s);
  return c;
}

// Scan-8: a batch axis (0) before the scan axis (1), and an optional sequence_lens input first.
bool IsScan8(const Node& n) { return n.opset > 0 && n.opset < 9; }

// Counts of a Scan: N state values, M scan inputs, K captured values, S scan outputs; `first` is the index of the
// first state input (1 at opset 8, after sequence_lens).
struct ScanCounts {
  size_t first = 0, n = 0, m = 0, k = 0, s = 0;
};
Result<ScanCounts> CountScan(const Node& node, const Graph& body) {
  ScanCounts c;
  c.first = IsScan8(node) ? 1 : 0;
  c.k = CapturedInputCount(node);
  KILN_ASSIGN_OR_RETURN(const int64_t m, node.attr_int("num_scan_inputs", -1));
  if (m < 1 || c.first + static_cast<size_t>(m) + c.k > node.inputs.size())
    return Err(StatusCode::kInvalidModel, "{}: num_scan_inputs is {} but the node has {} inputs", node.Where(), m,
               node.inputs.size() - c.k);
  c.m = static_cast<size_t>(m);
  c.n = node.inputs.size() - c.k - c.m - c.first;
  if (body.inputs.size() != c.n + c.m + c.k)
    return Err(StatusCode::kInvalidModel, "{}: the body takes {} inputs but the node gives {} states and {} scan "
               "inputs", node.Where(), body.inputs.size() - c.k, c.n, c.m);
  if (body.outputs.size() < c.n)
    return Err(StatusCode::kInvalidModel, "{}: the body has {} outputs, fewer than its {} states", node.Where(),
               body.outputs.size(), c.n);
  c.s = body.outputs.size() - c.n;
  if (node.outputs.size() > c.n + c.s)
    return Err(StatusCode::kInvalidModel, "{}: has {} outputs but its body makes only {}", node.Where(),
               node.outputs.size(), c.n + c.s);
  for (size_t i = c.first; i < c.first + c.n + c.m; ++i)
    if (!node.inputs[i]) return Err(StatusCode::kInvalidModel, "{}: input {} is empty", node.Where(), i);
  return c;
}

// An int attribute list of `count` entries (default 0 each); an error names a wrong length or value.
Result<std::vector<int64_t>> AxisList(const Node& n, const char* attr, size_t count) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, n.attr_ints(attr, {}));
  if (v.empty()) v.assign(count, 0);
  if (v.size() != count)
    return Err(StatusCode::kInvalidModel, "{}: '{}' has {} entries for {} tensors", n.Where(), attr, v.size(), count);
  return v;
}

Status IfShape(InferContext& c) {
  const Node& n = c.node;
  KILN_ASSIGN_OR_RETURN(const Graph* then_g, RequireBody(n, "then_branch"));
  KILN_ASSIGN_OR_RETURN(const Graph* else_g, RequireBody(n, "else_branch"));
  if (!c.has_input(0)) return Err(StatusCode::kInvalidModel, "{}: needs the condition input", n.Where());
  KILN_RETURN_IF_ERROR(RequireTensors(c, 0, 1));
  if (c.in(0).dtype != DataType::kBool)
    return Err(StatusCode::kInvalidModel, "{}: the condition must be bool, not {}", n.Where(), DataTypeName(c.in(0).dtype));
  if (then_g->outputs.size() != else_g->outputs.size())
    return Err(StatusCode::kInvalidModel, "{}: then_branch has {} outputs and else_branch {}; they must match",
               n.Where(), then_g->outputs.size(), else_g->outputs.size());
  if (n.outputs.size() > then_g->outputs.size())
    return Err(StatusCode::kInvalidModel, "{}: has {} outputs but its branches make {}", n.Where(), n.outputs.size(),
               then_g->outputs.size());
  const Tensor* cond = c.value(0);
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const TypeOf a = FromValue(then_g->outputs[i]), b = FromValue(else_g->outputs[i]);
    if (a.dtype != DataType::kUndefined && b.dtype != DataType::kUndefined && a.dtype != b.dtype)
      return Err(StatusCode::kInvalidModel, "{}: output {} is {} in then_branch but {} in else_branch", n.Where(), i,
                 DataTypeName(a.dtype), DataTypeName(b.dtype));
    if (!KindsMeet(a.kind, b.kind))
      return Err(StatusCode::kInvalidModel, "{}: output {} is {} in then_branch but {} in else_branch", n.Where(),
                 i, AValueKind(a.kind), AValueKind(b.kind));
    if (cond && cond->numel() == 1) SetOut(c, i, cond->GetAsDouble(0) != 0 ? a : b);
    else SetOut(c, i, Merge(a, b));
  }
  return Status::Ok();
}

Status LoopShape(InferContext& c) {
  const Node& n = c.node;
  KILN_ASSIGN_OR_RETURN(const Graph* body, RequireBody(n, "body"));
  KILN_ASSIGN_OR_RETURN(const LoopCounts k, CountLoop(n, *body));
  if (!c.has_input(0) && !c.has_input(1))
    return Err(StatusCode::kInvalidModel, "{}: has neither a trip count M nor a condition: the loop would never end",
               n.Where());
  KILN_RETURN_IF_ERROR(RequireTensors(c, 0, 2));
  KILN_RETURN_IF_ERROR(RequireTensorOutputs(n, *body, 1 + k.n, k.s));
  if (c.has_input(1) && c.in(1).dtype != DataType::kBool)
    return Err(StatusCode::kInvalidModel, "{}: the condition must be bool, not {}", n.Where(), DataTypeName(c.in(1).dtype));
  if (c.has_input(0) && c.in(0).dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: the trip count M must be int64, not {}", n.Where(),
               DataTypeName(c.in(0).dtype));
  for (size_t i = 0; i < k.n; ++i) {
    if (!c.has_input(2 + i)) return Err(StatusCode::kInvalidModel, "{}: loop-carried input {} is empty", n.Where(), i);
    const TypeOf in = InputType(c, 2 + i), out = FromValue(body->outputs[1 + i]);
    if (out.dtype != DataType::kUndefined && out.dtype != in.dtype)
      return Err(StatusCode::kInvalidModel, "{}: loop-carried value {} enters as {} but the body gives {}", n.Where(), i,
                 DataTypeName(in.dtype), DataTypeName(out.dtype));
    if (!KindsMeet(in.kind, out.kind))
      return Err(StatusCode::kInvalidModel, "{}: loop-carried value {} enters as {} but the body gives {}",
                 n.Where(), i, AValueKind(in.kind), AValueKind(out.kind));
    SetOut(c, i, Merge(in, out));
  }
  // The trip count is exact when M is known and no condition can end the loop early: there is none, or it is a
  // known constant the body gives back unchanged (a for loop as exporters write it; false: no iteration).
  Dim trips = Dim::Unknown();
  if (const Tensor* m = c.value(0); m && m->numel() == 1) {
    const Tensor* cond = c.value(1);
    if (!c.has_input(1)) trips = Dim(std::max<int64_t>(0, m->GetAsInt(0)));
    else if (cond && cond->numel() == 1 && LoopBodyKeepsCondition(*body))
      trips = Dim(cond->GetAsDouble(0) != 0 ? std::max<int64_t>(0, m->GetAsInt(0)) : 0);
  }
  for (size_t j = 0; j < k.s && k.n + j < n.outputs.size(); ++j) {
    TypeOf t = FromValue(body->outputs[1 + k.n + j]);
    if (t.has_shape) t.shape.insert(t.shape.begin(), trips);
    SetOut(c, k.n + j, t);
  }
  return Status::Ok();
}

// Scan-8: every state and scan input has the batch axis 0, scan inputs the scan axis 1; outputs likewise.
Status Scan8Shape(InferContext& c, const Graph& body, const ScanCounts& k) {
  const Node& n = c.node;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dirs, AxisList(n, "directions", k.m));
  for (size_t j = 0; j < k.m; ++j)
    if (dirs[j] != 0 && dirs[j] != 1)
      return Err(StatusCode::kInvalidModel, "{}: directions[{}] is {}; it must be 0 or 1", n.Where(), j, dirs[j]);
  if (c.has_input(0) && c.in(0).dtype != DataType::kInt64 && c.in(0).dtype != DataType::kInt32)
    return Err(StatusCode::kInvalidModel, "{}: sequence_lens must be an integer tensor, not {}", n.Where(),
               DataTypeName(c.in(0).dtype));
  Dim batch = Dim::Unknown(), seq = Dim::Unknown();
  auto agree = [&](Dim& have, const Dim& d, const char* what) -> Status {
    if (have.known() && d.known() && have.value != d.value)
      return Err(StatusCode::kInvalidModel, "{}: inputs have {} and {} {}; they must agree", n.Where(), have.value,
                 d.value, what);
    if (!have.known()) have = d;
    return Status::Ok();
  };
  for (size_t i = 0; i < k.n + k.m; ++i) {
    const TensorInfo& x = c.in(k.first + i);
    if (!x.has_shape) continue;
    const bool scan = i >= k.n;
    if (x.rank() < (scan ? 2 : 1))
      return Err(StatusCode::kInvalidModel, "{}: {} {} has shape {}; it needs a batch axis{}", n.Where(),
                 scan ? "scan input" : "state", scan ? i - k.n : i, ShapeToString(x.shape),
                 scan ? " and a sequence axis" : "");
    KILN_RETURN_IF_ERROR(agree(batch, x.shape[0], "batch entries"));
    if (scan) KILN_RETURN_IF_ERROR(agree(seq, x.shape[1], "steps"));
  }
  for (size_t i = 0; i < k.n; ++i) {
    const TypeOf in = InputType(c, k.first + i);
    TypeOf out = FromValue(body.outputs[i]);
    if (out.dtype != DataType::kUndefined && out.dtype != in.dtype)
      return Err(StatusCode::kInvalidModel, "{}: state {} enters as {} but the body gives {}", n.Where(), i,
                 DataTypeName(in.dtype), DataTypeName(out.dtype));
    if (out.has_shape) out.shape.insert(out.shape.begin(), batch);
    SetOut(c, i, Merge(in, out));
  }
  for (size_t j = 0; j < k.s && k.n + j < n.outputs.size(); ++j) {
    TypeOf t = FromValue(body.outputs[k.n + j]);
    if (t.has_shape) t.shape.insert(t.shape.begin(), {batch, seq});
    SetOut(c, k.n + j, t);
  }
  return Status::Ok();
}

Status ScanShape(InferContext& c) {
  const Node& n = c.node;
  KILN_ASSIGN_OR_RETURN(const Graph* body, RequireBody(n, "body"));
  KILN_ASSIGN_OR_RETURN(const ScanCounts k, CountScan(n, *body));
  KILN_RETURN_IF_ERROR(RequireTensors(c, 0, k.first + k.n + k.m));
  KILN_RETURN_IF_ERROR(RequireTensorOutputs(n, *body, 0, k.n + k.s));
  if (k.first) return Scan8Shape(c, *body, k);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> in_axes, AxisList(n, "scan_input_axes", k.m));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_axes, AxisList(n, "scan_output_axes", k.s));
  Dim seq = Dim::Unknown();
  for (size_t j = 0; j < k.m; ++j) {
    const TensorInfo& x = c.in(k.n + j);
    if (!x.has_shape) continue;
    auto axis = NormalizeAxis(in_axes[j], x.rank());
    if (!axis) return Err(StatusCode::kInvalidModel, "{}: scan_input_axes[{}] = {} is outside rank {}", n.Where(), j,
                          in_axes[j], x.rank());
    const Dim& d = x.shape[static_cast<size_t>(*axis)];
    if (seq.known() && d.known() && d.value != seq.value)
      return Err(StatusCode::kInvalidModel, "{}: scan inputs have {} and {} steps; they must agree", n.Where(),
                 seq.value, d.value);
    if (!seq.known()) seq = d;
  }
  for (size_t i = 0; i < k.n; ++i) {
    const TypeOf in = InputType(c, i), out = FromValue(body->outputs[i]);
    if (out.dtype != DataType::kUndefined && out.dtype != in.dtype)
      return Err(StatusCode::kInvalidModel, "{}: state {} enters as {} but the body gives {}", n.Where(), i,
                 DataTypeName(in.dtype), DataTypeName(out.dtype));
    SetOut(c, i, Merge(in, out));
  }
  for (size_t j = 0; j < k.s && k.n + j < n.outputs.size(); ++j) {
    TypeOf t = FromValue(body->outputs[k.n + j]);
    if (t.has_shape) {
      auto axis = NormalizeAxis(out_axes[j], static_cast<int64_t>(t.shape.size()) + 1);
      if (!axis) return Err(StatusCode::kInvalidModel, "{}: scan_output_axes[{}] = {} is outside rank {}", n.Where(), j,
                            out_axes[j], t.shape.size() + 1);
      t.shape.insert(t.shape.begin() + *axis, seq);
    }
    SetOut(c, k.n + j, t);
  }
  return Status::Ok();
}

// Sets a body input's type.
void Type(Value* v, const TypeOf& t) {
  if (t.dtype != DataType::kUndefined) v->dtype = t.dtype;
  // A body input declared an optional keeps that where the node gives what it holds (and the other way round).
  if (v->kind == ValueKind::kTensor || !KindsMeet(v->kind, t.kind)) v->kind = t.kind;
  v->shape = t.shape;
  v->has_shape = t.has_shape;
}

// Types and infers a copy of `body` with input i of type types[i].
Result<std::shared_ptr<Graph>> InferBody(const Node& n, const char* attr, const Graph& body,
                                         const std::vector<TypeOf>& types, const InferOptions& opts) {
  std::shared_ptr<Graph> g(body.Clone().release());
  for (size_t i = 0; i < g->inputs.size() && i < types.size(); ++i) Type(g->inputs[i], types[i]);
  for (Value* v : g->values())
    if (!v->is_graph_input && !v->is_const() && v->producer) {  // inferred afresh from the new input types
      v->has_shape = false;
      v->shape.clear();
      v->sym_value.reset();
    }
  // Captured constants fold into the body while it is inferred (an Unsqueeze by a captured axes constant gets its
  // rank); the inputs stay inputs afterwards, fed as before.
  std::vector<Value*> folded_inputs;
  for (size_t i = 0; i < g->inputs.size() && i < types.size(); ++i)
    if (types[i].value && types[i].kind == ValueKind::kTensor) {
      g->inputs[i]->const_value = *types[i].value;
      folded_inputs.push_back(g->inputs[i]);
    }
  Status st = InferGraph(*g, opts);
  for (Value* v : folded_inputs) v->const_value.reset();
  if (!st.ok()) return st.WithContext(fmt::format("{} attribute '{}'", n.Where(), attr));
  g->RemoveFoldedNodes();
  return g;
}

void SetBody(Node& n, const char* attr, std::shared_ptr<Graph> g) { n.attrs[attr].g = std::move(g); }

// Loop and Scan: state that changes type from one iteration to the next is widened until the body keeps it.
Status InferIterated(Node& n, const Graph& body, std::vector<TypeOf> types, size_t first_state, size_t states,
                     size_t first_state_out, const InferOptions& opts) {
  std::shared_ptr<Graph> g;
  for (int round = 0; round < 4; ++round) {
    KILN_ASSIGN_OR_RETURN(g, InferBody(n, "body", body, types, opts));
    bool changed = false;
    for (size_t i = 0; i < states; ++i) {
      TypeOf& in = types[first_state + i];
      const TypeOf out = FromValue(g->outputs[first_state_out + i]);
      if (out.dtype != DataType::kUndefined && out.dtype != in.dtype)
        return Err(StatusCode::kInvalidModel, "{}: the body turns state {} from {} into {}", n.Where(), i,
                   DataTypeName(in.dtype), DataTypeName(out.dtype));
      if (!KindsMeet(in.kind, out.kind))
        return Err(StatusCode::kInvalidModel, "{}: the body turns state {} from {} into {}", n.Where(), i,
                   AValueKind(in.kind), AValueKind(out.kind));
      if (SameType(in, TypeOf{in.dtype, out.shape, out.has_shape, in.kind})) continue;
      TypeOf widened = Merge(in, TypeOf{in.dtype, out.shape, out.has_shape, in.kind});
      if (round == 2) widened.has_shape = false, widened.shape.clear();
      in = widened;
      changed = true;
    }
    if (!changed) break;
  }
  SetBody(n, "body", std::move(g));
  return Status::Ok();
}

}  // namespace

Status InferBodies(Node& n, const InferOptions& opts) {
  if (!n.domain.empty() || !HasSubgraphs(n)) return Status::Ok();
  const size_t k = CapturedInputCount(n);
  std::vector<TypeOf> captured;
  for (size_t i = n.inputs.size() - k; i < n.inputs.size(); ++i) {
    captured.push_back(FromValue(n.inputs[i]));
    if (n.inputs[i] && n.inputs[i]->is_const()) captured.back().value = &*n.inputs[i]->const_value;
  }
  if (n.op_type == "If") {
    // A branch may be invalid at shapes where its condition keeps it from running (exporters guard shape-specific
    // code this way): a branch whose inference fails keeps its typed inputs and leaves its outputs to the run; the
    // error stands only when neither branch can be inferred, or the one a constant condition takes cannot.
    const Value* cond = n.input(0);
    const int taken = cond && cond->is_const() && cond->const_value->numel() == 1
                          ? (cond->const_value->GetAsDouble(0) != 0 ? 0 : 1) : -1;
    Status first_error = Status::Ok();
    int failed = 0;
    const char* attrs[2] = {"then_branch", "else_branch"};
    for (int b = 0; b < 2; ++b) {
      KILN_ASSIGN_OR_RETURN(const Graph* body, RequireBody(n, attrs[b]));
      if (body->inputs.size() != k)
        return Err(StatusCode::kInvalidModel, "{}: the branch '{}' takes inputs; If's branches take none", n.Where(),
                   attrs[b]);
      auto g = InferBody(n, attrs[b], *body, captured, opts);
      if (g.ok()) {
        SetBody(n, attrs[b], std::move(*g));
        continue;
      }
      if (taken == b) return g.status();
      if (first_error.ok()) first_error = g.status();
      ++failed;
      std::shared_ptr<Graph> typed(body->Clone().release());  // inputs typed, the rest left to the run
      for (size_t i = 0; i < typed->inputs.size() && i < captured.size(); ++i) Type(typed->inputs[i], captured[i]);
      for (Value* v : typed->values())
        if (!v->is_graph_input && !v->is_const() && v->producer) {
          v->has_shape = false;
          v->shape.clear();
          v->sym_value.reset();
        }
      SetBody(n, attrs[b], std::move(typed));
    }
    if (failed == 2) return first_error;
    return Status::Ok();
  }
  if (n.op_type == "Loop") {
    KILN_ASSIGN_OR_RETURN(const Graph* body, RequireBody(n, "body"));
    KILN_ASSIGN_OR_RETURN(const LoopCounts c, CountLoop(n, *body));
    std::vector<TypeOf> types = {TypeOf{DataType::kInt64, {}, true}, TypeOf{DataType::kBool, {}, true}};
    for (size_t i = 0; i < c.n; ++i) types.push_back(FromValue(n.inputs[2 + i]));
    types.insert(types.end(), captured.begin(), captured.end());
    return InferIterated(n, *body, std::move(types), 2, c.n, 1, opts);
  }
  if (n.op_type == "Scan") {
    KILN_ASSIGN_OR_RETURN(const Graph* body, RequireBody(n, "body"));
    KILN_ASSIGN_OR_RETURN(const ScanCounts c, CountScan(n, *body));
    std::vector<TypeOf> types;
    if (c.first) {  // Scan-8: one batch entry per run of the body; scan inputs lose their batch and scan axes
      for (size_t i = 0; i < c.n + c.m; ++i) {
        TypeOf t = FromValue(n.inputs[c.first + i]);
        const size_t drop = i < c.n ? 1 : 2;
        if (t.has_shape && t.shape.size() >= drop) t.shape.erase(t.shape.begin(), t.shape.begin() + drop);
        else t.has_shape = false, t.shape.clear();
        types.push_back(t);
      }
      types.insert(types.end(), captured.begin(), captured.end());
      return InferIterated(n, *body, std::move(types), 0, c.n, 0, opts);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> in_axes, AxisList(n, "scan_input_axes", c.m));
    for (size_t i = 0; i < c.n; ++i) types.push_back(FromValue(n.inputs[i]));
    for (size_t j = 0; j < c.m; ++j) {
      TypeOf t = FromValue(n.inputs[c.n + j]);
      if (t.has_shape) {
        auto axis = NormalizeAxis(in_axes[j], static_cast<int64_t>(t.shape.size()));
        if (!axis) return Err(StatusCode::kInvalidModel, "{}: scan_input_axes[{}] = {} is outside rank {}", n.Where(),
                              j, in_axes[j], t.shape.size());
        t.shape.erase(t.shape.begin() + *axis);
      }
      types.push_back(t);
    }
    types.insert(types.end(), captured.begin(), captured.end());
    return InferIterated(n, *body, std::move(types), 0, c.n, 0, opts);
  }
  if (n.op_type == "SequenceMap") {
    // The body runs once per element: a sequence input gives it an element (a tensor of the element type), a tensor
    // input the tensor itself.
    KILN_ASSIGN_OR_RETURN(const Graph* body, RequireBody(n, "body"));
    if (body->inputs.size() != n.inputs.size())
      return Err(StatusCode::kInvalidModel, "{}: the body takes {} inputs but the node gives {}", n.Where(),
                 body->inputs.size() - k, n.inputs.size() - k);
    std::vector<TypeOf> types;
    for (size_t i = 0; i + k < n.inputs.size(); ++i) {
      TypeOf t = FromValue(n.inputs[i]);
      if (t.kind == ValueKind::kSequence) t.kind = ValueKind::kTensor;
      types.push_back(t);
    }
    types.insert(types.end(), captured.begin(), captured.end());
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, InferBody(n, "body", *body, types, opts));
    SetBody(n, "body", std::move(g));
    return Status::Ok();
  }
  return Status::Ok();
}

Result<size_t> InlineConstantIfs(Graph& g) {
  size_t inlined = 0;
  for (bool again = true; again;) {
    again = false;
    auto& nodes = g.mutable_nodes();
    for (size_t pos = 0; pos < nodes.size(); ++pos) {
      Node& n = *nodes[pos];
      if (!n.domain.empty() || n.op_type != "If" || !n.input(0) || !n.input(0)->is_const()) continue;
      const Tensor& cond = *n.input(0)->const_value;
      if (cond.numel() != 1) continue;
      const Graph* branch = BodyOf(n, cond.GetAsDouble(0) != 0 ? "then_branch" : "else_branch");
      const size_t k = CapturedInputCount(n);
      if (!branch || branch->inputs.size() != k || branch->outputs.size() < n.outputs.size()) continue;
      // Branch values -> values of g: its inputs are the node's captured inputs, constants become constants of g,
      // everything else gets a fresh name under the If's.
      std::unordered_map<const Value*, Value*> map;
      for (size_t i = 0; i < k; ++i) map[branch->inputs[i]] = n.inputs[n.inputs.size() - k + i];
      auto mapped = [&](const Value* v) -> Value* {
        if (!v) return nullptr;
        auto it = map.find(v);
        if (it != map.end()) return it->second;
        Value* nv = v->is_const() ? g.AddConstant(n.name + "/" + v->name, *v->const_value)
                                  : g.AddValue(n.name + "/" + v->name);
        if (!v->is_const()) {
          nv->dtype = v->dtype;
          nv->shape = v->shape;
          nv->has_shape = v->has_shape;
          nv->sym_value = v->sym_value;
          nv->kind = v->kind;
        }
        map[v] = nv;
        return nv;
      };
      std::vector<std::unique_ptr<Node>> added;
      for (const auto& bn : branch->nodes()) {
        auto nn = std::make_unique<Node>(*bn);
        nn->name = n.name + "/" + bn->name;
        for (Value*& v : nn->inputs) v = mapped(v);
        for (Value*& v : nn->outputs) v = mapped(v);
        added.push_back(std::move(nn));
      }
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        if (!n.outputs[i]) continue;
        auto id = std::make_unique<Node>();
        id->name = n.name + "/output_" + std::to_string(i);
        id->op_type = "Identity";
        id->opset = n.opset;
        id->inputs = {mapped(branch->outputs[i])};
        id->outputs = {n.outputs[i]};
        added.push_back(std::move(id));
      }
      nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(pos));
      for (auto& a : added) nodes.push_back(std::move(a));
      ++inlined;
      again = true;
      break;
    }
  }
  if (inlined) KILN_RETURN_IF_ERROR(g.TopoSort());
  return inlined;
}

void RegisterControlFlowOps(OpRegistry& r) {
  // Bodies compute in the types their models give: FP16 planning keeps the nodes' float inputs and outputs FP32.
  r.Onnx("If").Since(1).Shape(IfShape).KeepsFp32();
  r.Onnx("Loop").Since(1).Shape(LoopShape).KeepsFp32();
  // Scan-8 (a batch axis and sequence_lens) and Scan-9+ (scan axes and directions per input and output) share the
  // shape function and the kernel, which tell them apart by the node's opset.
  r.Onnx("Scan").Since(8).Until(8).Shape(ScanShape).KeepsFp32();
  r.Onnx("Scan").Since(9).Shape(ScanShape).KeepsFp32();
}

}  // namespace kiln
