// CPU kernels of If, Loop and Scan: each body runs through the reference executor (RunGraph) with the node's
// inputs bound to the body's inputs by position (formal inputs first, captured outer values last).
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

namespace kiln::cpu {
namespace {

// Runs `body` with inputs[i] bound to its input i; returns its outputs in order.
Result<std::vector<Tensor>> RunBody(const Node& n, const Graph& body, const std::vector<Tensor>& inputs) {
  if (inputs.size() != body.inputs.size())
    return Err(StatusCode::kInternal, "{}: {} values for a body of {} inputs", n.Where(), inputs.size(),
               body.inputs.size());
  std::map<std::string, Tensor> feed;
  for (size_t i = 0; i < inputs.size(); ++i) feed[body.inputs[i]->name] = inputs[i];
  auto r = RunGraph(body, feed);
  if (!r.ok()) return r.status().WithContext(n.Where() + " body");
  std::vector<Tensor> outs;
  outs.reserve(body.outputs.size());
  for (const Value* o : body.outputs) outs.push_back(r->at(o->name));
  return outs;
}

// The captured outer values: the node's last inputs.
std::vector<Tensor> Captured(const KernelContext& c) {
  const size_t k = CapturedInputCount(c.node);
  std::vector<Tensor> r;
  for (size_t i = c.num_inputs() - k; i < c.num_inputs(); ++i) r.push_back(*c.input(i));
  return r;
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
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, RunBody(n, *body, Captured(c)));
  for (size_t i = 0; i < c.num_outputs() && i < outs.size(); ++i) SetOutput(c, i, outs[i]);
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
  std::vector<Tensor> state;
  for (size_t i = 0; i < carried; ++i) state.push_back(*c.input(2 + i));
  const std::vector<Tensor> captured = Captured(c);
  std::vector<std::vector<Tensor>> scanned(scans);
  int64_t it = 0;
  for (; keep && (!has_m || it < m); ++it) {
    std::vector<Tensor> in = {Tensor::Scalar(DataType::kInt64, static_cast<double>(it)),
                              Tensor::Scalar(DataType::kBool, keep ? 1 : 0)};
    in.insert(in.end(), state.begin(), state.end());
    in.insert(in.end(), captured.begin(), captured.end());
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out, RunBody(n, *body, in));
    if (has_cond) {  // without a condition input the body's condition is ignored (a for loop)
      keep = Truth(n, out[0], "the body's condition output", &st);
      KILN_RETURN_IF_ERROR(st);
    }
    for (size_t i = 0; i < carried; ++i) {
      if (out[1 + i].dtype() != state[i].dtype())
        return Err(StatusCode::kInvalidArgument, "{}: loop-carried value {} changed type from {} to {}", n.Where(), i,
                   DataTypeName(state[i].dtype()), DataTypeName(out[1 + i].dtype()));
      state[i] = out[1 + i];
    }
    for (size_t j = 0; j < scans; ++j) scanned[j].push_back(out[1 + carried + j]);
  }
  for (size_t i = 0; i < carried; ++i) SetOutput(c, i, state[i]);
  for (size_t j = 0; j < scans && carried + j < c.num_outputs(); ++j) {
    const Value* bo = body->outputs[1 + carried + j];
    KILN_ASSIGN_OR_RETURN(Tensor t, Stack(n, scanned[j], 0, bo->dtype, DeclaredShape(bo)));
    SetOutput(c, carried + j, t);
  }
  return Status::Ok();
}

Status ScanKernel(KernelContext& c) {
  const Node& n = c.node;
  const Graph* body = BodyOf(n, "body");
  if (!body) return Err(StatusCode::kInvalidModel, "{}: has no body", n.Where());
  const size_t k = CapturedInputCount(n);
  const auto m = static_cast<size_t>(n.geti("num_scan_inputs", 0));
  const size_t states = c.num_inputs() - k - m;
  const size_t scans = body->outputs.size() - states;
  auto list = [&](const char* attr, size_t count) {
    std::vector<int64_t> v = n.getints(attr);
    if (v.empty()) v.assign(count, 0);
    return v;
  };
  std::vector<int64_t> in_axes = list("scan_input_axes", m), in_dirs = list("scan_input_directions", m);
  const std::vector<int64_t> out_axes = list("scan_output_axes", scans), out_dirs = list("scan_output_directions", scans);
  int64_t steps = -1;
  for (size_t j = 0; j < m; ++j) {
    const Tensor& x = c.in(states + j);
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
  for (size_t i = 0; i < states; ++i) state.push_back(*c.input(i));
  const std::vector<Tensor> captured = Captured(c);
  std::vector<std::vector<Tensor>> scanned(scans);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Tensor> in = state;
    for (size_t j = 0; j < m; ++j)
      in.push_back(Take(c.in(states + j), in_axes[j], in_dirs[j] == 1 ? steps - 1 - t : t));
    in.insert(in.end(), captured.begin(), captured.end());
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out, RunBody(n, *body, in));
    for (size_t i = 0; i < states; ++i) state[i] = out[i];
    for (size_t j = 0; j < scans; ++j) scanned[j].push_back(out[states + j]);
  }
  for (size_t i = 0; i < states; ++i) SetOutput(c, i, state[i]);
  for (size_t j = 0; j < scans && states + j < c.num_outputs(); ++j) {
    if (out_dirs[j] == 1) std::reverse(scanned[j].begin(), scanned[j].end());
    const Value* bo = body->outputs[states + j];
    const int64_t elem_rank = scanned[j].empty() ? static_cast<int64_t>(DeclaredShape(bo).size()) : scanned[j][0].rank();
    auto axis = NormalizeAxis(out_axes[j], elem_rank + 1);
    if (!axis) return Err(StatusCode::kInvalidArgument, "{}: scan_output_axes[{}] is outside rank {}", n.Where(), j,
                          elem_rank + 1);
    KILN_ASSIGN_OR_RETURN(Tensor t, Stack(n, scanned[j], *axis, bo->dtype, DeclaredShape(bo)));
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
