// Helpers the quantized layers share (quantized_layers.cpp: QMatMul; quantized_conv_layers.cpp: QConv): the
// int8 weights on the device, the tiled kernel's arguments from a node's quantization attributes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/layer.h"
#include "backends/cuda/quantized_kernels.h"
#include "core/error.h"
#include "ops/quantized_ops.h"

#if defined(KILN_HAVE_CUTLASS_SM90)
#include "backends/cuda/cutlass/qgemm_sm90.h"
#endif

namespace kiln::cuda::quantized {

inline constexpr const char* kTactic = "int8-tiled";
inline constexpr const char* kFp8Tactic = "fp8-tiled";  // the same kernel over float8 operands (float32 sums)

struct QWeights {
  DeviceBuffer w, scales, zeros;
};

inline Status Unsupported(const Node& n, const std::string& what) {
  return Err(StatusCode::kUnsupported, "{}: the CUDA layer does not support {}", n.Where(), what);
}

inline int DTypeOf(DataType t) { return static_cast<int>(t); }

// The rows of a GEMM's X [..., K]: the product of every dim but the last (1 for a vector).
inline int64_t RowsOf(const std::vector<int64_t>& shape) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  return rows;
}

// The parts of QGemmArgs that do not depend on the run's shapes.
inline Result<QGemmArgs> BaseArgs(const Node& n, const quant_attrs::Params& p, const QWeights& w) {
  QGemmArgs a;
  a.w = static_cast<const int8_t*>(w.w.get());
  a.fp8 = n.input(0) && n.input(0)->dtype == DataType::kFloat8E4M3FN;
  a.x_zero_point = static_cast<int>(p.x_zero_point);
  a.x_scale = p.x_scale;
  a.w_scales = static_cast<const float*>(w.scales.get());
  a.per_channel = p.w_scales.size() > 1;
  a.act.act = static_cast<GemmAct>(static_cast<int>(p.activation));
  a.act.alpha = p.act_alpha;
  a.act.beta = p.act_beta;
  a.y_dtype = DTypeOf(p.y_type);
  a.y_scale = p.y_type == DataType::kFloat32 || p.y_type == DataType::kFloat16 ? 1.f : p.y_scale;  // 8-bit outputs
  a.y_zero_point = static_cast<int>(p.y_zero_point);
  a.r_scale = p.r_scale;
  return a;
}

// The tensor-core kernels read and write through TMA and vector loads: 16-byte aligned addresses. Arena buffers
// are; a graph input or output bound by the user (setTensorAddress) may not be, and then the tiled kernel runs.
inline bool TensorCoreAligned(const QGemmArgs& a) {
  auto ok = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return ok(a.x) && ok(a.y) && ok(a.residual) && ok(a.residual_i8) && ok(a.residual_f16) && ok(a.bias);
}

// Input 3, the residual: float32 or float16, or int8 (kiln_r_scale), or absent.
inline void SetResidual(QGemmArgs& a, const std::vector<DeviceTensor>& in) {
  a.residual = nullptr;
  a.residual_i8 = nullptr;
  a.residual_f16 = nullptr;
  if (in.size() <= 3 || !in[3].present()) return;
  if (in[3].dtype == DataType::kInt8) a.residual_i8 = static_cast<const int8_t*>(in[3].data);
  else if (in[3].dtype == DataType::kFloat16) a.residual_f16 = static_cast<const uint16_t*>(in[3].data);
  else a.residual = static_cast<const float*>(in[3].data);
}

inline Result<std::shared_ptr<QWeights>> Upload(const Node& n, const Tensor& w, const std::vector<float>& scales) {
  auto q = std::make_shared<QWeights>();
  KILN_ASSIGN_OR_RETURN(q->w, UploadToDevice(w.raw(), w.nbytes(), n.name + "/weight_int8"));
  KILN_ASSIGN_OR_RETURN(q->scales, UploadToDevice(scales.data(), scales.size() * sizeof(float), n.name + "/w_scales"));
  return q;
}

// The constant weight: int8, or float8e4m3fn for a float8 X.
inline const Tensor* ConstWeight(const Node& n) {
  const Value* w = n.input(1);
  const Value* x = n.input(0);
  const DataType t = x && x->dtype == DataType::kFloat8E4M3FN ? DataType::kFloat8E4M3FN : DataType::kInt8;
  return w && w->is_const() && w->dtype == t ? &*w->const_value : nullptr;
}

inline const float* OptionalFloat(const std::vector<DeviceTensor>& in, size_t i) {
  return i < in.size() && in[i].present() ? static_cast<const float*>(in[i].data) : nullptr;
}

// A factory of the quantized layers: float32 compute, tactics as given (default: the tiled kernel alone).
inline LayerFactory QFactory(Result<std::unique_ptr<Layer>> (*create)(const LayerSpec&, const std::string&),
                             Result<std::vector<std::string>> (*tactics)(const LayerSpec&) = nullptr) {
  LayerFactory f;
  if (tactics) f.tactics = tactics;
  else f.tactics = [](const LayerSpec&) -> Result<std::vector<std::string>> { return std::vector<std::string>{kTactic}; };
  f.create = create;
  f.compute_types = {DataType::kFloat32};
  // The tiled kernel is exact but has no tensor cores (ResNet-50 INT8 at batch 64 on an H200: 93 ms against FP16's
  // 2.1 ms): the optimizer creates a quantized layer only where a tensor-core tactic takes it (preferred_for).
  f.optimizer_may_create = false;
  return f;
}

#if defined(KILN_HAVE_CUTLASS_SM90)
// The Hopper GEMM's tiles as tactics, shared by QMatMul and the 1x1 QConv.
inline constexpr const char* kGemmTactics[cutlass_sm90::kNumGemmTiles] = {
    "int8-sm90-gemm-128x128", "int8-sm90-gemm-128x64", "int8-sm90-gemm-256x128"};
inline constexpr const char* kFp8GemmTactics[cutlass_sm90::kNumGemmTiles] = {
    "fp8-sm90-gemm-128x128", "fp8-sm90-gemm-128x64", "fp8-sm90-gemm-256x128"};
inline constexpr cutlass_sm90::GemmTile kGemmTiles[cutlass_sm90::kNumGemmTiles] = {
    cutlass_sm90::GemmTile::k128x128x128, cutlass_sm90::GemmTile::k128x64x128, cutlass_sm90::GemmTile::k256x128x128};

// The tile of an int8 (or, with `fp8`, a float8) GEMM tactic.
inline std::optional<cutlass_sm90::GemmTile> GemmTileOf(const std::string& tactic, bool fp8 = false) {
  for (int i = 0; i < cutlass_sm90::kNumGemmTiles; ++i)
    if (tactic == (fp8 ? kFp8GemmTactics : kGemmTactics)[i]) return kGemmTiles[i];
  return std::nullopt;
}

// The tensor-core kernels' operands (cutlass_sm90::QConvOperands or QGemmOperands) of a run: its tensors from `a`,
// the layer's device weight and per-channel scale, its activation as a clamp.
template <class Operands>
Operands TensorCoreOperands(const QGemmArgs& a, const void* w, const void* scale, float lo, float hi) {
  Operands o;
  o.x = static_cast<const int8_t*>(a.x);  // int8, or float8 bytes for the FP8 GEMM
  o.w = static_cast<const int8_t*>(w);
  o.scale = static_cast<const float*>(scale);
  o.bias = a.bias;
  o.residual = a.residual       ? static_cast<const void*>(a.residual)
               : a.residual_f16 ? static_cast<const void*>(a.residual_f16)
                                : static_cast<const void*>(a.residual_i8);
  o.r_scale = a.r_scale;
  o.lo = lo;
  o.hi = hi;
  o.y_scale = a.y_scale;
  o.y = a.y;
  return o;
}
#endif

LayerFactory QConvFactory();  // quantized_conv_layers.cpp
// The current device has compute capability 9.0: the sm_90a kernels of cutlass/ run there only (asked per device).
bool Sm90Device();
// The activation as the clamp the tensor-core epilogues apply (None, Relu, Clip), or false for the others.
bool ClampOf(const quant_attrs::Params& p, float* lo, float* hi);
// Why the optimizer creates no QConv on this device and build (empty: it does, where the tensor-core kernel fits).
std::string QConvTensorCoresUnavailable();
// Why --fp8 makes no FP8 layers on this device and build (empty: it does; quantized_layers.cpp).
std::string Fp8GemmUnavailable();

}  // namespace kiln::cuda::quantized
