// CUDA layers of EyeLike and HannWindow/HammingWindow/BlackmanWindow (kernels in generators.cu), with the CPU
// reference's semantics (backends/cpu/generators.cpp). The optimizer folds them into constants when their shapes
// are static; these layers run them when the shape is only known at run time (the output's inferred shape gives
// the window's length).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/generator_kernels.h"
#include "backends/cuda/tensor_layers_util.h"
#include "core/error.h"

namespace kiln::cuda {
namespace tensor_layers {
namespace {

// ---- EyeLike ----

LayerFactory EyeLikeFactory() {
  return SingleTactic([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    NodeInfo ni = Capture(n);
    const Value* y = n.output(0);
    if (!n.input(0) || !y) return Err(StatusCode::kInvalidModel, "{}: input and output are required", n.Where());
    KILN_ASSIGN_OR_RETURN(const int es, ElemSize(n, y->dtype));
    KILN_ASSIGN_OR_RETURN(const int64_t k, n.attr_int("k", 0));
    const Tensor one = Tensor::Scalar(y->dtype, 1.0);
    uint64_t bits = 0;
    std::memcpy(&bits, one.raw(), static_cast<size_t>(es));
    const DataType dtype = y->dtype;
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni, es, k, bits, dtype](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                 std::vector<DeviceTensor>& out) -> Status {
          const DeviceTensor& x = in[0];
          DeviceTensor& o = out[0];
          if (x.shape.size() != 2)
            return Err(StatusCode::kInvalidArgument, "{}: the input must be 2-D, got {}", ni.node().Where(),
                       ShapeToString(x.shape));
          if (o.shape != x.shape || o.dtype != dtype)
            return Err(StatusCode::kInternal, "{}: the output is {}{}, expected {}{}", ni.node().Where(),
                       DataTypeName(o.dtype), ShapeToString(o.shape), DataTypeName(dtype), ShapeToString(x.shape));
          return LaunchStatus(ni, LaunchEyeLike(o.data, x.shape[0], x.shape[1], k, es, bits, ctx.stream),
                              "LaunchEyeLike");
        }));
  });
}

// ---- HannWindow, HammingWindow, BlackmanWindow ----

LayerFactory WindowFactory(WindowKind kind) {
  return SingleTactic([kind](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    NodeInfo ni = Capture(n);
    const Value* y = n.output(0);
    if (!y) return Err(StatusCode::kInvalidModel, "{}: the output is required", n.Where());
    if (!WindowSupports(static_cast<int>(y->dtype)))
      return Err(StatusCode::kUnsupported,
                 "{}: the CUDA {} writes integer or float32/float16/bfloat16/float64 windows, not {}; run the node "
                 "on the CPU",
                 n.Where(), n.op_type, DataTypeName(y->dtype));
    KILN_ASSIGN_OR_RETURN(const int64_t periodic, n.attr_int("periodic", 1));
    return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
        [ni, kind, periodic](const LaunchContext& ctx, const std::vector<DeviceTensor>&,
                             std::vector<DeviceTensor>& out) -> Status {
          DeviceTensor& o = out[0];
          if (o.shape.size() != 1)
            return Err(StatusCode::kInternal, "{}: the output {} is not 1-D", ni.node().Where(),
                       ShapeToString(o.shape));
          return LaunchStatus(ni,
                              LaunchWindow(kind, static_cast<int>(o.dtype), o.data, o.shape[0], periodic != 0,
                                           ctx.stream),
                              "LaunchWindow");
        }));
  });
}

}  // namespace

void RegisterGeneratorLayers(LayerRegistry& r) {
  r.Add("EyeLike", EyeLikeFactory());
  r.Add("HannWindow", WindowFactory(kWindowHann));
  r.Add("HammingWindow", WindowFactory(kWindowHamming));
  r.Add("BlackmanWindow", WindowFactory(kWindowBlackman));
}

}  // namespace tensor_layers
}  // namespace kiln::cuda
