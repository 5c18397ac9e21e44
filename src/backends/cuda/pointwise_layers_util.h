// Host helpers shared by the pointwise layer files (pointwise_layers.cpp, pointwise_cast_layers.cpp): dtype
// codes, factories of one-tactic layers, broadcast plans for the kernels, errors that name the node, and the
// sub-registrations.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/layer.h"
#include "backends/cuda/pointwise_kernels.h"
#include "core/error.h"

namespace kiln::cuda::pwl {

inline int Code(DataType t) { return static_cast<int>(t); }

// A factory with one tactic ("default") whose layer `fn` creates.
inline LayerFactory Factory(std::function<Result<std::unique_ptr<Layer>>(const LayerSpec&)> fn) {
  LayerFactory f;
  f.create = [fn](const LayerSpec& spec, const std::string&) { return fn(spec); };
  return f;
}

inline std::unique_ptr<Layer> MakeLayer(FnLayer::Fn fn) { return std::make_unique<FnLayer>(std::move(fn)); }

// dtype of node input i as the graph gives it (kUndefined when omitted).
inline DataType InputType(const Node& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] ? n.inputs[i]->dtype : DataType::kUndefined;
}

// The broadcast plan of `inputs` onto `out` (numpy rules; each input's dims must be 1 or the output's).
// `where` names the node in errors.
Result<PwBroadcast> MakePwBroadcast(const std::string& where, const std::vector<int64_t>& out,
                                    const std::vector<std::vector<int64_t>>& inputs);

// "node 'x' (Op): the CUDA layer does not support <what>; <hint>"
Status NotSupported(const Node& n, const std::string& what, const std::string& hint);

// A launch's status (KILN_CUDA_STATUS of the launcher) with the node's Where() put before a failure. Layers keep
// `where` as a string: the Node need not outlive them.
inline Status InNode(const std::string& where, Status s) { return s.ok() ? s : s.WithContext(where); }

// Sub-registrations.
void RegisterCastQuantLayers(LayerRegistry& r);      // pointwise_cast_layers.cpp
void RegisterFusedPointwiseLayer(LayerRegistry& r);  // pointwise_cast_layers.cpp

}  // namespace kiln::cuda::pwl
