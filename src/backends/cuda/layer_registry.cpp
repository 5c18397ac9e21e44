// The one table of CUDA layers: each op family registers its factories here.
#include "backends/cuda/families.h"
#include "core/error.h"

namespace kiln::cuda {

const LayerRegistry& Layers() {
  static const LayerRegistry reg = [] {
    LayerRegistry r;
    RegisterPointwiseLayers(r);
    RegisterReduceLayers(r);
    RegisterNormLayers(r);
    RegisterTensorLayers(r);
    RegisterIndexLayers(r);
    RegisterMatmulLayers(r);
    RegisterAttentionLayers(r);
    RegisterConvLayers(r);
    RegisterPoolLayers(r);
    RegisterQuantizedLayers(r);
    RegisterWeightOnlyLayers(r);
    RegisterRnnLayers(r);
    RegisterVisionLayers(r);
    RegisterCumProdLpNormBitCastLayers(r);
    RegisterControlFlowLayers(r);
    RegisterIntegerOpLayers(r);
    RegisterSpectralLayers(r);
    return r;
  }();
  return reg;
}

const LayerFactory* LayerRegistry::Find(const Node& n) const {
  if (const LayerFactory* f = Find(QualifiedOpName(n))) return f;
  return PluginLayerFactory(n);
}

std::vector<std::string> LayerRegistry::OpTypes() const {
  std::vector<std::string> r;
  for (const auto& [k, v] : factories_) r.push_back(k);
  return r;
}

namespace {

// The element types the CUDA layers hold (kernel_util.cuh's codes, and the float8 formats of pointwise_scalar.cuh).
// A node with a value of any other type is refused here, naming the type, before any layer could take its bytes for
// those of another type. ONNX 1.18+'s narrow types (float4e2m1, float8e8m0, int2, uint2) are held only by the layers
// whose factory says so (LayerFactory::holds_narrow_types: Cast, CastLike, QuantizeLinear, DequantizeLinear).
bool CudaHoldsType(DataType t, bool narrow_ok) {
  switch (t) {
    case DataType::kFloat32: case DataType::kUInt8: case DataType::kInt8: case DataType::kUInt16:
    case DataType::kInt16: case DataType::kInt32: case DataType::kInt64: case DataType::kBool:
    case DataType::kFloat16: case DataType::kFloat64: case DataType::kUInt32: case DataType::kUInt64:
    case DataType::kBFloat16: case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2: case DataType::kFloat8E5M2FNUZ: case DataType::kUInt4: case DataType::kInt4:
      return true;
    case DataType::kFloat4E2M1: case DataType::kFloat8E8M0: case DataType::kUInt2: case DataType::kInt2:
      return narrow_ok;
    default: return false;
  }
}

// `f`: the node's factory (nullptr when none).
Status CheckValueTypes(const Node& n, const LayerFactory* f) {
  const bool narrow_ok = f && f->holds_narrow_types;
  auto check = [&n, narrow_ok](const std::vector<Value*>& values, const char* what) -> Status {
    for (size_t i = 0; i < values.size(); ++i) {
      const Value* v = values[i];
      if (v && v->kind != ValueKind::kTensor)
        return Err(StatusCode::kUnsupported, "{}: {} {} ('{}') is a sequence or an optional ({}), which the CUDA backend "
                   "does not hold; build this engine for the cpu backend (--backend=cpu)", n.Where(), what, i, v->name,
                   v->TypeString());
      if (!v || v->dtype == DataType::kUndefined || CudaHoldsType(v->dtype, narrow_ok)) continue;
      return Err(StatusCode::kUnsupported, "{}: {} {} ('{}') has element type {} (code {}), which the CUDA backend has "
                 "no kernels for; build this engine for the cpu backend (--backend=cpu)", n.Where(), what, i, v->name,
                 DataTypeName(v->dtype), static_cast<int>(v->dtype));
    }
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(check(n.inputs, "input"));
  return check(n.outputs, "output");
}

}  // namespace

LayerSpec SpecAt(const Node& node, const Node& tuned_node, bool allow_tf32) {
  LayerSpec spec{node, {}, {}, allow_tf32};
  for (const Value* v : tuned_node.inputs)
    spec.input_shapes.push_back(v && v->has_shape && IsStatic(v->shape) ? ToStatic(v->shape) : std::vector<int64_t>{});
  for (const Value* v : tuned_node.outputs)
    spec.output_shapes.push_back(v && v->has_shape && IsStatic(v->shape) ? ToStatic(v->shape) : std::vector<int64_t>{});
  return spec;
}

Result<std::vector<std::string>> TacticsFor(const LayerSpec& spec) {
  const LayerFactory* f = Layers().Find(spec.node);
  KILN_RETURN_IF_ERROR(CheckValueTypes(spec.node, f));
  if (!f)
    return Err(StatusCode::kUnsupported, "{}: the CUDA backend has no kernel for op type {}", spec.node.Where(),
               spec.node.op_type);
  if (!f->tactics) return std::vector<std::string>{"default"};
  auto r = f->tactics(spec);
  if (!r.ok()) {
    if (r.status().message().find(spec.node.name) == std::string::npos) return r.status().WithContext(spec.node.Where());
    return r.status();
  }
  if (r->empty()) return Err(StatusCode::kUnsupported, "{}: no CUDA tactic can run this node", spec.node.Where());
  return r;
}

Result<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec, const std::string& tactic) {
  if (tactic == kCpuFallbackTactic) return CreateCpuFallbackLayer(spec);
  const LayerFactory* f = Layers().Find(spec.node);
  KILN_RETURN_IF_ERROR(CheckValueTypes(spec.node, f));
  if (!f)
    return Err(StatusCode::kUnsupported, "{}: the CUDA backend has no kernel for op type {}", spec.node.Where(),
               spec.node.op_type);
  auto r = f->create(spec, tactic);
  if (!r.ok() && r.status().message().find(spec.node.name) == std::string::npos)
    return r.status().WithContext(spec.node.Where());
  return r;
}

}  // namespace kiln::cuda
