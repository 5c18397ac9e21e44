// CUDA layers of kiln.QConv (ops/quantized_ops.h):
//   - "int8-sm90-<M>x<N>x<K>" (4 tiles): CUTLASS's Hopper implicit-GEMM convolution on int8 tensor cores
//     (cutlass/qconv_sm90.h) with the epilogue fused; "int8-sm90-gemm-<M>x<N>" (3 tiles) for a 1x1, stride-1,
//     unpadded convolution: the persistent GEMM of cutlass/qgemm_sm90.h over the N*H*W positions (the
//     convolution kernel is not persistent, and one CTA per SM leaves short problems latency-bound). 2-D, NHWC (kiln_layout, set by layout planning), ungrouped,
//     symmetric int8 input, float32 or symmetric int8 output, activation None / Relu / Clip, input channels a
//     multiple of 16 and output channels of 16 (int8 output) or 4; sm_90 devices. The layer runs the tiled kernel
//     for a run whose shapes the tensor-core kernel cannot take.
//   - "int8-tiled": the tiled int8 GEMM of quantized.cu, any QConv (1 to 3 spatial dims, groups, zero points,
//     NCHW or NHWC): exact, the GPU's reference for INT8.
// The optimizer creates a QConv on this backend only where the tensor-core kernel takes it (preferred_for).
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/per_device.h"
#include "backends/cuda/quantized_kernels.h"
#include "backends/cuda/quantized_layer_util.h"
#include "core/error.h"
#include "ops/conv_geometry.h"
#include "ops/quantized_ops.h"

#if defined(KILN_HAVE_CUTLASS_SM90)
#include "backends/cuda/cutlass/qconv_sm90.h"
#include "backends/cuda/cutlass/qgemm_sm90.h"
#endif

namespace kiln::cuda::quantized {
namespace {

// What a QConv node fixes at build time, shared by its layers.
struct ConvPlan {
  std::shared_ptr<QWeights> q;  // [M, C/group, kernel...] as in the graph, for the tiled kernel
  QGemmArgs base;
  WindowParams wp;
  int64_t nsp = 0;
  int off = 0;  // spatial dims are right-aligned in QGemmArgs' 3 slots
  bool nhwc = false;
  std::string where;
  std::shared_ptr<Node> attrs;  // the node's attributes (no graph links), for auto_pad at each run's size
};

Result<bool> IsNhwc(const Node& n) {
  const std::string layout = n.gets("kiln_layout", "NCHW");
  if (layout != "NCHW" && layout != "NHWC")
    return Err(StatusCode::kInvalidModel, "{}: kiln_layout must be NCHW or NHWC, got '{}'", n.Where(), layout);
  return layout == "NHWC";
}

// `upload`: put the weight and its scales on the device (a layer's plan); without, the geometry alone (tactic listing).
Result<ConvPlan> MakePlan(const Node& n, bool upload) {
  ConvPlan c;
  KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
  const Tensor* w = ConstWeight(n);
  if (!w || w->rank() < 3) return Unsupported(n, "a weight that is not a constant int8 [M, C/group, kernel...]");
  c.nsp = w->rank() - 2;
  if (c.nsp > 3) return Unsupported(n, fmt::format("{} spatial dims (at most 3)", c.nsp));
  KILN_ASSIGN_OR_RETURN(c.nhwc, IsNhwc(n));
  if (c.nhwc && c.nsp != 2) return Unsupported(n, "kiln_layout NHWC with other than 2 spatial dims");
  std::vector<int64_t> kw(w->shape().begin() + 2, w->shape().end());
  KILN_ASSIGN_OR_RETURN(c.wp, ReadWindowParams(n, c.nsp, kw, false));
  if (upload) {
    KILN_ASSIGN_OR_RETURN(c.q, Upload(n, *w, p.w_scales));
  } else {
    c.q = std::make_shared<QWeights>();
  }
  KILN_ASSIGN_OR_RETURN(c.base, BaseArgs(n, p, *c.q));
  c.base.conv = true;
  c.base.nhwc = c.nhwc;
  c.base.groups = c.wp.group;
  c.base.out_channels = w->dim(0);
  c.base.m = w->dim(0) / c.wp.group;
  c.base.k = w->numel() / std::max<int64_t>(1, w->dim(0));
  c.off = 3 - static_cast<int>(c.nsp);
  for (int64_t d = 0; d < c.nsp; ++d) {
    c.base.kernel[c.off + d] = static_cast<int>(kw[d]);
    c.base.stride[c.off + d] = static_cast<int>(c.wp.strides[d]);
    c.base.dil[c.off + d] = static_cast<int>(c.wp.dilations[d]);
  }
  c.where = n.Where();
  c.attrs = std::make_shared<Node>();
  c.attrs->name = n.name;
  c.attrs->op_type = n.op_type;
  c.attrs->domain = n.domain;
  c.attrs->attrs = n.attrs;
  return c;
}

// The run's geometry: the tiled kernel's arguments at these shapes (pads resolved as the CPU reference does).
Result<QGemmArgs> RunArgs(const ConvPlan& c, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) {
  QGemmArgs a = c.base;
  const auto& xs = in[0].shape;
  const auto& ys = out[0].shape;
  if (static_cast<int64_t>(xs.size()) != c.nsp + 2 || ys.size() != xs.size())
    return Err(StatusCode::kInvalidArgument, "{}: input {} and output {} do not have rank {}", c.where,
               ShapeToString(xs), ShapeToString(ys), c.nsp + 2);
  // spatial dims start at 1 in NHWC, at 2 in NC(D)HW
  const size_t sp = c.nhwc ? 1 : 2;
  WindowParams w = c.wp;
  KILN_RETURN_IF_ERROR(
      ForwardOutputSizes(*c.attrs, w, std::vector<int64_t>(xs.begin() + sp, xs.begin() + sp + c.nsp)).status());
  a.x = in[0].data;
  a.x_unsigned = in[0].dtype == DataType::kUInt8;
  a.batch = xs[0];
  a.channels = c.nhwc ? xs[3] : xs[1];
  a.o = 1;
  for (int64_t d = 0; d < c.nsp; ++d) {
    a.in[c.off + d] = static_cast<int>(xs[sp + d]);
    a.out[c.off + d] = static_cast<int>(ys[sp + d]);
    a.pad[c.off + d] = static_cast<int>(w.pads[d]);
    a.o *= ys[sp + d];
  }
  a.bias = OptionalFloat(in, 2);
  SetResidual(a, in);
  a.y = out[0].data;
  return a;
}

Status RunTiled(const ConvPlan& c, const QGemmArgs& a, cudaStream_t stream) {
  Status st = KILN_CUDA_STATUS(LaunchQGemm(a, stream));
  return st.ok() ? st : st.WithContext(c.where);
}

#if defined(KILN_HAVE_CUTLASS_SM90)

constexpr const char* kSm90Tactics[cutlass_sm90::kNumTiles] = {"int8-sm90-128x128x128", "int8-sm90-128x64x128",
                                                                "int8-sm90-128x128x64", "int8-sm90-128x64x64"};
constexpr cutlass_sm90::Tile kSm90Tiles[cutlass_sm90::kNumTiles] = {
    cutlass_sm90::Tile::k128x128x128, cutlass_sm90::Tile::k128x64x128, cutlass_sm90::Tile::k128x128x64,
    cutlass_sm90::Tile::k128x64x64};

std::optional<cutlass_sm90::Tile> Sm90Tile(const std::string& tactic) {
  for (int i = 0; i < cutlass_sm90::kNumTiles; ++i)
    if (tactic == kSm90Tactics[i]) return kSm90Tiles[i];
  return std::nullopt;
}

// A 1x1 convolution with stride 1 and no padding reads its NHWC input as an [N*H*W, C] matrix.
bool IsPointwiseConv(const QGemmArgs& a) {
  return a.kernel[1] == 1 && a.kernel[2] == 1 && a.stride[1] == 1 && a.stride[2] == 1;
}

// Why node n's kind of QConv is not one the tensor-core kernel runs (empty: it is). `need_nhwc`: false for the
// optimizer's candidate, which layout planning has not yet made NHWC (it will for a 2-D ungrouped QConv with
// int8 input of zero point 0 and symmetric pads).
std::string Sm90Ineligible(const Node& n, bool need_nhwc) {
  if (!Sm90Device()) return "not a compute capability 9.0 device";
  const Value* x = n.input(0);
  if (!x || x->dtype != DataType::kInt8) return "input not int8";
  const Tensor* w = ConstWeight(n);
  if (!w || w->rank() != 4) return "not a 2-D convolution with a constant int8 weight";
  if (n.geti("group", 1) != 1) return "grouped";
  auto p = quant_attrs::Read(n);
  if (!p.ok()) return p.status().message();
  if (p->x_zero_point != 0) return "input zero point not 0";
  if (p->y_type != DataType::kFloat32 && !(p->y_type == DataType::kInt8 && p->y_zero_point == 0))
    return "output neither float32 nor symmetric int8";
  if (p->activation != fused::Act::kNone && p->activation != fused::Act::kRelu && p->activation != fused::Act::kClip)
    return "activation other than Relu or Clip";
  const int64_t k = w->dim(0), cin = w->dim(1);
  if (k % (p->y_type == DataType::kInt8 ? 16 : 4) != 0) return "output channels not a multiple of 16 (int8) / 4";
  auto nhwc = IsNhwc(n);
  if (!nhwc.ok()) return nhwc.status().message();
  if (need_nhwc) {
    if (!*nhwc) return "not NHWC";
    if (cin % 16 != 0) return "input channels not a multiple of 16";
  } else if (cin % 16 != 0) {
    // (An RGB stem stays float: padded to 16 channels, its tensor-core tiles would mostly multiply zeros.)
    return "input channels not a multiple of 16";
  }
  const std::string ap = n.gets("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && !ap.empty()) return "auto_pad SAME";
  const std::vector<int64_t> pads = n.getints("pads", {0, 0, 0, 0});
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) return "asymmetric pads";
  return {};
}

cutlass_sm90::QConvProblem Sm90Problem(const QGemmArgs& a, bool int8_out, bool residual) {
  cutlass_sm90::QConvProblem p;
  p.n = static_cast<int>(a.batch);
  p.h = a.in[1];
  p.w = a.in[2];
  p.c = static_cast<int>(a.channels);
  p.k = static_cast<int>(a.out_channels);
  p.r = a.kernel[1];
  p.s = a.kernel[2];
  p.pad_h = a.pad[1];
  p.pad_w = a.pad[2];
  p.stride_h = a.stride[1];
  p.stride_w = a.stride[2];
  p.dil_h = a.dil[1];
  p.dil_w = a.dil[2];
  p.int8_output = int8_out;
  p.residual = residual;
  p.residual_int8 = residual && a.r_scale > 0;
  return p;
}

cutlass_sm90::QGemmProblem GemmProblem(const QGemmArgs& a, bool int8_out, bool residual) {
  cutlass_sm90::QGemmProblem p;
  p.m = a.batch * a.in[1] * a.in[2];
  p.n = static_cast<int>(a.out_channels);
  p.k = static_cast<int>(a.channels);
  p.int8_output = int8_out;
  p.residual = residual;
  p.residual_int8 = residual && a.r_scale > 0;
  return p;
}

// Tensor-core QConv: the weight repacked to KRSC, the per-channel scale x_scale * w_scale[k] (the CPU's float
// product), the activation as a clamp.
class QConvSm90Layer : public Layer {
 public:
  QConvSm90Layer(ConvPlan plan, std::optional<cutlass_sm90::Tile> tile, std::optional<cutlass_sm90::GemmTile> gemm,
                 DeviceBuffer w_krsc, DeviceBuffer scale, float lo, float hi)
      : c_(std::move(plan)), tile_(tile), gemm_(gemm), w_(std::move(w_krsc)), scale_(std::move(scale)), lo_(lo),
        hi_(hi) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>& out) const override {
    std::vector<DeviceTensor> o = out;
    auto a = RunArgs(c_, in, o);
    if (!a.ok()) return 0;
    return Unsupported(*a, HasResidual(in)) ? 0 : Workspace(*a, HasResidual(in));
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    KILN_ASSIGN_OR_RETURN(const QGemmArgs a, RunArgs(c_, in, out));
    if (a.batch == 0 || a.o == 0 || a.out_channels == 0) return Status::Ok();
    const bool residual = a.residual != nullptr || a.residual_i8 != nullptr;
    // A float16 residual (a crafted model: the optimizer gives convolutions none) runs on the tiled kernel.
    if (a.residual_f16 || !TensorCoreAligned(a) || Unsupported(a, residual) ||
        ctx.workspace_bytes < Workspace(a, residual))
      return RunTiled(c_, a, ctx.stream);
    const char* e = nullptr;
    if (gemm_) {
      // KRSC with R = S = 1 is the [K, C] matrix the GEMM reads.
      const auto o = TensorCoreOperands<cutlass_sm90::QGemmOperands>(a, w_.get(), scale_.get(), lo_, hi_);
      e = cutlass_sm90::Run(GemmProblem(a, Int8Out(), residual), *gemm_, o, ctx.workspace, ctx.stream);
    } else {
      const auto o = TensorCoreOperands<cutlass_sm90::QConvOperands>(a, w_.get(), scale_.get(), lo_, hi_);
      e = cutlass_sm90::Run(Sm90Problem(a, Int8Out(), residual), *tile_, o, ctx.workspace, ctx.stream);
    }
    if (e) return Err(StatusCode::kCudaError, "{}: {} ({})", c_.where, e, cudaGetErrorString(cudaGetLastError()));
    return Status::Ok();
  }

 private:
  bool Int8Out() const { return c_.base.y_dtype == static_cast<int>(DataType::kInt8); }
  static bool HasResidual(const std::vector<DeviceTensor>& in) { return in.size() > 3 && in[3].present(); }
  const char* Unsupported(const QGemmArgs& a, bool residual) const {
    if (gemm_) {
      if (!IsPointwiseConv(a) || a.pad[1] != 0 || a.pad[2] != 0) return "not a 1x1, stride-1, unpadded convolution";
      return cutlass_sm90::Unsupported(GemmProblem(a, Int8Out(), residual), *gemm_);
    }
    return cutlass_sm90::Unsupported(Sm90Problem(a, Int8Out(), residual), *tile_);
  }
  size_t Workspace(const QGemmArgs& a, bool residual) const {
    return gemm_ ? cutlass_sm90::WorkspaceBytes(GemmProblem(a, Int8Out(), residual), *gemm_)
                 : cutlass_sm90::WorkspaceBytes(Sm90Problem(a, Int8Out(), residual), *tile_);
  }
  ConvPlan c_;
  std::optional<cutlass_sm90::Tile> tile_;
  std::optional<cutlass_sm90::GemmTile> gemm_;
  DeviceBuffer w_, scale_;
  float lo_, hi_;
};

Result<std::unique_ptr<Layer>> CreateSm90(const Node& n, ConvPlan plan, std::optional<cutlass_sm90::Tile> tile,
                                          std::optional<cutlass_sm90::GemmTile> gemm) {
  if (const std::string why = Sm90Ineligible(n, true); !why.empty())
    return Err(StatusCode::kInvalidArgument, "{}: the int8-sm90 tactics do not take this layer: {}", n.Where(), why);
  KILN_ASSIGN_OR_RETURN(const quant_attrs::Params p, quant_attrs::Read(n));
  const Tensor& w = *ConstWeight(n);
  const int64_t k = w.dim(0), cin = w.dim(1), r = w.dim(2), s = w.dim(3);
  Tensor krsc(DataType::kInt8, {k, r, s, cin});
  const int8_t* src = w.data<int8_t>();
  int8_t* dst = krsc.data<int8_t>();
  for (int64_t o = 0; o < k; ++o)
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t y = 0; y < r; ++y)
        for (int64_t x = 0; x < s; ++x) dst[((o * r + y) * s + x) * cin + c] = src[((o * cin + c) * r + y) * s + x];
  std::vector<float> scale(static_cast<size_t>(k));
  for (int64_t o = 0; o < k; ++o) scale[o] = p.x_scale * p.w_scale(o);
  KILN_ASSIGN_OR_RETURN(DeviceBuffer wd, UploadToDevice(krsc.raw(), krsc.nbytes(), n.name + "/weight_krsc"));
  KILN_ASSIGN_OR_RETURN(DeviceBuffer sd, UploadToDevice(scale.data(), scale.size() * sizeof(float),
                                                        n.name + "/channel_scale"));
  float lo = 0, hi = 0;
  ClampOf(p, &lo, &hi);
  return std::unique_ptr<Layer>(
      std::make_unique<QConvSm90Layer>(std::move(plan), tile, gemm, std::move(wd), std::move(sd), lo, hi));
}

#endif  // KILN_HAVE_CUTLASS_SM90

Result<std::vector<std::string>> QConvTactics(const LayerSpec& spec) {
  std::vector<std::string> tactics;
#if defined(KILN_HAVE_CUTLASS_SM90)
  if (Sm90Ineligible(spec.node, true).empty()) {
    KILN_ASSIGN_OR_RETURN(const ConvPlan plan, MakePlan(spec.node, false));
    const bool residual = spec.node.input(3) != nullptr;
    const bool int8_out = plan.base.y_dtype == static_cast<int>(DataType::kInt8);
    std::optional<QGemmArgs> run;  // the geometry at the tuning shapes, where known
    if (!spec.input_shapes.empty() && !spec.output_shapes.empty()) {
      std::vector<DeviceTensor> in(1), out(1);
      in[0].shape = spec.input_shapes[0];
      out[0].shape = spec.output_shapes[0];
      if (auto a = RunArgs(plan, in, out); a.ok()) run = *a;
    }
    for (int i = 0; i < cutlass_sm90::kNumTiles; ++i)
      if (!run || !cutlass_sm90::Unsupported(Sm90Problem(*run, int8_out, residual), kSm90Tiles[i]))
        tactics.push_back(kSm90Tactics[i]);
    // (Sm90Ineligible already refused auto_pad SAME.)
    const std::vector<int64_t> pads = spec.node.getints("pads", {0, 0, 0, 0});
    const bool unpadded = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
    if (IsPointwiseConv(plan.base) && unpadded)
      for (int i = 0; i < cutlass_sm90::kNumGemmTiles; ++i)
        if (!run || !cutlass_sm90::Unsupported(GemmProblem(*run, int8_out, residual), kGemmTiles[i]))
          tactics.push_back(kGemmTactics[i]);
  }
#endif
  tactics.push_back(kTactic);
  return tactics;
}

Result<std::unique_ptr<Layer>> CreateQConv(const LayerSpec& spec, const std::string& tactic) {
  const Node& n = spec.node;
  KILN_ASSIGN_OR_RETURN(ConvPlan plan, MakePlan(n, true));
#if defined(KILN_HAVE_CUTLASS_SM90)
  if (const auto tile = Sm90Tile(tactic)) return CreateSm90(n, std::move(plan), tile, std::nullopt);
  if (const auto gemm = GemmTileOf(tactic)) return CreateSm90(n, std::move(plan), std::nullopt, gemm);
#endif
  if (tactic != kTactic) return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}'", n.Where(), tactic);
  auto c = std::make_shared<ConvPlan>(std::move(plan));
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [c](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        KILN_ASSIGN_OR_RETURN(const QGemmArgs a, RunArgs(*c, in, out));
        return RunTiled(*c, a, ctx.stream);
      }));
}

}  // namespace

bool Sm90Device() {
  static PerDeviceValue sm90;  // the GPUs of one machine may differ
  return sm90.Get([] {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) return 0;
    return major == 9 && minor == 0 ? 1 : 0;
  }) != 0;
}

bool ClampOf(const quant_attrs::Params& p, float* lo, float* hi) {
  *lo = -std::numeric_limits<float>::infinity();  // infinite bounds: +-Inf pass through, as on the CPU
  *hi = std::numeric_limits<float>::infinity();
  if (p.activation == fused::Act::kRelu) *lo = 0.f;
  else if (p.activation == fused::Act::kClip) *lo = p.act_alpha, *hi = p.act_beta;
  else if (p.activation != fused::Act::kNone) return false;
  return true;
}

std::string QConvTensorCoresUnavailable() {
#if defined(KILN_HAVE_CUTLASS_SM90)
  return Sm90Device() ? std::string() : "its INT8 tensor-core convolution needs a compute capability 9.0 GPU (Hopper)";
#else
  return "this build has no INT8 tensor-core convolution (CUTLASS was not found when it was configured: "
         "scripts/deps installs it)";
#endif
}

LayerFactory QConvFactory() {
  LayerFactory f = QFactory(CreateQConv, QConvTactics);
#if defined(KILN_HAVE_CUTLASS_SM90)
  f.preferred_for = [](const Node& n) { return Sm90Ineligible(n, false).empty(); };
#endif
  return f;
}

}  // namespace kiln::cuda::quantized
