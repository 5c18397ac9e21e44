// CUDA layers of CumProd, LpNormalization and BitCast (kernels in cumprod_lpnorm_bitcast.cu) with the CPU
// reference's semantics (backends/cpu/reduce_topk.cpp, norm.cpp, bitcast_scatter.cpp).
//  - CumProd: every integer and float type (not bool); the axis from the node's constant or the runtime's host copy.
//  - LpNormalization: p 1 or 2 along any axis; float32/16, bfloat16, float64.
//  - BitCast: a copy of the bytes between types of one width; to bool, any nonzero byte becomes 1. Types narrower
//    than a byte (int4, uint4, float4e2m1, int2, uint2: kiln holds them one value per byte) are refused.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cumprod_lpnorm_bitcast_kernels.h"
#include "backends/cuda/families.h"
#include "core/element_bits.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

Status Launched(const std::string& where, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Err(StatusCode::kCudaError, "{}: launching the {} kernel failed: {} ({})", where, what,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};

Split SplitAt(const std::vector<int64_t>& shape, int64_t axis) {
  Split s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const int64_t e = shape[static_cast<size_t>(d)];
    if (d < axis) s.outer *= e;
    else if (d == axis) s.n = e;
    else s.inner *= e;
  }
  return s;
}

// ---- CumProd ----

Result<std::unique_ptr<Layer>> CreateCumProd(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  const Value* x = n.input(0);
  if (!x || !n.input(1)) return Err(StatusCode::kInvalidModel, "{}: x and axis are required", n.Where());
  if (!CumProdSupports(static_cast<int>(x->dtype)))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA CumProd does not take {} input (every integer and float type but bool); cast it or run "
               "the node on the CPU",
               n.Where(), DataTypeName(x->dtype));
  KILN_ASSIGN_OR_RETURN(const int64_t exclusive, n.attr_int("exclusive", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t reverse, n.attr_int("reverse", 0));
  std::optional<std::vector<int64_t>> axis_const;
  if (n.input(1)->is_const()) axis_const = n.input(1)->const_value->ToInt64Vector();
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        const DeviceTensor& xt = in[0];
        std::vector<int64_t> axis;
        if (axis_const) {
          axis = *axis_const;
        } else {
          if (in.size() < 2 || !in[1].present() || !in[1].host)
            return Err(StatusCode::kUnsupported,
                       "{}: the CUDA CumProd needs axis (input 1) on the host, but it is computed on the device; make "
                       "it a constant",
                       where);
          axis = in[1].host->ToInt64Vector();
        }
        if (axis.size() != 1)
          return Err(StatusCode::kInvalidArgument, "{}: axis (input 1) must hold exactly one value", where);
        const int64_t rank = static_cast<int64_t>(xt.shape.size());
        if (rank == 0) return Err(StatusCode::kInvalidArgument, "{}: CumProd needs an input of rank >= 1", where);
        const std::optional<int64_t> na = NormalizeAxis(axis[0], rank);
        if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", where, axis[0], rank);
        const Split s = SplitAt(xt.shape, *na);
        return Launched(where,
                        LaunchCumProd(static_cast<int>(xt.dtype), xt.data, out[0].data, s.outer, s.n, s.inner,
                                      exclusive != 0, reverse != 0, ctx.stream),
                        "CumProd");
      }));
}

// ---- LpNormalization ----

Result<std::unique_ptr<Layer>> CreateLpNorm(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  const Value* x = n.input(0);
  if (!x) return Err(StatusCode::kInvalidModel, "{}: input is required", n.Where());
  if (!LpNormSupports(static_cast<int>(x->dtype)))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA LpNormalization takes float32, float16, bfloat16 or float64 input, not {}; cast it or "
               "run the node on the CPU",
               n.Where(), DataTypeName(x->dtype));
  KILN_ASSIGN_OR_RETURN(const int64_t axis, n.attr_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(const int64_t p, n.attr_int("p", 2));
  if (p != 1 && p != 2) return Err(StatusCode::kInvalidModel, "{}: p must be 1 or 2, got {}", n.Where(), p);
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        const DeviceTensor& xt = in[0];
        const int64_t rank = static_cast<int64_t>(xt.shape.size());
        const std::optional<int64_t> na = NormalizeAxis(axis, rank);
        if (!na)
          return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for {}", where, axis,
                     ShapeToString(xt.shape));
        const Split s = SplitAt(xt.shape, *na);
        return Launched(where,
                        LaunchLpNorm(static_cast<int>(xt.dtype), xt.data, out[0].data, s.outer, s.n, s.inner,
                                     static_cast<int>(p), ctx.stream),
                        "LpNormalization");
      }));
}

// ---- BitCast ----

Result<std::unique_ptr<Layer>> CreateBitCast(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  const Value* x = n.input(0);
  if (!x) return Err(StatusCode::kInvalidModel, "{}: input is required", n.Where());
  KILN_ASSIGN_OR_RETURN(const int64_t code, n.attr_int("to", 0));
  const DataType to = static_cast<DataType>(code), from = x->dtype;
  if (!IsSupportedType(to) || !IsSupportedType(from) || ElementBits(to) != ElementBits(from))
    return Err(StatusCode::kInvalidModel, "{}: cannot bitcast {} to {} (types of the same width only)", n.Where(),
               DataTypeName(from), DataTypeName(to));
  if (ElementBits(from) < 8)
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA BitCast does not take {}-bit types ({} to {}): kiln holds them one value per byte, and "
               "the bits must be masked and sign-extended; run the node on the CPU",
               n.Where(), ElementBits(from), DataTypeName(from), DataTypeName(to));
  if (DataTypeSize(to) != DataTypeSize(from))
    return Err(StatusCode::kUnsupported, "{}: {} and {} are stored in different sizes", n.Where(), DataTypeName(from),
               DataTypeName(to));
  const bool to_bool = to == DataType::kBool && from != DataType::kBool;
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        const DeviceTensor& xt = in[0];
        if (xt.nbytes() != out[0].nbytes())
          return Err(StatusCode::kInternal, "{}: the output holds {} bytes, the input {}", where, out[0].nbytes(),
                     xt.nbytes());
        if (xt.numel() == 0) return Status::Ok();
        if (to_bool) return Launched(where, LaunchBytesToBool(xt.data, out[0].data, xt.numel(), ctx.stream), "BitCast");
        return KILN_CUDA_STATUS(
            cudaMemcpyAsync(out[0].data, xt.data, xt.nbytes(), cudaMemcpyDeviceToDevice, ctx.stream));
      }));
}

}  // namespace

void RegisterCumProdLpNormBitCastLayers(LayerRegistry& r) {
  LayerFactory cumprod, lpnorm, bitcast;
  cumprod.create = CreateCumProd;
  lpnorm.create = CreateLpNorm;
  bitcast.create = CreateBitCast;
  r.Add("CumProd", std::move(cumprod));
  r.Add("LpNormalization", std::move(lpnorm));
  r.Add("BitCast", std::move(bitcast));
}

}  // namespace kiln::cuda
