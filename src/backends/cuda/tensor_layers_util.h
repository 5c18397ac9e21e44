// Helpers shared by the host code of the tensor-family CUDA layers (tensor_layers.cpp, tensor_copy_layers.cpp):
// what a layer keeps of its node, host-known input values, element sizes, and the strided-copy call.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"

namespace kiln::cuda::tensor_layers {

// What a layer keeps of its node: a detached copy (name, op type, opset, attributes; no edges) for errors and
// the shared parameter helpers, and the node's constant inputs (shared host buffers).
struct NodeInfo {
  std::shared_ptr<const Node> meta;
  std::vector<std::optional<Tensor>> consts;
  const Node& node() const { return *meta; }
};
NodeInfo Capture(const Node& n);

// Whether input i is given at run time.
inline bool Has(const std::vector<DeviceTensor>& ins, size_t i) { return i < ins.size() && ins[i].present(); }
// Whether output i is wanted (present with memory or with 0 elements).
inline bool Wants(const std::vector<DeviceTensor>& outs, size_t i) { return i < outs.size() && outs[i].present(); }

// Input i's contents on the host (the runtime's copy, else the node's constant); nullptr when not known.
const Tensor* HostValue(const NodeInfo& ni, const std::vector<DeviceTensor>& ins, size_t i);
// Input i's contents as int64 values; an error naming the node and input (`what`) when not known on the host.
Result<std::vector<int64_t>> HostInts(const NodeInfo& ni, const std::vector<DeviceTensor>& ins, size_t i,
                                      const char* what);

// Bytes per element when the movement kernels handle it (1, 2, 4 or 8); an error naming the node otherwise.
Result<int> ElemSize(const Node& n, DataType t);

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape);

// LaunchStridedCopy with errors that name the node (strides in elements; see strided_copy_kernels.h).
Status StridedCopy(const NodeInfo& ni, cudaStream_t stream, const void* src, void* dst,
                   const std::vector<int64_t>& shape, const std::vector<int64_t>& src_strides,
                   const std::vector<int64_t>& dst_strides, int elem_size);

// A failed launcher call as a Status naming the node and the launcher.
Status LaunchStatus(const NodeInfo& ni, int cuda_error, const char* launcher);

// Byte offset of `elems` elements of `elem_size` bytes from p.
inline const void* Advance(const void* p, int64_t elems, int elem_size) {
  return static_cast<const char*>(p) + elems * elem_size;
}
inline void* Advance(void* p, int64_t elems, int elem_size) { return static_cast<char*>(p) + elems * elem_size; }

// A factory whose only tactic is "default"; `make` validates the node and builds the layer (it also runs when
// the builder lists tactics, so unsupported configurations are reported then).
using MakeLayer = std::function<Result<std::unique_ptr<Layer>>(const LayerSpec&)>;
LayerFactory SingleTactic(MakeLayer make);

void RegisterTensorCopyLayers(LayerRegistry& r);  // tensor_copy_layers.cpp
void RegisterRearrangeLayers(LayerRegistry& r);   // rearrange_layers.cpp: ReverseSequence, CenterCropPad, MaxUnpool,
                                                  // Col2Im
void RegisterGeneratorLayers(LayerRegistry& r);   // generator_layers.cpp: EyeLike, Hann/Hamming/BlackmanWindow
void RegisterReformatLayers(LayerRegistry& r);    // reformat_layers.cpp: kiln.Reformat (Cast + Transpose + Pad)

}  // namespace kiln::cuda::tensor_layers
