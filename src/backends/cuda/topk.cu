// TopK kernels: every slice (o, i) of x seen as [outer, n, inner] is fully sorted with a bitonic sort in a strict
// total order (the CPU reference's: NaN above every number, equal values by lower index; padding after all real
// elements), and its first k entries are written. The order is total, so the result is exactly the reference's.
//  - n <= kSharedSortMax: one block per slice, keys and indices in shared memory, one launch.
//  - larger n: keys/indices padded to a power of two in the workspace, one launch per bitonic step.
#include <algorithm>

#include "backends/cuda/reduce_common.cuh"
#include "backends/cuda/reduce_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {

namespace {

using reduce_detail::LoadValue;
using reduce_detail::StoreValue;
using reduce_detail::ValueT;

constexpr int kSharedSortMax = 2048;
constexpr int64_t kMaxBlocks = 65535LL * 32;

// True when (a, ia) comes strictly before (b, ib). Indices >= n are padding.
template <typename K>
__device__ __forceinline__ bool Before(K a, int ia, K b, int ib, int n, bool largest) {
  const bool pa = ia >= n, pb = ib >= n;
  if (pa != pb) return pb;
  if (pa) return ia < ib;
  const bool na = a != a, nb = b != b;
  if (na != nb) return largest ? na : nb;
  if (!na && a != b) return largest ? a > b : a < b;
  return ia < ib;
}

// One compare-exchange of bitonic step (size, stride) for pair t in [0, P/2): positions a < b = a + stride.
template <typename K>
__device__ __forceinline__ void CompareExchange(K* keys, int* ids, int64_t t, int64_t size, int64_t stride, int n,
                                                bool largest) {
  const int64_t a = 2 * stride * (t / stride) + t % stride, b = a + stride;
  const bool up = (a & size) == 0;
  const bool swap = up ? Before(keys[b], ids[b], keys[a], ids[a], n, largest)
                       : Before(keys[a], ids[a], keys[b], ids[b], n, largest);
  if (swap) {
    const K k = keys[a];
    keys[a] = keys[b];
    keys[b] = k;
    const int i = ids[a];
    ids[a] = ids[b];
    ids[b] = i;
  }
}

// One block per slice; P = the power of two >= n (<= kSharedSortMax).
template <typename T>
__global__ void TopKSharedKernel(const T* __restrict__ x, T* __restrict__ vals, int64_t* __restrict__ idx,
                                 int64_t slices, int n, int64_t inner, int k, int P, bool largest) {
  using K = ValueT<T>;
  __shared__ K keys[kSharedSortMax];
  __shared__ int ids[kSharedSortMax];
  for (int64_t s = blockIdx.x; s < slices; s += gridDim.x) {
    const int64_t o = s / inner, i = s - o * inner;
    const T* xs = x + o * n * inner + i;
    for (int r = threadIdx.x; r < P; r += blockDim.x) {
      keys[r] = r < n ? LoadValue(xs, static_cast<int64_t>(r) * inner) : K(0);
      ids[r] = r;
    }
    __syncthreads();
    for (int size = 2; size <= P; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int t = threadIdx.x; t < P / 2; t += blockDim.x) CompareExchange(keys, ids, t, size, stride, n, largest);
        __syncthreads();
      }
    }
    const int64_t ob = o * k * inner + i;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      if (vals) StoreValue(vals, ob + j * inner, keys[j]);
      if (idx) idx[ob + j * inner] = ids[j];
    }
    __syncthreads();
  }
}

// Global path: slice s occupies [s * P, (s + 1) * P) of keys/ids.
template <typename T>
__global__ void TopKFillKernel(const T* __restrict__ x, ValueT<T>* keys, int* ids, int64_t slices, int n,
                               int64_t inner, int64_t P) {
  const int64_t total = slices * P;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = e / P, r = e - s * P;
    const int64_t o = s / inner, i = s - o * inner;
    keys[e] = r < n ? LoadValue(x, o * n * inner + r * inner + i) : ValueT<T>(0);
    ids[e] = static_cast<int>(r);
  }
}

template <typename K>
__global__ void TopKStepKernel(K* keys, int* ids, int64_t slices, int64_t P, int64_t size, int64_t stride, int n,
                               bool largest) {
  const int64_t half = P / 2, total = slices * half;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = e / half, t = e - s * half;
    CompareExchange(keys + s * P, ids + s * P, t, size, stride, n, largest);
  }
}

template <typename T>
__global__ void TopKWriteKernel(const ValueT<T>* keys, const int* ids, T* vals, int64_t* idx, int64_t slices,
                                int64_t inner, int64_t k, int64_t P) {
  const int64_t total = slices * k;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = e / k, j = e - s * k;
    const int64_t o = s / inner, i = s - o * inner;
    const int64_t out = (o * k + j) * inner + i;
    if (vals) StoreValue(vals, out, keys[s * P + j]);
    if (idx) idx[out] = ids[s * P + j];
  }
}

int64_t NextPow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

template <typename T>
cudaError_t LaunchTyped(const T* x, T* vals, int64_t* idx, int64_t outer, int64_t n, int64_t inner, int64_t k,
                        bool largest, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  using K = ValueT<T>;
  const int64_t slices = outer * inner, P = NextPow2(n);
  if (P <= kSharedSortMax) {
    const int threads = static_cast<int>(std::max<int64_t>(32, std::min<int64_t>(1024, P / 2)));
    TopKSharedKernel<T><<<static_cast<unsigned>(std::min(slices, kMaxBlocks)), threads, 0, stream>>>(
        x, vals, idx, slices, static_cast<int>(n), inner, static_cast<int>(k), static_cast<int>(P), largest);
    return cudaGetLastError();
  }
  if (workspace == nullptr || workspace_bytes < TopKWorkspaceBytes(outer, n, inner)) return cudaErrorInvalidValue;
  K* keys = static_cast<K*>(workspace);
  int* ids = reinterpret_cast<int*>(static_cast<char*>(workspace) + slices * P * 8);
  TopKFillKernel<T><<<GridFor(slices * P), 256, 0, stream>>>(x, keys, ids, slices, static_cast<int>(n), inner, P);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  for (int64_t size = 2; size <= P; size <<= 1) {
    for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
      TopKStepKernel<K><<<GridFor(slices * (P / 2)), 256, 0, stream>>>(keys, ids, slices, P, size, stride,
                                                                       static_cast<int>(n), largest);
      err = cudaGetLastError();
      if (err != cudaSuccess) return err;
    }
  }
  TopKWriteKernel<T><<<GridFor(slices * k), 256, 0, stream>>>(keys, ids, vals, idx, slices, inner, k, P);
  return cudaGetLastError();
}

}  // namespace

int64_t TopKSharedSortMax() { return kSharedSortMax; }

size_t TopKWorkspaceBytes(int64_t outer, int64_t n, int64_t inner) {
  const int64_t P = NextPow2(n);
  if (P <= kSharedSortMax) return 0;
  return static_cast<size_t>(outer * inner * P) * (8 + sizeof(int));  // keys (<= 8 bytes) then int32 indices
}

cudaError_t LaunchTopK(int dtype, const void* x, void* values, int64_t* indices, int64_t outer, int64_t n,
                       int64_t inner, int64_t k, bool largest, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream) {
  if (dtype == kBool || n > (int64_t{1} << 30) || k < 0 || k > n) return cudaErrorInvalidValue;
  if (outer * inner * k == 0) return cudaSuccess;
  cudaError_t err = cudaErrorInvalidValue;
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    err = LaunchTyped<T>(static_cast<const T*>(x), static_cast<T*>(values), indices, outer, n, inner, k, largest,
                         workspace, workspace_bytes, stream);
  };
  switch (dtype) {  // the integer types the reduce family's dispatch leaves out
    case kI16: launch(TypeTag<int16_t>{}); return err;
    case kU16: launch(TypeTag<uint16_t>{}); return err;
    case kU32: launch(TypeTag<uint32_t>{}); return err;
    case kU64: launch(TypeTag<uint64_t>{}); return err;
    default: break;
  }
  KILN_REDUCE_DISPATCH(dtype, T, launch(TypeTag<T>{}));
  return err;
}

bool TopKDTypeSupported(int dtype) {
  switch (dtype) {
    case kI16: case kU16: case kU32: case kU64: return true;
    case kBool: return false;
    default: return ReduceDTypeSupported(dtype);
  }
}

}  // namespace kiln::cuda
