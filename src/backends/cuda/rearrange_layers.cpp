// CUDA layers of ReverseSequence, CenterCropPad, MaxUnpool and Col2Im, with the CPU reference's semantics
// (backends/cpu/tensor_more_ops.cpp). Kernels in rearrange.cu; CenterCropPad is the constant Pad kernel
// (tensor_misc.cu) with negative padding where it crops. Values carried by inputs (Col2Im's image_shape and
// block_shape) come from the node's constants or the runtime's host copies; data-dependent checks the CPU makes
// (sequence lengths, unpooling indices) are made where the values are known on the host, and the kernels clamp or
// skip what they cannot check.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/rearrange_kernels.h"
#include "backends/cuda/tensor_layers_util.h"
#include "backends/cuda/tensor_misc_kernels.h"
#include "core/error.h"

namespace kiln::cuda {
namespace tensor_layers {
namespace {

using Layer_ = std::unique_ptr<Layer>;
using Fn = FnLayer::Fn;

Layer_ Make(Fn fn) { return std::make_unique<FnLayer>(std::move(fn)); }

int64_t Volume(const std::vector<int64_t>& s) {
  int64_t v = 1;
  for (int64_t d : s) v *= d;
  return v;
}

// ---- ReverseSequence ----

LayerFactory ReverseSequenceFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<Layer_> {
    const Node& n = spec.node;
    NodeInfo ni = Capture(n);
    if (!n.input(0) || !n.input(1))
      return Err(StatusCode::kInvalidModel, "{}: input and sequence_lens are required", n.Where());
    KILN_ASSIGN_OR_RETURN(const int es, ElemSize(n, n.input(0)->dtype));
    if (n.input(1)->dtype != DataType::kInt64)
      return Err(StatusCode::kInvalidModel, "{}: sequence_lens must be int64, got {}", n.Where(),
                 DataTypeName(n.input(1)->dtype));
    KILN_ASSIGN_OR_RETURN(const int64_t batch_axis, n.attr_int("batch_axis", 1));
    KILN_ASSIGN_OR_RETURN(const int64_t time_axis, n.attr_int("time_axis", 0));
    if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) || batch_axis == time_axis)
      return Err(StatusCode::kInvalidModel, "{}: batch_axis and time_axis must be 0 and 1 (or 1 and 0), got {} and {}",
                 n.Where(), batch_axis, time_axis);
    return Make([ni, es, batch_axis, time_axis](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                                std::vector<DeviceTensor>& out) -> Status {
      const DeviceTensor& x = in[0];
      const DeviceTensor& lens = in[1];
      const std::string where = ni.node().Where();
      if (x.shape.size() < 2)
        return Err(StatusCode::kInvalidArgument, "{}: the input must have rank >= 2, got {}", where,
                   ShapeToString(x.shape));
      const int64_t batch = x.shape[static_cast<size_t>(batch_axis)];
      const int64_t steps = x.shape[static_cast<size_t>(time_axis)];
      if (lens.numel() != batch)
        return Err(StatusCode::kInvalidArgument, "{}: sequence_lens has {} entries for a batch of {}", where,
                   lens.numel(), batch);
      if (const Tensor* h = HostValue(ni, in, 1))
        for (int64_t b = 0; b < h->numel(); ++b)
          if (h->GetAsInt(b) < 0 || h->GetAsInt(b) > steps)
            return Err(StatusCode::kInvalidArgument, "{}: sequence_lens[{}] = {} is outside [0, {}]", where, b,
                       h->GetAsInt(b), steps);
      const int64_t inner = Volume(std::vector<int64_t>(x.shape.begin() + 2, x.shape.end()));
      return LaunchStatus(ni,
                          LaunchReverseSequence(x.data, out[0].data, static_cast<const int64_t*>(lens.data),
                                                x.shape[0], x.shape[1], inner, batch_axis == 0, es, ctx.stream),
                          "LaunchReverseSequence");
    });
  });
}

// ---- CenterCropPad ----

// Each dim of the output is the input's centred window of the output's length: a crop starting at
// floor((size - length) / 2), or floor((length - size) / 2) zeros before. The output shape (from the shape input)
// says everything; dims not in `axes` keep their length and copy straight.
LayerFactory CenterCropPadFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<Layer_> {
    const Node& n = spec.node;
    NodeInfo ni = Capture(n);
    if (!n.input(0)) return Err(StatusCode::kInvalidModel, "{}: input is required", n.Where());
    KILN_ASSIGN_OR_RETURN(const int es, ElemSize(n, n.input(0)->dtype));
    return Make([ni, es](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      const DeviceTensor& x = in[0];
      DeviceTensor& y = out[0];
      if (x.shape.size() != y.shape.size())
        return Err(StatusCode::kInternal, "{}: the output {} and the input {} differ in rank", ni.node().Where(),
                   ShapeToString(y.shape), ShapeToString(x.shape));
      if (y.numel() == 0) return Status::Ok();
      if (x.shape.empty())
        return KILN_CUDA_STATUS(cudaMemcpyAsync(y.data, x.data, static_cast<size_t>(es), cudaMemcpyDeviceToDevice,
                                                ctx.stream));
      std::vector<int64_t> before(x.shape.size());
      for (size_t d = 0; d < x.shape.size(); ++d) {
        const int64_t size = x.shape[d], len = y.shape[d];
        before[d] = size >= len ? -((size - len) / 2) : (len - size) / 2;
      }
      return LaunchStatus(ni,
                          LaunchPad(x.data, y.data, static_cast<int>(x.shape.size()), x.shape.data(), y.shape.data(),
                                    before.data(), PadMode::kConstant, es, 0, nullptr, ctx.stream),
                          "LaunchPad");
    });
  });
}

// ---- MaxUnpool ----

class MaxUnpoolLayer : public Layer {
 public:
  MaxUnpoolLayer(NodeInfo ni, int es, std::vector<int64_t> kernel, std::vector<int64_t> strides,
                 std::vector<int64_t> pads)
      : ni_(std::move(ni)), es_(es), kernel_(std::move(kernel)), strides_(std::move(strides)), pads_(std::move(pads)) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    auto u = Unpooled(in[0]);
    return u.ok() ? MaxUnpoolWorkspaceBytes(Volume(*u)) : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const DeviceTensor& x = in[0];
    const DeviceTensor& idx = in[1];
    DeviceTensor& y = out[0];
    const std::string where = ni_.node().Where();
    if (idx.numel() != x.numel())
      return Err(StatusCode::kInvalidArgument, "{}: I {} must match X {}", where, ShapeToString(idx.shape),
                 ShapeToString(x.shape));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> unpooled, Unpooled(x));
    if (y.shape.size() != unpooled.size())
      return Err(StatusCode::kInvalidArgument, "{}: output_shape has {} dims, X has {}", where, y.shape.size(),
                 unpooled.size());
    if (unpooled.size() > 8)
      return Err(StatusCode::kUnsupported, "{}: rank {} is above the CUDA kernel's 8", where, unpooled.size());
    const int64_t volume = Volume(unpooled);
    if (const Tensor* h = HostValue(ni_, in, 1))
      for (int64_t i = 0; i < h->numel(); ++i)
        if (h->GetAsInt(i) < 0 || h->GetAsInt(i) >= volume)
          return Err(StatusCode::kInvalidArgument, "{}: index {} at {} is outside the unpooled {} elements", where,
                     h->GetAsInt(i), i, volume);
    if (ctx.workspace_bytes < MaxUnpoolWorkspaceBytes(volume))
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where,
                 ctx.workspace_bytes, MaxUnpoolWorkspaceBytes(volume));
    return LaunchStatus(ni_,
                        LaunchMaxUnpool(x.data, idx.data, static_cast<int>(idx.dtype), x.numel(), y.data,
                                        static_cast<int>(unpooled.size()), unpooled.data(), y.shape.data(), es_,
                                        ctx.workspace, ctx.workspace_bytes, ctx.stream),
                        "LaunchMaxUnpool");
  }

 private:
  // The shape MaxUnpool infers from X: (in - 1) * stride + kernel - pad_begin - pad_end per spatial dim.
  Result<std::vector<int64_t>> Unpooled(const DeviceTensor& x) const {
    const std::string where = ni_.node().Where();
    if (x.shape.size() < 3)
      return Err(StatusCode::kInvalidArgument, "{}: X must be [N, C, spatial...], got {}", where,
                 ShapeToString(x.shape));
    const size_t r = x.shape.size() - 2;
    const std::vector<int64_t> strides = strides_.empty() ? std::vector<int64_t>(r, 1) : strides_;
    const std::vector<int64_t> pads = pads_.empty() ? std::vector<int64_t>(2 * r, 0) : pads_;
    if (kernel_.size() != r || strides.size() != r || pads.size() != 2 * r)
      return Err(StatusCode::kInvalidModel, "{}: kernel_shape, strides and pads must match the {} spatial dims",
                 where, r);
    std::vector<int64_t> u = {x.shape[0], x.shape[1]};
    for (size_t d = 0; d < r; ++d)
      u.push_back((x.shape[2 + d] - 1) * strides[d] + kernel_[d] - pads[d] - pads[d + r]);
    return u;
  }

  NodeInfo ni_;
  int es_;
  std::vector<int64_t> kernel_, strides_, pads_;  // strides/pads empty: the defaults
};

LayerFactory MaxUnpoolFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<Layer_> {
    const Node& n = spec.node;
    if (!n.input(0) || !n.input(1)) return Err(StatusCode::kInvalidModel, "{}: X and I are required", n.Where());
    KILN_ASSIGN_OR_RETURN(const int es, ElemSize(n, n.input(0)->dtype));
    const DataType it = n.input(1)->dtype;
    if (it != DataType::kInt64 && it != DataType::kInt32)
      return Err(StatusCode::kUnsupported, "{}: the CUDA MaxUnpool takes int64 (or int32) indices, not {}", n.Where(),
                 DataTypeName(it));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, n.attr_ints("kernel_shape", {}));
    if (kernel.empty()) return Err(StatusCode::kInvalidModel, "{}: attribute kernel_shape is required", n.Where());
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, n.attr_ints("strides", {}));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, n.attr_ints("pads", {}));
    return Layer_(std::make_unique<MaxUnpoolLayer>(Capture(n), es, std::move(kernel), std::move(strides),
                                                   std::move(pads)));
  });
}

// ---- Col2Im ----

LayerFactory Col2ImFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<Layer_> {
    const Node& n = spec.node;
    NodeInfo ni = Capture(n);
    if (!n.input(0) || !n.input(1) || !n.input(2))
      return Err(StatusCode::kInvalidModel, "{}: input, image_shape and block_shape are required", n.Where());
    const DataType t = n.input(0)->dtype;
    if (t == DataType::kBool || !Col2ImSupports(static_cast<int>(t)))
      return Err(StatusCode::kUnsupported,
                 "{}: the CUDA Col2Im takes integer or float32/float16/bfloat16/float64 input, not {}; run the node "
                 "on the CPU",
                 n.Where(), DataTypeName(t));
    return Make([ni](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                     std::vector<DeviceTensor>& out) -> Status {
      const Node& node = ni.node();
      const std::string where = node.Where();
      const DeviceTensor& x = in[0];
      KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> image, HostInts(ni, in, 1, "image_shape"));
      KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> block, HostInts(ni, in, 2, "block_shape"));
      const size_t r = image.size();
      if (x.shape.size() != 3 || block.size() != r || r == 0)
        return Err(StatusCode::kInvalidArgument, "{}: input {} with image_shape of {} and block_shape of {} dims",
                   where, ShapeToString(x.shape), r, block.size());
      if (r > static_cast<size_t>(kCol2ImMaxDims))
        return Err(StatusCode::kUnsupported, "{}: {} spatial dims are above the CUDA kernel's {}", where, r,
                   kCol2ImMaxDims);
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, node.attr_ints("strides", std::vector<int64_t>(r, 1)));
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dil, node.attr_ints("dilations", std::vector<int64_t>(r, 1)));
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.attr_ints("pads", std::vector<int64_t>(2 * r, 0)));
      if (strides.size() != r || dil.size() != r || pads.size() != 2 * r)
        return Err(StatusCode::kInvalidModel, "{}: strides, dilations and pads must match the {} spatial dims", where,
                   r);
      Col2ImArgs a;
      a.x = x.data;
      a.y = out[0].data;
      a.dtype = static_cast<int>(x.dtype);
      a.rank = static_cast<int>(r);
      int64_t block_volume = 1, positions = 1;
      for (size_t d = 0; d < r; ++d) {
        if (strides[d] < 1 || dil[d] < 1)
          return Err(StatusCode::kInvalidModel, "{}: strides and dilations must be positive", where);
        a.image[d] = image[d];
        a.block[d] = block[d];
        a.stride[d] = strides[d];
        a.dilation[d] = dil[d];
        a.pad[d] = pads[d];
        const int64_t span = dil[d] * (block[d] - 1) + 1;
        a.blocks[d] = (image[d] + pads[d] + pads[d + r] - span) / strides[d] + 1;
        block_volume *= block[d];
        positions *= a.blocks[d];
      }
      if (block_volume <= 0 || x.shape[1] % block_volume != 0 || x.shape[2] != positions)
        return Err(StatusCode::kInvalidArgument,
                   "{}: input {} does not match image_shape and block_shape ({} blocks of {} values)", where,
                   ShapeToString(x.shape), positions, block_volume);
      a.n = x.shape[0];
      a.c = x.shape[1] / block_volume;
      std::vector<int64_t> want = {a.n, a.c};
      want.insert(want.end(), image.begin(), image.end());
      if (out[0].shape != want)
        return Err(StatusCode::kInternal, "{}: the output {} is not the expected {}", where,
                   ShapeToString(out[0].shape), ShapeToString(want));
      return LaunchStatus(ni, LaunchCol2Im(a, ctx.stream), "LaunchCol2Im");
    });
  });
}

}  // namespace

void RegisterRearrangeLayers(LayerRegistry& r) {
  r.Add("ReverseSequence", ReverseSequenceFactory());
  r.Add("CenterCropPad", CenterCropPadFactory());
  r.Add("MaxUnpool", MaxUnpoolFactory());
  r.Add("Col2Im", Col2ImFactory());
}

}  // namespace tensor_layers
}  // namespace kiln::cuda
