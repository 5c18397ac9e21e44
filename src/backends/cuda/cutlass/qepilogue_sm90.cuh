// The quantized layers' epilogue as a CUTLASS sm90 epilogue visitor tree, shared by the convolution
// (qconv_sm90_impl.cuh) and the GEMM (qgemm_sm90_impl.cuh). Along N (output channels / columns):
//   v = acc * scale[n];  v = v + bias[n];  [v = v + C]  (C: the residual);  v = clamp(v, lo, hi)
//   D = v (float32)  or  saturate(round_half_even(v * (1 / y_scale))) (int8; a division here costs 5x the GEMM)
// each step its own rounded float operation (the stage compiles without FMA contraction), as the CPU computes it.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/functional.h"

namespace kiln::cuda::cutlass_sm90::detail {

template <class TileShape, bool kInt8Out, bool kResidual>
struct QEpilogueTree {
  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  using ElementD = std::conditional_t<kInt8Out, int8_t, float>;
  template <template <class> class Fn, class Out = float>
  using Compute = cutlass::epilogue::fusion::Sm90Compute<Fn, Out, float, kRound>;
  template <class... T>
  using EVT = cutlass::epilogue::fusion::Sm90EVT<T...>;

  using Vector = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float, float,
                                                             cute::Stride<cute::_0, cute::_1, int64_t>, 4>;
  using Scaled = EVT<Compute<cutlass::multiplies>, cutlass::epilogue::fusion::Sm90AccFetch, Vector>;
  using Biased = EVT<Compute<cutlass::plus>, Scaled, Vector>;
  using Summed = std::conditional_t<
      kResidual, EVT<Compute<cutlass::plus>, Biased, cutlass::epilogue::fusion::Sm90SrcFetch<float>>, Biased>;
  using Activated = EVT<Compute<cutlass::epilogue::thread::Clamp, std::conditional_t<kInt8Out, float, ElementD>>,
                        Summed>;
  using Tree = std::conditional_t<
      kInt8Out,
      EVT<Compute<cutlass::multiplies, ElementD>, Activated, cutlass::epilogue::fusion::Sm90ScalarBroadcast<float>>,
      Activated>;

  // The tree's arguments, children first at each node: {children..., the node's own}.
  static typename Tree::Arguments Arguments(const float* scale, const float* bias, float lo, float hi,
                                            float y_scale) {
    typename Scaled::Arguments scaled{{}, {scale, 0.f, {}}, {}};
    typename Biased::Arguments biased{scaled, {bias, 0.f, {}}, {}};
    typename Summed::Arguments summed = [&] {
      if constexpr (kResidual) return typename Summed::Arguments{biased, {}, {}};
      else return biased;
    }();
    typename Activated::Arguments activated{summed, typename cutlass::epilogue::thread::Clamp<float>::Arguments{lo, hi}};
    if constexpr (kInt8Out) {
      typename cutlass::epilogue::fusion::Sm90ScalarBroadcast<float>::Arguments ys{};
      ys.scalars[0] = 1.f / y_scale;  // the float reciprocal, as the CPU computes it
      return typename Tree::Arguments{activated, ys, {}};
    } else {
      return activated;
    }
  }
};

}  // namespace kiln::cuda::cutlass_sm90::detail
