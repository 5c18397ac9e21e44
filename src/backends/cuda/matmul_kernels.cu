// Device kernels of the matmul family (see matmul_kernels.h): GEMM post-op, broadcast fill, generic contraction.
#include <type_traits>

#include "backends/cuda/epilogue_pack.cuh"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/matmul_kernels.h"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {

namespace {

constexpr int kBlock = 256;

// Compute type of a floating storage type: double for double, float otherwise.
template <typename T>
using FloatComputeT = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename C, typename T>
__device__ __forceinline__ C LoadAs(T v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return static_cast<C>(ToF32<T>(v));
}

template <typename T, typename C>
__device__ __forceinline__ T StoreAs(C v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return FromF32<T>(static_cast<float>(v));
}

template <typename T>
__global__ void GemmPostOpKernel(T* y, int64_t numel, int64_t n, const T* bias, GemmPostOp op) {
  using C = FloatComputeT<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    C v = LoadAs<C>(y[i]);
    if (bias) v += LoadAs<C>(bias[i % n]);
    y[i] = StoreAs<T>(epilogue::ActAt<GemmAct, C>(op.act, v, static_cast<C>(op.alpha), static_cast<C>(op.beta)));
  }
}

template <typename T>
__global__ void BroadcastFillKernel(T* y, int64_t m, int64_t n, const T* c, int64_t c_rows, int64_t c_cols,
                                   float beta) {
  using C = FloatComputeT<T>;
  const int64_t total = m * n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += step) {
    const int64_t i = idx / n, j = idx % n;
    const int64_t src = (c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j);
    y[idx] = StoreAs<T>(static_cast<C>(beta) * LoadAs<C>(c[src]));
  }
}

// ---- contraction ----

template <typename T>
struct ContractionTraits {  // integers: 64-bit wrapping accumulation
  using Acc = uint64_t;
  static constexpr bool kFloat = false;
  __device__ static Acc Load(T v) { return static_cast<uint64_t>(v); }
};
template <>
struct ContractionTraits<float> {
  using Acc = double;
  static constexpr bool kFloat = true;
  __device__ static Acc Load(float v) { return v; }
};
template <>
struct ContractionTraits<double> {
  using Acc = double;
  static constexpr bool kFloat = true;
  __device__ static Acc Load(double v) { return v; }
};
template <>
struct ContractionTraits<__half> {
  using Acc = double;
  static constexpr bool kFloat = true;
  __device__ static Acc Load(__half v) { return __half2float(v); }
};
template <>
struct ContractionTraits<__nv_bfloat16> {
  using Acc = double;
  static constexpr bool kFloat = true;
  __device__ static Acc Load(__nv_bfloat16 v) { return __bfloat162float(v); }
};

template <typename T>
__device__ __forceinline__ T StoreDouble(double v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>(v);
  else return FromF32<T>(static_cast<float>(v));
}

template <typename T, bool kGemm>
__global__ void ContractionKernel(ContractionParams p, int64_t out_count, int64_t red_count) {
  using Tr = ContractionTraits<T>;
  using Acc = typename Tr::Acc;
  const int nops = p.num_operands, nl = p.num_labels, nout = p.num_out;
  T* out = static_cast<T*>(p.out);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < out_count; o += step) {
    int64_t off[kMaxContractionOperands];
    for (int k = 0; k < nops; ++k) off[k] = 0;
    int64_t c_off = 0;
    int64_t rem = o;
    for (int l = nout - 1; l >= 0; --l) {  // the output index, last label fastest
      const int64_t i = rem % p.sizes[l];
      rem /= p.sizes[l];
      for (int k = 0; k < nops; ++k) off[k] += i * p.strides[k][l];
      c_off += i * p.c_strides[l];
    }
    int64_t ridx[kMaxContractionLabels];
    for (int l = nout; l < nl; ++l) ridx[l] = 0;
    Acc acc = 0;
    for (int64_t r = 0; r < red_count; ++r) {
      Acc prod = 1;
      for (int k = 0; k < nops; ++k) prod *= Tr::Load(static_cast<const T*>(p.operands[k])[off[k]]);
      acc += prod;
      for (int l = nl - 1; l >= nout; --l) {  // odometer over the summed labels
        if (++ridx[l] < p.sizes[l]) {
          for (int k = 0; k < nops; ++k) off[k] += p.strides[k][l];
          break;
        }
        for (int k = 0; k < nops; ++k) off[k] -= p.strides[k][l] * (p.sizes[l] - 1);
        ridx[l] = 0;
      }
    }
    if constexpr (Tr::kFloat) {
      double v = static_cast<double>(acc);
      if constexpr (kGemm) {
        v *= p.alpha;
        if (p.c) v += p.beta * static_cast<double>(Tr::Load(static_cast<const T*>(p.c)[c_off]));
      }
      out[o] = StoreDouble<T>(v);
    } else {
      T v = static_cast<T>(acc);
      if constexpr (kGemm) {
        v = static_cast<T>(p.alpha * static_cast<double>(v));
        if (p.c) {
          const T cb = static_cast<T>(p.beta * static_cast<double>(static_cast<const T*>(p.c)[c_off]));
          v = static_cast<T>(cb + v);
        }
      }
      out[o] = v;
    }
  }
}

template <typename T>
cudaError_t RunContraction(const ContractionParams& p, cudaStream_t stream) {
  int64_t out_count = 1, red_count = 1;
  for (int l = 0; l < p.num_out; ++l) out_count *= p.sizes[l];
  for (int l = p.num_out; l < p.num_labels; ++l) red_count *= p.sizes[l];
  if (out_count == 0) return cudaSuccess;
  // The Gemm form (alpha, beta * C) is only used by Gemm; Einsum and MatMul take the plain sum.
  const bool gemm = p.c != nullptr || p.alpha != 1.0;
  if (gemm) ContractionKernel<T, true><<<GridFor(out_count, kBlock), kBlock, 0, stream>>>(p, out_count, red_count);
  else ContractionKernel<T, false><<<GridFor(out_count, kBlock), kBlock, 0, stream>>>(p, out_count, red_count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGemmPostOp(int dtype, void* y, int64_t numel, int64_t n, const void* bias, GemmPostOp op,
                             cudaStream_t stream) {
  if (numel <= 0) return cudaSuccess;
  if (n <= 0) return cudaErrorInvalidValue;
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, double>) {  // 16-byte packs where n (with a bias) and the pointers allow
      if (epilogue::LaunchBiasActPacks(static_cast<T*>(y), static_cast<const T*>(bias), static_cast<const T*>(nullptr),
                                       numel, 1, n, op.act, op.alpha, op.beta, stream))
        return;
    }
    GemmPostOpKernel<T><<<GridFor(numel, kBlock), kBlock, 0, stream>>>(static_cast<T*>(y), numel, n,
                                                                       static_cast<const T*>(bias), op);
  };
  if (!DispatchFloat(dtype, launch)) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t LaunchBroadcastFill(int dtype, void* y, int64_t m, int64_t n, const void* c, int64_t c_rows,
                                int64_t c_cols, float beta, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  if ((c_rows != 1 && c_rows != m) || (c_cols != 1 && c_cols != n)) return cudaErrorInvalidValue;
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    BroadcastFillKernel<T><<<GridFor(m * n, kBlock), kBlock, 0, stream>>>(
        static_cast<T*>(y), m, n, static_cast<const T*>(c), c_rows, c_cols, beta);
  };
  if (!DispatchFloat(dtype, launch)) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t LaunchContraction(int dtype, const ContractionParams& p, cudaStream_t stream) {
  if (p.num_operands < 1 || p.num_operands > kMaxContractionOperands || p.num_labels > kMaxContractionLabels ||
      p.num_out < 0 || p.num_out > p.num_labels)
    return cudaErrorInvalidValue;
  cudaError_t e = cudaErrorInvalidValue;
  DispatchNumeric(dtype, [&](auto tag) { e = RunContraction<typename decltype(tag)::type>(p, stream); });
  return e;
}

}  // namespace kiln::cuda
