// Gather/scatter kernels (see gather_scatter_kernels.h). Gathers move raw bytes: whole rows (Gather, GatherND) are
// copied in the widest unit (16/8/4/2/1 bytes) that the row size and both base addresses allow, one block per row
// when rows are long (the BERT/GPT-2 embedding lookup) and one thread per unit otherwise. Scatters with a
// reduction combine in float32 for 16-bit floats and in the element type otherwise, with atomics (a compare-and-
// swap loop on the containing 32/64-bit word; native atomicAdd for float32/float64 add).
#include <cstring>
#include <type_traits>

#include "backends/cuda/gather_scatter_kernels.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

// Wraps a negative index once and clamps the result into [0, dim - 1] (dim > 0).
__device__ __forceinline__ int64_t ClampIndex(int64_t v, int64_t dim) {
  if (v < 0) v += dim;
  return v < 0 ? 0 : (v >= dim ? dim - 1 : v);
}

__device__ __forceinline__ int64_t LoadIndex(const void* p, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// ---- row copies (Gather, GatherND) ----

// Source row (in rows of the destination's row size) of Gather's destination row r = (o, j).
struct GatherRowFn {
  const void* indices;
  bool is64;
  int64_t num_indices, dim;
  __device__ int64_t operator()(int64_t r) const {
    const int64_t o = r / num_indices, j = r - o * num_indices;
    return o * dim + ClampIndex(LoadIndex(indices, is64, j), dim);
  }
};

// Source slice of GatherND's index tuple r.
struct GatherNDRowFn {
  const void* indices;
  bool is64;
  GatherNDGeometry g;
  __device__ int64_t operator()(int64_t r) const {
    const int64_t batch = r / g.rows_per_batch;
    int64_t s = batch * g.slices_per_batch;
    for (int j = 0; j < g.k; ++j)
      s += ClampIndex(LoadIndex(indices, is64, r * g.k + j), g.dims[j]) * g.slice_strides[j];
    return s;
  }
};

// One thread per unit: for short rows.
template <typename U, typename RowFn>
__global__ void CopyRowsFlatKernel(const U* __restrict__ src, U* __restrict__ dst, int64_t rows, int64_t row_units,
                                   RowFn row_of) {
  const int64_t total = rows * row_units;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / row_units, u = t - r * row_units;
    dst[t] = src[row_of(r) * row_units + u];
  }
}

// Long rows: each block copies one chunk of a row, so that a few long rows (Gather of one index along an outer
// axis copies a single row of megabytes) still spread over the whole GPU.
template <typename U, typename RowFn>
__global__ void CopyRowsBlockKernel(const U* __restrict__ src, U* __restrict__ dst, int64_t rows, int64_t row_units,
                                    int64_t chunk_units, int64_t chunks_per_row, RowFn row_of) {
  const int64_t pieces = rows * chunks_per_row;
  for (int64_t p = blockIdx.x; p < pieces; p += gridDim.x) {
    const int64_t r = p / chunks_per_row, c = p - r * chunks_per_row;
    const int64_t begin = c * chunk_units;
    const int64_t end = begin + chunk_units < row_units ? begin + chunk_units : row_units;
    const U* s = src + row_of(r) * row_units;
    U* d = dst + r * row_units;
    for (int64_t u = begin + threadIdx.x; u < end; u += blockDim.x) d[u] = s[u];
  }
}

template <typename U, typename RowFn>
cudaError_t CopyRowsAs(const void* src, void* dst, int64_t rows, int64_t row_bytes, RowFn row_of,
                       cudaStream_t stream) {
  const int64_t units = row_bytes / static_cast<int64_t>(sizeof(U));
  const U* s = static_cast<const U*>(src);
  U* d = static_cast<U*>(dst);
  if (units >= 32) {
    const int block = units >= 256 ? 256 : static_cast<int>((units + 31) / 32 * 32);
    const int64_t chunk = int64_t{block} * 8;  // units per block and row piece: 8 per thread
    const int64_t chunks = (units + chunk - 1) / chunk;
    const int64_t pieces = rows * chunks;
    const int64_t grid = pieces < (int64_t{1} << 20) ? pieces : (int64_t{1} << 20);
    CopyRowsBlockKernel<U><<<static_cast<unsigned>(grid), block, 0, stream>>>(s, d, rows, units, chunk, chunks, row_of);
  } else {
    CopyRowsFlatKernel<U><<<GridFor(rows * units), 256, 0, stream>>>(s, d, rows, units, row_of);
  }
  return cudaGetLastError();
}

// dst row r (row_bytes bytes) = src row row_of(r).
template <typename RowFn>
cudaError_t CopyRows(const void* src, void* dst, int64_t rows, int64_t row_bytes, RowFn row_of, cudaStream_t stream) {
  if (rows <= 0 || row_bytes <= 0) return cudaSuccess;
  const uintptr_t a = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                      static_cast<uintptr_t>(row_bytes);
  if (a % 16 == 0) return CopyRowsAs<uint4>(src, dst, rows, row_bytes, row_of, stream);
  if (a % 8 == 0) return CopyRowsAs<uint2>(src, dst, rows, row_bytes, row_of, stream);
  if (a % 4 == 0) return CopyRowsAs<uint32_t>(src, dst, rows, row_bytes, row_of, stream);
  if (a % 2 == 0) return CopyRowsAs<uint16_t>(src, dst, rows, row_bytes, row_of, stream);
  return CopyRowsAs<uint8_t>(src, dst, rows, row_bytes, row_of, stream);
}

// ---- element-wise index geometry (GatherElements, ScatterElements) ----

// Data offset of index element t without the axis term.
__device__ __forceinline__ int64_t ElementsBase(const ElementsGeometry& g, int64_t t) {
  int64_t rem = t, off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t n = g.index_shape[d];
    const int64_t c = rem % n;
    rem /= n;
    if (d != g.axis) off += c * g.data_strides[d];
  }
  return off;
}

template <typename E, typename I>
__global__ void GatherElementsKernel(const E* __restrict__ data, E* __restrict__ out, const I* __restrict__ indices,
                                     ElementsGeometry g, int64_t count) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < count;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = ClampIndex(static_cast<int64_t>(indices[t]), g.axis_dim);
    out[t] = data[ElementsBase(g, t) + j * g.data_strides[g.axis]];
  }
}

// ---- scatter reductions ----

template <typename T>
struct Acc {
  using type = T;
  static __device__ __forceinline__ T Load(T v) { return v; }
  static __device__ __forceinline__ T Store(T v) { return v; }
};
template <>
struct Acc<__half> {
  using type = float;
  static __device__ __forceinline__ float Load(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half Store(float v) { return __float2half_rn(v); }
};
template <>
struct Acc<__nv_bfloat16> {
  using type = float;
  static __device__ __forceinline__ float Load(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 Store(float v) { return __float2bfloat16_rn(v); }
};

// The CPU reference's combination: add and mul wrap to the type, max/min keep `a` on ties and NaN compares.
template <typename C>
__device__ __forceinline__ C Combine(C a, C b, int red) {
  if constexpr (std::is_same_v<C, bool>) {
    return (red == kScatterAdd || red == kScatterMax) ? (a || b) : (a && b);
  } else {
    switch (red) {
      case kScatterAdd: return static_cast<C>(a + b);
      case kScatterMul: return static_cast<C>(a * b);
      case kScatterMax: return a < b ? b : a;
      default: return b < a ? b : a;
    }
  }
}

template <typename T>
__device__ __forceinline__ T CombineStorage(T cur, T val, int red) {
  return Acc<T>::Store(Combine<typename Acc<T>::type>(Acc<T>::Load(cur), Acc<T>::Load(val), red));
}

// *addr = Combine(*addr, val) atomically.
template <typename T>
__device__ void AtomicCombine(T* addr, T val, int red) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (red == kScatterAdd) {
      atomicAdd(addr, val);
      return;
    }
  }
  if constexpr (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) {
    using W = std::conditional_t<sizeof(T) == 2, unsigned short,
                                 std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>>;
    W* word = reinterpret_cast<W*>(addr);
    W old = *reinterpret_cast<volatile W*>(word);
    while (true) {
      T cur;
      memcpy(&cur, &old, sizeof(T));
      const T nv = CombineStorage(cur, val, red);
      W nw;
      memcpy(&nw, &nv, sizeof(T));
      if (nw == old) return;
      const W seen = atomicCAS(word, old, nw);
      if (seen == old) return;
      old = seen;
    }
  } else {  // 1 byte: compare-and-swap the aligned 32-bit word that contains it (the launcher makes sure that word
            // lies inside the tensor)
    static_assert(sizeof(T) == 1, "element size");
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    unsigned int* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(a & 3) * 8u;
    const unsigned mask = 0xffu << shift;
    unsigned old = *reinterpret_cast<volatile unsigned*>(word);
    while (true) {
      const unsigned bits = (old & mask) >> shift;
      T cur;
      memcpy(&cur, &bits, sizeof(T));
      const T nv = CombineStorage(cur, val, red);
      unsigned nb = 0;
      memcpy(&nb, &nv, sizeof(T));
      const unsigned nw = (old & ~mask) | ((nb << shift) & mask);
      if (nw == old) return;
      const unsigned seen = atomicCAS(word, old, nw);
      if (seen == old) return;
      old = seen;
    }
  }
}

// How a scatter kernel writes: store the update (reduction none), combine atomically, or combine in order from a
// single thread (1-byte reductions on a tensor whose size or address is not a multiple of 4, where the 32-bit word
// of the compare-and-swap would reach outside the tensor).
enum class ScatterWrite { kAssign, kAtomic, kSerial };

template <ScatterWrite kWrite, typename T>
__device__ __forceinline__ void ScatterWriteOne(T* out, int64_t off, T update, int red) {
  if constexpr (kWrite == ScatterWrite::kAssign) out[off] = update;
  else if constexpr (kWrite == ScatterWrite::kAtomic) AtomicCombine(out + off, update, red);
  else out[off] = CombineStorage(out[off], update, red);
}

// With kAssign, T is the unsigned type of the element size.
template <typename T, ScatterWrite kWrite, typename I>
__global__ void ScatterElementsKernel(T* out, const T* __restrict__ updates, const I* __restrict__ indices,
                                      ElementsGeometry g, int64_t count, int red) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < count;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t v = static_cast<int64_t>(indices[t]);
    if (v < 0) v += g.axis_dim;
    if (v < 0 || v >= g.axis_dim) continue;  // out of range: skipped
    const int64_t off = ElementsBase(g, t) + v * g.data_strides[g.axis];
    ScatterWriteOne<kWrite>(out, off, updates[t], red);
  }
}

template <typename T, ScatterWrite kWrite, typename I>
__global__ void ScatterNDKernel(T* out, const T* __restrict__ updates, const I* __restrict__ indices,
                                ScatterNDGeometry g, int64_t rows, int64_t slice, int red) {
  const int64_t total = rows * slice;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = t / slice, e = t - row * slice;
    int64_t s = 0;
    bool ok = true;
    for (int j = 0; j < g.k; ++j) {
      int64_t v = static_cast<int64_t>(indices[row * g.k + j]);
      if (v < 0) v += g.dims[j];
      if (v < 0 || v >= g.dims[j]) ok = false;
      s += v * g.slice_strides[j];
    }
    if (!ok) continue;  // out of range: skipped
    const int64_t off = s * slice + e;
    ScatterWriteOne<kWrite>(out, off, updates[t], red);
  }
}

int DTypeBytes(int dtype) {
  switch (dtype) {
    case kU8: case kI8: case kBool: case kF8E4M3: return 1;
    case kU16: case kI16: case kF16: case kBF16: return 2;
    case kF32: case kI32: case kU32: return 4;
    case kF64: case kI64: case kU64: return 8;
    default: return 0;
  }
}

template <ScatterWrite kWrite>
using WriteTag = std::integral_constant<ScatterWrite, kWrite>;

// Calls launch(TypeTag<T>, WriteTag) for the scatter's element type and write mode.
template <typename Launch>
void DispatchWrite(void* out, int64_t out_elems, int dtype, int reduction, Launch&& launch) {
  if (reduction == kScatterNone) {
    DispatchElemBytes(DTypeBytes(dtype), [&](auto tag) { launch(tag, WriteTag<ScatterWrite::kAssign>{}); });
    return;
  }
  const bool word_safe = reinterpret_cast<uintptr_t>(out) % 4 == 0 && out_elems % 4 == 0;
  if (DTypeBytes(dtype) == 1 && !word_safe)
    DispatchStorage(dtype, [&](auto tag) { launch(tag, WriteTag<ScatterWrite::kSerial>{}); });
  else
    DispatchStorage(dtype, [&](auto tag) { launch(tag, WriteTag<ScatterWrite::kAtomic>{}); });
}

}  // namespace

cudaError_t LaunchGather(const void* data, void* out, const void* indices, bool indices_int64, int64_t outer,
                         int64_t dim, int64_t inner, int64_t num_indices, int elem_bytes, cudaStream_t stream) {
  if (outer <= 0 || inner <= 0 || num_indices <= 0) return cudaSuccess;
  if (dim <= 0) return cudaErrorInvalidValue;
  return CopyRows(data, out, outer * num_indices, inner * elem_bytes,
                  GatherRowFn{indices, indices_int64, num_indices, dim}, stream);
}

cudaError_t LaunchGatherND(const void* data, void* out, const void* indices, bool indices_int64,
                           const GatherNDGeometry& g, int64_t rows, int64_t slice_elems, int elem_bytes,
                           cudaStream_t stream) {
  if (rows <= 0 || slice_elems <= 0) return cudaSuccess;
  for (int j = 0; j < g.k; ++j)
    if (g.dims[j] <= 0) return cudaErrorInvalidValue;
  return CopyRows(data, out, rows, slice_elems * elem_bytes, GatherNDRowFn{indices, indices_int64, g}, stream);
}

cudaError_t LaunchGatherElements(const void* data, void* out, const void* indices, bool indices_int64,
                                 const ElementsGeometry& g, int64_t count, int elem_bytes, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (g.axis_dim <= 0) return cudaErrorInvalidValue;
  const bool ok = DispatchElemBytes(elem_bytes, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* d = static_cast<const E*>(data);
    E* o = static_cast<E*>(out);
    if (indices_int64)
      GatherElementsKernel<<<GridFor(count), 256, 0, stream>>>(d, o, static_cast<const int64_t*>(indices), g, count);
    else
      GatherElementsKernel<<<GridFor(count), 256, 0, stream>>>(d, o, static_cast<const int32_t*>(indices), g, count);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

bool ScatterSupports(int dtype, int reduction) {
  if (reduction == kScatterNone) {
    const int b = DTypeBytes(dtype);
    return b == 1 || b == 2 || b == 4 || b == 8;
  }
  if (reduction < kScatterAdd || reduction > kScatterMin) return false;
  return DispatchStorage(dtype, [](auto) {});
}

cudaError_t LaunchScatterElements(void* out, int64_t out_elems, const void* updates, const void* indices,
                                  bool indices_int64, const ElementsGeometry& g, int64_t count, int dtype,
                                  int reduction, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (!ScatterSupports(dtype, reduction)) return cudaErrorInvalidValue;
  auto launch = [&](auto tag, auto write) {
    using T = typename decltype(tag)::type;
    constexpr ScatterWrite kWrite = decltype(write)::value;
    T* o = static_cast<T*>(out);
    const T* u = static_cast<const T*>(updates);
    const unsigned grid = kWrite == ScatterWrite::kSerial ? 1 : GridFor(count);
    const int block = kWrite == ScatterWrite::kSerial ? 1 : 256;
    if (indices_int64)
      ScatterElementsKernel<T, kWrite><<<grid, block, 0, stream>>>(o, u, static_cast<const int64_t*>(indices), g,
                                                                   count, reduction);
    else
      ScatterElementsKernel<T, kWrite><<<grid, block, 0, stream>>>(o, u, static_cast<const int32_t*>(indices), g,
                                                                   count, reduction);
  };
  DispatchWrite(out, out_elems, dtype, reduction, launch);
  return cudaGetLastError();
}

cudaError_t LaunchScatterND(void* out, int64_t out_elems, const void* updates, const void* indices,
                            bool indices_int64, const ScatterNDGeometry& g, int64_t rows, int64_t slice_elems,
                            int dtype, int reduction, cudaStream_t stream) {
  if (rows <= 0 || slice_elems <= 0) return cudaSuccess;
  if (!ScatterSupports(dtype, reduction)) return cudaErrorInvalidValue;
  const int64_t total = rows * slice_elems;
  auto launch = [&](auto tag, auto write) {
    using T = typename decltype(tag)::type;
    constexpr ScatterWrite kWrite = decltype(write)::value;
    T* o = static_cast<T*>(out);
    const T* u = static_cast<const T*>(updates);
    const unsigned grid = kWrite == ScatterWrite::kSerial ? 1 : GridFor(total);
    const int block = kWrite == ScatterWrite::kSerial ? 1 : 256;
    if (indices_int64)
      ScatterNDKernel<T, kWrite><<<grid, block, 0, stream>>>(o, u, static_cast<const int64_t*>(indices), g, rows,
                                                             slice_elems, reduction);
    else
      ScatterNDKernel<T, kWrite><<<grid, block, 0, stream>>>(o, u, static_cast<const int32_t*>(indices), g, rows,
                                                             slice_elems, reduction);
  };
  DispatchWrite(out, out_elems, dtype, reduction, launch);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
