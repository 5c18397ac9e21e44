// CUDA layers of the tensor family, part 2: the data-movement ops. Each describes its output as a strided view of
// its input(s) at the run-time shapes (exactly as the CPU reference does in tensor_copy.cpp) and hands it to
// LaunchStridedCopy, which merges dims and picks a memcpy, a tiled transpose or a vectorized element loop.
// Pad and Trilu have their own kernels (tensor_misc.cu). Everything is type-agnostic: only element sizes matter.
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/strided_copy_kernels.h"
#include "backends/cuda/tensor_layers_util.h"
#include "backends/cuda/tensor_misc_kernels.h"
#include "core/error.h"
#include "ops/shape_tensor_params.h"

namespace kiln::cuda::tensor_layers {
namespace {

std::unique_ptr<Layer> Fn(FnLayer::Fn f) { return std::make_unique<FnLayer>(std::move(f)); }

// Rejects, at build time, an input 0 whose elements the movement kernels cannot move.
Status CheckInputElements(const LayerSpec& spec) {
  const Value* v = spec.node.input(0);
  if (v && v->dtype != DataType::kUndefined) {
    KILN_ASSIGN_OR_RETURN(int es, ElemSize(spec.node, v->dtype));
    (void)es;
  }
  return Status::Ok();
}

Status CheckOutputShape(const NodeInfo& ni, const DeviceTensor& out, const std::vector<int64_t>& shape) {
  if (out.shape != shape)
    return Err(StatusCode::kInternal, "{}: the layer computes output shape {} but the output has shape {}",
               ni.node().Where(), ShapeToString(shape), ShapeToString(out.shape));
  return Status::Ok();
}

Result<int64_t> Axis(const NodeInfo& ni, int64_t rank) {
  auto ax = NormalizeAxis(ni.node().geti("axis", 0), rank);
  if (!ax)
    return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", ni.node().Where(),
               ni.node().geti("axis", 0), rank);
  return *ax;
}

// A factory for a movement layer with one or more tactics, each a `body` run at Enqueue with the element size: checks
// input 0's element type (and `validate` the node). The first tactic is the default when the builder does not time.
using Body = std::function<Status(const NodeInfo&, cudaStream_t, int, const std::vector<DeviceTensor>&,
                                  std::vector<DeviceTensor>&)>;
LayerFactory MovementTactics(std::vector<std::pair<std::string, Body>> bodies,
                             std::function<Status(const Node&)> validate = nullptr, std::string default_body = "") {
  auto check = [validate](const LayerSpec& spec) -> Status {
    KILN_RETURN_IF_ERROR(CheckInputElements(spec));
    if (validate) KILN_RETURN_IF_ERROR(validate(spec.node));
    return Status::Ok();
  };
  LayerFactory f;
  f.tactics = [check, bodies](const LayerSpec& spec) -> Result<std::vector<std::string>> {
    KILN_RETURN_IF_ERROR(check(spec));
    std::vector<std::string> names;
    for (const auto& b : bodies) names.push_back(b.first);
    return names;
  };
  f.create = [check, bodies, default_body](const LayerSpec& spec,
                                          const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    KILN_RETURN_IF_ERROR(check(spec));
    // "default": the name every movement layer's one tactic had, which engines built before a layer had several
    // hold; it maps to `default_body` (the old behaviour).
    const std::string& name = tactic == "default" && !default_body.empty() ? default_body : tactic;
    auto it = std::find_if(bodies.begin(), bodies.end(), [&](const auto& b) { return b.first == name; });
    if (it == bodies.end())
      return Err(StatusCode::kInvalidArgument, "{}: the CUDA {} layer has no tactic '{}'", spec.node.Where(),
                 spec.node.op_type, tactic);
    NodeInfo ni = Capture(spec.node);
    Body body = it->second;
    return Fn([ni, body](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins,
                         std::vector<DeviceTensor>& outs) -> Status {
      if (!Has(ins, 0) || outs.empty())
        return Err(StatusCode::kInvalidModel, "{}: input 0 and output 0 are required", ni.node().Where());
      KILN_ASSIGN_OR_RETURN(int es, ElemSize(ni.node(), ins[0].dtype));
      return body(ni, ctx.stream, es, ins, outs);
    });
  };
  return f;
}

LayerFactory MovementFactory(Body body, std::function<Status(const Node&)> validate = nullptr) {
  return MovementTactics({{"default", std::move(body)}}, std::move(validate));
}

Status Transpose(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
                 std::vector<DeviceTensor>& outs) {
  const DeviceTensor& x = ins[0];
  KILN_ASSIGN_OR_RETURN(auto perm, TransposePerm(ni.node(), static_cast<int64_t>(x.shape.size())));
  const auto xs = ContiguousStrides(x.shape);
  std::vector<int64_t> shape, src;
  for (int64_t p : perm) {
    shape.push_back(x.shape[p]);
    src.push_back(xs[p]);
  }
  KILN_RETURN_IF_ERROR(CheckOutputShape(ni, outs[0], shape));
  return StridedCopy(ni, stream, x.data, outs[0].data, shape, src, ContiguousStrides(shape), es);
}

// Concat's axis and its output checked against the inputs.
Result<int64_t> ConcatAxis(const NodeInfo& ni, const std::vector<DeviceTensor>& ins, const DeviceTensor& o) {
  const DeviceTensor& first = ins[0];
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t ax, Axis(ni, rank));
  std::vector<int64_t> shape = first.shape;
  shape[ax] = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    const DeviceTensor& t = ins[i];
    if (!t.present() || t.shape.size() != first.shape.size() || t.dtype != first.dtype)
      return Err(StatusCode::kInvalidArgument, "{}: input {} does not match input 0 in rank or type", ni.node().Where(),
                 i);
    for (int64_t d = 0; d < rank; ++d)
      if (d != ax && t.shape[d] != first.shape[d])
        return Err(StatusCode::kInvalidArgument, "{}: input shapes {} and {} differ outside the axis",
                   ni.node().Where(), ShapeToString(first.shape), ShapeToString(t.shape));
    shape[ax] += t.shape[ax];
  }
  KILN_RETURN_IF_ERROR(CheckOutputShape(ni, o, shape));
  return ax;
}

// Concat, tactic "one": every input in one launch (LaunchConcat), the output seen as [outer, row].
Status ConcatOne(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
                 std::vector<DeviceTensor>& outs) {
  DeviceTensor& o = outs[0];
  KILN_ASSIGN_OR_RETURN(int64_t ax, ConcatAxis(ni, ins, o));
  int64_t outer = 1;
  for (int64_t d = 0; d < ax; ++d) outer *= o.shape[d];
  std::vector<const void*> srcs;
  std::vector<int64_t> widths;
  for (const DeviceTensor& t : ins) {
    int64_t w = 1;
    for (size_t d = static_cast<size_t>(ax); d < t.shape.size(); ++d) w *= t.shape[d];
    srcs.push_back(t.data);
    widths.push_back(w);
  }
  return LaunchStatus(ni, LaunchConcat(static_cast<int>(srcs.size()), srcs.data(), widths.data(), o.data, outer, es,
                                       stream),
                      "LaunchConcat");
}

// Concat, tactic "copies": one strided copy per input into its slab of the output (a memcpy each when the axis is
// the outermost; faster than one launch for a few large inputs).
Status ConcatCopies(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
                    std::vector<DeviceTensor>& outs) {
  DeviceTensor& o = outs[0];
  KILN_ASSIGN_OR_RETURN(int64_t ax, ConcatAxis(ni, ins, o));
  const auto os = ContiguousStrides(o.shape);
  int64_t offset = 0;
  for (const DeviceTensor& t : ins) {
    if (t.numel() > 0)
      KILN_RETURN_IF_ERROR(StridedCopy(ni, stream, t.data, Advance(o.data, offset * os[ax], es), t.shape,
                                       ContiguousStrides(t.shape), os, es));
    offset += t.shape[ax];
  }
  return Status::Ok();
}

// Split sizes: the split input when known on the host (or num_outputs chunks without it), else the outputs' shapes.
Result<std::vector<int64_t>> SplitSizes(const NodeInfo& ni, const std::vector<DeviceTensor>& ins,
                                        const std::vector<DeviceTensor>& outs, int64_t ax) {
  const int64_t dim = ins[0].shape[ax], parts = static_cast<int64_t>(outs.size());
  if (!Has(ins, 1)) return ComputeSplit(ni.node(), dim, false, {}, parts);
  if (const Tensor* t = HostValue(ni, ins, 1)) return ComputeSplit(ni.node(), dim, true, t->ToInt64Vector(), parts);
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].present() || outs[i].shape.size() != ins[0].shape.size())
      return Err(StatusCode::kUnsupported,
                 "{}: the split input (input 1) is not known on the host and output {} is omitted; make split a "
                 "constant",
                 ni.node().Where(), i);
    sizes.push_back(outs[i].shape[ax]);
  }
  return ComputeSplit(ni.node(), dim, true, sizes, parts);
}

Status Split(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
             std::vector<DeviceTensor>& outs) {
  const DeviceTensor& x = ins[0];
  KILN_ASSIGN_OR_RETURN(int64_t ax, Axis(ni, static_cast<int64_t>(x.shape.size())));
  KILN_ASSIGN_OR_RETURN(auto sizes, SplitSizes(ni, ins, outs, ax));
  const auto xs = ContiguousStrides(x.shape);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!Wants(outs, i)) continue;
    std::vector<int64_t> shape = x.shape;
    shape[ax] = sizes[i];
    KILN_RETURN_IF_ERROR(CheckOutputShape(ni, outs[i], shape));
  }
  int64_t offset = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (Wants(outs, i) && outs[i].numel() > 0)
      KILN_RETURN_IF_ERROR(StridedCopy(ni, stream, Advance(x.data, offset * xs[ax], es), outs[i].data,
                                       outs[i].shape, xs, ContiguousStrides(outs[i].shape), es));
    offset += sizes[i];
  }
  return Status::Ok();
}

Status Slice(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
             std::vector<DeviceTensor>& outs) {
  const DeviceTensor& x = ins[0];
  KILN_ASSIGN_OR_RETURN(auto starts, HostInts(ni, ins, 1, "starts"));
  KILN_ASSIGN_OR_RETURN(auto ends, HostInts(ni, ins, 2, "ends"));
  std::vector<int64_t> axes, steps;
  if (Has(ins, 3)) {
    KILN_ASSIGN_OR_RETURN(axes, HostInts(ni, ins, 3, "axes"));
  }
  if (Has(ins, 4)) {
    KILN_ASSIGN_OR_RETURN(steps, HostInts(ni, ins, 4, "steps"));
  }
  KILN_ASSIGN_OR_RETURN(SliceParams p, ComputeSlice(ni.node(), x.shape, starts, ends, axes, steps));
  KILN_RETURN_IF_ERROR(CheckOutputShape(ni, outs[0], p.count));
  if (outs[0].numel() == 0) return Status::Ok();
  const auto xs = ContiguousStrides(x.shape);
  std::vector<int64_t> src(x.shape.size());
  int64_t offset = 0;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    offset += p.start[d] * xs[d];
    src[d] = xs[d] * p.step[d];
  }
  return StridedCopy(ni, stream, Advance(x.data, offset, es), outs[0].data, p.count, src, ContiguousStrides(p.count),
                     es);
}

// Expand: the output shape comes from inference; the input is read with broadcast (0) strides.
Status Expand(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
              std::vector<DeviceTensor>& outs) {
  const DeviceTensor& x = ins[0];
  DeviceTensor& o = outs[0];
  if (o.shape.size() < x.shape.size())
    return Err(StatusCode::kInternal, "{}: output {} has a lower rank than input {}", ni.node().Where(),
               ShapeToString(o.shape), ShapeToString(x.shape));
  const auto xs = ContiguousStrides(x.shape);
  const size_t off = o.shape.size() - x.shape.size();
  std::vector<int64_t> src(o.shape.size(), 0);
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (x.shape[i] == o.shape[off + i] && x.shape[i] != 1) src[off + i] = xs[i];
    else if (x.shape[i] != 1)
      return Err(StatusCode::kInvalidArgument, "{}: input {} does not broadcast to {}", ni.node().Where(),
                 ShapeToString(x.shape), ShapeToString(o.shape));
  }
  if (o.numel() == 0) return Status::Ok();
  return StridedCopy(ni, stream, x.data, o.data, o.shape, src, ContiguousStrides(o.shape), es);
}

// Tile: the output viewed as [r0, d0, r1, d1, ...], where the repeat index does not move the source; when that
// view keeps more than 8 dims after merging, a modulo-indexed kernel.
Status Tile(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
            std::vector<DeviceTensor>& outs) {
  const DeviceTensor& x = ins[0];
  DeviceTensor& o = outs[0];
  if (o.shape.size() != x.shape.size())
    return Err(StatusCode::kInternal, "{}: output {} and input {} differ in rank", ni.node().Where(),
               ShapeToString(o.shape), ShapeToString(x.shape));
  if (o.numel() == 0) return Status::Ok();
  const int64_t r = static_cast<int64_t>(x.shape.size());
  const auto xs = ContiguousStrides(x.shape), os = ContiguousStrides(o.shape);
  std::vector<int64_t> vshape, vsrc, vdst;
  for (int64_t d = 0; d < r; ++d) {
    if (x.shape[d] <= 0 || o.shape[d] % x.shape[d] != 0)
      return Err(StatusCode::kInternal, "{}: output {} is not a tiling of input {}", ni.node().Where(),
                 ShapeToString(o.shape), ShapeToString(x.shape));
    vshape.insert(vshape.end(), {o.shape[d] / x.shape[d], x.shape[d]});
    vsrc.insert(vsrc.end(), {0, xs[d]});
    vdst.insert(vdst.end(), {x.shape[d] * os[d], os[d]});
  }
  const cudaError_t e = LaunchStridedCopy(x.data, o.data, static_cast<int>(vshape.size()), vshape.data(), vsrc.data(),
                                          vdst.data(), es, stream);
  if (e != cudaErrorNotSupported) return LaunchStatus(ni, e, "LaunchStridedCopy");
  return LaunchStatus(ni, LaunchTileCopy(x.data, o.data, static_cast<int>(r), x.shape.data(), o.shape.data(), es, stream),
                      "LaunchTileCopy");
}

// DepthToSpace (to_space) and SpaceToDepth as one 6-D transpose each (the CPU reference's views).
Status Block(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
             std::vector<DeviceTensor>& outs, bool to_space) {
  const DeviceTensor& x = ins[0];
  const int64_t b = ni.node().geti("blocksize", 0);
  if (x.shape.size() != 4 || b <= 0)
    return Err(StatusCode::kInvalidArgument, "{}: needs a 4-D input and a positive blocksize", ni.node().Where());
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  std::vector<int64_t> oshape, vshape, vsrc;
  if (to_space) {
    if (C % (b * b) != 0)
      return Err(StatusCode::kInvalidArgument, "{}: channels {} not divisible by {}", ni.node().Where(), C, b * b);
    const int64_t Co = C / (b * b);
    oshape = {N, Co, H * b, W * b};
    vshape = {N, Co, H, b, W, b};
    if (ni.node().gets("mode", "DCR") == "CRD")  // input viewed as [N, Co, b1, b2, H, W]
      vsrc = {C * H * W, b * b * H * W, W, b * H * W, 1, H * W};
    else  // DCR: input viewed as [N, b1, b2, Co, H, W]
      vsrc = {C * H * W, H * W, W, b * Co * H * W, 1, Co * H * W};
  } else {
    if (H % b != 0 || W % b != 0)
      return Err(StatusCode::kInvalidArgument, "{}: spatial size {}x{} not divisible by {}", ni.node().Where(), H, W,
                 b);
    const int64_t Ho = H / b, Wo = W / b;
    oshape = {N, C * b * b, Ho, Wo};
    // Output order: DCR, channel (b1 * b + b2) * C + c; CRD (SpaceToDepth-28), c * b * b + b1 * b + b2. The input
    // is viewed as [N, C, Ho, b1, Wo, b2].
    if (ni.node().gets("mode", "DCR") == "CRD") {
      vshape = {N, C, b, b, Ho, Wo};
      vsrc = {C * H * W, H * W, W, 1, b * W, b};
    } else {
      vshape = {N, b, b, C, Ho, Wo};
      vsrc = {C * H * W, W, 1, H * W, b * W, b};
    }
  }
  KILN_RETURN_IF_ERROR(CheckOutputShape(ni, outs[0], oshape));
  return StridedCopy(ni, stream, x.data, outs[0].data, vshape, vsrc, ContiguousStrides(vshape), es);
}

Result<PadMode> ParsePadMode(const Node& n) {
  const std::string mode = n.gets("mode", "constant");
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  if (mode == "wrap") return PadMode::kWrap;
  return Err(StatusCode::kUnsupported, "{}: Pad mode '{}' is not supported (constant, reflect, edge, wrap)",
             n.Where(), mode);
}

Status Pad(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
           std::vector<DeviceTensor>& outs) {
  const DeviceTensor& x = ins[0];
  DeviceTensor& o = outs[0];
  KILN_ASSIGN_OR_RETURN(PadMode mode, ParsePadMode(ni.node()));
  const int64_t r = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(auto pads, HostInts(ni, ins, 1, "pads"));
  std::vector<int64_t> axes;
  if (Has(ins, 3)) {
    KILN_ASSIGN_OR_RETURN(axes, HostInts(ni, ins, 3, "axes"));
  }
  KILN_ASSIGN_OR_RETURN(auto p, ComputePads(ni.node(), r, pads, axes));
  std::vector<int64_t> shape(r);
  for (int64_t d = 0; d < r; ++d) {
    shape[d] = x.shape[d] + p[d] + p[r + d];
    if (shape[d] < 0)
      return Err(StatusCode::kInvalidArgument, "{}: pads make axis {} negative", ni.node().Where(), d);
    if (x.shape[d] == 0 && shape[d] > 0 && mode != PadMode::kConstant)
      return Err(StatusCode::kInvalidArgument, "{}: cannot pad an empty axis in mode '{}'", ni.node().Where(),
                 ni.node().gets("mode", "constant"));
  }
  KILN_RETURN_IF_ERROR(CheckOutputShape(ni, o, shape));
  if (o.numel() == 0) return Status::Ok();
  if (r > 8)
    return Err(StatusCode::kUnsupported, "{}: the CUDA Pad layer supports rank <= 8, got {}", ni.node().Where(), r);
  // The constant: host-known (converted to the input's type like the CPU does), else read on the device.
  uint64_t bits = 0;
  const void* value_ptr = nullptr;
  if (Has(ins, 2) && ins[2].numel() > 0) {
    if (const Tensor* v = HostValue(ni, ins, 2); v && v->numel() > 0) {
      const Tensor value = v->dtype() == x.dtype ? *v : Tensor::Scalar(x.dtype, v->GetAsDouble(0));
      std::memcpy(&bits, value.raw(), static_cast<size_t>(es));
    } else if (ins[2].dtype == x.dtype) {
      value_ptr = ins[2].data;
    } else {
      return Err(StatusCode::kUnsupported,
                 "{}: constant_value (input 2) is {} and not known on the host; the CUDA Pad layer needs it to have "
                 "the input's type ({}) or be a constant",
                 ni.node().Where(), DataTypeName(ins[2].dtype), DataTypeName(x.dtype));
    }
  }
  return LaunchStatus(ni,
                      LaunchPad(x.data, o.data, static_cast<int>(r), x.shape.data(), o.shape.data(), p.data(), mode,
                                es, bits, value_ptr, stream),
                      "LaunchPad");
}

Status Trilu(const NodeInfo& ni, cudaStream_t stream, int es, const std::vector<DeviceTensor>& ins,
             std::vector<DeviceTensor>& outs) {
  const DeviceTensor& x = ins[0];
  const size_t r = x.shape.size();
  if (r < 2) return Err(StatusCode::kInvalidArgument, "{}: needs an input of rank >= 2", ni.node().Where());
  KILN_RETURN_IF_ERROR(CheckOutputShape(ni, outs[0], x.shape));
  int64_t k = 0;
  const int64_t* k_ptr = nullptr;
  if (Has(ins, 1) && ins[1].numel() > 0) {
    if (const Tensor* t = HostValue(ni, ins, 1); t && t->numel() > 0) {
      k = t->GetAsInt(0);
    } else if (ins[1].dtype == DataType::kInt64) {
      k_ptr = static_cast<const int64_t*>(ins[1].data);
    } else {
      return Err(StatusCode::kUnsupported, "{}: k (input 1) must be int64, got {}", ni.node().Where(),
                 DataTypeName(ins[1].dtype));
    }
  }
  const bool upper = ni.node().geti("upper", 1) != 0;
  return LaunchStatus(
      ni, LaunchTrilu(x.data, outs[0].data, x.numel(), x.shape[r - 2], x.shape[r - 1], upper, k, k_ptr, es, stream),
      "LaunchTrilu");
}

}  // namespace

void RegisterTensorCopyLayers(LayerRegistry& r) {
  r.Add("Transpose", MovementFactory(Transpose));
  r.Add("Concat", MovementTactics({{"concat.one", ConcatOne}, {"concat.copies", ConcatCopies}}, nullptr, "concat.copies"));
  r.Add("Split", MovementFactory(Split));
  r.Add("Slice", MovementFactory(Slice));
  r.Add("Expand", MovementFactory(Expand));
  r.Add("Tile", MovementFactory(Tile));
  r.Add("DepthToSpace", MovementFactory([](const NodeInfo& ni, cudaStream_t s, int es,
                                           const std::vector<DeviceTensor>& ins, std::vector<DeviceTensor>& outs) {
          return Block(ni, s, es, ins, outs, true);
        }));
  r.Add("SpaceToDepth", MovementFactory([](const NodeInfo& ni, cudaStream_t s, int es,
                                           const std::vector<DeviceTensor>& ins, std::vector<DeviceTensor>& outs) {
          return Block(ni, s, es, ins, outs, false);
        }));
  r.Add("Trilu", MovementFactory(Trilu));
  r.Add("Pad", MovementFactory(Pad, [](const Node& n) { return ParsePadMode(n).status(); }));
}

}  // namespace kiln::cuda::tensor_layers
