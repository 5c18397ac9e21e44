// CUDA layers of the signal-processing ops with the CPU reference's semantics (backends/cpu/signal.cpp):
//  - DFT: forward or inverse (scaled by 1 / n), one-sided (RFFT; IRFFT from the first n / 2 + 1 bins, mirrored),
//    dft_length zero-padding or cropping, any signal axis (input 2, or the axis attribute where the node was not
//    imported: default -2), real ([..., 1]) or complex ([..., 2]) signals.
//  - STFT: frames of frame_length (or the window's length, or the whole signal) every frame_step samples, times the
//    window where given, each transformed; one-sided keeps frame_length / 2 + 1 bins.
//  - MelWeightMatrix: the triangular mel filters, their edges from cpu::MelEdges (the CPU's own host code), drawn by
//    a generator kernel.
// DFT and STFT gather their lines into a contiguous complex buffer in the workspace (spectral.cu), transform it in
// place with a batched cuFFT plan (fft_plan.h) and store the bins asked for as the output's type. Tactics:
// "cufft-f64" (the default) transforms in double as the CPU reference does, for every float type; "cufft-f32"
// transforms float32, float16 and bfloat16 signals in float (faster, with float32's rounding: about 1e-7 of the
// spectrum's norm per bin, so bins near zero differ from the reference by more than 1e-5 on large inputs).
// dft_length, the axis, frame_step and frame_length must be known on the host (constants, or values the runtime
// keeps on the host); the output shapes shape inference gave are checked against them.
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/signal.h"
#include "backends/cuda/families.h"
#include "backends/cuda/fft_plan.h"
#include "backends/cuda/spectral_kernels.h"
#include "backends/cuda/tensor_layers_util.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

using tensor_layers::Capture;
using tensor_layers::Has;
using tensor_layers::HostValue;
using tensor_layers::LaunchStatus;
using tensor_layers::NodeInfo;

constexpr const char* kTacticF64 = "cufft-f64";
constexpr const char* kTacticF32 = "cufft-f32";

// Input i's value as an int32/int64 scalar known on the host.
Result<int64_t> HostScalarInt(const NodeInfo& ni, const std::vector<DeviceTensor>& ins, size_t i, const char* what) {
  const Tensor* t = HostValue(ni, ins, i);
  if (!t)
    return Err(StatusCode::kUnsupported,
               "{}: {} (input {}) is not known on the host; the CUDA {} layer needs it as a constant or a small "
               "integer value the runtime keeps on the host",
               ni.node().Where(), what, i, ni.node().op_type);
  if (t->numel() != 1 || (t->dtype() != DataType::kInt32 && t->dtype() != DataType::kInt64))
    return Err(StatusCode::kInvalidArgument, "{}: {} (input {}) must be an int32 or int64 scalar, got {}",
               ni.node().Where(), what, i, t->Describe());
  return t->GetAsInt(0);
}

Status CheckOutput(const NodeInfo& ni, const DeviceTensor& y, DataType dtype, const std::vector<int64_t>& shape) {
  if (y.dtype != dtype || y.shape != shape)
    return Err(StatusCode::kInternal, "{}: the output is {}{} but the inputs give {}{}", ni.node().Where(),
               DataTypeName(y.dtype), ShapeToString(y.shape), DataTypeName(dtype), ShapeToString(shape));
  return Status::Ok();
}

size_t RoundUp256(size_t b) { return (b + 255) / 256 * 256; }

// What a DFT or STFT launch transforms: `lines` transforms of `len` points, in a buffer of BufferBytes().
struct Transform {
  int64_t lines = 0, len = 0;
  bool f64 = true;
  size_t BufferBytes() const {
    return RoundUp256(static_cast<size_t>(lines * len) * 2 * (f64 ? sizeof(double) : sizeof(float)));
  }
};

// The shared part of the DFT and STFT layers: the plan cache, workspace size and the transform itself.
class SpectralLayer : public Layer {
 public:
  SpectralLayer(NodeInfo ni, bool f64) : ni_(std::move(ni)), f64_(f64), plans_(ni_.node().Where()) {}

 protected:
  // The buffer plus the plan's work area (the plan is made here, before any capture: fft_plan.h).
  size_t TransformWorkspace(const Transform& t) const {
    if (t.lines * t.len == 0) return 0;
    auto work = plans_.WorkBytes(t.len, t.lines, t.f64);
    return t.BufferBytes() + (work.ok() ? *work : 0);  // a failed plan is reported by Enqueue
  }
  Status RequireBuffer(const LaunchContext& ctx, const Transform& t) const {
    if (ctx.workspace == nullptr || ctx.workspace_bytes < t.BufferBytes())
      return Err(StatusCode::kInternal, "{}: the transform needs {} bytes of workspace, {} were given",
                 ni_.node().Where(), t.BufferBytes(), ctx.workspace_bytes);
    return Status::Ok();
  }
  Status Run(const LaunchContext& ctx, const Transform& t, bool inverse) const {
    char* work = static_cast<char*>(ctx.workspace) + t.BufferBytes();
    return plans_.Exec(t.len, t.lines, t.f64, inverse, ctx.workspace, work, ctx.workspace_bytes - t.BufferBytes(),
                       ctx.stream);
  }

  NodeInfo ni_;
  bool f64_;

 private:
  FftPlans plans_;
};

// ---- DFT ----

struct DftShape {
  int64_t outer = 1, m = 0, inner = 1, channels = 1, len = 0, out_len = 0, out_channels = 2;
  bool irfft = false;
  Transform t;
};

class DftLayer : public SpectralLayer {
 public:
  DftLayer(NodeInfo ni, bool f64, bool inverse, bool onesided, int64_t axis)
      : SpectralLayer(std::move(ni), f64), inverse_(inverse), onesided_(onesided), axis_(axis) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& ins, const std::vector<DeviceTensor>& outs) const override {
    auto s = ShapeOf(ins, outs);
    return s.ok() ? TransformWorkspace(s->t) : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& ins,
                 std::vector<DeviceTensor>& outs) const override {
    KILN_ASSIGN_OR_RETURN(const DftShape s, ShapeOf(ins, outs));
    DeviceTensor& y = outs[0];
    if (y.numel() == 0) return Status::Ok();
    KILN_RETURN_IF_ERROR(RequireBuffer(ctx, s.t));
    const int dtype = static_cast<int>(ins[0].dtype);
    KILN_RETURN_IF_ERROR(LaunchStatus(ni_,
                                      LaunchDftGather(dtype, s.t.f64, ins[0].data, ctx.workspace, s.outer, s.m,
                                                      s.inner, static_cast<int>(s.channels), s.len, s.irfft,
                                                      ctx.stream),
                                      "LaunchDftGather"));
    KILN_RETURN_IF_ERROR(Run(ctx, s.t, inverse_));
    const double scale = inverse_ ? 1.0 / static_cast<double>(s.len) : 1.0;
    return LaunchStatus(ni_,
                        LaunchSpectrumStore(dtype, s.t.f64, ctx.workspace, y.data, s.outer, s.len, s.inner, s.out_len,
                                            static_cast<int>(s.out_channels), scale, ctx.stream),
                        "LaunchSpectrumStore");
  }

 private:
  Result<DftShape> ShapeOf(const std::vector<DeviceTensor>& ins, const std::vector<DeviceTensor>& outs) const {
    const Node& n = ni_.node();
    if (!Has(ins, 0) || outs.empty()) return Err(StatusCode::kInvalidArgument, "{}: the input is required", n.Where());
    const DeviceTensor& x = ins[0];
    const int64_t r = static_cast<int64_t>(x.shape.size());
    if (r < 2 || (x.shape[r - 1] != 1 && x.shape[r - 1] != 2))
      return Err(StatusCode::kInvalidArgument, "{}: the input must be [signal dims..., 1 or 2], got {}", n.Where(),
                 ShapeToString(x.shape));
    int64_t axis = axis_;
    if (Has(ins, 2)) {
      KILN_ASSIGN_OR_RETURN(axis, HostScalarInt(ni_, ins, 2, "axis"));
    }
    const int64_t a = axis < 0 ? axis + r : axis;
    if (a < 0 || a > r - 2)
      return Err(StatusCode::kInvalidArgument,
                 "{}: axis {} is out of range for shape {} (the last dim holds the complex parts)", n.Where(), axis,
                 ShapeToString(x.shape));
    DftShape s;
    s.m = x.shape[a];
    s.channels = x.shape[r - 1];
    s.irfft = onesided_ && inverse_;
    s.len = s.irfft ? 2 * (s.m - 1) : s.m;
    if (Has(ins, 1)) {
      KILN_ASSIGN_OR_RETURN(s.len, HostScalarInt(ni_, ins, 1, "dft_length"));
    }
    if (s.len < 1)
      return Err(StatusCode::kInvalidArgument, "{}: the transform length (dft_length) must be at least 1, got {}",
                 n.Where(), s.len);
    s.out_len = onesided_ && !inverse_ ? s.len / 2 + 1 : s.len;
    s.out_channels = s.irfft ? 1 : 2;
    std::vector<int64_t> out_shape = x.shape;
    out_shape[a] = s.out_len;
    out_shape[r - 1] = s.out_channels;
    KILN_RETURN_IF_ERROR(CheckOutput(ni_, outs[0], x.dtype, out_shape));
    for (int64_t d = 0; d < a; ++d) s.outer *= x.shape[d];
    for (int64_t d = a + 1; d < r - 1; ++d) s.inner *= x.shape[d];
    s.t = Transform{s.outer * s.inner, s.len, f64_};
    return s;
  }

  bool inverse_, onesided_;
  int64_t axis_;
};

// ---- STFT ----

struct StftShape {
  int64_t batch = 0, signal = 0, channels = 1, step = 1, frame = 0, frames = 0, bins = 0;
  Transform t;
};

class StftLayer : public SpectralLayer {
 public:
  StftLayer(NodeInfo ni, bool f64, bool onesided) : SpectralLayer(std::move(ni), f64), onesided_(onesided) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& ins, const std::vector<DeviceTensor>& outs) const override {
    auto s = ShapeOf(ins, outs);
    return s.ok() ? TransformWorkspace(s->t) : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& ins,
                 std::vector<DeviceTensor>& outs) const override {
    KILN_ASSIGN_OR_RETURN(const StftShape s, ShapeOf(ins, outs));
    DeviceTensor& y = outs[0];
    if (y.numel() == 0) return Status::Ok();
    KILN_RETURN_IF_ERROR(RequireBuffer(ctx, s.t));
    const int dtype = static_cast<int>(ins[0].dtype);
    const void* window = Has(ins, 2) ? ins[2].data : nullptr;
    KILN_RETURN_IF_ERROR(LaunchStatus(ni_,
                                      LaunchStftFrames(dtype, s.t.f64, ins[0].data, window, ctx.workspace, s.batch,
                                                       s.signal, static_cast<int>(s.channels), s.frames, s.frame,
                                                       s.step, ctx.stream),
                                      "LaunchStftFrames"));
    KILN_RETURN_IF_ERROR(Run(ctx, s.t, false));
    return LaunchStatus(ni_,
                        LaunchSpectrumStore(dtype, s.t.f64, ctx.workspace, y.data, s.batch * s.frames, s.frame, 1,
                                            s.bins, 2, 1.0, ctx.stream),
                        "LaunchSpectrumStore");
  }

 private:
  Result<StftShape> ShapeOf(const std::vector<DeviceTensor>& ins, const std::vector<DeviceTensor>& outs) const {
    const Node& n = ni_.node();
    if (!Has(ins, 0) || !Has(ins, 1) || outs.empty())
      return Err(StatusCode::kInvalidArgument, "{}: the signal and frame_step are required", n.Where());
    const DeviceTensor& x = ins[0];
    if (x.shape.size() != 3 || (x.shape[2] != 1 && x.shape[2] != 2))
      return Err(StatusCode::kInvalidArgument, "{}: the signal must be [batch, length, 1 or 2], got {}", n.Where(),
                 ShapeToString(x.shape));
    StftShape s;
    s.batch = x.shape[0];
    s.signal = x.shape[1];
    s.channels = x.shape[2];
    KILN_ASSIGN_OR_RETURN(s.step, HostScalarInt(ni_, ins, 1, "frame_step"));
    const bool has_window = Has(ins, 2);
    if (has_window && (ins[2].shape.size() != 1 || ins[2].dtype != x.dtype))
      return Err(StatusCode::kInvalidArgument, "{}: the window {}{} must be 1-D of the signal's type {}", n.Where(),
                 DataTypeName(ins[2].dtype), ShapeToString(ins[2].shape), DataTypeName(x.dtype));
    s.frame = has_window ? ins[2].shape[0] : s.signal;
    if (Has(ins, 3)) {
      KILN_ASSIGN_OR_RETURN(s.frame, HostScalarInt(ni_, ins, 3, "frame_length"));
      if (has_window && ins[2].shape[0] != s.frame)
        return Err(StatusCode::kInvalidArgument, "{}: the window has {} elements but frame_length is {}", n.Where(),
                   ins[2].shape[0], s.frame);
    }
    if (s.step < 1 || s.frame < 1 || s.frame > s.signal)
      return Err(StatusCode::kInvalidArgument,
                 "{}: frame_step ({}) and frame_length ({}) must be at least 1, frame_length at most the signal's "
                 "length ({})",
                 n.Where(), s.step, s.frame, s.signal);
    s.frames = (s.signal - s.frame) / s.step + 1;
    s.bins = onesided_ ? s.frame / 2 + 1 : s.frame;
    KILN_RETURN_IF_ERROR(CheckOutput(ni_, outs[0], x.dtype, {s.batch, s.frames, s.bins, 2}));
    s.t = Transform{s.batch * s.frames, s.frame, f64_};
    return s;
  }

  bool onesided_;
};

// ---- DFT / STFT factories ----

Result<bool> FlagAttr(const Node& n, const char* name, int64_t def) {
  KILN_ASSIGN_OR_RETURN(const int64_t v, n.attr_int(name, def));
  if (v != 0 && v != 1) return Err(StatusCode::kInvalidModel, "{}: {} must be 0 or 1, got {}", n.Where(), name, v);
  return v != 0;
}

// The tactics of a DFT or STFT node: transforms in double, and in float for the types narrower than float64.
Result<std::vector<std::string>> SpectralTactics(const LayerSpec& spec) {
  const Node& n = spec.node;
  const Value* x = n.input(0);
  if (!x || !n.output(0)) return Err(StatusCode::kInvalidModel, "{}: the input and output are required", n.Where());
  if (!SpectralSupports(static_cast<int>(x->dtype)))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA {} layer takes float32, float16, bfloat16 or float64 signals, not {}", n.Where(),
               n.op_type, DataTypeName(x->dtype));
  if (x->dtype == DataType::kFloat64) return std::vector<std::string>{kTacticF64};
  return std::vector<std::string>{kTacticF64, kTacticF32};
}

// Whether the tactic transforms in double.
Result<bool> TacticIsF64(const LayerSpec& spec, const std::string& tactic) {
  KILN_ASSIGN_OR_RETURN(const std::vector<std::string> tactics, SpectralTactics(spec));
  if (tactic == "default" || tactic == kTacticF64) return true;
  if (tactic == kTacticF32 && tactics.size() > 1) return false;
  std::string known;
  for (const std::string& t : tactics) known += (known.empty() ? "" : ", ") + t;
  return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}' for the CUDA {} layer (it has {})",
             spec.node.Where(), tactic, spec.node.op_type, known);
}

LayerFactory DftFactory() {
  LayerFactory f;
  f.tactics = SpectralTactics;
  f.create = [](const LayerSpec& spec, const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    KILN_ASSIGN_OR_RETURN(const bool f64, TacticIsF64(spec, tactic));
    KILN_ASSIGN_OR_RETURN(const bool inverse, FlagAttr(n, "inverse", 0));
    KILN_ASSIGN_OR_RETURN(const bool onesided, FlagAttr(n, "onesided", 0));
    // Opset 20's default; an imported DFT-17 node carries its axis attribute as input 2.
    KILN_ASSIGN_OR_RETURN(const int64_t axis, n.attr_int("axis", -2));
    return std::unique_ptr<Layer>(std::make_unique<DftLayer>(Capture(n), f64, inverse, onesided, axis));
  };
  return f;
}

LayerFactory StftFactory() {
  LayerFactory f;
  f.tactics = SpectralTactics;
  f.create = [](const LayerSpec& spec, const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    KILN_ASSIGN_OR_RETURN(const bool f64, TacticIsF64(spec, tactic));
    KILN_ASSIGN_OR_RETURN(const bool onesided, FlagAttr(n, "onesided", 1));
    return std::unique_ptr<Layer>(std::make_unique<StftLayer>(Capture(n), f64, onesided));
  };
  return f;
}

// ---- MelWeightMatrix ----

LayerFactory MelWeightMatrixFactory() {
  LayerFactory f;
  f.create = [](const LayerSpec& spec, const std::string&) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    if (!n.output(0)) return Err(StatusCode::kInvalidModel, "{}: the output is required", n.Where());
    KILN_ASSIGN_OR_RETURN(const int64_t code, n.attr_int("output_datatype", 1));
    const DataType dtype = static_cast<DataType>(code);
    if (!MelWeightsSupports(static_cast<int>(code)) || !IsSupportedType(dtype))
      return Err(StatusCode::kUnsupported,
                 "{}: the CUDA MelWeightMatrix writes integer or float32/float16/bfloat16/float64 weights, not "
                 "output_datatype {}",
                 n.Where(), code);
    NodeInfo ni = Capture(n);
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni, dtype](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins,
                    std::vector<DeviceTensor>& outs) -> Status {
          const Node& node = ni.node();
          KILN_ASSIGN_OR_RETURN(const int64_t mels, HostScalarInt(ni, ins, 0, "num_mel_bins"));
          KILN_ASSIGN_OR_RETURN(const int64_t length, HostScalarInt(ni, ins, 1, "dft_length"));
          KILN_ASSIGN_OR_RETURN(const int64_t rate, HostScalarInt(ni, ins, 2, "sample_rate"));
          if (mels < 1 || length < 1 || rate < 1)
            return Err(StatusCode::kInvalidArgument,
                       "{}: num_mel_bins ({}), dft_length ({}) and sample_rate ({}) must be at least 1", node.Where(),
                       mels, length, rate);
          double edge_hz[2];
          for (size_t i : {3, 4}) {
            const Tensor* t = HostValue(ni, ins, i);
            if (!t)
              return Err(StatusCode::kUnsupported,
                         "{}: {} (input {}) is not known on the host; the CUDA MelWeightMatrix layer needs it as a "
                         "constant or a graph input",
                         node.Where(), i == 3 ? "lower_edge_hertz" : "upper_edge_hertz", i);
            if (t->numel() != 1)
              return Err(StatusCode::kInvalidArgument, "{}: input {} must be a scalar, got {}", node.Where(), i,
                         t->Describe());
            edge_hz[i - 3] = t->GetAsDouble(0);
          }
          KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> edges,
                                cpu::MelEdges(node.Where(), mels, length, rate, edge_hz[0], edge_hz[1]));
          const int64_t spectrum = length / 2 + 1;
          KILN_RETURN_IF_ERROR(CheckOutput(ni, outs.at(0), dtype, {spectrum, mels}));
          return LaunchStatus(ni,
                              LaunchMelWeights(static_cast<int>(dtype), outs[0].data, spectrum, mels, edges.data(),
                                               ctx.stream),
                              "LaunchMelWeights");
        }));
  };
  return f;
}

}  // namespace

void RegisterSpectralLayers(LayerRegistry& r) {
  r.Add("DFT", DftFactory());
  r.Add("STFT", StftFactory());
  r.Add("MelWeightMatrix", MelWeightMatrixFactory());
}

}  // namespace kiln::cuda
