// Parameter arithmetic of the data-movement ops on concrete shapes, shared by the shape functions
// (src/shape/shape_tensor*.cpp) and the CPU kernels (src/backends/cpu/tensor*.cpp) so both agree exactly.
// Every function validates its operands and returns an error naming the node instead of crashing.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "ops/infer.h"
#include "ops/op_def.h"

namespace kiln {

// Normalizes axes against `rank` (negative counts from the end); errors on out-of-range or repeats.
Result<std::vector<int64_t>> NormalizeAxesList(const Node& n, const std::vector<int64_t>& axes, int64_t rank);

// Transpose permutation: attribute `perm` or the reversed axes; validated to be a permutation of rank.
Result<std::vector<int64_t>> TransposePerm(const Node& n, int64_t rank);

// Reshape target for a concrete input shape: 0 copies the input dim (unless allowzero), -1 is inferred.
Result<std::vector<int64_t>> ReshapeTarget(const Node& n, const std::vector<int64_t>& in,
                                           const std::vector<int64_t>& shape, bool allowzero);

// Slice, per input dim: first element, step and number of elements taken (dims not sliced: 0, 1, d).
struct SliceParams {
  std::vector<int64_t> start, step, count;
};
// `axes` and `steps` may be empty (defaults). ONNX clamping rules for out-of-range starts/ends.
Result<SliceParams> ComputeSlice(const Node& n, const std::vector<int64_t>& in_shape,
                                 const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                                 const std::vector<int64_t>& axes, const std::vector<int64_t>& steps);

// Split sizes along a dim of length `dim`: explicit `split` (when has_split) or `parts` chunks of
// ceil(dim/parts) with a smaller last chunk (opset 18 num_outputs semantics; equal when divisible).
Result<std::vector<int64_t>> ComputeSplit(const Node& n, int64_t dim, bool has_split,
                                          const std::vector<int64_t>& split, int64_t parts);

// Pad amounts for all `rank` dims as [begin_0..begin_{r-1}, end_0..end_{r-1}] from the pads input and
// the optional axes input (empty = all dims).
Result<std::vector<int64_t>> ComputePads(const Node& n, int64_t rank, const std::vector<int64_t>& pads,
                                         const std::vector<int64_t>& axes);

// Number of elements of Range(start, limit, delta): max(ceil((limit - start) / delta), 0).
Result<int64_t> RangeCount(const Node& n, double start, double limit, double delta);

// Contents of input i of a shape function as dims: its constant value (any int type) or its symbolic
// value (sym_value); nullopt when the input is omitted or its contents are not known. Negative integers read as
// unknown dims.
std::optional<std::vector<Dim>> InputDims(const InferContext& c, size_t i);
// Contents of input i as they are, for propagating them (Concat): negative integers as ContentDim's "#v" symbols;
// nullopt when unknown or not a small (<= 64 elements, rank <= 1) integer tensor.
std::optional<std::vector<Dim>> InputContents(const InferContext& c, size_t i);
// Contents of input i when every element is known (constant, or a sym_value of known dims).
std::optional<std::vector<int64_t>> InputInts(const InferContext& c, size_t i);

// Registers the second half of the tensor family's ops (tensor_more.cpp).
void RegisterTensorOpsMore(OpRegistry& r);

}  // namespace kiln
