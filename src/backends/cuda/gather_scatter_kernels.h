// Launchers of the gather/scatter kernels (gather_scatter.cu): Gather, GatherElements, GatherND, ScatterElements,
// ScatterND. Plain C++ (no IR): pointers, int64 sizes, DTypeCode ints and small POD geometry structs.
//
// Index semantics on the device (a kernel cannot raise an error): negative indices are wrapped once (v + dim);
// gathers clamp an index that is still out of range to [0, dim - 1]; scatters skip the update of such an index.
// The host code validates indices that are known on the host (constants) and reports them like the CPU does.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

constexpr int kIndexMaxRank = 8;

// Gather: data viewed as [outer, dim, inner] elements of elem_bytes (1, 2, 4, 8 or any size: rows are copied as
// raw bytes, 16 bytes at a time where sizes and alignment allow); out[o, j, :] = data[o, index[j], :].
cudaError_t LaunchGather(const void* data, void* out, const void* indices, bool indices_int64, int64_t outer,
                         int64_t dim, int64_t inner, int64_t num_indices, int elem_bytes, cudaStream_t stream);

// GatherElements / ScatterElements geometry: the index tensor's shape and the data's strides (same rank).
struct ElementsGeometry {
  int rank = 0;
  int axis = 0;
  int64_t axis_dim = 0;                     // data.shape[axis]
  int64_t index_shape[kIndexMaxRank] = {};  // also the output (gather) / updates (scatter) shape
  int64_t data_strides[kIndexMaxRank] = {};
};

// out[i] = data[coords(i) with coords[axis] = index[i]] for every element i of the index tensor.
cudaError_t LaunchGatherElements(const void* data, void* out, const void* indices, bool indices_int64,
                                 const ElementsGeometry& g, int64_t count, int elem_bytes, cudaStream_t stream);

// GatherND geometry. Rows are the index tuples (flattened indices.shape[:-1]); each selects a slice of
// prod(data.shape[batch_dims + k:]) elements. Offsets are counted in slices.
struct GatherNDGeometry {
  int k = 0;                                 // indices.shape[-1]
  int64_t rows_per_batch = 1;                // prod(indices.shape[batch_dims:-1])
  int64_t slices_per_batch = 1;              // prod(data.shape[batch_dims:batch_dims + k])
  int64_t dims[kIndexMaxRank] = {};          // data.shape[batch_dims + j]
  int64_t slice_strides[kIndexMaxRank] = {};  // prod(data.shape[batch_dims + j + 1:batch_dims + k])
};

cudaError_t LaunchGatherND(const void* data, void* out, const void* indices, bool indices_int64,
                           const GatherNDGeometry& g, int64_t rows, int64_t slice_elems, int elem_bytes,
                           cudaStream_t stream);

enum ScatterReduction : int { kScatterNone = 0, kScatterAdd, kScatterMul, kScatterMax, kScatterMin };

// True where the scatter kernels implement `reduction` for the dtype (none: any 1/2/4/8-byte type; the
// reductions: float32/16, bfloat16, float64 and the 8..64-bit integers and bool).
bool ScatterSupports(int dtype, int reduction);

// ScatterElements on `out` (out_elems elements, already holding a copy of data): out[coords(i) with coords[axis] =
// index[i]] (op)= updates[i]. Reductions use atomics (their order, and with none the winner among duplicates, is
// unspecified); 1-byte reductions on a tensor whose size or address is not a multiple of 4 run in one thread.
cudaError_t LaunchScatterElements(void* out, int64_t out_elems, const void* updates, const void* indices,
                                  bool indices_int64, const ElementsGeometry& g, int64_t count, int dtype,
                                  int reduction, cudaStream_t stream);

// ScatterND geometry: data.shape[:k] and the strides of those axes counted in slices of prod(data.shape[k:]).
struct ScatterNDGeometry {
  int k = 0;
  int64_t dims[kIndexMaxRank] = {};
  int64_t slice_strides[kIndexMaxRank] = {};
};

// ScatterND on `out` (out_elems elements, already holding a copy of data): out[index[row], :] (op)= updates[row, :]
// (reductions as for ScatterElements).
cudaError_t LaunchScatterND(void* out, int64_t out_elems, const void* updates, const void* indices,
                            bool indices_int64, const ScatterNDGeometry& g, int64_t rows, int64_t slice_elems,
                            int dtype, int reduction, cudaStream_t stream);

}  // namespace kiln::cuda
