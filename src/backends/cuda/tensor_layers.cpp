// CUDA layers of the tensor family, part 1: the views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference
// Dropout), Shape, Size, ConstantOfShape and Range, plus the helpers of tensor_layers_util.h. The strided-copy
// layers (Transpose, Concat, Split, Slice, Expand, Tile, DepthToSpace, SpaceToDepth, Pad, Trilu) are in
// tensor_copy_layers.cpp.
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "backends/cuda/strided_copy_kernels.h"
#include "backends/cuda/tensor_layers_util.h"
#include "backends/cuda/tensor_misc_kernels.h"
#include "core/error.h"

namespace kiln::cuda {
namespace tensor_layers {

NodeInfo Capture(const Node& n) {
  auto m = std::make_shared<Node>();
  m->name = n.name;
  m->op_type = n.op_type;
  m->domain = n.domain;
  m->opset = n.opset;
  m->attrs = n.attrs;
  NodeInfo ni;
  ni.meta = std::move(m);
  for (const Value* v : n.inputs) ni.consts.push_back(v && v->const_value ? v->const_value : std::nullopt);
  return ni;
}

const Tensor* HostValue(const NodeInfo& ni, const std::vector<DeviceTensor>& ins, size_t i) {
  if (i < ins.size() && ins[i].host) return ins[i].host;
  if (i < ni.consts.size() && ni.consts[i]) return &*ni.consts[i];
  return nullptr;
}

Result<std::vector<int64_t>> HostInts(const NodeInfo& ni, const std::vector<DeviceTensor>& ins, size_t i,
                                      const char* what) {
  const Tensor* t = HostValue(ni, ins, i);
  if (!t)
    return Err(StatusCode::kUnsupported,
               "{}: the {} input (input {}) is not known on the host; the CUDA {} layer needs it to be a constant or "
               "a small integer tensor the runtime folds",
               ni.node().Where(), what, i, ni.node().op_type);
  if (!IsIntegerType(t->dtype()))
    return Err(StatusCode::kInvalidModel, "{}: the {} input (input {}) must be integer, got {}", ni.node().Where(),
               what, i, DataTypeName(t->dtype()));
  return t->ToInt64Vector();
}

Result<int> ElemSize(const Node& n, DataType t) {
  const size_t es = DataTypeSize(t);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return Err(StatusCode::kUnsupported,
               "{}: element type {} is not supported by the CUDA {} layer (it moves 1, 2, 4 or 8-byte elements); run "
               "this node on the CPU",
               n.Where(), DataTypeName(t), n.op_type);
  return static_cast<int>(es);
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

Status LaunchStatus(const NodeInfo& ni, int cuda_error, const char* launcher) {
  const auto e = static_cast<cudaError_t>(cuda_error);
  if (e == cudaSuccess) return Status::Ok();
  if (e == cudaErrorNotSupported)
    return Err(StatusCode::kUnsupported,
               "{}: {} does not support this configuration (more than 8 dims that cannot be merged, or an element "
               "size other than 1/2/4/8 bytes)",
               ni.node().Where(), launcher);
  return Err(StatusCode::kCudaError, "{}: {} failed: {} ({})", ni.node().Where(), launcher, cudaGetErrorString(e),
             cudaGetErrorName(e));
}

Status StridedCopy(const NodeInfo& ni, cudaStream_t stream, const void* src, void* dst,
                   const std::vector<int64_t>& shape, const std::vector<int64_t>& src_strides,
                   const std::vector<int64_t>& dst_strides, int elem_size) {
  return LaunchStatus(ni,
                      LaunchStridedCopy(src, dst, static_cast<int>(shape.size()), shape.data(), src_strides.data(),
                                        dst_strides.data(), elem_size, stream),
                      "LaunchStridedCopy");
}

LayerFactory SingleTactic(MakeLayer make) {
  LayerFactory f;
  f.tactics = [make](const LayerSpec& spec) -> Result<std::vector<std::string>> {
    KILN_ASSIGN_OR_RETURN(auto layer, make(spec));
    return std::vector<std::string>{"default"};
  };
  f.create = [make](const LayerSpec& spec, const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    if (tactic != "default")
      return Err(StatusCode::kInvalidArgument, "{}: the CUDA {} layer has no tactic '{}' (only 'default')",
                 spec.node.Where(), spec.node.op_type, tactic);
    return make(spec);
  };
  return f;
}

}  // namespace tensor_layers

namespace {

using namespace tensor_layers;

// Output 0 is the input's bytes under a new shape: nothing to do when the memory planner aliased them.
Status CopyUnlessAliased(const NodeInfo& ni, cudaStream_t stream, const DeviceTensor& in, const DeviceTensor& out) {
  if (in.nbytes() != out.nbytes())
    return Err(StatusCode::kInternal, "{}: the output ({} bytes) and the input ({} bytes) differ in size",
               ni.node().Where(), out.nbytes(), in.nbytes());
  if (out.data == in.data || out.nbytes() == 0) return Status::Ok();
  return KILN_CUDA_STATUS(cudaMemcpyAsync(out.data, in.data, out.nbytes(), cudaMemcpyDeviceToDevice, stream));
}

LayerFactory ViewFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    NodeInfo ni = Capture(spec.node);
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins, std::vector<DeviceTensor>& outs) {
          return CopyUnlessAliased(ni, ctx.stream, ins.at(0), outs.at(0));
        }));
  });
}

// The raw bits of `v` converted to dtype (little-endian, low bytes), for fills.
uint64_t ValueBits(DataType dtype, double v) {
  const Tensor t = Tensor::Scalar(dtype, v);
  uint64_t bits = 0;
  std::memcpy(&bits, t.raw(), std::min<size_t>(t.nbytes(), sizeof(bits)));
  return bits;
}

// Inference Dropout: output 0 = input, the optional mask all true. Training mode with a non-zero ratio (random
// masks) is not supported.
// `ins` is null at creation, where only a constant training_mode can be judged.
Status CheckDropoutInference(const NodeInfo& ni, const std::vector<DeviceTensor>* ins) {
  static const std::vector<DeviceTensor> kNone;
  const std::vector<DeviceTensor>& in = ins ? *ins : kNone;
  if (ins && !Has(in, 2)) return Status::Ok();
  const Tensor* training = HostValue(ni, in, 2);
  if (!training) {
    if (!ins) return Status::Ok();  // absent, or decided at run time
    return Err(StatusCode::kUnsupported,
               "{}: training_mode (input 2) is not known on the host; the CUDA Dropout layer supports inference only "
               "(make training_mode a constant false or remove it)",
               ni.node().Where());
  }
  if (training->numel() == 0 || training->GetAsInt(0) == 0) return Status::Ok();
  const Tensor* ratio = HostValue(ni, in, 1);
  if (ratio && ratio->numel() > 0 && ratio->GetAsDouble(0) == 0.0) return Status::Ok();
  return Err(StatusCode::kUnsupported,
             "{}: training-mode Dropout (random masks) is not supported by the CUDA layer; set training_mode to "
             "false for inference",
             ni.node().Where());
}

LayerFactory DropoutFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    NodeInfo ni = Capture(spec.node);
    KILN_RETURN_IF_ERROR(CheckDropoutInference(ni, nullptr));
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins, std::vector<DeviceTensor>& outs) {
          KILN_RETURN_IF_ERROR(CheckDropoutInference(ni, &ins));
          KILN_RETURN_IF_ERROR(CopyUnlessAliased(ni, ctx.stream, ins.at(0), outs.at(0)));
          if (Wants(outs, 1) && outs[1].numel() > 0) {
            KILN_ASSIGN_OR_RETURN(int es, ElemSize(ni.node(), outs[1].dtype));
            KILN_RETURN_IF_ERROR(LaunchStatus(
                ni, LaunchFill(outs[1].data, outs[1].numel(), es, ValueBits(outs[1].dtype, 1.0), ctx.stream),
                "LaunchFill"));
          }
          return Status::Ok();
        }));
  });
}

// Shape / Size: the values are the input's runtime shape, written by a tiny kernel that carries them.
Status WriteInt64s(const NodeInfo& ni, cudaStream_t stream, DeviceTensor& out, const std::vector<int64_t>& values) {
  if (out.dtype != DataType::kInt64 || out.numel() != static_cast<int64_t>(values.size()))
    return Err(StatusCode::kInternal, "{}: the output is {}{} but {} int64 values are to be written",
               ni.node().Where(), DataTypeName(out.dtype), ShapeToString(out.shape), values.size());
  if (values.empty()) return Status::Ok();
  return LaunchStatus(ni,
                      LaunchWriteInt64s(static_cast<int64_t*>(out.data), values.data(),
                                        static_cast<int>(values.size()), stream),
                      "LaunchWriteInt64s");
}

LayerFactory ShapeFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    NodeInfo ni = Capture(spec.node);
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins, std::vector<DeviceTensor>& outs) {
          const auto& shape = ins.at(0).shape;
          const int64_t r = static_cast<int64_t>(shape.size());
          int64_t start = ni.node().geti("start", 0), end = ni.node().geti("end", r);
          if (start < 0) start += r;
          if (end < 0) end += r;
          start = std::clamp<int64_t>(start, 0, r);
          end = std::clamp<int64_t>(end, 0, r);
          std::vector<int64_t> dims;
          for (int64_t i = start; i < end; ++i) dims.push_back(shape[i]);
          return WriteInt64s(ni, ctx.stream, outs.at(0), dims);
        }));
  });
}

LayerFactory SizeFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    NodeInfo ni = Capture(spec.node);
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins, std::vector<DeviceTensor>& outs) {
          return WriteInt64s(ni, ctx.stream, outs.at(0), {ins.at(0).numel()});
        }));
  });
}

LayerFactory ConstantOfShapeFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    NodeInfo ni = Capture(spec.node);
    DataType dtype = DataType::kFloat32;
    uint64_t bits = 0;
    if (auto it = spec.node.attrs.find("value"); it != spec.node.attrs.end()) {
      const Attribute& a = it->second;
      if (a.kind != Attribute::Kind::kTensor || a.t.numel() != 1)
        return Err(StatusCode::kInvalidModel, "{}: attribute 'value' must be a one-element tensor", spec.node.Where());
      dtype = a.t.dtype();
      KILN_ASSIGN_OR_RETURN(int es, ElemSize(spec.node, dtype));
      std::memcpy(&bits, a.t.raw(), static_cast<size_t>(es));
    }
    KILN_ASSIGN_OR_RETURN(int es, ElemSize(spec.node, dtype));
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni, dtype, bits, es](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins,
                              std::vector<DeviceTensor>& outs) {
          DeviceTensor& o = outs.at(0);
          if (o.dtype != dtype)
            return Err(StatusCode::kInternal, "{}: the output is {} but the value is {}", ni.node().Where(),
                       DataTypeName(o.dtype), DataTypeName(dtype));
          return LaunchStatus(ni, LaunchFill(o.data, o.numel(), es, bits, ctx.stream), "LaunchFill");
        }));
  });
}

// Range: start and delta are read on the device (they may be computed by earlier layers); the element count is
// the output's inferred length.
LayerFactory RangeFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    NodeInfo ni = Capture(spec.node);
    const Value* v = spec.node.input(0);
    const DataType t = v ? v->dtype : DataType::kUndefined;
    const bool low = t == DataType::kFloat16 || t == DataType::kBFloat16;  // opset 27, with stash_type
    if (t != DataType::kFloat32 && t != DataType::kFloat64 && t != DataType::kInt16 && t != DataType::kInt32 &&
        t != DataType::kInt64 && !low)
      return Err(StatusCode::kUnsupported,
                 "{}: the CUDA Range layer takes float32, float64, float16, bfloat16, int16, int32 or int64, not {}",
                 spec.node.Where(), DataTypeName(t));
    KILN_ASSIGN_OR_RETURN(const int64_t stash, spec.node.attr_int("stash_type", 1));
    if (low && stash != 1 && stash != 11)
      return Err(StatusCode::kUnsupported, "{}: stash_type {} is not float (1) or double (11)", spec.node.Where(),
                 stash);
    const bool stash_double = low && stash == 11;
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni, stash_double](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins,
                           std::vector<DeviceTensor>& outs) {
          if (!Has(ins, 0) || !Has(ins, 1) || !Has(ins, 2) || ins[0].numel() != 1 || ins[2].numel() != 1)
            return Err(StatusCode::kInvalidArgument, "{}: start, limit and delta must be scalars", ni.node().Where());
          DeviceTensor& o = outs.at(0);
          if (o.dtype != ins[0].dtype || ins[2].dtype != ins[0].dtype)
            return Err(StatusCode::kInvalidArgument, "{}: start, delta and the output must have one type",
                       ni.node().Where());
          return LaunchStatus(
              ni,
              LaunchRange(static_cast<int>(o.dtype), ins[0].data, ins[2].data, o.data, o.numel(), ctx.stream,
                          stash_double),
              "LaunchRange");
        }));
  });
}

}  // namespace

void RegisterTensorLayers(LayerRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) r.Add(op, ViewFactory());
  r.Add("Dropout", DropoutFactory());
  r.Add("Shape", ShapeFactory());
  r.Add("Size", SizeFactory());
  r.Add("ConstantOfShape", ConstantOfShapeFactory());
  r.Add("Range", RangeFactory());
  tensor_layers::RegisterTensorCopyLayers(r);
  tensor_layers::RegisterRearrangeLayers(r);
  tensor_layers::RegisterGeneratorLayers(r);
  tensor_layers::RegisterReformatLayers(r);
}

}  // namespace kiln::cuda
