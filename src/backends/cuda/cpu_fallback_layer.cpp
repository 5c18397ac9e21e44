// CPU fallback inside a GPU engine: a node the CUDA backend has no kernel for (its op, a dtype or an attribute)
// runs on the CPU reference kernel, in stream order. Enqueue copies the node's device inputs into the context's
// page-locked host scratch, enqueues a host callback (cudaLaunchHostFunc) that runs the CPU kernel with its outputs
// written into that scratch, and copies the outputs back. Nothing synchronizes the host, so a CUDA graph captures the
// whole sequence and replays it like any other layer.
//
// A host callback cannot return an error to the stream. An error the CPU kernel reports zero-fills the node's
// outputs and is returned by the layer's next Enqueue (the next inference), naming the node.
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cpu/kernel.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/layer.h"
#include "core/error.h"

namespace kiln::cuda {

bool CpuCanRun(const Node& node) { return cpu::Kernels().Find(node) != nullptr; }

namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Where the CPU kernel's errors wait for the next Enqueue.
struct ErrorSlot {
  std::mutex mu;
  std::string message;
};

// One staged call of the node: its inputs (views of the host scratch, or the host copies of constants) and its outputs
// (views of the host scratch). Kept as long as the layer: a captured CUDA graph calls it at every replay.
struct HostCall {
  const Node* node = nullptr;
  std::vector<Tensor> inputs;
  std::vector<bool> present;
  std::vector<Tensor> outputs;
  std::shared_ptr<ErrorSlot> error;
};

void Fail(HostCall& c, const std::string& message) {
  for (Tensor& o : c.outputs)
    if (o.nbytes()) std::memset(o.raw(), 0, o.nbytes());
  std::lock_guard<std::mutex> lock(c.error->mu);
  if (c.error->message.empty()) c.error->message = message;
}

void CUDART_CB RunOnHost(void* arg) {
  auto& c = *static_cast<HostCall*>(arg);
  std::vector<const Tensor*> ins(c.inputs.size(), nullptr);
  for (size_t i = 0; i < ins.size(); ++i)
    if (c.present[i]) ins[i] = &c.inputs[i];
  // Outputs whose type and shape inference gives at these inputs are written straight into the staging views.
  auto place = [&c](const Node&, size_t i, DataType t, const std::vector<int64_t>& shape) -> Tensor {
    if (i < c.outputs.size() && c.outputs[i].dtype() == t && c.outputs[i].shape() == shape) return c.outputs[i];
    return Tensor();
  };
  try {
    auto r = cpu::EvaluateNodeInto(*c.node, ins, place);
    if (!r.ok()) return Fail(c, r.status().message());
    for (size_t i = 0; i < c.outputs.size() && i < r->size(); ++i) {
      const Tensor& got = (*r)[i];
      Tensor& want = c.outputs[i];
      if (!want.defined() || got.raw() == want.raw()) continue;
      if (got.dtype() != want.dtype() || got.shape() != want.shape())
        return Fail(c, fmt::format("{}: the CPU kernel made output {} as {}, but the engine planned {}",
                                   c.node->Where(), i, got.Describe(), want.Describe()));
      if (got.nbytes()) std::memcpy(want.raw(), got.raw(), got.nbytes());
    }
  } catch (const std::exception& e) {  // a host callback must not throw into the CUDA runtime
    Fail(c, fmt::format("{}: the CPU kernel failed: {}", c.node->Where(), e.what()));
  }
}

class CpuFallbackLayer final : public Layer {
 public:
  explicit CpuFallbackLayer(const Node& node) : node_(node), error_(std::make_shared<ErrorSlot>()) {}

  size_t HostWorkspaceBytes(const std::vector<DeviceTensor>& inputs,
                            const std::vector<DeviceTensor>& outputs) const override {
    size_t bytes = 0;
    for (const DeviceTensor& t : inputs)
      if (t.present() && !t.host) bytes += AlignUp(t.nbytes());
    for (const DeviceTensor& t : outputs)
      if (t.present()) bytes += AlignUp(t.nbytes());
    return bytes;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    {
      std::lock_guard<std::mutex> lock(error_->mu);
      if (!error_->message.empty()) {
        std::string m = std::move(error_->message);
        error_->message.clear();
        return Err(StatusCode::kInternal, "{} (on the CPU, during the previous inference; its outputs were zeros)", m);
      }
    }
    const size_t need = HostWorkspaceBytes(inputs, outputs);
    if (need > 0 && (!ctx.host_workspace || ctx.host_workspace_bytes < need))
      return Err(StatusCode::kInternal, "{}: runs on the CPU and needs {} bytes of page-locked host scratch, {} given",
                 node_.Where(), need, ctx.host_workspace_bytes);
    auto* base = static_cast<uint8_t*>(ctx.host_workspace);
    HostCall* call = Call(ctx, inputs, outputs, base);
    size_t offset = 0;
    for (const DeviceTensor& t : inputs) {
      if (!t.present() || t.host) continue;
      if (t.nbytes())
        KILN_CUDA_RETURN_IF_ERROR(
            cudaMemcpyAsync(base + offset, t.data, t.nbytes(), cudaMemcpyDeviceToHost, ctx.stream));
      offset += AlignUp(t.nbytes());
    }
    KILN_CUDA_RETURN_IF_ERROR(cudaLaunchHostFunc(ctx.stream, RunOnHost, call));
    for (const DeviceTensor& t : outputs) {
      if (!t.present()) continue;
      if (t.nbytes())
        KILN_CUDA_RETURN_IF_ERROR(
            cudaMemcpyAsync(t.data, base + offset, t.nbytes(), cudaMemcpyHostToDevice, ctx.stream));
      offset += AlignUp(t.nbytes());
    }
    return Status::Ok();
  }

 private:
  // The staged call for these addresses and shapes (made on first use; later enqueues and graph replays reuse it).
  HostCall* Call(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 const std::vector<DeviceTensor>& outputs, uint8_t* base) const {
    std::string key = fmt::format("{}", ctx.host_workspace);
    for (const auto* list : {&inputs, &outputs})
      for (const DeviceTensor& t : *list)
        key += fmt::format("|{}:{}:{}:{}", t.data, static_cast<const void*>(t.host), static_cast<int>(t.dtype),
                           fmt::join(t.shape, "x"));
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<HostCall>& slot = calls_[key];
    if (slot) return slot.get();
    slot = std::make_unique<HostCall>();
    slot->node = &node_;
    slot->error = error_;
    size_t offset = 0;
    for (const DeviceTensor& t : inputs) {
      slot->present.push_back(t.present());
      if (!t.present()) {
        slot->inputs.emplace_back();
      } else if (t.host) {
        slot->inputs.push_back(*t.host);  // shares the constant's bytes
      } else {
        slot->inputs.push_back(Tensor::View(t.dtype, t.shape, base + offset));
        offset += AlignUp(t.nbytes());
      }
    }
    for (const DeviceTensor& t : outputs) {
      if (!t.present()) {
        slot->outputs.emplace_back();
        continue;
      }
      slot->outputs.push_back(Tensor::View(t.dtype, t.shape, base + offset));
      offset += AlignUp(t.nbytes());
    }
    return slot.get();
  }

  const Node& node_;
  std::shared_ptr<ErrorSlot> error_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<HostCall>> calls_;
};

}  // namespace

Result<std::unique_ptr<Layer>> CreateCpuFallbackLayer(const LayerSpec& spec) {
  if (!CpuCanRun(spec.node))
    return Err(StatusCode::kUnsupported, "{}: neither the CUDA backend nor the CPU backend has a kernel for op type {}",
               spec.node.Where(), spec.node.op_type);
  return std::unique_ptr<Layer>(std::make_unique<CpuFallbackLayer>(spec.node));
}

}  // namespace kiln::cuda
