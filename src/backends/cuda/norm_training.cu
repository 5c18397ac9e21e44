// BatchNormalization in training mode (see norm_training_kernels.h). Five launches:
//  1. per (channel, chunk of the channel's N * inner values) one block sums the values in double;
//  2. per channel the chunks' sums are added in chunk order (the result does not depend on scheduling): the mean;
//  3. as 1, the squared deviations from the mean;
//  4. per channel the variance, the affine coefficients and the running statistics;
//  5. y = x * a + b (norm.cu's BatchNorm apply kernel for the 32- and 16-bit types, a double one for float64).
#include <cmath>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/norm_kernels.h"
#include "backends/cuda/norm_training_kernels.h"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 16384;       // values of a channel per block of the sums
constexpr int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest
constexpr size_t kAlign = 256;

constexpr size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

int64_t ChunksOf(int64_t m) { return m <= 0 ? 1 : (m + kChunk - 1) / kChunk; }

__device__ __forceinline__ double LoadParam(const void* p, int code, int64_t i) {
  switch (code) {
    case kF16: return static_cast<double>(__half2float(static_cast<const __half*>(p)[i]));
    case kBF16: return static_cast<double>(__bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]));
    case kF64: return static_cast<const double*>(p)[i];
    default: return static_cast<double>(static_cast<const float*>(p)[i]);
  }
}

// As Tensor::SetFromDouble: 16-bit floats through float32.
__device__ __forceinline__ void StoreParam(void* p, int code, int64_t i, double v) {
  switch (code) {
    case kF16: static_cast<__half*>(p)[i] = __float2half_rn(static_cast<float>(v)); break;
    case kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v)); break;
    case kF64: static_cast<double*>(p)[i] = v; break;
    default: static_cast<float*>(p)[i] = static_cast<float>(v); break;
  }
}

bool IsParamCode(int code) { return code == kF32 || code == kF16 || code == kBF16 || code == kF64; }

// Block b of C * chunks: channel b / chunks, values [j * kChunk, (j + 1) * kChunk) of its m = N * inner (value
// v = k * inner + i is x[(k * C + c) * inner + i]). mean == nullptr: the sum of the values; else of the squared
// deviations from mean[c].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    ChannelSumsKernel(const T* __restrict__ x, int64_t C, int64_t inner, int64_t m, int64_t chunks,
                      const double* __restrict__ mean, double* __restrict__ partial) {
  __shared__ double red[32];
  for (int64_t b = blockIdx.x; b < C * chunks; b += gridDim.x) {
    const int64_t c = b / chunks, j = b % chunks;
    const int64_t begin = j * kChunk, end = begin + kChunk < m ? begin + kChunk : m;
    const double mu = mean ? mean[c] : 0.0;
    double s = 0.0;
    for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x) {
      const int64_t k = v / inner, i = v - k * inner;
      const double f = LoadF64(x, (k * C + c) * inner + i);
      if (mean) {
        const double d = f - mu;
        s += d * d;
      } else {
        s += f;
      }
    }
    s = BlockSumF64(s, red);
    if (threadIdx.x == 0) partial[b] = s;
  }
}

// mean[c] = the chunks' sums of channel c, in order, over m.
__global__ void ChannelMeanKernel(const double* __restrict__ partial, int64_t C, int64_t chunks, int64_t m,
                                  double* __restrict__ mean) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0.0;
    for (int64_t j = 0; j < chunks; ++j) s += partial[c * chunks + j];
    mean[c] = s / static_cast<double>(m);
  }
}

// The variance from the chunks' sums of squared deviations, the coefficients (as A) and the running statistics.
template <typename A>
__global__ void ChannelFinishKernel(BatchNormTrainingArgs a, const double* __restrict__ partial, int64_t chunks,
                                    int64_t m, const double* __restrict__ mean, A* __restrict__ coef_a,
                                    A* __restrict__ coef_b) {
  const double eps = static_cast<double>(a.eps), momentum = static_cast<double>(a.momentum);
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < a.C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double q = 0.0;
    for (int64_t j = 0; j < chunks; ++j) q += partial[c * chunks + j];
    const double var = q / static_cast<double>(m), mu = mean[c];
    const double av = LoadParam(a.scale, a.scale_dtype, c) / sqrt(var + eps);
    coef_a[c] = static_cast<A>(av);
    coef_b[c] = static_cast<A>(LoadParam(a.bias, a.bias_dtype, c) - mu * av);
    if (a.running_mean)
      StoreParam(a.running_mean, a.running_mean_dtype, c,
                 LoadParam(a.input_mean, a.input_mean_dtype, c) * momentum + mu * (1 - momentum));
    if (a.running_var)
      StoreParam(a.running_var, a.running_var_dtype, c,
                 LoadParam(a.input_var, a.input_var_dtype, c) * momentum + var * (1 - momentum));
  }
}

__global__ void ApplyF64Kernel(const double* __restrict__ x, double* __restrict__ y, const double* __restrict__ ca,
                               const double* __restrict__ cb, int64_t total, int64_t C, int64_t inner) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (e / inner) % C;
    y[e] = x[e] * ca[c] + cb[c];
  }
}

unsigned BlocksFor(int64_t n) { return static_cast<unsigned>(n < kMaxBlocks ? (n < 1 ? 1 : n) : kMaxBlocks); }

template <typename T>
cudaError_t Sums(const BatchNormTrainingArgs& a, int64_t m, int64_t chunks, const double* mean, double* partial,
                 cudaStream_t stream) {
  ChannelSumsKernel<T><<<BlocksFor(a.C * chunks), kThreads, 0, stream>>>(static_cast<const T*>(a.x), a.C, a.inner, m,
                                                                         chunks, mean, partial);
  return cudaGetLastError();
}

cudaError_t SumsByType(const BatchNormTrainingArgs& a, int64_t m, int64_t chunks, const double* mean,
                       double* partial, cudaStream_t stream) {
  switch (a.dtype) {
    case kF32: return Sums<float>(a, m, chunks, mean, partial, stream);
    case kF16: return Sums<__half>(a, m, chunks, mean, partial, stream);
    case kBF16: return Sums<__nv_bfloat16>(a, m, chunks, mean, partial, stream);
    case kF64: return Sums<double>(a, m, chunks, mean, partial, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool BatchNormTrainingSupports(int data_dtype, int param_dtype) {
  return IsParamCode(data_dtype) && IsParamCode(param_dtype);
}

size_t BatchNormTrainingWorkspaceBytes(int64_t N, int64_t C, int64_t inner) {
  if (N < 0 || C <= 0 || inner < 0) return 0;
  const size_t c = static_cast<size_t>(C);
  const size_t partial = static_cast<size_t>(C * ChunksOf(N * inner)) * sizeof(double);
  return AlignUp(partial) + AlignUp(c * sizeof(double)) + 2 * AlignUp(c * sizeof(double));
}

cudaError_t LaunchBatchNormTraining(const BatchNormTrainingArgs& a, void* workspace, size_t workspace_bytes,
                                    cudaStream_t stream) {
  if (a.C <= 0) return cudaSuccess;
  if (a.N < 0 || a.inner < 0 || !IsParamCode(a.dtype) || !IsParamCode(a.scale_dtype) ||
      !IsParamCode(a.bias_dtype) || (a.running_mean && (!a.input_mean || !IsParamCode(a.input_mean_dtype) ||
                                                        !IsParamCode(a.running_mean_dtype))) ||
      (a.running_var && (!a.input_var || !IsParamCode(a.input_var_dtype) || !IsParamCode(a.running_var_dtype))))
    return cudaErrorInvalidValue;
  if (!workspace || workspace_bytes < BatchNormTrainingWorkspaceBytes(a.N, a.C, a.inner)) return cudaErrorInvalidValue;
  const int64_t m = a.N * a.inner, chunks = ChunksOf(m);
  const size_t c = static_cast<size_t>(a.C);
  char* ws = static_cast<char*>(workspace);
  double* partial = reinterpret_cast<double*>(ws);
  ws += AlignUp(static_cast<size_t>(a.C * chunks) * sizeof(double));
  double* mean = reinterpret_cast<double*>(ws);
  ws += AlignUp(c * sizeof(double));
  void* coef_a = ws;
  void* coef_b = ws + AlignUp(c * sizeof(double));

  cudaError_t e = SumsByType(a, m, chunks, nullptr, partial, stream);
  if (e != cudaSuccess) return e;
  ChannelMeanKernel<<<GridFor(a.C), kThreads, 0, stream>>>(partial, a.C, chunks, m, mean);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if ((e = SumsByType(a, m, chunks, mean, partial, stream)) != cudaSuccess) return e;
  const bool f64 = a.dtype == kF64;
  if (f64)
    ChannelFinishKernel<double><<<GridFor(a.C), kThreads, 0, stream>>>(
        a, partial, chunks, m, mean, static_cast<double*>(coef_a), static_cast<double*>(coef_b));
  else
    ChannelFinishKernel<float><<<GridFor(a.C), kThreads, 0, stream>>>(
        a, partial, chunks, m, mean, static_cast<float*>(coef_a), static_cast<float*>(coef_b));
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  const int64_t total = m * a.C;
  if (total == 0) return cudaSuccess;
  if (f64) {
    ApplyF64Kernel<<<GridFor(total), kThreads, 0, stream>>>(static_cast<const double*>(a.x),
                                                            static_cast<double*>(a.y), static_cast<double*>(coef_a),
                                                            static_cast<double*>(coef_b), total, a.C, a.inner);
    return cudaGetLastError();
  }
  BatchNormArgs apply;
  apply.x = a.x;
  apply.y = a.y;
  apply.dtype = a.dtype;
  apply.a = static_cast<const float*>(coef_a);
  apply.b = static_cast<const float*>(coef_b);
  apply.total = total;
  apply.C = a.C;
  apply.inner = a.inner;
  return LaunchBatchNormApply(apply, stream);
}

}  // namespace kiln::cuda
