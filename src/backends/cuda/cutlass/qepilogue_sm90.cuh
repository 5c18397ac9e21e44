// The quantized layers' epilogue as a CUTLASS sm90 epilogue visitor tree, shared by the convolution
// (qconv_sm90_impl.cuh) and the GEMM (qgemm_sm90_impl.cuh). Along N (output channels / columns):
//   v = acc * scale[n];  v = v + bias[n];  [v = v + C]  (C: the residual, float32, float16, or int8 read as c * r_scale);
//   v = clamp(v, lo, hi)  or  v = 0.5 * v * (1 + erf(v * 0.7071067811865476)) (GELU, kAct 1; see GeluErf)
//   D = v (float32), v rounded to float16,  or  saturate(round_half_even(v * (1 / y_scale))) (int8, or float8e4m3fn
//   saturated to +-448 (cvt.rn.satfinite); a division here costs 5x the GEMM)
// each step its own rounded float operation (the stage compiles without FMA contraction), as the CPU computes it;
// GELU's erf alone is a branch-free approximation within 1e-6 (GeluErf).
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/functional.h"

namespace kiln::cuda::cutlass_sm90::detail {

// GELU in its erf form, 0.5 x (1 + erf(x / sqrt(2))), for the 8-bit outputs (the only ones with GELU here). erf(z)
// for z >= 0 is 1 - R, R = (1 + a1 z + ... + a6 z^6)^-16 (Abramowitz & Stegun 7.1.28, |error| <= 3e-7), so
// 1 + erf(x / sqrt(2)) is 2 - R for x >= 0 and R for x < 0 (erf is odd): six FMAs, four squarings, one
// reciprocal, no branch. GELU is within 1e-6 of its exact value for every x (the CPU's, through erff: 5e-7): an
// 8-bit output differs from the CPU's only where v / y_scale lies within about 1e-6 / y_scale of a rounding
// boundary. CUDA's erff (about 24 instructions and a divergent branch to ex2) made GELU cost 0.015 ms of BERT-base
// FFN1's 0.042 ms (batch 32, H200), the epilogue being bound by its arithmetic.
template <class T>
struct GeluErf {
  CUTLASS_HOST_DEVICE T operator()(T x) const {
    const float z = fabsf(x * 0.7071067811865476f);
    float p = fmaf(4.30638e-5f, z, 2.765672e-4f);
    p = fmaf(p, z, 1.520143e-4f);
    p = fmaf(p, z, 9.2705272e-3f);
    p = fmaf(p, z, 4.22820123e-2f);
    p = fmaf(p, z, 7.05230784e-2f);
    p = fmaf(p, z, 1.f);  // >= 1; +inf for large z (R = 0)
    p = p * p;
    p = p * p;
    p = p * p;
    p = p * p;
#if defined(__CUDA_ARCH__)
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(p));
#else
    const float r = 1.f / p;
#endif
    const float h = x >= 0.f ? 2.f - r : r;  // NaN x: NaN r
    return 0.5f * x * h;
  }
};
template <class T, int N>
struct GeluErf<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    GeluErf<T> f;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = f(x[i]);
    return y;
  }
};

// kOut: 0 float32, 1 int8, 2 float16, 3 float8e4m3fn. kResidual: 0 none, 1 float32, 2 int8 (times r_scale), 3
// float16. kAct: 0 the clamp (no activation, Relu, Clip), 1 GELU.
template <class TileShape, int kOut, int kResidual, int kAct = 0>
struct QEpilogueTree {
  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  static constexpr bool kInt8Out = kOut == 1 || kOut == 3;  // an 8-bit output, scaled by 1 / y_scale
  using ElementD = std::conditional_t<
      kOut == 1, int8_t,
      std::conditional_t<kOut == 2, cutlass::half_t, std::conditional_t<kOut == 3, cutlass::float_e4m3_t, float>>>;
  template <template <class> class Fn, class Out = float>
  using Compute = cutlass::epilogue::fusion::Sm90Compute<Fn, Out, float, kRound>;
  template <class... T>
  using EVT = cutlass::epilogue::fusion::Sm90EVT<T...>;

  using Vector = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float, float,
                                                             cute::Stride<cute::_0, cute::_1, int64_t>, 4>;
  using Scaled = EVT<Compute<cutlass::multiplies>, cutlass::epilogue::fusion::Sm90AccFetch, Vector>;
  using Biased = EVT<Compute<cutlass::plus>, Scaled, Vector>;
  using Scalar = cutlass::epilogue::fusion::Sm90ScalarBroadcast<float>;
  using Int8Residual = EVT<Compute<cutlass::multiplies>, cutlass::epilogue::fusion::Sm90SrcFetch<int8_t>, Scalar>;
  using Summed = std::conditional_t<
      kResidual == 0, Biased,
      std::conditional_t<
          kResidual == 1, EVT<Compute<cutlass::plus>, Biased, cutlass::epilogue::fusion::Sm90SrcFetch<float>>,
          std::conditional_t<kResidual == 3,
                             EVT<Compute<cutlass::plus>, Biased, cutlass::epilogue::fusion::Sm90SrcFetch<cutlass::half_t>>,
                             EVT<Compute<cutlass::plus>, Biased, Int8Residual>>>>;
  using Activated = std::conditional_t<
      kAct == 0, EVT<Compute<cutlass::epilogue::thread::Clamp, std::conditional_t<kInt8Out, float, ElementD>>, Summed>,
      EVT<Compute<GeluErf, std::conditional_t<kInt8Out, float, ElementD>>, Summed>>;
  using Tree = std::conditional_t<
      kInt8Out,
      EVT<Compute<cutlass::multiplies, ElementD>, Activated, Scalar>,
      Activated>;

  // The tree's arguments, children first at each node: {children..., the node's own}.
  static typename Scalar::Arguments ScalarArgs(float v) {
    typename Scalar::Arguments a{};
    a.scalars[0] = v;
    return a;
  }

  static typename Tree::Arguments Arguments(const float* scale, const float* bias, float lo, float hi, float y_scale,
                                            float r_scale) {
    typename Scaled::Arguments scaled{{}, {scale, 0.f, {}}, {}};
    typename Biased::Arguments biased{scaled, {bias, 0.f, {}}, {}};
    typename Summed::Arguments summed = [&] {
      if constexpr (kResidual == 1 || kResidual == 3) return typename Summed::Arguments{biased, {}, {}};
      else if constexpr (kResidual == 2)
        return typename Summed::Arguments{biased, typename Int8Residual::Arguments{{}, ScalarArgs(r_scale), {}}, {}};
      else return biased;
    }();
    typename Activated::Arguments activated = [&] {
      if constexpr (kAct == 0)
        return typename Activated::Arguments{summed, typename cutlass::epilogue::thread::Clamp<float>::Arguments{lo, hi}};
      else return typename Activated::Arguments{summed, {}};
    }();
    if constexpr (kInt8Out) {
      return typename Tree::Arguments{activated, ScalarArgs(1.f / y_scale), {}};  // the CPU's float reciprocal
    } else {
      return activated;
    }
  }
};

}  // namespace kiln::cuda::cutlass_sm90::detail
