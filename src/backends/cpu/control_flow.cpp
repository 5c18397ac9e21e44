// CPU kernels of If, Loop and Scan: each body runs through the reference executor (RunBodyGraph) with the node's
// inputs bound to the body's inputs by position (formal inputs first, captured outer values last). Loop-carried
// values, captured values and If's outputs may be sequences or optionals (OnnxValue); Scan's are tensors. Scan-8 (a
// batch axis, sequence_lens) runs the body per batch entry.
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cpu/families.h"
#include "backends/cpu/kernel.h"
#include "core/error.h"
#include "ops/control_flow.h"
#include "ops/sequence.h"

namespace kiln::cpu {
namespace {

// Runs `body` with inputs[i] bound to its input i; returns its outputs in order.
Result<std::vector<OnnxValue>> RunBody(const Node& n, const Graph& body, std::vector<OnnxValue> inputs) {
  auto r = RunBodyGraph(body, std::move(inputs));
  if (!r.ok()) return r.status().WithContext(n.Where() + " body");
  return r;
}

// Input i as a value: its sequence or optional, else its tensor (an omitted input is an empty optional).
OnnxValue InputValue(const KernelContext& c, size_t i) {
  if (const OnnxValue* v = c.value_input(i)) return *v;
  const Tensor* t = c.input(i);
  return t ? OnnxValue::FromTensor(*t) : OnnxValue::None();
}

// The captured outer values: the node's last inputs.
std::vector<OnnxValue> Captured(const KernelContext& c) {
  const size_t k = CapturedInputCount(c.node);
  std::vector<OnnxValue> r;
  for (size_t i = c.num_inputs() - k; i < c.num_inputs(); ++i) r.push_back(InputValue(c, i));
  return r;
}

// A body output that must be a tensor (a condition, a Scan state, a scan output).
Result<Tensor> TensorOf(const Node& n, OnnxValue v, const char* what) {
  if (!v.is_tensor() || !v.tensor.defined())
    return Err(StatusCode::kInvalidArgument, "{}: {} must be a tensor, but the body made {}", n.Where(), what,
               v.Describe());
  return std::move(v.tensor);
}

// Output i becomes t: written into the buffer the executor placed when it has t's type and shape, else handed over.
void SetOutput(KernelContext& c, size_t i, const Tensor& t) {
  if (i >= c.num_outputs()) return;
  Tensor& o = c.out(i);
  if (o.defined() && o.raw() && o.dtype() == t.dtype() && o.shape() == t.shape()) {
    if (t.nbytes() && o.raw() != t.raw()) std::memcpy(o.raw(), t.raw(), t.nbytes());
    return;
  }
  o = t;
}

// Output i becomes v: a sequence or optional where shape inference made the output one, else v's tensor.
Status SetOutputValue(KernelContext& c, size_t i, OnnxValue v) {
  if (i >= c.num_outputs()) return Status::Ok();
  if (c.output_kind(i) != ValueKind::kTensor) {
    c.value_out(i) = std::move(v);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(Tensor t, TensorOf(c.node, std::move(v), "this output"));
  SetOutput(c, i, t);
  return Status::Ok();
}

bool Truth(const Node& n, const Tensor& t, const char* what, Status* st) {
  if (t.numel() != 1) {
    *st = Err(StatusCode::kInvalidArgument, "{}: {} must hold one element, not {}", n.Where(), what, t.Describe());
    return false;
  }
  return t.GetAsDouble(0) != 0;
}

// Stacks equal-shaped tensors along a new axis `axis` of the result (0 = outermost); `empty_shape` is the element
// shape to use when there are none.
Result<Tensor> Stack(const Node& n, const std::vector<Tensor>& parts, int64_t axis, DataType dtype,
                     const std::vector<int64_t>& empty_shape) {
  std::vector<int64_t> elem = parts.empty() ? empty_shape : parts[0].shape();
  for (const Tensor& p : parts)
    if (p.shape() != elem || p.dtype() != parts[0].dtype())
      return Err(StatusCode::kInvalidArgument, "{}: scan output iterations differ in shape ({} and {}); they must "
                 "agree to be stacked", n.Where(), parts[0].Describe(), p.Describe());
  const DataType t = parts.empty() ? dtype : parts[0].dtype();
  std::vector<int64_t> shape = elem;
  axis = std::clamp<int64_t>(axis, 0, static_cast<int64_t>(elem.size()));
  shape.insert(shape.begin() + axis, static_cast<int64_t>(parts.size()));
  Tensor out(t, shape);
  const size_t es = DataTypeSize(t);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= elem[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis); i < elem.size(); ++i) inner *= elem[i];
  auto* dst = static_cast<uint8_t*>(out.raw());
  const int64_t steps = static_cast<int64_t>(parts.size());
  for (int64_t s = 0; s < steps; ++s) {
    const auto* src = static_cast<const uint8_t*>(parts[static_cast<size_t>(s)].raw());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + ((o * steps + s) * inner) * es, src + o * inner * es, static_cast<size_t>(inner) * es);
  }
  return out;
}

// Slice `index` of x along `axis`, with that axis removed.
Tensor Take(const Tensor& x, int64_t axis, int64_t index) {
  std::vector<int64_t> shape = x.shape();
  const int64_t steps = shape[static_cast<size_t>(axis)];
  shape.erase(shape.begin() + axis);
  Tensor out(x.dtype(), shape);
  const size_t es = DataTypeSize(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.shape()[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < x.shape().size(); ++i) inner *= x.shape()[i];
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * inner * es, src + ((o * steps + index) * inner) * es, static_cast<size_t>(inner) * es);
  return out;
}

// The static shape of a body output, for an empty stack (unknown dims count as 0).
std::vector<int64_t> DeclaredShape(const Value* v) {
  std::vector<int64_t> r;
  if (v->has_shape)
    for (const Dim& d : v->shape) r.push_back(d.known() ? d.value : 0);
  return r;
}

Status IfKernel(KernelContext& c) {
  const Node& n = c.node;
  Status st;
  const bool cond = Truth(n, c.in(0), "the condition", &st);
  KILN_RETURN_IF_ERROR(st);
  const Graph* body = BodyOf(n, cond ? "then_branch" : "else_branch");
  if (!body) return Err(StatusCode::kInvalidModel, "{}: has no {}", n.Where(), cond ? "then_branch" : "else_branch");
  KILN_ASSIGN_OR_RETURN(std::vector<OnnxValue> outs, RunBody(n, *body, Captured(c)));
  for (size_t i = 0; i < c.num_outputs() && i < outs.size(); ++i)
    KILN_RETURN_IF_ERROR(SetOutputValue(c, i, std::move(outs[i])));
  return Status::Ok();
}

Status LoopKernel(KernelContext& c) {
  const Node& n = c.node;
  const Graph* body = BodyOf(n, "body");
  if (!body) return Err(StatusCode::kInvalidModel, "{}: has no body", n.Where());
  const size_t k = CapturedInputCount(n);
  const size_t carried = c.num_inputs() - 2 - k;
  const size_t scans = body->outputs.size() - 1 - carried;
  Status st;
  const bool has_m = c.input(0) != nullptr, has_cond = c.input(1) != nullptr;
  const int64_t m = has_m ? c.in(0).GetAsInt(0) : 0;
  if (has_m && c.in(0).numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: M must hold one element, not {}", n.Where(), c.in(0).Describe());
  bool keep = has_cond ? Truth(n, c.in(1), "the condition", &st) : true;
  KILN_RETURN_IF_ERROR(st);
  std::vector<OnnxValue> state;
  for (size_t i = 0; i < carried; ++i) state.push_back(InputValue(c, 2 + i));
  const std::vector<OnnxValue> captured = Captured(c);
  std::vector<std::vector<Tensor>> scanned(scans);
  int64_t it = 0;
  for (; keep && (!has_m || it < m); ++it) {
    std::vector<OnnxValue> in = {OnnxValue::FromTensor(Tensor::Scalar(DataType::kInt64, static_cast<double>(it))),
                                 OnnxValue::FromTensor(Tensor::Scalar(DataType::kBool, keep ? 1 : 0))};
    in.insert(in.end(), state.begin(), state.end());
    in.insert(in.end(), captured.begin(), captured.end());
    KILN_ASSIGN_OR_RETURN(std::vector<OnnxValue> out, RunBody(n, *body, std::move(in)));
    if (has_cond) {  // without a condition input the body's condition is ignored (a for loop)
      KILN_ASSIGN_OR_RETURN(const Tensor cond, TensorOf(n, out[0], "the body's condition output"));
      keep = Truth(n, cond, "the body's condition output", &st);
      KILN_RETURN_IF_ERROR(st);
    }
    for (size_t i = 0; i < carried; ++i) {
      OnnxValue& next = out[1 + i];
      if (next.is_tensor() && state[i].is_tensor() && next.tensor.dtype() != state[i].tensor.dtype())
        return Err(StatusCode::kInvalidArgument, "{}: loop-carried value {} changed type from {} to {}", n.Where(), i,
                   DataTypeName(state[i].tensor.dtype()), DataTypeName(next.tensor.dtype()));
      if (next.is_sequence() != state[i].is_sequence() && !next.is_none() && !state[i].is_none())
        return Err(StatusCode::kInvalidArgument, "{}: loop-carried value {} changed from {} to {}", n.Where(), i,
                   state[i].Describe(), next.Describe());
      state[i] = std::move(next);
    }
    for (size_t j = 0; j < scans; ++j) {
      KILN_ASSIGN_OR_RETURN(Tensor t, TensorOf(n, std::move(out[1 + carried + j]), "a scan output"));
      scanned[j].push_back(std::move(t));
    }
  }
  for (size_t i = 0; i < carried; ++i) KILN_RETURN_IF_ERROR(SetOutputValue(c, i, std::move(state[i])));
  for (size_t j = 0; j < scans && carried + j < c.num_outputs(); ++j) {
    const Value* bo = body->outputs[1 + carried + j];
    KILN_ASSIGN_OR_RETURN(Tensor t, Stack(n, scanned[j], 0, bo->dtype, DeclaredShape(bo)));
    SetOutput(c, carried + j, t);
  }
  return Status::Ok();
}

// One scan: `steps` runs of the body over the scan inputs' slices along their axes (backwards where dirs[j] is 1);
// the final states and each scan output's tensors, step by step.
struct ScanRun {
  std::vector<Tensor> states;
  std::vector<std::vector<Tensor>> scanned;
};
Result<ScanRun> RunScan(const Node& n, const Graph& body, std::vector<Tensor> states,
                        const std::vector<const Tensor*>& xs, const std::vector<int64_t>& axes,
                        const std::vector<int64_t>& dirs, int64_t steps, const std::vector<OnnxValue>& captured) {
  ScanRun r;
  r.states = std::move(states);
  const size_t n_states = r.states.size();
  r.scanned.resize(body.outputs.size() - n_states);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<OnnxValue> in;
    in.reserve(body.inputs.size());
    for (const Tensor& s : r.states) in.push_back(OnnxValue::FromTensor(s));
    for (size_t j = 0; j < xs.size(); ++j)
      in.push_back(OnnxValue::FromTensor(Take(*xs[j], axes[j], dirs[j] == 1 ? steps - 1 - t : t)));
    in.insert(in.end(), captured.begin(), captured.end());
    KILN_ASSIGN_OR_RETURN(std::vector<OnnxValue> out, RunBody(n, body, std::move(in)));
    for (size_t i = 0; i < n_states; ++i) {
      KILN_ASSIGN_OR_RETURN(r.states[i], TensorOf(n, std::move(out[i]), "a state"));
    }
    for (size_t j = 0; j < r.scanned.size(); ++j) {
      KILN_ASSIGN_OR_RETURN(Tensor y, TensorOf(n, std::move(out[n_states + j]), "a scan output"));
      r.scanned[j].push_back(std::move(y));
    }
  }
  return r;
}

std::vector<int64_t> IntList(const Node& n, const char* attr, size_t count) {
  std::vector<int64_t> v = n.getints(attr);
  if (v.size() != count) v.assign(count, 0);  // shape inference checked the length of a given list
  return v;
}

// Scan-8: inputs (sequence_lens, states..., scans..., captured...), each with the batch axis 0; scan inputs have the
// scan axis 1. The body runs over each batch entry's first sequence_lens[b] steps; scan outputs are padded with zeros
// to the longest sequence.
Status Scan8Kernel(KernelContext& c, const Graph& body) {
  const Node& n = c.node;
  const size_t k = CapturedInputCount(n);
  const auto m = static_cast<size_t>(n.geti("num_scan_inputs", 0));
  const size_t states = c.num_inputs() - k - m - 1;
  const size_t scans = body.outputs.size() - states;
  const std::vector<int64_t> dirs = IntList(n, "directions", m);
  int64_t batch = -1, max_steps = -1;
  for (size_t j = 0; j < m; ++j) {
    const Tensor& x = c.in(1 + states + j);
    if (x.rank() < 2)
      return Err(StatusCode::kInvalidArgument, "{}: scan input {} is {}; it needs a batch and a sequence axis",
                 n.Where(), j, x.Describe());
    if ((batch >= 0 && x.dim(0) != batch) || (max_steps >= 0 && x.dim(1) != max_steps))
      return Err(StatusCode::kInvalidArgument, "{}: scan inputs disagree in batch or sequence length ({})", n.Where(),
                 x.Describe());
    batch = x.dim(0);
    max_steps = x.dim(1);
  }
  for (size_t i = 0; i < states; ++i)
    if (c.in(1 + i).rank() < 1 || c.in(1 + i).dim(0) != batch)
      return Err(StatusCode::kInvalidArgument, "{}: state {} is {}; its first axis must be the batch ({})", n.Where(),
                 i, c.in(1 + i).Describe(), batch);
  const Tensor* lens = c.input(0);
  if (lens && lens->numel() != batch)
    return Err(StatusCode::kInvalidArgument, "{}: sequence_lens holds {} lengths for a batch of {}", n.Where(),
               lens->numel(), batch);
  const std::vector<OnnxValue> captured = Captured(c);
  std::vector<std::vector<Tensor>> final_states(states);
  std::vector<std::vector<std::vector<Tensor>>> per_batch(scans);  // [scan output][batch entry][step]
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t steps = lens ? lens->GetAsInt(b) : max_steps;
    if (steps < 0 || steps > max_steps)
      return Err(StatusCode::kInvalidArgument, "{}: sequence_lens[{}] is {}, outside [0, {}]", n.Where(), b, steps,
                 max_steps);
    std::vector<Tensor> st, xs_b;
    for (size_t i = 0; i < states; ++i) st.push_back(Take(c.in(1 + i), 0, b));
    for (size_t j = 0; j < m; ++j) xs_b.push_back(Take(c.in(1 + states + j), 0, b));
    std::vector<const Tensor*> xs;
    for (const Tensor& x : xs_b) xs.push_back(&x);
    KILN_ASSIGN_OR_RETURN(ScanRun r, RunScan(n, body, std::move(st), xs, std::vector<int64_t>(m, 0), dirs, steps,
                                             captured));
    for (size_t i = 0; i < states; ++i) final_states[i].push_back(std::move(r.states[i]));
    for (size_t j = 0; j < scans; ++j) per_batch[j].push_back(std::move(r.scanned[j]));
  }
  for (size_t i = 0; i < states && i < c.num_outputs(); ++i) {
    const Value* bo = body.outputs[i];
    KILN_ASSIGN_OR_RETURN(Tensor t, Stack(n, final_states[i], 0, c.in(1 + i).dtype(), DeclaredShape(bo)));
    SetOutput(c, i, t);
  }
  for (size_t j = 0; j < scans && states + j < c.num_outputs(); ++j) {
    const Value* bo = body.outputs[states + j];
    const Tensor* first = nullptr;  // an element, for the shape and type of them all
    for (const auto& steps : per_batch[j])
      if (!steps.empty() && !first) first = &steps[0];
    const std::vector<int64_t> elem = first ? first->shape() : DeclaredShape(bo);
    const DataType dtype = first ? first->dtype() : bo->dtype;
    std::vector<int64_t> shape = {batch, max_steps};
    shape.insert(shape.end(), elem.begin(), elem.end());
    Tensor out(dtype, shape);  // zero-filled: the steps past a sequence's length
    const size_t bytes = static_cast<size_t>(NumElements(elem)) * DataTypeSize(dtype);
    auto* dst = static_cast<uint8_t*>(out.raw());
    for (int64_t b = 0; b < batch; ++b) {
      const auto& steps = per_batch[j][static_cast<size_t>(b)];
      for (size_t t = 0; t < steps.size(); ++t) {
        if (steps[t].shape() != elem || steps[t].dtype() != dtype)
          return Err(StatusCode::kInvalidArgument, "{}: scan output {} is {} at one step and {} at another; they must "
                     "agree to be stacked", n.Where(), j, steps[t].Describe(), first->Describe());
        if (bytes) std::memcpy(dst + (static_cast<size_t>(b * max_steps) + t) * bytes, steps[t].raw(), bytes);
      }
    }
    SetOutput(c, states + j, out);
  }
  return Status::Ok();
}

Status ScanKernel(KernelContext& c) {
  const Node& n = c.node;
  const Graph* body = BodyOf(n, "body");
  if (!body) return Err(StatusCode::kInvalidModel, "{}: has no body", n.Where());
  if (n.opset > 0 && n.opset < 9) return Scan8Kernel(c, *body);
  const size_t k = CapturedInputCount(n);
  const auto m = static_cast<size_t>(n.geti("num_scan_inputs", 0));
  const size_t states = c.num_inputs() - k - m;
  const size_t scans = body->outputs.size() - states;
  std::vector<int64_t> in_axes = IntList(n, "scan_input_axes", m), in_dirs = IntList(n, "scan_input_directions", m);
  const std::vector<int64_t> out_axes = IntList(n, "scan_output_axes", scans);
  const std::vector<int64_t> out_dirs = IntList(n, "scan_output_directions", scans);
  int64_t steps = -1;
  std::vector<const Tensor*> xs;
  for (size_t j = 0; j < m; ++j) {
    const Tensor& x = c.in(states + j);
    xs.push_back(&x);
    auto axis = NormalizeAxis(in_axes[j], x.rank());
    if (!axis) return Err(StatusCode::kInvalidArgument, "{}: scan_input_axes[{}] is outside rank {}", n.Where(), j, x.rank());
    in_axes[j] = *axis;
    const int64_t len = x.shape()[static_cast<size_t>(*axis)];
    if (steps >= 0 && len != steps)
      return Err(StatusCode::kInvalidArgument, "{}: scan inputs have {} and {} steps; they must agree", n.Where(), steps,
                 len);
    steps = len;
  }
  std::vector<Tensor> state;
  for (size_t i = 0; i < states; ++i) state.push_back(c.in(i));
  KILN_ASSIGN_OR_RETURN(ScanRun r, RunScan(n, *body, std::move(state), xs, in_axes, in_dirs, steps, Captured(c)));
  for (size_t i = 0; i < states; ++i) SetOutput(c, i, r.states[i]);
  for (size_t j = 0; j < scans && states + j < c.num_outputs(); ++j) {
    std::vector<Tensor>& scanned = r.scanned[j];
    if (out_dirs[j] == 1) std::reverse(scanned.begin(), scanned.end());
    const Value* bo = body->outputs[states + j];
    const int64_t elem_rank = scanned.empty() ? static_cast<int64_t>(DeclaredShape(bo).size()) : scanned[0].rank();
    auto axis = NormalizeAxis(out_axes[j], elem_rank + 1);
    if (!axis) return Err(StatusCode::kInvalidArgument, "{}: scan_output_axes[{}] is outside rank {}", n.Where(), j,
                          elem_rank + 1);
    KILN_ASSIGN_OR_RETURN(Tensor t, Stack(n, scanned, *axis, bo->dtype, DeclaredShape(bo)));
    SetOutput(c, states + j, t);
  }
  return Status::Ok();
}

}  // namespace

void RegisterControlFlowKernels(KernelRegistry& r) {
  r.Add("If", IfKernel);
  r.Add("Loop", LoopKernel);
  r.Add("Scan", ScanKernel);
}

}  // namespace kiln::cpu
