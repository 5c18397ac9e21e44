// DeformConv kernels (see vision_kernels.h). Per image:
//  1. one thread per (offset group, kernel point, output point) finds where the kernel point samples (the window
//     position plus its offset, in double), and for every channel of the offset group writes the multilinear
//     interpolation of X there (corners outside X read 0; a position at or past one pixel outside reads 0) times the
//     mask into the columns col[channel * K + k, output point];
//  2. per group, Y[m, q] = B[m] + sum over the group's (channel, k) rows of W[m, row] col[row, q] (simple_gemm.cuh).
#include <algorithm>
#include <cmath>

#include "backends/cuda/f64_util.cuh"
#include "backends/cuda/simple_gemm.cuh"
#include "backends/cuda/type_dispatch.cuh"
#include "backends/cuda/vision_kernels.h"

namespace kiln::cuda {
namespace {

template <typename T>
using DeformAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;

constexpr int kMaxD = kDeformConvMaxDims;

struct DeformGeom {
  int nsp;
  int64_t channels, offset_group, cpog, kpoints, in_points, out_points;
  int64_t in_sp[kMaxD], out_sp[kMaxD], kernel[kMaxD], strides[kMaxD], pads[kMaxD], dilations[kMaxD];
  int64_t in_strides[kMaxD];
};

template <typename T, typename A>
__global__ void DeformSampleKernel(const T* __restrict__ x, const T* __restrict__ offset, const T* __restrict__ mask,
                                   A* __restrict__ col, DeformGeom g, int64_t b) {
  const int64_t P = g.out_points, K = g.kpoints;
  const int64_t total = g.offset_group * K * P;
  const int64_t corners = int64_t{1} << g.nsp;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = i % P, k = (i / P) % K, og = i / (P * K);
    int64_t lo[kMaxD];
    double frac[kMaxD];
    bool outside = false;
    int64_t qrem = q, krem = k;
    int64_t o[kMaxD], kidx[kMaxD];
    for (int d = g.nsp - 1; d >= 0; --d) {
      o[d] = qrem % g.out_sp[d];
      qrem /= g.out_sp[d];
      kidx[d] = krem % g.kernel[d];
      krem /= g.kernel[d];
    }
    const int64_t group_point = (b * g.offset_group + og) * K + k;
    for (int d = 0; d < g.nsp; ++d) {
      const double pos = __dadd_rn(static_cast<double>(o[d] * g.strides[d] - g.pads[d] + kidx[d] * g.dilations[d]),
                                   LoadF64(offset, (group_point * g.nsp + d) * P + q));
      if (!(pos > -1.0 && pos < static_cast<double>(g.in_sp[d]))) {
        outside = true;
        break;
      }
      const double f = floor(pos);
      lo[d] = static_cast<int64_t>(f);
      frac[d] = __dsub_rn(pos, f);
    }
    const double mk = mask ? LoadF64(mask, group_point * P + q) : 1.0;
    for (int64_t cc = og * g.cpog; cc < (og + 1) * g.cpog; ++cc) {
      double v = 0;
      if (!outside) {
        const T* plane = x + (b * g.channels + cc) * g.in_points;
        for (int64_t corner = 0; corner < corners; ++corner) {
          double wt = 1;
          int64_t at = 0;
          bool in = true;
          for (int d = 0; d < g.nsp; ++d) {
            const bool hi = ((corner >> d) & 1) != 0;
            const int64_t idx = lo[d] + (hi ? 1 : 0);
            wt = __dmul_rn(wt, hi ? frac[d] : __dsub_rn(1.0, frac[d]));
            if (idx < 0 || idx >= g.in_sp[d]) in = false;
            else at += idx * g.in_strides[d];
          }
          if (in && wt != 0) v = __dadd_rn(v, __dmul_rn(wt, LoadF64(plane, at)));
        }
      }
      col[(cc * K + k) * P + q] = static_cast<A>(__dmul_rn(v, mk));
    }
  }
}

// Y[b, z * mpg + m, n] = acc + B[z * mpg + m].
template <typename T, typename A>
struct DeformStore {
  T* y;
  const T* bias;
  int64_t mpg, out_channels, out_points, b;
  __device__ __forceinline__ void operator()(int64_t z, int64_t m, int64_t n, A acc) const {
    const int64_t oc = z * mpg + m;
    const A v = bias ? acc + LoadAcc<A>(bias, oc) : acc;
    y[(b * out_channels + oc) * out_points + n] = StoreFromAcc<T>(v);
  }
};

bool Valid(const DeformConvArgs& a) {
  if (a.nsp < 1 || a.nsp > kMaxD || a.batch < 0 || a.channels < 0 || a.out_channels < 0 || a.group < 1 ||
      a.offset_group < 1 || a.channels % a.group != 0 || a.out_channels % a.group != 0 ||
      a.channels % a.offset_group != 0)
    return false;
  for (int d = 0; d < a.nsp; ++d)
    if (a.in_sp[d] < 0 || a.out_sp[d] < 0 || a.kernel[d] < 1 || a.strides[d] < 1 || a.dilations[d] < 1) return false;
  return true;
}

DeformGeom MakeGeom(const DeformConvArgs& a) {
  DeformGeom g{};
  g.nsp = a.nsp;
  g.channels = a.channels;
  g.offset_group = a.offset_group;
  g.cpog = a.channels / a.offset_group;
  g.kpoints = g.in_points = g.out_points = 1;
  for (int d = 0; d < a.nsp; ++d) {
    g.in_sp[d] = a.in_sp[d];
    g.out_sp[d] = a.out_sp[d];
    g.kernel[d] = a.kernel[d];
    g.strides[d] = a.strides[d];
    g.pads[d] = a.pads[d];
    g.dilations[d] = a.dilations[d];
    g.kpoints *= a.kernel[d];
    g.in_points *= a.in_sp[d];
    g.out_points *= a.out_sp[d];
  }
  int64_t s = 1;
  for (int d = a.nsp - 1; d >= 0; --d) {
    g.in_strides[d] = s;
    s *= a.in_sp[d];
  }
  return g;
}

size_t AccSize(int dtype) { return dtype == kF64 ? sizeof(double) : sizeof(float); }

}  // namespace

size_t DeformConvWorkspaceBytes(const DeformConvArgs& a) {
  if (!Valid(a)) return 0;
  const DeformGeom g = MakeGeom(a);
  return static_cast<size_t>(a.channels * g.kpoints * g.out_points) * AccSize(a.dtype);
}

cudaError_t LaunchDeformConv(const DeformConvArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (!Valid(a)) return cudaErrorInvalidValue;
  const DeformGeom g = MakeGeom(a);
  if (a.batch == 0 || a.out_channels == 0 || g.out_points == 0) return cudaSuccess;
  if (workspace_bytes < DeformConvWorkspaceBytes(a) || (DeformConvWorkspaceBytes(a) > 0 && !workspace))
    return cudaErrorInvalidValue;
  const int64_t cpg = a.channels / a.group, mpg = a.out_channels / a.group;
  bool launched = false;
  DispatchFloat(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = DeformAcc<T>;
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    const T* off = static_cast<const T*>(a.offset);
    const T* mask = static_cast<const T*>(a.mask);
    const T* bias = static_cast<const T*>(a.bias);
    T* y = static_cast<T*>(a.y);
    A* col = static_cast<A*>(workspace);
    SimpleGemmGeom gg;
    gg.m = mpg;
    gg.n = g.out_points;
    gg.k = cpg * g.kpoints;
    gg.batch = a.group;
    gg.a_m = gg.k;
    gg.a_k = 1;
    gg.a_z = mpg * gg.k;
    gg.b_k = g.out_points;
    gg.b_n = 1;
    gg.b_z = gg.k * g.out_points;
    const int64_t sample_threads = a.offset_group * g.kpoints * g.out_points;
    for (int64_t b = 0; b < a.batch; ++b) {
      if (sample_threads > 0 && a.channels > 0)
        DeformSampleKernel<T, A><<<GridFor(sample_threads), 256, 0, stream>>>(x, off, mask, col, g, b);
      SimpleGemmKernel<A, T, A, DeformStore<T, A>><<<SimpleGemmBlocks(gg), kSimpleGemmThreads, 0, stream>>>(
          w, col, gg, DeformStore<T, A>{y, bias, mpg, a.out_channels, g.out_points, b});
    }
    launched = true;
  });
  return launched ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
