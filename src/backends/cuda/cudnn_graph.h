// A thin C++ layer over the cuDNN 9 backend (graph) API: owned descriptors, builders for the descriptors the conv
// layers use (tensors, convolution, pointwise, operations, operation graph), heuristics, engine configurations
// named as tactic strings, execution plans and execution. Only descriptors and attributes present in every cuDNN
// 9.x release are used (no cudnn-frontend).
//
// Plans are built with a process-wide cuDNN handle per device (BuildHandle, created lazily) while holding
// BuildMutex(); they are executed with the stream's own handle (LaunchContext::cudnn) on the same device.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kiln/status.h"

// Checks a cuDNN call; the Status carries the statement text, cudnnGetErrorString and cudnnGetLastErrorString.
#define KILN_CUDNN_STATUS(expr)                                                         \
  ([&]() -> ::kiln::Status {                                                            \
    const cudnnStatus_t _kiln_s = (expr);                                               \
    if (_kiln_s == CUDNN_STATUS_SUCCESS) return ::kiln::Status::Ok();                   \
    return ::kiln::cuda::dnn::CudnnError(#expr, _kiln_s, __FILE__, __LINE__);            \
  }())

namespace kiln::cuda::dnn {

Status CudnnError(const char* what, cudnnStatus_t s, const char* file, int line);

// One owned cudnnBackendDescriptor_t.
class Desc {
 public:
  static Result<Desc> Create(cudnnBackendDescriptorType_t type);
  Desc() = default;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept;
  ~Desc();
  cudnnBackendDescriptor_t get() const { return d_; }

  Status Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  Status SetInt64(cudnnBackendAttributeName_t name, int64_t v) { return Set(name, CUDNN_TYPE_INT64, 1, &v); }
  Status SetInt64s(cudnnBackendAttributeName_t name, const std::vector<int64_t>& v) {
    return Set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(v.size()), v.data());
  }
  Status SetDataType(cudnnBackendAttributeName_t name, cudnnDataType_t v) {
    return Set(name, CUDNN_TYPE_DATA_TYPE, 1, &v);
  }
  Status SetFloat(cudnnBackendAttributeName_t name, float v) { return Set(name, CUDNN_TYPE_FLOAT, 1, &v); }
  Status SetDesc(cudnnBackendAttributeName_t name, const Desc& d) {
    cudnnBackendDescriptor_t raw = d.get();
    return Set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  Status Finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// The process-wide handle for building plans on the current device (created on first use; never destroyed).
Result<cudnnHandle_t> BuildHandle();
// Serializes everything that uses BuildHandle (descriptor building, heuristics, plan finalization).
std::mutex& BuildMutex();

// ---- descriptor builders ----
// A tensor with these strides; dense row-major when `strides` is empty.
Result<Desc> MakeTensor(int64_t uid, cudnnDataType_t dtype, const std::vector<int64_t>& dims, int64_t alignment,
                        bool is_virtual, const std::vector<int64_t>& strides = {});
// Channels-last strides of dims [N, C, spatial...] (NHWC / NDHWC memory; KRSC for a filter [K, C, R, S]).
std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& dims);
// Cross-correlation with float32 math; vectors have one entry per spatial dim.
Result<Desc> MakeConvolution(const std::vector<int64_t>& pre_pads, const std::vector<int64_t>& post_pads,
                             const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations);
Result<Desc> MakeConvForward(const Desc& x, const Desc& w, const Desc& y, const Desc& conv);
Result<Desc> MakeConvBackwardData(const Desc& dx, const Desc& w, const Desc& dy, const Desc& conv);
// A pointwise operation y = mode(x [, b]) with float32 math (b may be null for unary modes).
Result<Desc> MakePointwiseOp(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y);
Result<Desc> MakeOperationGraph(cudnnHandle_t handle, const std::vector<const Desc*>& ops);

// ---- engines as tactic strings ----
// An engine configuration: "eng=<global index>;knobs=<type>=<value>,..." (knobs sorted by type).
struct EngineChoice {
  int64_t engine = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs;
  std::vector<int> numerical_notes;  // cudnnBackendNumericalNote_t values (read from the engine, not named)
  std::vector<int> behavior_notes;   // cudnnBackendBehaviorNote_t values (read from the engine, not named)
  bool HasNote(cudnnBackendNumericalNote_t n) const;
  bool HasBehavior(cudnnBackendBehaviorNote_t n) const;
  std::string Name() const;
  static Result<EngineChoice> Parse(const std::string& name);
};

// The finalized engine configurations heuristics `mode` proposes for `graph`, best first.
Result<std::vector<Desc>> HeuristicConfigs(const Desc& graph, cudnnBackendHeurMode_t mode);
// Reads the engine index, knob choices, numerical and behavior notes of a finalized engine configuration.
Result<EngineChoice> DescribeConfig(const Desc& cfg);
// Rebuilds the configuration named by `choice` for `graph` (engine + knob choices, finalized). The engine
// descriptor is returned in *engine_keep, which must outlive the configuration.
Result<Desc> MakeConfig(const Desc& graph, const EngineChoice& choice, Desc* engine_keep);
// A finalized execution plan for a configuration.
Result<Desc> MakePlan(cudnnHandle_t handle, const Desc& cfg);
Result<int64_t> PlanWorkspaceBytes(const Desc& plan);

// Runs a plan: uids[i] is bound to ptrs[i].
Status Execute(cudnnHandle_t handle, const Desc& plan, const std::vector<int64_t>& uids,
               const std::vector<void*>& ptrs, void* workspace);

}  // namespace kiln::cuda::dnn
