// If, Loop and Scan on the CUDA backend: the body runs on the CUDA layers (body_exec.h), once or once per iteration,
// in stream order; loop-carried values stay in device buffers between iterations and scan slices are strided
// device copies.
//
// No host round trip where the data allows it: a Scan's trip count is its inputs' length, and a Loop whose trip
// count M the host knows (a constant, a folded value) and whose condition the body passes through unchanged runs
// all its iterations without the host (the iteration number is counted on the device), so CUDA graphs capture it.
// An If whose condition is computed on the device, and a Loop whose body computes its condition, read it on the
// host (a stream synchronization per read); while a CUDA graph is being captured they refuse, and the engine runs
// that launch plan without a graph (capture_guard.h).
//
// Bodies run on the GPU when every value's shape follows from the node's input shapes; a body whose shapes depend on
// data computed in it (a loop-carried value that grows, a Slice by the iteration number) is refused by the tactics
// function, so in an engine the node falls back to the CPU whole.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/body_exec.h"
#include "backends/cuda/capture_guard.h"
#include "backends/cuda/control_flow_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "core/error.h"
#include "ops/control_flow.h"
#include "ops/sequence.h"

namespace kiln::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

Status Copy(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  if (bytes == 0 || dst == src) return Status::Ok();
  return KILN_CUDA_STATUS(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
}

// A tensor seen as [outer, steps, inner] (inner in bytes): copies slice `index` of the steps axis to or from a dense
// [outer, inner] buffer.
Status TakeSlice(void* dst, const void* src, int64_t outer, int64_t steps, size_t inner, int64_t index,
                 cudaStream_t s) {
  if (inner == 0 || outer == 0) return Status::Ok();
  const auto* from = static_cast<const uint8_t*>(src) + static_cast<size_t>(index) * inner;
  if (outer == 1) return Copy(dst, from, inner, s);
  return KILN_CUDA_STATUS(cudaMemcpy2DAsync(dst, inner, from, static_cast<size_t>(steps) * inner, inner,
                                            static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, s));
}
Status PutSlice(void* dst, const void* src, int64_t outer, int64_t steps, size_t inner, int64_t index,
                cudaStream_t s) {
  if (inner == 0 || outer == 0) return Status::Ok();
  auto* to = static_cast<uint8_t*>(dst) + static_cast<size_t>(index) * inner;
  if (outer == 1) return Copy(to, src, inner, s);
  return KILN_CUDA_STATUS(cudaMemcpy2DAsync(to, static_cast<size_t>(steps) * inner, src, inner, inner,
                                            static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, s));
}

// Reads a (small) device tensor on the host: a stream synchronization, so refused while the stream is captured.
Result<Tensor> ReadOnHost(const Node& n, const DeviceTensor& t, cudaStream_t s, const char* what) {
  if (t.host) return *t.host;
  KILN_ASSIGN_OR_RETURN(bool capturing, IsCapturing(s));
  if (capturing) return RefuseCapture(fmt::format("{} reads its {} on the host", n.Where(), what));
  Tensor h(t.dtype, t.shape);
  if (t.nbytes()) {
    KILN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h.raw(), t.data, t.nbytes(), cudaMemcpyDeviceToHost, s));
    KILN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  }
  return h;
}

Result<bool> Truth(const Node& n, const Tensor& t, const char* what) {
  if (t.numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: {} must hold one element, not {}", n.Where(), what, t.Describe());
  return t.GetAsDouble(0) != 0;
}

BodyInput Binding(const DeviceTensor& t, bool fold) { return BodyInput{t.dtype, t.shape, fold ? t.host : nullptr}; }

// Loop-carried values: after an iteration, each body output goes to the buffer its body input reads next time. A
// source that is itself a body input (a body that passes or swaps its state) is staged first so that every copy
// reads the old values.
struct Carry {
  void* dst = nullptr;
  void* stage = nullptr;
  size_t bytes = 0;
};
Status CarryOver(const std::vector<Carry>& carries, const std::vector<DeviceTensor>& sources,
                 const std::vector<bool>& source_is_input, cudaStream_t s) {
  for (size_t i = 0; i < carries.size(); ++i)
    if (source_is_input[i] && sources[i].data != carries[i].dst)
      KILN_RETURN_IF_ERROR(Copy(carries[i].stage, sources[i].data, carries[i].bytes, s));
  for (size_t i = 0; i < carries.size(); ++i) {
    if (sources[i].data == carries[i].dst) continue;
    KILN_RETURN_IF_ERROR(Copy(carries[i].dst, source_is_input[i] ? carries[i].stage : sources[i].data,
                              carries[i].bytes, s));
  }
  return Status::Ok();
}

// A carried value's buffer and staging copy in the owner's scratch.
struct Slots {
  size_t bytes = 0;
  size_t Add(size_t n) {
    const size_t at = bytes;
    bytes += AlignUp(n);
    return at;
  }
};
void* At(const LaunchContext& ctx, size_t offset) { return static_cast<uint8_t*>(ctx.workspace) + offset; }

Status CheckShape(const Node& n, const DeviceTensor& got, const std::vector<int64_t>& want, const char* what, size_t i) {
  if (got.shape == want) return Status::Ok();
  return Err(StatusCode::kInvalidArgument, "{}: the body makes {} {} as [{}], but [{}] was planned", n.Where(), what, i,
             fmt::join(got.shape, ","), fmt::join(want, ","));
}

// Output `o` takes `shape`: as planned, or, where the runner left it open (passed with no shape and room for the
// layer's MaxOutputElements: the node-by-node runner, whose shape inference does not re-type bodies), within that room.
// An output planned with another shape is an error, never a write past its buffer.
Status FitOutput(const Node& n, DeviceTensor& o, const std::vector<int64_t>& shape, int64_t room, const char* what,
                 size_t i) {
  if (o.shape == shape) return Status::Ok();
  if (o.shape.empty() && room >= 0 && NumElements(shape) <= room) {
    o.shape = shape;
    return Status::Ok();
  }
  return Err(StatusCode::kInvalidArgument, "{}: the body makes {} {} as [{}], but [{}] was planned", n.Where(), what, i,
             fmt::join(shape, ","), fmt::join(o.shape, ","));
}

// ---- If ----
class IfLayer final : public Layer {
 public:
  IfLayer(const Node& n, bool tf32)
      : n_(n),
        then_(n, "then_branch", *BodyOf(n, "then_branch"), tf32),
        else_(n, "else_branch", *BodyOf(n, "else_branch"), tf32) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& inputs, const std::vector<DeviceTensor>&) const override {
    size_t bytes = 0;
    for (int b = 0; b < 2; ++b)
      if (auto p = Branch(b).PlanFor(Bindings(inputs)); p.ok()) bytes = std::max(bytes, (*p)->bytes());
    return bytes;
  }

  // The most elements output i has in either branch (engines call this only for outputs whose shape inference
  // leaves open: branches that differ in shape).
  int64_t MaxOutputElements(size_t i, const std::vector<DeviceTensor>& inputs) const override {
    int64_t most = -1;
    for (int b = 0; b < 2; ++b) {
      auto p = Branch(b).PlanFor(Bindings(inputs));
      if (!p.ok() || i >= (*p)->shaped->outputs.size()) continue;
      most = std::max(most, NumElements(ToStatic((*p)->shaped->outputs[i]->shape)));
    }
    return most;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    KILN_ASSIGN_OR_RETURN(Tensor c, ReadOnHost(n_, inputs[0], ctx.stream, "condition"));
    KILN_ASSIGN_OR_RETURN(bool cond, Truth(n_, c, "the condition"));
    const BodyExec& body = Branch(cond ? 0 : 1);
    KILN_ASSIGN_OR_RETURN(const BodyExec::Plan* p, body.PlanFor(Bindings(inputs)));
    std::vector<void*> ptrs;
    for (size_t i = inputs.size() - CapturedInputCount(n_); i < inputs.size(); ++i) ptrs.push_back(inputs[i].data);
    if (ctx.workspace_bytes < p->bytes())
      return Err(StatusCode::kInternal, "{}: its branch needs {} bytes of scratch, {} given", n_.Where(), p->bytes(),
                 ctx.workspace_bytes);
    KILN_ASSIGN_OR_RETURN(BodyExec::Bound bound, body.Bind(*p, ctx.workspace, ptrs));
    KILN_RETURN_IF_ERROR(body.Run(bound, ctx));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].present()) continue;
      const DeviceTensor src = body.Output(*p, i, ctx.workspace, ptrs);
      if (outputs[i].shape != src.shape)
        KILN_RETURN_IF_ERROR(FitOutput(n_, outputs[i], src.shape, MaxOutputElements(i, inputs), "output", i));
      KILN_RETURN_IF_ERROR(Copy(outputs[i].data, src.data, src.nbytes(), ctx.stream));
    }
    return Status::Ok();
  }

 private:
  const BodyExec& Branch(int b) const { return b == 0 ? then_ : else_; }
  std::vector<BodyInput> Bindings(const std::vector<DeviceTensor>& inputs) const {
    std::vector<BodyInput> r;
    for (size_t i = inputs.size() - CapturedInputCount(n_); i < inputs.size(); ++i) r.push_back(Binding(inputs[i], true));
    return r;
  }

  const Node& n_;
  BodyExec then_, else_;
};

// A Loop whose body's shapes follow the iteration number is planned once per iteration up to this many iterations.
constexpr int64_t kMaxUnrolledIterations = 64;

// ---- Loop ----
class LoopLayer final : public Layer {
 public:
  LoopLayer(const Node& n, bool tf32) : n_(n), body_(n, "body", *BodyOf(n, "body"), tf32) {
    const Graph& g = *BodyOf(n, "body");
    k_ = CapturedInputCount(n);
    carried_ = n.inputs.size() - 2 - k_;
    scans_ = g.outputs.size() - 1 - carried_;
    cond_passes_ = LoopBodyKeepsCondition(g);
    for (size_t i = 0; i <= carried_; ++i) {
      const Value* out = g.outputs[i];
      out_is_input_.push_back(std::find(g.inputs.begin(), g.inputs.end(), out) != g.inputs.end());
    }
  }

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& inputs, const std::vector<DeviceTensor>&) const override {
    auto plans = Plans(inputs);
    if (!plans.ok()) return 0;
    size_t most = 0;
    for (const BodyExec::Plan* p : *plans) most = std::max(most, p->bytes());
    return Layout(inputs).bytes + most;
  }

  // Loop-carried outputs: their entry size. Scan outputs: M iterations' worth where the host knows M.
  int64_t MaxOutputElements(size_t i, const std::vector<DeviceTensor>& inputs) const override {
    if (i < carried_) return inputs[2 + i].numel();
    if (!inputs[0].present() || !inputs[0].host || inputs[0].host->numel() != 1) return -1;
    auto plans = Plans(inputs);
    if (!plans.ok()) return -1;
    const int64_t m = std::max<int64_t>(0, inputs[0].host->GetAsInt(0));
    const int64_t elems = NumElements(ToStatic(plans->front()->shaped->outputs[1 + i]->shape));
    if (elems > 0 && m > (int64_t{1} << 40) / elems) return -1;
    return m * elems;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    const cudaStream_t s = ctx.stream;
    KILN_ASSIGN_OR_RETURN(const std::vector<const BodyExec::Plan*> plans, Plans(inputs));
    const Slots own = Layout(inputs);
    if (ctx.workspace_bytes < WorkspaceBytes(inputs, outputs))
      return Err(StatusCode::kInternal, "{}: needs {} bytes of scratch, {} given", n_.Where(),
                 WorkspaceBytes(inputs, outputs), ctx.workspace_bytes);
    const bool has_m = inputs[0].present(), has_cond = inputs[1].present();
    int64_t m = 0;
    if (has_m) {
      KILN_ASSIGN_OR_RETURN(Tensor t, ReadOnHost(n_, inputs[0], s, "trip count"));
      if (t.numel() != 1)
        return Err(StatusCode::kInvalidArgument, "{}: M must hold one element, not {}", n_.Where(), t.Describe());
      m = std::max<int64_t>(0, t.GetAsInt(0));
    }
    bool keep = true;
    if (has_cond) {
      KILN_ASSIGN_OR_RETURN(Tensor t, ReadOnHost(n_, inputs[1], s, "condition"));
      KILN_ASSIGN_OR_RETURN(keep, Truth(n_, t, "the condition"));
    }
    // The body's condition decides only where a condition input is given and the body changes it.
    const bool cond_decides = has_cond && !cond_passes_;
    if (!has_m && !cond_decides && keep)
      return Err(StatusCode::kInvalidArgument, "{}: has no trip count and its condition never changes: it would never "
                 "end", n_.Where());

    // Own scratch: iteration number, condition, the loop-carried values and their staging copies.
    size_t at = 0;
    auto* iter = static_cast<int64_t*>(At(ctx, at));
    at += kAlign;
    std::vector<Carry> carries(1 + carried_);
    for (size_t c = 0; c <= carried_; ++c) {
      const size_t bytes = c == 0 ? 1 : inputs[1 + c].nbytes();
      carries[c].bytes = bytes;
      carries[c].dst = At(ctx, at);
      at += AlignUp(bytes);
      carries[c].stage = At(ctx, at);
      at += AlignUp(bytes);
    }
    void* scratch = At(ctx, own.bytes);
    KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(iter, 0, sizeof(int64_t), s));
    if (has_cond) KILN_RETURN_IF_ERROR(Copy(carries[0].dst, inputs[1].data, 1, s));
    else KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(carries[0].dst, 1, 1, s));
    for (size_t i = 0; i < carried_; ++i)
      KILN_RETURN_IF_ERROR(Copy(carries[1 + i].dst, inputs[2 + i].data, inputs[2 + i].nbytes(), s));

    std::vector<void*> ptrs = {iter};
    for (const Carry& c : carries) ptrs.push_back(c.dst);
    for (size_t i = inputs.size() - k_; i < inputs.size(); ++i) ptrs.push_back(inputs[i].data);
    // One binding per plan (a single plan, or one per iteration where the body's shapes follow the iteration).
    struct Step {
      BodyExec::Bound bound;
      std::vector<DeviceTensor> sources, scanned;  // the carried values' and scan outputs' sources
    };
    std::vector<Step> steps;
    for (const BodyExec::Plan* p : plans) {
      Step st;
      KILN_ASSIGN_OR_RETURN(st.bound, body_.Bind(*p, scratch, ptrs));
      for (size_t c = 0; c <= carried_; ++c) st.sources.push_back(body_.Output(*p, c, scratch, ptrs));
      for (size_t i = 0; i < carried_; ++i)
        KILN_RETURN_IF_ERROR(CheckShape(n_, st.sources[1 + i], inputs[2 + i].shape, "loop-carried value", i));
      for (size_t j = 0; j < scans_; ++j) {
        st.scanned.push_back(body_.Output(*p, 1 + carried_ + j, scratch, ptrs));
        if (!steps.empty() && st.scanned[j].shape != steps[0].scanned[j].shape)
          return Err(StatusCode::kInvalidArgument, "{}: scan output {} is [{}] at one iteration and [{}] at another; "
                     "they must agree to be stacked", n_.Where(), j, fmt::join(steps[0].scanned[j].shape, ","),
                     fmt::join(st.scanned[j].shape, ","));
      }
      steps.push_back(std::move(st));
    }
    // Scan outputs: room for as many elements as inference gave (an exact trip count) or the bound given.
    std::vector<int64_t> capacity;
    for (size_t j = 0; j < scans_; ++j) {
      const DeviceTensor* o = carried_ + j < outputs.size() ? &outputs[carried_ + j] : nullptr;
      capacity.push_back(!o || !o->present() ? -1 : !o->shape.empty() ? o->numel()
                                                                      : MaxOutputElements(carried_ + j, inputs));
    }
    const std::vector<DeviceTensor>& scanned = steps[0].scanned;

    const bool exact = has_m && !cond_decides;
    const int64_t trips = exact ? (keep ? m : 0) : -1;
    int64_t it = 0;
    for (;; ++it) {
      if (exact && it >= trips) break;
      if (!exact) {
        if (has_m && it >= m) break;
        if (it > 0) {
          DeviceTensor c{carries[0].dst, DataType::kBool, {}, nullptr};
          KILN_ASSIGN_OR_RETURN(Tensor t, ReadOnHost(n_, c, s, "condition"));
          keep = t.GetAsDouble(0) != 0;
        }
        if (!keep) break;
      }
      if (plans.size() > 1 && static_cast<size_t>(it) >= plans.size())
        return Err(StatusCode::kInternal, "{}: planned {} iterations, running more", n_.Where(), plans.size());
      Step& step = steps[plans.size() > 1 ? static_cast<size_t>(it) : 0];
      KILN_RETURN_IF_ERROR(body_.Run(step.bound, ctx));
      for (size_t j = 0; j < scans_; ++j) {
        DeviceTensor* o = carried_ + j < outputs.size() ? &outputs[carried_ + j] : nullptr;
        if (!o || !o->present()) continue;
        const bool fits = (it + 1) * scanned[j].numel() <= capacity[j];
        if (!fits)
          return Err(StatusCode::kInternal, "{}: scan output {} has room for fewer iterations than run", n_.Where(), j);
        KILN_RETURN_IF_ERROR(Copy(static_cast<uint8_t*>(o->data) + static_cast<size_t>(it) * scanned[j].nbytes(),
                                  step.scanned[j].data, scanned[j].nbytes(), s));
      }
      std::vector<Carry> moving(carries.begin() + (cond_decides ? 0 : 1), carries.end());
      std::vector<DeviceTensor> from(step.sources.begin() + (cond_decides ? 0 : 1), step.sources.end());
      std::vector<bool> from_input(out_is_input_.begin() + (cond_decides ? 0 : 1), out_is_input_.end());
      KILN_RETURN_IF_ERROR(CarryOver(moving, from, from_input, s));
      KILN_CUDA_RETURN_IF_ERROR(LaunchIncrementInt64(iter, s));
    }
    for (size_t i = 0; i < carried_ && i < outputs.size(); ++i) {
      if (!outputs[i].present()) continue;
      KILN_RETURN_IF_ERROR(FitOutput(n_, outputs[i], inputs[2 + i].shape, inputs[2 + i].numel(), "loop-carried value", i));
      KILN_RETURN_IF_ERROR(Copy(outputs[i].data, carries[1 + i].dst, carries[1 + i].bytes, s));
    }
    for (size_t j = 0; j < scans_ && carried_ + j < outputs.size(); ++j) {
      DeviceTensor& o = outputs[carried_ + j];
      if (!o.present()) continue;
      std::vector<int64_t> shape = scanned[j].shape;  // [iterations, ...]
      shape.insert(shape.begin(), it);
      KILN_RETURN_IF_ERROR(FitOutput(n_, o, shape, capacity[j], "scan output", j));
    }
    return Status::Ok();
  }

 private:
  // The body's plans at these inputs: one for every iteration; or, where the body's shapes follow the iteration
  // number (a Slice by it), the host knows the trip count (at most kMaxUnrolledIterations) and no condition can end
  // the loop early, one per iteration with the iteration number folded in. Planned outside captures, so a CUDA graph
  // captures such a loop too.
  Result<std::vector<const BodyExec::Plan*>> Plans(const std::vector<DeviceTensor>& inputs) const {
    auto one = body_.PlanFor(Bindings(inputs));
    if (one.ok()) return std::vector<const BodyExec::Plan*>{*one};
    const bool cond_decides = inputs[1].present() && !cond_passes_;
    if (one.status().code() != StatusCode::kUnsupported || cond_decides || !inputs[0].present() || !inputs[0].host ||
        inputs[0].host->numel() != 1)
      return one.status();
    const int64_t m = std::max<int64_t>(0, inputs[0].host->GetAsInt(0));
    if (m > kMaxUnrolledIterations)
      return one.status().WithContext(fmt::format("(its {} iterations are more than the {} kiln plans one by one)", m,
                                                  kMaxUnrolledIterations));
    std::vector<const BodyExec::Plan*> r;
    for (int64_t it = 0; it < std::max<int64_t>(m, 1); ++it) {
      KILN_ASSIGN_OR_RETURN(const BodyExec::Plan* p, body_.PlanFor(Bindings(inputs, IterationValue(it))));
      r.push_back(p);
    }
    return r;
  }
  // A stable host tensor holding iteration number `it`.
  const Tensor* IterationValue(int64_t it) const {
    std::lock_guard<std::mutex> lock(iter_mu_);
    auto [pos, fresh] = iterations_.try_emplace(it);
    if (fresh) pos->second = Tensor::Scalar(DataType::kInt64, static_cast<double>(it));
    return &pos->second;
  }
  std::vector<BodyInput> Bindings(const std::vector<DeviceTensor>& inputs, const Tensor* iteration = nullptr) const {
    std::vector<BodyInput> r = {BodyInput{DataType::kInt64, {}, iteration}, BodyInput{DataType::kBool, {}, nullptr}};
    for (size_t i = 0; i < carried_; ++i) r.push_back(Binding(inputs[2 + i], false));
    for (size_t i = inputs.size() - k_; i < inputs.size(); ++i) r.push_back(Binding(inputs[i], true));
    return r;
  }
  Slots Layout(const std::vector<DeviceTensor>& inputs) const {
    Slots s;
    s.Add(sizeof(int64_t));
    for (size_t c = 0; c <= carried_; ++c) {
      const size_t bytes = c == 0 ? 1 : inputs[1 + c].nbytes();
      s.Add(bytes);
      s.Add(bytes);
    }
    return s;
  }

  const Node& n_;
  BodyExec body_;
  size_t k_ = 0, carried_ = 0, scans_ = 0;
  bool cond_passes_ = false;
  std::vector<bool> out_is_input_;  // per carried value (condition first): the body output is a body input
  mutable std::mutex iter_mu_;
  mutable std::map<int64_t, Tensor> iterations_;
};

// ---- Scan ----
class ScanLayer final : public Layer {
 public:
  ScanLayer(const Node& n, bool tf32) : n_(n), body_(n, "body", *BodyOf(n, "body"), tf32) {
    const Graph& g = *BodyOf(n, "body");
    first_ = n.opset > 0 && n.opset < 9 ? 1 : 0;
    k_ = CapturedInputCount(n);
    m_ = static_cast<size_t>(n.geti("num_scan_inputs", 0));
    states_ = n.inputs.size() - k_ - m_ - first_;
    scans_ = g.outputs.size() - states_;
    for (size_t i = 0; i < states_; ++i)
      out_is_input_.push_back(std::find(g.inputs.begin(), g.inputs.end(), g.outputs[i]) != g.inputs.end());
  }

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& inputs, const std::vector<DeviceTensor>&) const override {
    auto b = Bindings(inputs);
    if (!b.ok()) return 0;
    auto p = body_.PlanFor(*b);
    return p.ok() ? Layout(*b) + (*p)->bytes() : 0;
  }

  // The exact element count of output i, from the body planned at these inputs (engines call this only where shape
  // inference leaves an output open).
  int64_t MaxOutputElements(size_t i, const std::vector<DeviceTensor>& inputs) const override {
    auto b = Bindings(inputs);
    if (!b.ok()) return -1;
    auto p = body_.PlanFor(*b);
    if (!p.ok() || i >= (*p)->shaped->outputs.size()) return -1;
    const int64_t elems = NumElements(ToStatic((*p)->shaped->outputs[i]->shape));
    const DeviceTensor& x = inputs[first_ + states_];  // the first scan input
    if (first_) return (x.shape.size() < 2 ? 0 : i < states_ ? x.shape[0] : x.shape[0] * x.shape[1]) * elems;
    if (i < states_) return elems;
    const std::vector<int64_t> axes = Ints("scan_input_axes", m_);
    const auto rank = static_cast<int64_t>(x.shape.size());
    const int64_t a = axes[0] < 0 ? axes[0] + rank : axes[0];
    return a < 0 || a >= rank ? -1 : x.shape[static_cast<size_t>(a)] * elems;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    KILN_ASSIGN_OR_RETURN(std::vector<BodyInput> bindings, Bindings(inputs));
    KILN_ASSIGN_OR_RETURN(const BodyExec::Plan* p, body_.PlanFor(bindings));
    const size_t own = Layout(bindings);
    if (ctx.workspace_bytes < own + p->bytes())
      return Err(StatusCode::kInternal, "{}: needs {} bytes of scratch, {} given", n_.Where(), own + p->bytes(),
                 ctx.workspace_bytes);
    // Own scratch: per state its buffer and staging copy, per scan input its slice.
    size_t at = 0;
    std::vector<Carry> carries(states_);
    for (size_t i = 0; i < states_; ++i) {
      const size_t bytes = static_cast<size_t>(NumElements(bindings[i].shape)) * DataTypeSize(bindings[i].dtype);
      carries[i] = Carry{At(ctx, at), At(ctx, at + AlignUp(bytes)), bytes};
      at += 2 * AlignUp(bytes);
    }
    std::vector<void*> slices;
    for (size_t j = 0; j < m_; ++j) {
      const BodyInput& b = bindings[states_ + j];
      slices.push_back(At(ctx, at));
      at += AlignUp(static_cast<size_t>(NumElements(b.shape)) * DataTypeSize(b.dtype));
    }
    void* scratch = At(ctx, own);
    std::vector<void*> ptrs;
    for (const Carry& c : carries) ptrs.push_back(c.dst);
    for (void* x : slices) ptrs.push_back(x);
    for (size_t i = inputs.size() - k_; i < inputs.size(); ++i) ptrs.push_back(inputs[i].data);
    KILN_ASSIGN_OR_RETURN(BodyExec::Bound bound, body_.Bind(*p, scratch, ptrs));
    std::vector<DeviceTensor> sources, scanned;
    for (size_t i = 0; i < states_; ++i) {
      sources.push_back(body_.Output(*p, i, scratch, ptrs));
      KILN_RETURN_IF_ERROR(CheckShape(n_, sources[i], bindings[i].shape, "state", i));
    }
    for (size_t j = 0; j < scans_; ++j) scanned.push_back(body_.Output(*p, states_ + j, scratch, ptrs));
    return first_ ? RunScan8(ctx, inputs, outputs, bound, carries, sources, scanned, slices)
                  : RunScan9(ctx, inputs, outputs, bound, carries, sources, scanned, slices);
  }

 private:
  Status RunScan9(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs, std::vector<DeviceTensor>& outputs,
                  BodyExec::Bound& bound, const std::vector<Carry>& carries, const std::vector<DeviceTensor>& sources,
                  const std::vector<DeviceTensor>& scanned, const std::vector<void*>& slices) const {
    const cudaStream_t s = ctx.stream;
    const std::vector<int64_t> in_axes = Ints("scan_input_axes", m_), in_dirs = Ints("scan_input_directions", m_);
    const std::vector<int64_t> out_axes = Ints("scan_output_axes", scans_);
    const std::vector<int64_t> out_dirs = Ints("scan_output_directions", scans_);
    int64_t steps = 0;
    struct Geometry {
      int64_t outer = 1, steps = 0;
      size_t inner = 0;
    };
    std::vector<Geometry> xs(m_), ys(scans_);
    for (size_t j = 0; j < m_; ++j) {
      const DeviceTensor& x = inputs[states_ + j];
      const auto rank = static_cast<int64_t>(x.shape.size());
      const int64_t a = in_axes[j] < 0 ? in_axes[j] + rank : in_axes[j];
      if (a < 0 || a >= rank)
        return Err(StatusCode::kInvalidArgument, "{}: scan_input_axes[{}] is outside rank {}", n_.Where(), j, rank);
      xs[j].steps = x.shape[static_cast<size_t>(a)];
      for (int64_t d = 0; d < a; ++d) xs[j].outer *= x.shape[static_cast<size_t>(d)];
      xs[j].inner = DataTypeSize(x.dtype);
      for (int64_t d = a + 1; d < rank; ++d) xs[j].inner *= static_cast<size_t>(x.shape[static_cast<size_t>(d)]);
      if (j > 0 && xs[j].steps != steps)
        return Err(StatusCode::kInvalidArgument, "{}: scan inputs have {} and {} steps; they must agree", n_.Where(),
                   steps, xs[j].steps);
      steps = xs[j].steps;
    }
    for (size_t j = 0; j < scans_; ++j) {
      const DeviceTensor& y = scanned[j];
      const auto rank = static_cast<int64_t>(y.shape.size()) + 1;
      const int64_t a = out_axes[j] < 0 ? out_axes[j] + rank : out_axes[j];
      if (a < 0 || a >= rank)
        return Err(StatusCode::kInvalidArgument, "{}: scan_output_axes[{}] is outside rank {}", n_.Where(), j, rank);
      ys[j].steps = steps;
      for (int64_t d = 0; d < a; ++d) ys[j].outer *= y.shape[static_cast<size_t>(d)];
      ys[j].inner = DataTypeSize(y.dtype);
      for (int64_t d = a; d < rank - 1; ++d) ys[j].inner *= static_cast<size_t>(y.shape[static_cast<size_t>(d)]);
      if (states_ + j < outputs.size() && outputs[states_ + j].present()) {
        std::vector<int64_t> want = y.shape;
        want.insert(want.begin() + a, steps);
        KILN_RETURN_IF_ERROR(FitOutput(n_, outputs[states_ + j], want, MaxOutputElements(states_ + j, inputs),
                                       "scan output", j));
      }
    }
    for (size_t i = 0; i < states_; ++i) {
      KILN_RETURN_IF_ERROR(Copy(carries[i].dst, inputs[i].data, carries[i].bytes, s));
      if (i < outputs.size() && outputs[i].present())
        KILN_RETURN_IF_ERROR(FitOutput(n_, outputs[i], inputs[i].shape, inputs[i].numel(), "state", i));
    }
    for (int64_t t = 0; t < steps; ++t) {
      for (size_t j = 0; j < m_; ++j)
        KILN_RETURN_IF_ERROR(TakeSlice(slices[j], inputs[states_ + j].data, xs[j].outer, steps, xs[j].inner,
                                       in_dirs[j] == 1 ? steps - 1 - t : t, s));
      KILN_RETURN_IF_ERROR(body_.Run(bound, ctx));
      for (size_t j = 0; j < scans_ && states_ + j < outputs.size(); ++j)
        if (outputs[states_ + j].present())
          KILN_RETURN_IF_ERROR(PutSlice(outputs[states_ + j].data, scanned[j].data, ys[j].outer, steps, ys[j].inner,
                                        out_dirs[j] == 1 ? steps - 1 - t : t, s));
      KILN_RETURN_IF_ERROR(CarryOver(carries, sources, out_is_input_, s));
    }
    for (size_t i = 0; i < states_ && i < outputs.size(); ++i)
      if (outputs[i].present()) KILN_RETURN_IF_ERROR(Copy(outputs[i].data, carries[i].dst, carries[i].bytes, s));
    return Status::Ok();
  }

  // Scan-8: axis 0 of every state and scan input is the batch, axis 1 of scan inputs the steps; each batch entry
  // runs its first sequence_lens[b] steps, and scan outputs are zero past them.
  Status RunScan8(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs, std::vector<DeviceTensor>& outputs,
                  BodyExec::Bound& bound, const std::vector<Carry>& carries, const std::vector<DeviceTensor>& sources,
                  const std::vector<DeviceTensor>& scanned, const std::vector<void*>& slices) const {
    const cudaStream_t s = ctx.stream;
    const std::vector<int64_t> dirs = Ints("directions", m_);
    const DeviceTensor& x0 = inputs[1 + states_];
    const int64_t batch = x0.shape[0], max_steps = x0.shape[1];
    for (size_t i = 0; i < states_ + scans_ && i < outputs.size(); ++i) {
      if (!outputs[i].present()) continue;
      std::vector<int64_t> want = i < states_ ? inputs[1 + i].shape : scanned[i - states_].shape;
      if (i >= states_) want.insert(want.begin(), {batch, max_steps});
      KILN_RETURN_IF_ERROR(FitOutput(n_, outputs[i], want, MaxOutputElements(i, inputs), i < states_ ? "state" : "scan output",
                                     i < states_ ? i : i - states_));
    }
    std::vector<int64_t> lens(static_cast<size_t>(batch), max_steps);
    if (inputs[0].present()) {
      KILN_ASSIGN_OR_RETURN(Tensor l, ReadOnHost(n_, inputs[0], s, "sequence_lens"));
      if (l.numel() != batch)
        return Err(StatusCode::kInvalidArgument, "{}: sequence_lens holds {} lengths for a batch of {}", n_.Where(),
                   l.numel(), batch);
      for (int64_t b = 0; b < batch; ++b) {
        lens[static_cast<size_t>(b)] = l.GetAsInt(b);
        if (lens[static_cast<size_t>(b)] < 0 || lens[static_cast<size_t>(b)] > max_steps)
          return Err(StatusCode::kInvalidArgument, "{}: sequence_lens[{}] is {}, outside [0, {}]", n_.Where(), b,
                     lens[static_cast<size_t>(b)], max_steps);
      }
      for (size_t j = 0; j < scans_ && states_ + j < outputs.size(); ++j)
        if (outputs[states_ + j].present() && outputs[states_ + j].nbytes())
          KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(outputs[states_ + j].data, 0, outputs[states_ + j].nbytes(), s));
    }
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t steps = lens[static_cast<size_t>(b)];
      for (size_t i = 0; i < states_; ++i)
        KILN_RETURN_IF_ERROR(Copy(carries[i].dst,
                                  static_cast<const uint8_t*>(inputs[1 + i].data) + static_cast<size_t>(b) * carries[i].bytes,
                                  carries[i].bytes, s));
      for (int64_t t = 0; t < steps; ++t) {
        for (size_t j = 0; j < m_; ++j) {
          const DeviceTensor& x = inputs[1 + states_ + j];
          const size_t slice = x.nbytes() / static_cast<size_t>(std::max<int64_t>(1, batch * max_steps));
          const int64_t at = b * max_steps + (dirs[j] == 1 ? steps - 1 - t : t);
          KILN_RETURN_IF_ERROR(Copy(slices[j], static_cast<const uint8_t*>(x.data) + static_cast<size_t>(at) * slice,
                                    slice, s));
        }
        KILN_RETURN_IF_ERROR(body_.Run(bound, ctx));
        for (size_t j = 0; j < scans_ && states_ + j < outputs.size(); ++j)
          if (outputs[states_ + j].present())
            KILN_RETURN_IF_ERROR(Copy(static_cast<uint8_t*>(outputs[states_ + j].data) +
                                          static_cast<size_t>(b * max_steps + t) * scanned[j].nbytes(),
                                      scanned[j].data, scanned[j].nbytes(), s));
        KILN_RETURN_IF_ERROR(CarryOver(carries, sources, out_is_input_, s));
      }
      for (size_t i = 0; i < states_ && i < outputs.size(); ++i)
        if (outputs[i].present())
          KILN_RETURN_IF_ERROR(Copy(static_cast<uint8_t*>(outputs[i].data) + static_cast<size_t>(b) * carries[i].bytes,
                                    carries[i].dst, carries[i].bytes, s));
    }
    return Status::Ok();
  }

  std::vector<int64_t> Ints(const char* attr, size_t count) const {
    std::vector<int64_t> v = n_.getints(attr);
    if (v.size() != count) v.assign(count, 0);
    return v;
  }
  Result<std::vector<BodyInput>> Bindings(const std::vector<DeviceTensor>& inputs) const {
    std::vector<BodyInput> r;
    const std::vector<int64_t> axes = first_ ? std::vector<int64_t>(m_, 1) : Ints("scan_input_axes", m_);
    for (size_t i = 0; i < states_; ++i) {
      BodyInput b = Binding(inputs[first_ + i], false);
      if (first_) {
        if (b.shape.empty()) return Err(StatusCode::kInvalidArgument, "{}: state {} has no batch axis", n_.Where(), i);
        b.shape.erase(b.shape.begin());
      }
      r.push_back(std::move(b));
    }
    for (size_t j = 0; j < m_; ++j) {
      BodyInput b = Binding(inputs[first_ + states_ + j], false);
      const auto rank = static_cast<int64_t>(b.shape.size());
      const int64_t a = axes[j] < 0 ? axes[j] + rank : axes[j];
      if (a < 0 || a >= rank || (first_ && rank < 2))
        return Err(StatusCode::kInvalidArgument, "{}: scan input {} of rank {} has no axis {}", n_.Where(), j, rank,
                   axes[j]);
      b.shape.erase(b.shape.begin() + a);
      if (first_) b.shape.erase(b.shape.begin());
      r.push_back(std::move(b));
    }
    for (size_t i = inputs.size() - k_; i < inputs.size(); ++i) r.push_back(Binding(inputs[i], true));
    return r;
  }
  size_t Layout(const std::vector<BodyInput>& bindings) const {
    Slots s;
    for (size_t i = 0; i < states_ + m_; ++i) {
      const size_t bytes = static_cast<size_t>(NumElements(bindings[i].shape)) * DataTypeSize(bindings[i].dtype);
      s.Add(bytes);
      if (i < states_) s.Add(bytes);
    }
    return s.bytes;
  }

  const Node& n_;
  BodyExec body_;
  size_t first_ = 0, k_ = 0, m_ = 0, states_ = 0, scans_ = 0;
  std::vector<bool> out_is_input_;
};

// ---- the factories ----

// The bindings of the node's bodies at the tuning shapes, where every input's shape is known there.
std::optional<std::vector<DeviceTensor>> TunedInputs(const LayerSpec& spec) {
  std::vector<DeviceTensor> r;
  for (size_t i = 0; i < spec.node.inputs.size(); ++i) {
    const Value* v = spec.node.inputs[i];
    DeviceTensor t;
    if (v) {
      const bool scalar = v->has_shape && v->shape.empty();
      if (i >= spec.input_shapes.size() || (spec.input_shapes[i].empty() && !scalar)) return std::nullopt;
      t.dtype = v->dtype;
      t.shape = spec.input_shapes[i];
      if (v->is_const()) t.host = &*v->const_value;
    }
    r.push_back(std::move(t));
  }
  return r;
}

Result<std::vector<std::string>> ControlFlowTactics(const LayerSpec& spec) {
  const Node& n = spec.node;
  for (const auto* list : {&n.inputs, &n.outputs})
    for (const Value* v : *list)
      if (v && v->kind != ValueKind::kTensor)
        return Err(StatusCode::kUnsupported, "{}: '{}' is {}; GPU engines hold tensors only", n.Where(), v->name,
                   AValueKind(v->kind));
  std::vector<const char*> attrs = n.op_type == "If" ? std::vector<const char*>{"then_branch", "else_branch"}
                                                     : std::vector<const char*>{"body"};
  for (const char* a : attrs)
    if (!BodyOf(n, a)) return Err(StatusCode::kInvalidModel, "{}: has no graph attribute '{}'", n.Where(), a);
  // Plan the bodies at the tuning shapes where they are known: each must have fixed shapes and layers for its nodes.
  const auto tuned = TunedInputs(spec);
  if (!tuned) {
    for (const char* a : attrs) KILN_RETURN_IF_ERROR(CheckBodyLayers(n, a, *BodyOf(n, a), spec.allow_tf32));
    return std::vector<std::string>{"default"};
  }
  const size_t k = CapturedInputCount(n);
  std::vector<BodyInput> captured;
  for (size_t i = tuned->size() - k; i < tuned->size(); ++i) captured.push_back(Binding((*tuned)[i], true));
  std::vector<std::vector<BodyInput>> bindings;
  std::vector<size_t> state_first_in, state_first_out, states;
  if (n.op_type == "If") {
    bindings = {captured, captured};
  } else if (n.op_type == "Loop") {
    const size_t carried = n.inputs.size() - 2 - k;
    std::vector<BodyInput> b = {BodyInput{DataType::kInt64, {}, nullptr}, BodyInput{DataType::kBool, {}, nullptr}};
    for (size_t i = 0; i < carried; ++i) b.push_back(Binding((*tuned)[2 + i], false));
    b.insert(b.end(), captured.begin(), captured.end());
    bindings = {b};
  } else {
    const size_t first = n.opset > 0 && n.opset < 9 ? 1 : 0;
    const auto m = static_cast<size_t>(n.geti("num_scan_inputs", 0));
    const size_t st = n.inputs.size() - k - m - first;
    const std::vector<int64_t> axes = first ? std::vector<int64_t>(m, 1) : n.getints("scan_input_axes");
    std::vector<BodyInput> b;
    for (size_t i = 0; i < st + m; ++i) {
      BodyInput x = Binding((*tuned)[first + i], false);
      if (i >= st) {
        const auto rank = static_cast<int64_t>(x.shape.size());
        const int64_t ax = axes.size() == m ? axes[i - st] : 0;
        const int64_t a = ax < 0 ? ax + rank : ax;
        if (a < 0 || a >= rank) return Err(StatusCode::kInvalidModel, "{}: scan input {} has no axis {}", n.Where(), i - st, ax);
        x.shape.erase(x.shape.begin() + a);
      }
      if (first && !x.shape.empty()) x.shape.erase(x.shape.begin());
      b.push_back(std::move(x));
    }
    b.insert(b.end(), captured.begin(), captured.end());
    bindings = {b};
  }
  // A body planned at these bindings: fixed shapes, layers for its nodes, and (Loop, Scan) carried values that keep
  // their shapes from one iteration to the next.
  auto check = [&](const char* attr, const std::vector<BodyInput>& b) -> Status {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, ShapeBody(n, attr, *BodyOf(n, attr), b, /*require_static=*/true));
    KILN_RETURN_IF_ERROR(CheckBodyLayers(n, attr, *g, spec.allow_tf32));
    if (n.op_type == "If") return Status::Ok();
    const size_t first_in = n.op_type == "Loop" ? 2 : 0, first_out = n.op_type == "Loop" ? 1 : 0;
    const size_t count = n.op_type == "Loop" ? n.inputs.size() - 2 - k
                                             : n.inputs.size() - k - static_cast<size_t>(n.geti("num_scan_inputs", 0)) -
                                                   (n.opset > 0 && n.opset < 9 ? 1 : 0);
    for (size_t i = 0; i < count; ++i) {
      const Value* out = g->outputs[first_out + i];
      if (ToStatic(out->shape) != b[first_in + i].shape)
        return Err(StatusCode::kUnsupported, "{}: loop-carried value {} enters as [{}] and leaves the body as {}; "
                   "values that change shape between iterations run on the CPU", n.Where(), i,
                   fmt::join(b[first_in + i].shape, ","), ShapeToString(out->shape));
    }
    return Status::Ok();
  };
  Status first_error = Status::Ok();
  int planned = 0;
  for (size_t a = 0; a < attrs.size(); ++a) {
    Status st = check(attrs[a], bindings[a]);
    // A Loop whose body shapes follow the iteration number: planned once per iteration where M is a constant of at
    // most LoopLayer's limit and no condition ends it early (the layer does the same at run time).
    const Value* m = n.input(0);
    if (!st.ok() && st.code() == StatusCode::kUnsupported && n.op_type == "Loop" && m && m->is_const() &&
        m->const_value->numel() == 1 && (!n.input(1) || LoopBodyKeepsCondition(*BodyOf(n, "body")))) {
      const int64_t trips = std::max<int64_t>(0, m->const_value->GetAsInt(0));
      if (trips <= kMaxUnrolledIterations) {
        Status each = Status::Ok();
        for (int64_t it = 0; it < std::max<int64_t>(trips, 1) && each.ok(); ++it) {
          const Tensor iter = Tensor::Scalar(DataType::kInt64, static_cast<double>(it));
          std::vector<BodyInput> b = bindings[a];
          b[0].host = &iter;
          each = check(attrs[a], b);
        }
        if (each.ok()) st = Status::Ok();
      }
    }
    if (st.ok()) {
      ++planned;
      continue;
    }
    // A branch the GPU cannot run is refused (the node then falls back whole); an If may only carry a branch whose
    // inference fails at these shapes (exporters guard shape-specific code so), as long as its other branch plans.
    if (st.code() == StatusCode::kUnsupported || n.op_type != "If") return Status(StatusCode::kUnsupported, st.message());
    if (first_error.ok()) first_error = st;
  }
  if (planned == 0) return Status(StatusCode::kUnsupported, first_error.message());
  return std::vector<std::string>{"default"};
}

template <typename L>
LayerFactory ControlFlowFactory() {
  LayerFactory f;
  f.tactics = ControlFlowTactics;
  f.create = [](const LayerSpec& spec, const std::string&) -> Result<std::unique_ptr<Layer>> {
    return std::unique_ptr<Layer>(std::make_unique<L>(spec.node, spec.allow_tf32));
  };
  f.compute_types = {DataType::kFloat32};  // bodies keep the types they were written with
  return f;
}

}  // namespace

void RegisterControlFlowLayers(LayerRegistry& r) {
  r.Add("If", ControlFlowFactory<IfLayer>());
  r.Add("Loop", ControlFlowFactory<LoopLayer>());
  r.Add("Scan", ControlFlowFactory<ScanLayer>());
}

}  // namespace kiln::cuda
