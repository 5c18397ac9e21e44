// CUDA layer of kiln.Reformat (ops/fused_ops.h): Cast, Transpose and a zero Pad of the last axis in one kernel
// (reformat.cu), with the CPU reference's semantics (backends/cpu/elementwise_cast.cpp). float32, float16 and
// bfloat16 in and out; one tactic. The optimizer makes it only where the channels-last kernel runs it: the general
// kernel (one thread per output element, strided reads) is there for any node, not to replace a Cast and a tiled
// Transpose.
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backends/cuda/reformat_kernels.h"
#include "backends/cuda/tensor_layers_util.h"
#include "core/error.h"
#include "ops/fused_ops.h"

namespace kiln::cuda::tensor_layers {
namespace {

bool OnGpu(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16; }

// X's axis 1, of at most 16 channels, moved last (NCHW -> NHWC, and its 1-D and 3-D kin), padded to at most 16:
// what the channels-last kernel runs (reformat_kernels.h).
bool RunsChannelsLast(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !OnGpu(x->dtype) || !OnGpu(static_cast<DataType>(n.geti("to", static_cast<int64_t>(x->dtype)))) ||
      !x->has_shape || x->shape.size() < 3 || !x->shape[1].known() || x->shape[1].value > 16 ||
      n.geti("kiln_pad_last", 0) > 16)
    return false;
  const std::vector<int64_t> perm = n.getints("perm");
  const size_t r = x->shape.size();
  bool ok = perm.size() == r && perm[0] == 0 && perm[r - 1] == 1;
  for (size_t i = 1; ok && i + 1 < r; ++i) ok = perm[i] == static_cast<int64_t>(i) + 1;
  return ok;
}

Result<std::unique_ptr<Layer>> MakeReformat(const LayerSpec& spec) {
  const Node& n = spec.node;
  const Value* x = n.input(0);
  if (!x || !n.output(0))
    return Err(StatusCode::kInvalidModel, "{}: Reformat needs input 0 and output 0", n.Where());
  const DataType to = static_cast<DataType>(n.geti("to", static_cast<int64_t>(x->dtype)));
  if (!OnGpu(x->dtype) || !OnGpu(to))
    return Err(StatusCode::kUnsupported, "{}: the CUDA Reformat casts between float32, float16 and bfloat16, not {} to "
               "{}", n.Where(), DataTypeName(x->dtype), DataTypeName(to));
  // The attributes, read once where X's rank is known (the runtime's shapes keep it), else at each launch.
  std::optional<fused::ReformatParams> known;
  if (x->has_shape) {
    KILN_ASSIGN_OR_RETURN(known, fused::ReadReformat(n, x->dtype, static_cast<int64_t>(x->shape.size())));
  }
  NodeInfo ni = Capture(n);
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [ni, known](const LaunchContext& ctx, const std::vector<DeviceTensor>& ins,
                  std::vector<DeviceTensor>& outs) -> Status {
        if (!Has(ins, 0) || outs.empty())
          return Err(StatusCode::kInvalidModel, "{}: input 0 and output 0 are required", ni.node().Where());
        const DeviceTensor& x = ins[0];
        DeviceTensor& y = outs[0];
        const int64_t rank = static_cast<int64_t>(x.shape.size());
        fused::ReformatParams p;
        if (known && static_cast<int64_t>(known->perm.size()) == rank) {
          p = *known;
        } else {
          KILN_ASSIGN_OR_RETURN(p, fused::ReadReformat(ni.node(), x.dtype, rank));
        }
        KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, fused::ReformatOutputShape(ni.node(), p, x.shape));
        if (y.shape != shape || y.dtype != p.to)
          return Err(StatusCode::kInternal, "{}: the layer writes {} {} but the output is {} {}", ni.node().Where(),
                     DataTypeName(p.to), ShapeToString(shape), DataTypeName(y.dtype), ShapeToString(y.shape));
        if (y.numel() == 0) return Status::Ok();
        return LaunchStatus(ni,
                            LaunchReformat(static_cast<int>(x.dtype), static_cast<int>(y.dtype), x.data, y.data,
                                           static_cast<int>(rank), x.shape.data(), p.perm.data(),
                                           rank > 0 ? shape.back() : 1, ctx.stream),
                            "LaunchReformat");
      }));
}

}  // namespace

void RegisterReformatLayers(LayerRegistry& r) {
  LayerFactory f = SingleTactic(MakeReformat);
  f.optimizer_may_create = false;
  f.preferred_for = RunsChannelsLast;
  r.Add("kiln.Reformat", std::move(f));
}

}  // namespace kiln::cuda::tensor_layers
