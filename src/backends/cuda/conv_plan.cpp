// cuDNN plans of the conv layers (see conv_plan.h).
#include "backends/cuda/conv_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "backends/cuda/device.h"
#include "core/error.h"
#include "ops/conv_geometry.h"

namespace kiln::cuda {

namespace {

std::string Join(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

}  // namespace

Result<ConvGeometry> ComputeConvGeometry(const Node& n, bool transpose, const std::vector<int64_t>& x,
                                         const std::vector<int64_t>& w) {
  if (x.size() < 3 || w.size() != x.size())
    return Err(StatusCode::kInvalidArgument, "{}: X {} and W {} must have the same rank >= 3", n.Where(), Join(x),
               Join(w));
  const int64_t nsp = static_cast<int64_t>(x.size()) - 2;
  if (nsp > 3)
    return Err(StatusCode::kUnsupported,
               "{}: cuDNN convolutions have 1 to 3 spatial dims, this one has {}; run the node on the CPU", n.Where(),
               nsp);
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(n, nsp, kernel, transpose));
  const int64_t batch = x[0], c = x[1], group = p.group;
  const int64_t m = transpose ? w[1] * group : w[0];
  const bool channels_ok = transpose ? (w[0] == c && c % group == 0) : (w[1] * group == c && m % group == 0);
  if (!channels_ok)
    return Err(StatusCode::kInvalidArgument, "{}: channels of X {} and W {} do not match group {}", n.Where(),
               Join(x), Join(w), group);
  const std::vector<int64_t> in_sp(x.begin() + 2, x.end());
  std::vector<int64_t> out_sp;
  if (transpose) {
    KILN_ASSIGN_OR_RETURN(out_sp, TransposeOutputSizes(n, p, in_sp));
  } else {
    KILN_ASSIGN_OR_RETURN(out_sp, ForwardOutputSizes(n, p, in_sp));
  }
  ConvGeometry g;
  g.transpose = transpose;
  g.y_node = {batch, m};
  g.y_node.insert(g.y_node.end(), out_sp.begin(), out_sp.end());
  g.out_channels = m;
  g.out_inner = NumElements(out_sp);
  g.degenerate = NumElements(x) == 0 || NumElements(w) == 0;
  if (g.degenerate || NumElements(g.y_node) == 0) return g;

  std::vector<int64_t> copy_in, copy_out, copy_off(x.size(), 0);
  g.strides = p.strides;
  g.dilations = p.dilations;
  g.pre_pads.assign(nsp, 0);
  g.post_pads.assign(nsp, 0);
  if (!transpose) {
    // cuDNN pads symmetrically here; the excess of the larger side is added by an explicit zero-padding copy.
    g.conv_x = {batch, c};
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t b = p.pads[d], e = p.pads[d + nsp], s = std::min(b, e);
      g.pre_pads[d] = g.post_pads[d] = s;
      g.conv_x.push_back(in_sp[d] + (b - s) + (e - s));
      copy_off[d + 2] = -(b - s);
      if (b != e) g.window = true;
    }
    g.conv_w = w;
    g.conv_y = g.y_node;
    copy_in = x;
    copy_out = g.conv_x;
  } else {
    // Backward data computes dx[o] = sum over i*s - pad + k*d == o: the transposed conv with symmetric pads,
    // provided the forward conv of dx's size gives back X's size. Otherwise compute the unpadded result
    // (size s*(in-1) + extent) and crop/zero-extend it: Y[o] = full[o + pad_begin].
    bool direct = true;
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t b = p.pads[d], e = p.pads[d + nsp];
      const int64_t extent = (p.kernel[d] - 1) * p.dilations[d] + 1;
      const int64_t span = out_sp[d] + 2 * b - extent;
      if (b != e || b < 0 || span < 0 || span / p.strides[d] + 1 != in_sp[d]) direct = false;
    }
    g.conv_x = {batch, m};
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t extent = (p.kernel[d] - 1) * p.dilations[d] + 1;
      if (direct) {
        g.pre_pads[d] = g.post_pads[d] = p.pads[d];
        g.conv_x.push_back(out_sp[d]);
      } else {
        g.conv_x.push_back(p.strides[d] * (in_sp[d] - 1) + extent);
        copy_off[d + 2] = p.pads[d];
      }
    }
    g.window = !direct;
    g.conv_w = w;
    g.conv_y = x;
    copy_in = g.conv_x;
    copy_out = g.y_node;
  }
  if (nsp == 1) {
    // cuDNN wants 2 or 3 spatial dims: [N, C, L] -> [N, C, 1, L].
    for (auto* v : {&g.conv_x, &g.conv_w, &g.conv_y, &copy_in, &copy_out}) v->insert(v->begin() + 2, 1);
    copy_off.insert(copy_off.begin() + 2, 0);
    g.pre_pads.insert(g.pre_pads.begin(), 0);
    g.post_pads.insert(g.post_pads.begin(), 0);
    g.strides.insert(g.strides.begin(), 1);
    g.dilations.insert(g.dilations.begin(), 1);
  }
  if (g.window) {
    g.copy.rank = static_cast<int>(copy_in.size());
    for (size_t d = 0; d < copy_in.size(); ++d) {
      g.copy.in_dims[d] = copy_in[d];
      g.copy.out_dims[d] = copy_out[d];
      g.copy.offset[d] = copy_off[d];
    }
    g.window_elements = NumElements(g.conv_x);
  }
  return g;
}

namespace {

constexpr int64_t kUidFirstVirtual = 10;  // virtual tensors of the fused graph: 10, 11, ...

struct GraphParts {
  std::deque<dnn::Desc> keep;
  const dnn::Desc* graph = nullptr;
};

// conv alone (forward or backward data), or conv -> (+ bias) -> (+ residual) -> (activation) with float32
// intermediates.
Result<GraphParts> BuildGraph(const ConvGeometry& g, const ConvGraphOptions& o, cudnnHandle_t handle) {
  GraphParts parts;
  auto keep = [&](dnn::Desc d) -> const dnn::Desc& { return parts.keep.emplace_back(std::move(d)); };
  // Channels-last (NHWC): X, Y and the virtual intermediates with NHWC strides, W in KRSC.
  auto strides = [&](const std::vector<int64_t>& dims) {
    return o.nhwc ? dnn::ChannelsLastStrides(dims) : std::vector<int64_t>{};
  };
  KILN_ASSIGN_OR_RETURN(dnn::Desc xd,
                        dnn::MakeTensor(kUidConvX, o.dtype, g.conv_x, o.alignment, false, strides(g.conv_x)));
  const dnn::Desc& x = keep(std::move(xd));
  KILN_ASSIGN_OR_RETURN(dnn::Desc wd,
                        dnn::MakeTensor(kUidConvW, o.dtype, g.conv_w, o.alignment, false, strides(g.conv_w)));
  const dnn::Desc& w = keep(std::move(wd));
  KILN_ASSIGN_OR_RETURN(dnn::Desc yd,
                        dnn::MakeTensor(kUidConvY, o.dtype, g.conv_y, o.alignment, false, strides(g.conv_y)));
  const dnn::Desc& y = keep(std::move(yd));
  KILN_ASSIGN_OR_RETURN(dnn::Desc cd, dnn::MakeConvolution(g.pre_pads, g.post_pads, g.strides, g.dilations));
  const dnn::Desc& conv = keep(std::move(cd));
  std::vector<const dnn::Desc*> ops;
  int steps = o.fused ? (o.has_bias ? 1 : 0) + (o.residual ? 1 : 0) + (o.act ? 1 : 0) : 0;
  if (g.transpose) {
    KILN_ASSIGN_OR_RETURN(dnn::Desc op, dnn::MakeConvBackwardData(x, w, y, conv));
    ops.push_back(&keep(std::move(op)));
  } else if (steps == 0) {
    KILN_ASSIGN_OR_RETURN(dnn::Desc op, dnn::MakeConvForward(x, w, y, conv));
    ops.push_back(&keep(std::move(op)));
  } else {
    int64_t uid = kUidFirstVirtual;
    // The output of the next step: Y for the last one, else a new float32 virtual tensor.
    auto step_out = [&]() -> Result<const dnn::Desc*> {
      if (--steps == 0) return &y;
      KILN_ASSIGN_OR_RETURN(dnn::Desc t, dnn::MakeTensor(uid++, CUDNN_DATA_FLOAT, g.conv_y, 16, true, strides(g.conv_y)));
      return &keep(std::move(t));
    };
    ++steps;  // the convolution itself writes a virtual tensor
    KILN_ASSIGN_OR_RETURN(const dnn::Desc* cur, step_out());
    KILN_ASSIGN_OR_RETURN(dnn::Desc op, dnn::MakeConvForward(x, w, *cur, conv));
    ops.push_back(&keep(std::move(op)));
    if (o.has_bias) {
      std::vector<int64_t> bdims(g.conv_y.size(), 1);
      bdims[1] = g.out_channels;
      KILN_ASSIGN_OR_RETURN(dnn::Desc bd, dnn::MakeTensor(kUidBias, o.dtype, bdims, o.alignment, false, strides(bdims)));
      const dnn::Desc& b = keep(std::move(bd));
      KILN_ASSIGN_OR_RETURN(const dnn::Desc* out, step_out());
      KILN_ASSIGN_OR_RETURN(dnn::Desc add, dnn::MakePointwiseOp(CUDNN_POINTWISE_ADD, *cur, &b, *out));
      ops.push_back(&keep(std::move(add)));
      cur = out;
    }
    if (o.residual) {
      KILN_ASSIGN_OR_RETURN(dnn::Desc rd,
                            dnn::MakeTensor(kUidResidual, o.dtype, g.conv_y, o.alignment, false, strides(g.conv_y)));
      const dnn::Desc& r = keep(std::move(rd));
      KILN_ASSIGN_OR_RETURN(const dnn::Desc* out, step_out());
      KILN_ASSIGN_OR_RETURN(dnn::Desc add, dnn::MakePointwiseOp(CUDNN_POINTWISE_ADD, *cur, &r, *out));
      ops.push_back(&keep(std::move(add)));
      cur = out;
    }
    if (o.act) {
      KILN_ASSIGN_OR_RETURN(const dnn::Desc* out, step_out());
      KILN_ASSIGN_OR_RETURN(dnn::Desc act, dnn::MakePointwiseOp(*o.act, *cur, nullptr, *out));
      ops.push_back(&keep(std::move(act)));
    }
  }
  KILN_ASSIGN_OR_RETURN(dnn::Desc graph, dnn::MakeOperationGraph(handle, ops));
  parts.graph = &keep(std::move(graph));
  return parts;
}

bool Acceptable(const dnn::EngineChoice& c, const ConvGraphOptions& o) {
  if (c.HasNote(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return false;  // we accumulate in float32
  if (o.dtype == CUDNN_DATA_FLOAT && !o.allow_tf32 &&
      (c.HasNote(CUDNN_NUMERICAL_NOTE_TENSOR_CORE) || c.HasNote(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)))
    return false;
  return true;
}

// Calls fn(cfg, choice) for every acceptable heuristic engine configuration (mode A, then fallback) until it
// returns true. Heuristics errors of one mode are skipped; returns the first when no mode produced a config.
template <typename Fn>
Status ForEachHeuristicConfig(const GraphParts& parts, const ConvGraphOptions& o, Fn&& fn) {
  Status first_error;
  bool any = false;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    auto cfgs = dnn::HeuristicConfigs(*parts.graph, mode);
    if (!cfgs.ok()) {
      if (first_error.ok()) first_error = cfgs.status();
      continue;
    }
    any = true;
    for (dnn::Desc& cfg : *cfgs) {
      auto choice = dnn::DescribeConfig(cfg);
      if (!choice.ok() || !Acceptable(*choice, o)) continue;
      if (fn(cfg, *choice)) return Status::Ok();
    }
  }
  return any ? Status::Ok() : first_error;
}

std::string Describe(const ConvGeometry& g, const ConvGraphOptions& o) {
  return fmt::format("{}{} x {} w {} y {} pads {}/{} strides {} dilations {}{}",
                     g.transpose ? "backward-data" : "forward", o.nhwc ? " NHWC" : "", Join(g.conv_x), Join(g.conv_w), Join(g.conv_y),
                     Join(g.pre_pads), Join(g.post_pads), Join(g.strides), Join(g.dilations),
                     o.fused ? (o.residual ? " fused with bias/residual/activation" : " fused with bias/activation")
                             : "");
}

// Everything a plan depends on: the geometry (cuDNN's view and the window copy), the graph options, the engine.
std::string PlanKey(const ConvGeometry& g, const ConvGraphOptions& o, const std::string& engine) {
  return fmt::format("{}|y {}|M {} inner {} deg {} win {} {}|dt {} fused {} bias {} res {} act {} align {} tf32 {}|{}",
                     Describe(g, o), Join(g.y_node), g.out_channels, g.out_inner, g.degenerate, g.window,
                     g.window_elements, static_cast<int>(o.dtype), o.fused, o.has_bias, o.residual,
                     o.act ? static_cast<int>(*o.act) : -1, o.alignment, o.allow_tf32, engine);
}

// Plans and engine lists already built in this process (finalizing a cuDNN plan costs milliseconds, and a
// network repeats its convolution shapes; the builder lists, times and then recreates the same ones). Keyed by
// the current device too (DeviceKey): a plan is finalized with that device's cuDNN handle and runs there only, and
// what heuristics list depends on the GPU.
std::map<std::string, std::shared_ptr<const ConvPlan>>& PlanCache() {
  static std::map<std::string, std::shared_ptr<const ConvPlan>> cache;
  return cache;
}
std::map<std::string, std::vector<std::string>>& EngineListCache() {
  static std::map<std::string, std::vector<std::string>> cache;
  return cache;
}

Result<std::string> DeviceKey(const std::string& key) {
  KILN_ASSIGN_OR_RETURN(const int device, CurrentDevice());
  return fmt::format("dev {}|{}", device, key);
}

}  // namespace

Result<std::vector<std::string>> ListConvEngines(const ConvGeometry& g, const ConvGraphOptions& o, size_t limit) {
  std::lock_guard<std::mutex> lock(dnn::BuildMutex());
  KILN_ASSIGN_OR_RETURN(const std::string key, DeviceKey(PlanKey(g, o, fmt::format("list {}", limit))));
  if (auto it = EngineListCache().find(key); it != EngineListCache().end()) return it->second;
  KILN_ASSIGN_OR_RETURN(cudnnHandle_t handle, dnn::BuildHandle());
  KILN_ASSIGN_OR_RETURN(GraphParts parts, BuildGraph(g, o, handle));
  std::vector<std::string> names;
  std::set<std::string> seen;
  KILN_RETURN_IF_ERROR(ForEachHeuristicConfig(parts, o, [&](dnn::Desc& cfg, const dnn::EngineChoice& c) {
    const std::string name = c.Name();
    if (!seen.insert(name).second) return false;
    if (dnn::MakePlan(handle, cfg).ok()) names.push_back(name);
    return names.size() >= limit;
  }));
  EngineListCache()[key] = names;
  return names;
}

Result<std::shared_ptr<const ConvPlan>> BuildConvPlan(const ConvGeometry& g, const ConvGraphOptions& o,
                                                      const std::optional<dnn::EngineChoice>& choice) {
  std::lock_guard<std::mutex> lock(dnn::BuildMutex());
  KILN_ASSIGN_OR_RETURN(const std::string key,
                        DeviceKey(PlanKey(g, o, choice ? choice->Name() : std::string("auto"))));
  if (auto it = PlanCache().find(key); it != PlanCache().end()) return it->second;
  KILN_ASSIGN_OR_RETURN(cudnnHandle_t handle, dnn::BuildHandle());
  KILN_ASSIGN_OR_RETURN(GraphParts parts, BuildGraph(g, o, handle));
  auto p = std::make_shared<ConvPlan>();
  p->geo = g;
  if (choice) {
    dnn::Desc engine;
    auto cfg = dnn::MakeConfig(*parts.graph, *choice, &engine);
    if (!cfg.ok())
      return Err(cfg.status().code(), "cuDNN engine '{}' cannot run the convolution ({}): {}", choice->Name(),
                 Describe(g, o), cfg.status().message());
    KILN_ASSIGN_OR_RETURN(dnn::EngineChoice described, dnn::DescribeConfig(*cfg));
    if (!Acceptable(described, o))
      return Err(StatusCode::kInvalidArgument,
                 "cuDNN engine '{}' uses TF32 tensor cores or reduced-precision accumulation, which this build "
                 "forbids (--noTF32 or a float16/bfloat16 layer); pick another tactic",
                 choice->Name());
    auto plan = dnn::MakePlan(handle, *cfg);
    if (!plan.ok())
      return Err(plan.status().code(), "cuDNN engine '{}' cannot run the convolution ({}): {}", choice->Name(),
                 Describe(g, o), plan.status().message());
    p->plan = std::move(*plan);
    p->engine = choice->Name();
    p->runtime_compiled = described.HasBehavior(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
    p->keep.push_back(std::move(engine));
    p->keep.push_back(std::move(*cfg));
  } else {
    Status last;
    KILN_RETURN_IF_ERROR(ForEachHeuristicConfig(parts, o, [&](dnn::Desc& cfg, const dnn::EngineChoice& c) {
      auto plan = dnn::MakePlan(handle, cfg);
      if (!plan.ok()) {
        last = plan.status();
        return false;
      }
      p->plan = std::move(*plan);
      p->engine = c.Name();
      p->runtime_compiled = c.HasBehavior(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
      p->keep.push_back(std::move(cfg));
      return true;
    }));
    if (!p->plan.get())
      return Err(StatusCode::kUnsupported, "no cuDNN engine can run the convolution ({}){}{}", Describe(g, o),
                 last.ok() ? "" : ": ", last.ok() ? std::string() : last.message());
  }
  KILN_ASSIGN_OR_RETURN(int64_t ws, dnn::PlanWorkspaceBytes(p->plan));
  p->cudnn_workspace = static_cast<size_t>(ws);
  for (auto& d : parts.keep) p->keep.push_back(std::move(d));
  std::shared_ptr<const ConvPlan> plan(std::move(p));
  PlanCache()[key] = plan;
  return plan;
}

}  // namespace kiln::cuda
