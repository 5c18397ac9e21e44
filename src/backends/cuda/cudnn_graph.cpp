// The cuDNN backend-API wrapper (see cudnn_graph.h).
#include "backends/cuda/cudnn_graph.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "core/error.h"

namespace kiln::cuda::dnn {

Status CudnnError(const char* what, cudnnStatus_t s, const char* file, int line) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  return Err(StatusCode::kCudaError, "{} failed: {} ({}){}{} at {}:{}", what, cudnnGetErrorString(s),
             static_cast<int>(s), last[0] ? ": " : "", last, file, line);
}

Result<Desc> Desc::Create(cudnnBackendDescriptorType_t type) {
  Desc d;
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(cudnnBackendCreateDescriptor(type, &d.d_)));
  return d;
}

Desc& Desc::operator=(Desc&& o) noexcept {
  if (this != &o) {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    o.d_ = nullptr;
  }
  return *this;
}

Desc::~Desc() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

Status Desc::Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                 const void* values) {
  return KILN_CUDNN_STATUS(cudnnBackendSetAttribute(d_, name, type, count, values));
}

Status Desc::Finalize() { return KILN_CUDNN_STATUS(cudnnBackendFinalize(d_)); }

std::mutex& BuildMutex() {
  static std::mutex m;
  return m;
}

Result<cudnnHandle_t> BuildHandle() {
  static std::mutex m;
  static std::map<int, cudnnHandle_t> handles;  // device -> handle (kept for the life of the process)
  int device = 0;
  const cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess)
    return Err(StatusCode::kCudaError, "cudaGetDevice failed: {} (is a CUDA device available?)", cudaGetErrorString(e));
  std::lock_guard<std::mutex> lock(m);
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  const cudnnStatus_t s = cudnnCreate(&h);
  if (s != CUDNN_STATUS_SUCCESS)
    return Err(StatusCode::kCudaError,
               "cudnnCreate failed: {} (is cuDNN 9 on LD_LIBRARY_PATH? kiln was built with cuDNN {}.{})",
               cudnnGetErrorString(s), CUDNN_MAJOR, CUDNN_MINOR);
  handles[device] = h;
  return h;
}

std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  if (dims.size() < 3) return strides;
  int64_t s = dims[1];  // C is innermost, then the spatial dims from the last, then N
  for (size_t i = dims.size(); i-- > 2;) {
    strides[i] = s;
    s *= dims[i];
  }
  strides[1] = 1;
  strides[0] = s;
  return strides;
}

Result<Desc> MakeTensor(int64_t uid, cudnnDataType_t dtype, const std::vector<int64_t>& dims, int64_t alignment,
                        bool is_virtual, const std::vector<int64_t>& given_strides) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  if (!given_strides.empty()) strides = given_strides;
  KILN_ASSIGN_OR_RETURN(Desc t, Desc::Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(t.SetDataType(CUDNN_ATTR_TENSOR_DATA_TYPE, dtype));
  KILN_RETURN_IF_ERROR(t.SetInt64s(CUDNN_ATTR_TENSOR_DIMENSIONS, dims));
  KILN_RETURN_IF_ERROR(t.SetInt64s(CUDNN_ATTR_TENSOR_STRIDES, strides));
  KILN_RETURN_IF_ERROR(t.SetInt64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid));
  KILN_RETURN_IF_ERROR(t.SetInt64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, alignment));
  const bool v = is_virtual;
  KILN_RETURN_IF_ERROR(t.Set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v));
  KILN_RETURN_IF_ERROR(t.Finalize());
  return t;
}

Result<Desc> MakeConvolution(const std::vector<int64_t>& pre_pads, const std::vector<int64_t>& post_pads,
                             const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations) {
  KILN_ASSIGN_OR_RETURN(Desc c, Desc::Create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(c.SetDataType(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_DATA_FLOAT));
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  KILN_RETURN_IF_ERROR(c.Set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  KILN_RETURN_IF_ERROR(c.SetInt64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, static_cast<int64_t>(strides.size())));
  KILN_RETURN_IF_ERROR(c.SetInt64s(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, pre_pads));
  KILN_RETURN_IF_ERROR(c.SetInt64s(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, post_pads));
  KILN_RETURN_IF_ERROR(c.SetInt64s(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, strides));
  KILN_RETURN_IF_ERROR(c.SetInt64s(CUDNN_ATTR_CONVOLUTION_DILATIONS, dilations));
  KILN_RETURN_IF_ERROR(c.Finalize());
  return c;
}

Result<Desc> MakeConvForward(const Desc& x, const Desc& w, const Desc& y, const Desc& conv) {
  KILN_ASSIGN_OR_RETURN(Desc op, Desc::Create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv));
  KILN_RETURN_IF_ERROR(op.SetFloat(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, 1.f));
  KILN_RETURN_IF_ERROR(op.SetFloat(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, 0.f));
  KILN_RETURN_IF_ERROR(op.Finalize());
  return op;
}

Result<Desc> MakeConvBackwardData(const Desc& dx, const Desc& w, const Desc& dy, const Desc& conv) {
  KILN_ASSIGN_OR_RETURN(Desc op, Desc::Create(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, dx));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, dy));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv));
  KILN_RETURN_IF_ERROR(op.SetFloat(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, 1.f));
  KILN_RETURN_IF_ERROR(op.SetFloat(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, 0.f));
  KILN_RETURN_IF_ERROR(op.Finalize());
  return op;
}

Result<Desc> MakePointwiseOp(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y) {
  KILN_ASSIGN_OR_RETURN(Desc pw, Desc::Create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(pw.Set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  KILN_RETURN_IF_ERROR(pw.SetDataType(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT));
  KILN_RETURN_IF_ERROR(pw.Finalize());
  KILN_ASSIGN_OR_RETURN(Desc op, Desc::Create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
  if (b) KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b));
  KILN_RETURN_IF_ERROR(op.SetDesc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
  KILN_RETURN_IF_ERROR(op.Finalize());
  return op;
}

Result<Desc> MakeOperationGraph(cudnnHandle_t handle, const std::vector<const Desc*>& ops) {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const Desc* d : ops) raw.push_back(d->get());
  KILN_ASSIGN_OR_RETURN(Desc g, Desc::Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(g.Set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                             static_cast<int64_t>(raw.size()), raw.data()));
  KILN_RETURN_IF_ERROR(g.Set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  KILN_RETURN_IF_ERROR(g.Finalize());
  return g;
}

bool EngineChoice::HasNote(cudnnBackendNumericalNote_t n) const {
  return std::find(numerical_notes.begin(), numerical_notes.end(), static_cast<int>(n)) != numerical_notes.end();
}

bool EngineChoice::HasBehavior(cudnnBackendBehaviorNote_t n) const {
  return std::find(behavior_notes.begin(), behavior_notes.end(), static_cast<int>(n)) != behavior_notes.end();
}

std::string EngineChoice::Name() const {
  std::string s = fmt::format("eng={};knobs=", engine);
  for (size_t i = 0; i < knobs.size(); ++i) s += fmt::format("{}{}={}", i ? "," : "", knobs[i].first, knobs[i].second);
  return s;
}

namespace {

bool ParseInt(std::string_view s, int64_t* v) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

Result<EngineChoice> EngineChoice::Parse(const std::string& name) {
  auto bad = [&]() {
    return Err(StatusCode::kInvalidArgument,
               "cuDNN tactic '{}' is malformed (expected 'eng=<index>;knobs=<type>=<value>,...'); rebuild the "
               "engine so its tactics are listed again",
               name);
  };
  const std::string_view s(name);
  const size_t semi = s.find(';');
  if (s.substr(0, 4) != "eng=" || semi == std::string_view::npos) return bad();
  EngineChoice c;
  if (!ParseInt(s.substr(4, semi - 4), &c.engine) || c.engine < 0) return bad();
  std::string_view rest = s.substr(semi + 1);
  if (rest.substr(0, 6) != "knobs=") return bad();
  rest.remove_prefix(6);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view kv = rest.substr(0, comma);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) return bad();
    int64_t k = 0, v = 0;
    if (!ParseInt(kv.substr(0, eq), &k) || !ParseInt(kv.substr(eq + 1), &v)) return bad();
    c.knobs.emplace_back(k, v);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return c;
}

Result<std::vector<Desc>> HeuristicConfigs(const Desc& graph, cudnnBackendHeurMode_t mode) {
  KILN_ASSIGN_OR_RETURN(Desc heur, Desc::Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(heur.SetDesc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
  KILN_RETURN_IF_ERROR(heur.Set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  KILN_RETURN_IF_ERROR(heur.Finalize());
  int64_t count = 0;
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr)));
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    KILN_ASSIGN_OR_RETURN(Desc c, Desc::Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(c.get());
    cfgs.push_back(std::move(c));
  }
  if (count == 0) return cfgs;
  int64_t got = 0;
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(cudnnBackendGetAttribute(
      heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data())));
  cfgs.resize(static_cast<size_t>(std::min(got, count)));
  return cfgs;
}

Result<EngineChoice> DescribeConfig(const Desc& cfg) {
  EngineChoice c;
  KILN_ASSIGN_OR_RETURN(Desc engine, Desc::Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  cudnnBackendDescriptor_t eraw = engine.get();
  int64_t n = 0;
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(
      cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eraw)));
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &c.engine)));
  cudnnBackendNumericalNote_t notes[32];
  int64_t nn = 0;
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(cudnnBackendGetAttribute(
      engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 32, &nn, notes)));
  for (int64_t i = 0; i < std::min<int64_t>(nn, 32); ++i) c.numerical_notes.push_back(static_cast<int>(notes[i]));
  cudnnBackendBehaviorNote_t behaviors[32];
  int64_t nb = 0;
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(cudnnBackendGetAttribute(
      engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 32, &nb, behaviors)));
  for (int64_t i = 0; i < std::min<int64_t>(nb, 32); ++i) c.behavior_notes.push_back(static_cast<int>(behaviors[i]));

  constexpr int kMaxKnobs = 64;
  std::vector<Desc> knobs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < kMaxKnobs; ++i) {
    KILN_ASSIGN_OR_RETURN(Desc k, Desc::Create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    raw.push_back(k.get());
    knobs.push_back(std::move(k));
  }
  int64_t nk = 0;
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(cudnnBackendGetAttribute(
      cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxKnobs, &nk, raw.data())));
  for (int64_t i = 0; i < std::min<int64_t>(nk, kMaxKnobs); ++i) {
    cudnnBackendKnobType_t type;
    int64_t value = 0, m = 0;
    KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(
        cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &m, &type)));
    KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(
        cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &m, &value)));
    c.knobs.emplace_back(static_cast<int64_t>(type), value);
  }
  std::sort(c.knobs.begin(), c.knobs.end());
  return c;
}

Result<Desc> MakeConfig(const Desc& graph, const EngineChoice& choice, Desc* engine_keep) {
  KILN_ASSIGN_OR_RETURN(Desc engine, Desc::Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(engine.SetDesc(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph));
  KILN_RETURN_IF_ERROR(engine.SetInt64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, choice.engine));
  KILN_RETURN_IF_ERROR(engine.Finalize());
  std::vector<Desc> knobs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& [type, value] : choice.knobs) {
    KILN_ASSIGN_OR_RETURN(Desc k, Desc::Create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    const auto t = static_cast<cudnnBackendKnobType_t>(type);
    KILN_RETURN_IF_ERROR(k.Set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &t));
    KILN_RETURN_IF_ERROR(k.SetInt64(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, value));
    KILN_RETURN_IF_ERROR(k.Finalize());
    raw.push_back(k.get());
    knobs.push_back(std::move(k));
  }
  KILN_ASSIGN_OR_RETURN(Desc cfg, Desc::Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(cfg.SetDesc(CUDNN_ATTR_ENGINECFG_ENGINE, engine));
  if (!raw.empty())
    KILN_RETURN_IF_ERROR(cfg.Set(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 static_cast<int64_t>(raw.size()), raw.data()));
  KILN_RETURN_IF_ERROR(cfg.Finalize());
  *engine_keep = std::move(engine);
  return cfg;
}

Result<Desc> MakePlan(cudnnHandle_t handle, const Desc& cfg) {
  KILN_ASSIGN_OR_RETURN(Desc plan, Desc::Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(plan.Set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  KILN_RETURN_IF_ERROR(plan.SetDesc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg));
  KILN_RETURN_IF_ERROR(plan.Finalize());
  return plan;
}

Result<int64_t> PlanWorkspaceBytes(const Desc& plan) {
  int64_t ws = 0, n = 0;
  KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(cudnnBackendGetAttribute(
      plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws)));
  return ws;
}

Status Execute(cudnnHandle_t handle, const Desc& plan, const std::vector<int64_t>& uids,
               const std::vector<void*>& ptrs, void* workspace) {
  KILN_ASSIGN_OR_RETURN(Desc pack, Desc::Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                static_cast<int64_t>(uids.size()), uids.data()));
  KILN_RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                static_cast<int64_t>(ptrs.size()), ptrs.data()));
  KILN_RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  KILN_RETURN_IF_ERROR(pack.Finalize());
  return KILN_CUDNN_STATUS(cudnnBackendExecute(handle, plan.get(), pack.get()));
}

}  // namespace kiln::cuda::dnn
