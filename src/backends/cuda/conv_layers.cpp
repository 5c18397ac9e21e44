// CUDA layers of the conv family: Conv, FusedConv (kiln domain: Conv + residual + activation) and ConvTranspose
// on cuDNN 9 through the backend graph API (cudnn_graph.h, conv_plan.h).
//
// Tactics: "cudnn:eng=<global index>;knobs=<type>=<value>,..." runs the convolution alone in cuDNN and applies
// bias, residual and activation with one small kernel after it (conv_kernels.cu); "cudnn-fused:eng=..." runs
// conv -> add bias -> add residual -> activation as one cuDNN operation graph (listed only where cuDNN finalizes
// such a plan for the node's dtype and shapes; Conv/FusedConv only). "cudnn:auto" (also "default") takes the heuristics'
// first acceptable engine at every shape. "kiln:depthwise-nhwc" is kiln's own depthwise kernel with the epilogue fused
// (depthwise_conv.cu), listed for channels-last 2-D convolutions with one filter per channel and symmetric pads.
//
// Plans: create() builds the plan for the spec's shapes. A layer met with other input shapes (dynamic shapes)
// or with pointers not 16-byte aligned builds a plan for them on first use, under the layer's mutex, keeps it in
// a per-layer cache, and falls back to the heuristics' choice where the tactic's engine cannot run them. Plan
// building is host work that must not happen inside a CUDA graph capture: WorkspaceBytes() builds the plans of
// the shapes and pointer alignment it is asked about, so a runtime that asks it with each launch's tensors before
// capturing is safe.
// Plans are built with a process-wide cuDNN handle and executed with the stream's handle (ctx.cudnn).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/conv_plan.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/families.h"
#include "core/error.h"
#include "plan/layout.h"
#include "ops/fused_ops.h"

namespace kiln::cuda {

namespace {

// KILN_CUDNN_RTC_OVERLAP=1 leaves out the barrier before runtime-compiled cuDNN kernels (conv_plan.h): for checking
// whether a newer cuDNN still needs it (build ResNet-50 in TF32 a few times and compare it with the CPU).
bool RuntimeFusionOverlapAllowed() {
  static const bool allowed = [] {
    const char* e = std::getenv("KILN_CUDNN_RTC_OVERLAP");
    return e && std::string(e) == "1";
  }();
  return allowed;
}

enum class ConvOp { kConv, kFusedConv, kConvTranspose };

constexpr size_t kMaxPlainTactics = 6, kMaxFusedTactics = 3;
constexpr std::string_view kPlainPrefix = "cudnn:", kFusedPrefix = "cudnn-fused:";
constexpr std::string_view kDepthwiseTactic = "kiln:depthwise-nhwc";

Result<cudnnDataType_t> CudnnType(const Node& n, DataType t) {
  switch (t) {
    case DataType::kFloat32: return CUDNN_DATA_FLOAT;
    case DataType::kFloat16: return CUDNN_DATA_HALF;
    case DataType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    default:
      return Err(StatusCode::kUnsupported,
                 "{}: the cuDNN convolution runs float32, float16 and bfloat16 tensors, not {}; run this node on "
                 "the CPU or build it in another precision",
                 n.Where(), DataTypeName(t));
  }
}

struct Epilogue {
  ConvAct act = ConvAct::kNone;
  float alpha = 0.f, beta = 0.f;
  bool fusable = true;                       // cuDNN has a pointwise mode for the activation (or there is none)
  std::optional<cudnnPointwiseMode_t> mode;  // that mode
};

Result<Epilogue> ReadEpilogue(const Node& n, ConvOp op) {
  Epilogue e;
  if (op != ConvOp::kFusedConv) return e;
  const std::string name = n.gets("kiln_activation", "None");
  const auto act = fused::ParseActivation(name);
  if (!act) return Err(StatusCode::kInvalidModel, "{}: unknown kiln_activation '{}'", n.Where(), name);
  e.alpha = n.getf("kiln_activation_alpha", 0.f);
  e.beta = n.getf("kiln_activation_beta", 0.f);
  switch (*act) {
    case fused::Act::kNone: e.act = ConvAct::kNone; break;
    case fused::Act::kRelu: e.act = ConvAct::kRelu; e.mode = CUDNN_POINTWISE_RELU_FWD; break;
    case fused::Act::kSigmoid: e.act = ConvAct::kSigmoid; e.mode = CUDNN_POINTWISE_SIGMOID_FWD; break;
    case fused::Act::kTanh: e.act = ConvAct::kTanh; e.mode = CUDNN_POINTWISE_TANH_FWD; break;
    case fused::Act::kGelu: e.act = ConvAct::kGelu; e.mode = CUDNN_POINTWISE_GELU_FWD; break;
    case fused::Act::kGeluTanh: e.act = ConvAct::kGeluTanh; e.mode = CUDNN_POINTWISE_GELU_APPROX_TANH_FWD; break;
    case fused::Act::kLeakyRelu: e.act = ConvAct::kLeakyRelu; e.fusable = false; break;
    case fused::Act::kClip: e.act = ConvAct::kClip; e.fusable = false; break;
    case fused::Act::kHardSigmoid: e.act = ConvAct::kHardSigmoid; e.fusable = false; break;
    case fused::Act::kSiLU: e.act = ConvAct::kSiLU; e.fusable = false; break;
  }
  return e;
}

// What a layer keeps of its node: a copy without the graph's value pointers (geometry at later shapes).
Node AttributesOf(const Node& n) {
  Node c;
  c.name = n.name;
  c.op_type = n.op_type;
  c.domain = n.domain;
  c.opset = n.opset;
  c.attrs = n.attrs;
  return c;
}

struct ConvConfig {
  ConvOp op = ConvOp::kConv;
  DataType dtype = DataType::kUndefined;
  bool has_bias = false;
  bool has_residual = false;                // FusedConv input 3: Y = act(conv + B + R)
  Epilogue epi;
  bool nhwc = false;                        // kiln_layout = "NHWC": X, Y channels-last, W repacked to KRSC
  bool depthwise = false;                   // kDepthwiseTactic: W repacked to [kh, kw, C] instead
  ConvGraphOptions graph;                   // alignment is set per plan
  std::optional<dnn::EngineChoice> choice;  // empty: heuristics' first acceptable engine
};

// Checks the node's inputs and reads what every tactic shares.
Result<ConvConfig> ReadConfig(const LayerSpec& spec, ConvOp op) {
  const Node& n = spec.node;
  if (!n.input(0) || !n.input(1))
    return Err(StatusCode::kInvalidModel, "{}: needs inputs X and W", n.Where());
  ConvConfig c;
  c.op = op;
  c.dtype = n.input(0)->dtype;
  KILN_ASSIGN_OR_RETURN(c.graph.dtype, CudnnType(n, c.dtype));
  c.has_bias = n.input(2) != nullptr;
  c.has_residual = op == ConvOp::kFusedConv && n.input(3) != nullptr;
  for (size_t i = 1; i < 4; ++i) {
    const Value* v = n.input(i);
    if (!v || (i == 3 && !c.has_residual)) continue;
    if (v->dtype != c.dtype && (i == 3 || !v->is_const()))
      return Err(StatusCode::kUnsupported, "{}: input {} is {} but X is {}; cast it to {} first", n.Where(), i,
                 DataTypeName(v->dtype), DataTypeName(c.dtype), DataTypeName(c.dtype));
  }
  KILN_ASSIGN_OR_RETURN(c.epi, ReadEpilogue(n, op));
  c.graph.allow_tf32 = spec.allow_tf32;
  const std::string layout = n.gets("kiln_layout", "NCHW");
  if (layout != "NCHW" && layout != "NHWC")
    return Err(StatusCode::kInvalidModel, "{}: kiln_layout must be NCHW or NHWC, got '{}'", n.Where(), layout);
  c.nhwc = c.graph.nhwc = layout == "NHWC";
  if (c.nhwc && (op == ConvOp::kConvTranspose || !n.input(1)->is_const() ||
                 (n.input(0)->has_shape && n.input(0)->shape.size() != 4)))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA channels-last (NHWC) convolution needs a 2-D Conv with a constant W", n.Where());
  return c;
}

// Whether kiln's depthwise kernel runs this convolution: channels-last 2-D forward convolution, one input channel
// per filter and as many filters as channels (groups = C), pads the same on both sides (no window copy).
bool DepthwiseFits(const ConvConfig& c, const ConvGeometry& g) {
  return c.nhwc && c.op != ConvOp::kConvTranspose && !g.transpose && !g.window && !g.degenerate &&
         g.conv_x.size() == 4 && g.conv_w.size() == 4 && g.conv_w[1] == 1 && g.conv_w[0] == g.conv_x[1];
}

bool CanFuse(const ConvConfig& c) {
  return c.op != ConvOp::kConvTranspose && c.epi.fusable && (c.has_bias || c.has_residual || c.epi.mode.has_value());
}

// Sets c.graph.fused and c.choice from a tactic name.
Status ApplyTactic(const Node& n, const std::string& tactic, ConvConfig& c) {
  const std::string_view t(tactic);
  if (t == "default" || t == "cudnn:auto") return Status::Ok();
  if (t == kDepthwiseTactic) {
    c.depthwise = true;
    return Status::Ok();
  }
  const bool fused = t.substr(0, kFusedPrefix.size()) == kFusedPrefix;
  if (!fused && t.substr(0, kPlainPrefix.size()) != kPlainPrefix)
    return Err(StatusCode::kInvalidArgument,
               "{}: unknown tactic '{}' (expected 'cudnn:auto', 'cudnn:eng=...', 'cudnn-fused:eng=...' or '{}')",
               n.Where(), tactic, kDepthwiseTactic);
  if (fused && !CanFuse(c))
    return Err(StatusCode::kInvalidArgument,
               "{}: tactic '{}' fuses bias/residual/activation into cuDNN, but this node has none of them or an "
               "activation cuDNN cannot fuse; use a 'cudnn:' tactic",
               n.Where(), tactic);
  auto choice = dnn::EngineChoice::Parse(std::string(t.substr(fused ? kFusedPrefix.size() : kPlainPrefix.size())));
  if (!choice.ok()) return choice.status().WithContext(n.Where());
  c.graph.fused = fused;
  c.graph.has_bias = fused && c.has_bias;
  c.graph.residual = fused && c.has_residual;
  if (fused) c.graph.act = c.epi.mode;
  c.choice = std::move(*choice);
  return Status::Ok();
}

// The spec's shapes of X and W (W's from its constant when the spec lacks it); empty when unknown.
std::pair<std::vector<int64_t>, std::vector<int64_t>> SpecShapes(const LayerSpec& spec) {
  std::vector<int64_t> x, w;
  if (!spec.input_shapes.empty()) x = spec.input_shapes[0];
  if (spec.input_shapes.size() > 1) w = spec.input_shapes[1];
  if (w.empty() && spec.node.input(1)->is_const()) w = spec.node.input(1)->const_value->shape();
  return {x, w};
}

class ConvLayer final : public Layer {
 public:
  ConvLayer(const Node& n, ConvConfig cfg) : node_(AttributesOf(n)), cfg_(std::move(cfg)) {}

  // Uploads W (and B) once when they are constants, converted to the layer's dtype.
  Status UploadConstants(const Node& n) {
    for (size_t i = 1; i < (cfg_.has_bias ? 3u : 2u); ++i) {
      const Value* v = n.input(i);
      if (!v->is_const()) continue;
      Tensor t = *v->const_value;
      if (t.dtype() != cfg_.dtype) t = CastTensor(t, cfg_.dtype);
      const std::vector<int64_t> logical = t.shape();
      if (i == 1 && cfg_.depthwise) t = PermuteTensor(t, {1, 2, 3, 0});  // [C, 1, kh, kw] -> [1, kh, kw, C]
      else if (i == 1 && cfg_.nhwc) t = PermuteTensor(t, {0, 2, 3, 1});  // KCRS -> KRSC, once
      Constant& k = i == 1 ? w_ : b_;
      KILN_ASSIGN_OR_RETURN(k.buf, UploadToDevice(t.raw(), t.nbytes(), v->name));
      k.present = true;
      k.shape = logical;
    }
    return Status::Ok();
  }

  // The plan for these shapes and pointer alignment (built on first use). `strict`: the tactic's engine must
  // run them (no fallback to the heuristics' choice).
  Result<std::shared_ptr<const ConvPlan>> PlanFor(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                                                  int64_t alignment, bool strict) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto key = std::make_tuple(x, w, alignment);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    KILN_ASSIGN_OR_RETURN(ConvGeometry g, ComputeConvGeometry(node_, cfg_.op == ConvOp::kConvTranspose,
                                                              cfg_.nhwc ? NhwcToNchw(x) : x, w));
    if (cfg_.depthwise && !g.degenerate && NumElements(g.y_node) > 0) {
      if (!DepthwiseFits(cfg_, g))
        return Err(StatusCode::kUnsupported,
                   "{}: tactic '{}' runs channels-last 2-D convolutions with groups = channels and symmetric pads; "
                   "X [{}] W [{}] is not one",
                   node_.Where(), kDepthwiseTactic, fmt::join(x, ","), fmt::join(w, ","));
      auto p = std::make_shared<ConvPlan>();
      p->geo = std::move(g);
      p->engine = std::string(kDepthwiseTactic);
      auto [pos, inserted] = plans_.emplace(std::move(key), std::move(p));
      return pos->second;
    }
    if (cfg_.nhwc && g.window)
      return Err(StatusCode::kUnsupported,
                 "{}: asymmetric pads need a zero-padding copy, which the channels-last (NHWC) convolution lacks",
                 node_.Where());
    std::shared_ptr<const ConvPlan> plan;
    if (g.degenerate || NumElements(g.y_node) == 0) {
      auto p = std::make_shared<ConvPlan>();
      p->geo = std::move(g);
      plan = std::move(p);
    } else {
      ConvGraphOptions o = cfg_.graph;
      o.alignment = alignment;
      auto built = BuildConvPlan(g, o, cfg_.choice);
      if (!built.ok() && cfg_.choice && !strict) built = BuildConvPlan(g, o, std::nullopt);
      if (!built.ok()) return built.status().WithContext(node_.Where());
      plan = std::move(*built);
    }
    plans_.emplace(std::move(key), plan);
    return plan;
  }

  // The alignment all of a call's tensor pointers share (16 bytes, else the element size): the plan is built for
  // it. WorkspaceBytes and Enqueue agree on it, so a plan is never built during a CUDA graph capture.
  int64_t CallAlignment(const std::vector<DeviceTensor>& inputs, const std::vector<DeviceTensor>& outputs) const {
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    bool all16 = outputs.empty() || aligned(outputs[0].data);
    for (size_t i = 0; i < inputs.size() && i < 4; ++i) {
      if ((i == 1 && w_.present) || (i == 2 && b_.present)) continue;  // the layer's own copies: aligned
      if (inputs[i].present()) all16 = all16 && aligned(inputs[i].data);
    }
    return all16 ? 16 : static_cast<int64_t>(DataTypeSize(cfg_.dtype));
  }

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& inputs,
                        const std::vector<DeviceTensor>& outputs) const override {
    if (inputs.size() < 2) return 0;
    auto plan = PlanFor(inputs[0].shape, w_.present ? w_.shape : inputs[1].shape, CallAlignment(inputs, outputs),
                        false);
    return plan.ok() ? (*plan)->WorkspaceBytes(DataTypeSize(cfg_.dtype)) : 0;  // Enqueue reports the error
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& inputs,
                 std::vector<DeviceTensor>& outputs) const override {
    if (inputs.size() < 2 || outputs.empty())
      return Err(StatusCode::kInvalidArgument, "{}: needs inputs X, W and output Y", node_.Where());
    const DeviceTensor& x = inputs[0];
    DeviceTensor& y = outputs[0];
    if (x.dtype != cfg_.dtype || y.dtype != cfg_.dtype)
      return Err(StatusCode::kInvalidArgument, "{}: X is {} and Y is {}, but the layer was built for {}",
                 node_.Where(), DataTypeName(x.dtype), DataTypeName(y.dtype), DataTypeName(cfg_.dtype));
    if (y.numel() == 0) return Status::Ok();
    const void* w = w_.present ? w_.buf.get() : inputs[1].data;
    const std::vector<int64_t>& w_shape = w_.present ? w_.shape : inputs[1].shape;
    const void* b = nullptr;
    if (cfg_.has_bias) {
      const bool runtime_bias = !b_.present && inputs.size() > 2 && inputs[2].present();
      if (!b_.present && !runtime_bias)
        return Err(StatusCode::kInvalidArgument, "{}: the bias input B is missing", node_.Where());
      b = b_.present ? b_.buf.get() : inputs[2].data;
      const int64_t nb = b_.present ? NumElements(b_.shape) : inputs[2].numel();
      const int64_t m = y.shape.size() > 1 ? y.shape[cfg_.nhwc ? y.shape.size() - 1 : 1] : -1;
      if (nb != m)
        return Err(StatusCode::kInvalidArgument, "{}: bias has {} elements, expected {} (output channels)",
                   node_.Where(), nb, m);
    }
    const void* r = nullptr;
    if (cfg_.has_residual) {
      if (inputs.size() < 4 || !inputs[3].present())
        return Err(StatusCode::kInvalidArgument, "{}: the residual input R is missing", node_.Where());
      const DeviceTensor& rt = inputs[3];
      if (rt.dtype != cfg_.dtype || rt.shape != y.shape)
        return Err(StatusCode::kInvalidArgument, "{}: the residual is {} [{}] but Y is {} [{}]", node_.Where(),
                   DataTypeName(rt.dtype), fmt::join(rt.shape, ","), DataTypeName(y.dtype), fmt::join(y.shape, ","));
      r = rt.data;
    }
    const size_t elem = DataTypeSize(cfg_.dtype);
    const bool ws16 = reinterpret_cast<uintptr_t>(ctx.workspace) % 16 == 0;
    const int64_t alignment = ws16 ? CallAlignment(inputs, outputs) : static_cast<int64_t>(elem);
    KILN_ASSIGN_OR_RETURN(auto plan, PlanFor(x.shape, w_shape, alignment, false));
    const ConvGeometry& g = plan->geo;
    const std::vector<int64_t> y_expect = cfg_.nhwc ? NchwToNhwc(g.y_node) : g.y_node;
    if (y_expect != y.shape)
      return Err(StatusCode::kInvalidArgument, "{}: Y has shape [{}] but the convolution gives [{}]", node_.Where(),
                 fmt::join(y.shape, ","), fmt::join(y_expect, ","));
    const bool cudnn_epilogue = plan->plan.get() && cfg_.graph.fused;
    if (cfg_.depthwise && !g.degenerate) {
      DepthwiseConvParams p;
      p.n = g.conv_x[0];
      p.c = g.conv_x[1];
      p.h = g.conv_x[2];
      p.w = g.conv_x[3];
      p.oh = g.conv_y[2];
      p.ow = g.conv_y[3];
      p.kh = static_cast<int>(g.conv_w[2]);
      p.kw = static_cast<int>(g.conv_w[3]);
      p.sh = static_cast<int>(g.strides[0]);
      p.sw = static_cast<int>(g.strides[1]);
      p.ph = static_cast<int>(g.pre_pads[0]);
      p.pw = static_cast<int>(g.pre_pads[1]);
      p.dh = static_cast<int>(g.dilations[0]);
      p.dw = static_cast<int>(g.dilations[1]);
      p.act = cfg_.epi.act;
      p.alpha = cfg_.epi.alpha;
      p.beta = cfg_.epi.beta;
      return KILN_CUDA_STATUS(
          LaunchDepthwiseConv(static_cast<int>(cfg_.dtype), x.data, w, b, r, y.data, p, ctx.stream));
    }
    if (g.degenerate) {
      KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y.data, 0, y.nbytes(), ctx.stream));
    } else {
      if (!ctx.cudnn) return Err(StatusCode::kInternal, "{}: the launch context has no cuDNN handle", node_.Where());
      const size_t need = plan->WorkspaceBytes(elem);
      if (ctx.workspace_bytes < need || (need > 0 && !ctx.workspace))
        return Err(StatusCode::kInternal, "{}: needs {} bytes of workspace, got {}", node_.Where(), need,
                   ctx.workspace_bytes);
      KILN_RETURN_IF_ERROR(KILN_CUDNN_STATUS(cudnnSetStream(ctx.cudnn, ctx.stream)));
      char* ws = static_cast<char*>(ctx.workspace);
      void* window = g.window ? ws + plan->WindowOffset() : nullptr;
      void* cudnn_ws = plan->cudnn_workspace > 0 ? ws : nullptr;
      std::vector<int64_t> uids{kUidConvX, kUidConvW, kUidConvY};
      std::vector<void*> ptrs;
      if (!g.transpose) {
        const void* src = x.data;
        if (g.window) {
          KILN_CUDA_RETURN_IF_ERROR(LaunchWindowCopy(x.data, window, static_cast<int>(elem), g.copy, ctx.stream));
          src = window;
        }
        ptrs = {const_cast<void*>(src), const_cast<void*>(w), y.data};
        if (cfg_.graph.fused && cfg_.graph.has_bias) {
          uids.push_back(kUidBias);
          ptrs.push_back(const_cast<void*>(b));
        }
        if (cfg_.graph.fused && cfg_.graph.residual) {
          uids.push_back(kUidResidual);
          ptrs.push_back(const_cast<void*>(r));
        }
      } else {
        ptrs = {g.window ? window : y.data, const_cast<void*>(w), x.data};
      }
      // (conv_plan.h: cuDNN's runtime-compiled kernels may overlap the kernel before them and read unfinished data)
      if (plan->runtime_compiled && !RuntimeFusionOverlapAllowed())
        KILN_CUDA_RETURN_IF_ERROR(LaunchStreamBarrier(ctx.stream));
      Status st = dnn::Execute(ctx.cudnn, plan->plan, uids, ptrs, cudnn_ws);
      if (!st.ok()) return st.WithContext(fmt::format("{} (cuDNN engine {})", node_.Where(), plan->engine));
      if (g.transpose && g.window)
        KILN_CUDA_RETURN_IF_ERROR(LaunchWindowCopy(window, y.data, static_cast<int>(elem), g.copy, ctx.stream));
    }
    if (!cudnn_epilogue && (b || r || cfg_.epi.act != ConvAct::kNone)) {
      ConvEpilogueParams p;
      p.numel = y.numel();
      p.channels = g.out_channels;
      p.inner = cfg_.nhwc ? 1 : g.out_inner;  // NHWC: the channel is the innermost index
      p.act = cfg_.epi.act;
      p.alpha = cfg_.epi.alpha;
      p.beta = cfg_.epi.beta;
      KILN_CUDA_RETURN_IF_ERROR(LaunchConvEpilogue(y.data, b, r, static_cast<int>(cfg_.dtype), p, ctx.stream));
    }
    return Status::Ok();
  }

 private:
  struct Constant {
    bool present = false;
    DeviceBuffer buf;
    std::vector<int64_t> shape;
  };
  Node node_;
  ConvConfig cfg_;
  Constant w_, b_;
  mutable std::mutex mu_;
  mutable std::map<std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t>, std::shared_ptr<const ConvPlan>>
      plans_;
};

Result<std::vector<std::string>> ListTactics(const LayerSpec& spec, ConvOp op) {
  const Node& n = spec.node;
  KILN_ASSIGN_OR_RETURN(ConvConfig c, ReadConfig(spec, op));
  const auto [x, w] = SpecShapes(spec);
  if (x.empty() || w.empty()) return std::vector<std::string>{"cudnn:auto"};
  KILN_ASSIGN_OR_RETURN(ConvGeometry g,
                        ComputeConvGeometry(n, op == ConvOp::kConvTranspose, c.nhwc ? NhwcToNchw(x) : x, w));
  if (g.degenerate || NumElements(g.y_node) == 0) return std::vector<std::string>{"cudnn:auto"};
  std::vector<std::string> names;
  auto plain = ListConvEngines(g, c.graph, kMaxPlainTactics);
  if (plain.ok())
    for (const auto& e : *plain) names.push_back(std::string(kPlainPrefix) + e);
  if (DepthwiseFits(c, g)) names.push_back(std::string(kDepthwiseTactic));
  if (CanFuse(c)) {
    ConvGraphOptions o = c.graph;
    o.fused = true;
    o.has_bias = c.has_bias;
    o.residual = c.has_residual;
    o.act = c.epi.mode;
    auto fused = ListConvEngines(g, o, kMaxFusedTactics);  // fused graphs that cuDNN rejects just add nothing
    if (fused.ok())
      for (const auto& e : *fused) names.push_back(std::string(kFusedPrefix) + e);
  }
  if (names.empty()) {
    if (!plain.ok()) return plain.status().WithContext(n.Where());
    return Err(StatusCode::kUnsupported,
               "{}: no cuDNN engine can run this convolution ({} X [{}] W [{}]{}); run the node on the CPU",
               n.Where(), DataTypeName(c.dtype), fmt::join(x, ","), fmt::join(w, ","),
               c.dtype == DataType::kFloat32 && !spec.allow_tf32 ? ", TF32 forbidden" : "");
  }
  return names;
}

Result<std::unique_ptr<Layer>> CreateConvLayer(const LayerSpec& spec, const std::string& tactic, ConvOp op) {
  const Node& n = spec.node;
  KILN_ASSIGN_OR_RETURN(ConvConfig c, ReadConfig(spec, op));
  KILN_RETURN_IF_ERROR(ApplyTactic(n, tactic, c));
  auto layer = std::make_unique<ConvLayer>(n, std::move(c));
  KILN_RETURN_IF_ERROR(layer->UploadConstants(n));
  const auto [x, w] = SpecShapes(spec);
  if (!x.empty() && !w.empty()) {
    auto plan = layer->PlanFor(x, w, 16, /*strict=*/true);
    if (!plan.ok()) return plan.status().WithContext(fmt::format("tactic '{}'", tactic));
  }
  return std::unique_ptr<Layer>(std::move(layer));
}

LayerFactory Factory(ConvOp op) {
  LayerFactory f;
  f.tactics = [op](const LayerSpec& s) { return ListTactics(s, op); };
  f.create = [op](const LayerSpec& s, const std::string& t) { return CreateConvLayer(s, t, op); };
  return f;
}

}  // namespace

void RegisterConvLayers(LayerRegistry& r) {
  r.Add("Conv", Factory(ConvOp::kConv));
  r.Add("kiln.FusedConv", Factory(ConvOp::kFusedConv));
  r.Add("ConvTranspose", Factory(ConvOp::kConvTranspose));
}

}  // namespace kiln::cuda
