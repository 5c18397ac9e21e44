// Definitions of QConvImpl (qconv_sm90_impl.h): CUTLASS 3's sm90 implicit-GEMM fprop with the QConv epilogue as an
// epilogue visitor tree. GEMM view of the convolution: M = n*p*q output positions, N = k output channels,
// K = r*s*c; "row broadcast" below is a vector along N, one value per output channel.
#pragma once

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/conv/device/conv_universal_adapter.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "qconv_sm90_impl.h"
#include "qepilogue_sm90.cuh"
#include "sm90_launch.cuh"

namespace kiln::cuda::cutlass_sm90 {
namespace detail {

using namespace cute;

template <bool kInt8Out, int kResidual, int kTileN, int kTileK, int kStages>
struct Kernel {
  using TileShape = Shape<_128, Int<kTileN>, Shape<Int<kTileK>>>;
  using ClusterShape = Shape<_1, _1, _1>;
  using ElementD = std::conditional_t<kInt8Out, int8_t, float>;
  using ElementC = std::conditional_t<kResidual == 0, void, std::conditional_t<kResidual == 1, float, int8_t>>;
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  static constexpr int kAlignC = kResidual == 2 ? 16 : 4;

  using Tree = typename QEpilogueTree<TileShape, kInt8Out, kResidual>::Tree;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, int32_t, float, ElementC, cutlass::layout::TensorNHWC,
      kResidual != 0 ? kAlignC : kAlignD, ElementD, cutlass::layout::TensorNHWC, kAlignD,
      cutlass::epilogue::TmaWarpSpecialized, Tree>::CollectiveOp;

  using Mainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop, int8_t,
      cutlass::layout::TensorNHWC, 16, int8_t, cutlass::layout::TensorNHWC, 16, int32_t, TileShape, ClusterShape,
      std::conditional_t<kStages == 0,
                         cutlass::conv::collective::StageCountAutoCarveout<
                             static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
                         cutlass::conv::collective::StageCount<kStages>>,
      cutlass::conv::collective::KernelScheduleAuto>::CollectiveOp;

  using Problem = cutlass::conv::ConvProblemShape<cutlass::conv::Operator::kFprop, 2>;
  using ConvKernel = cutlass::conv::kernel::ConvUniversal<Problem, Mainloop, Epilogue>;
  using Conv = cutlass::conv::device::ConvUniversalAdapter<ConvKernel>;
  using Arguments = typename Conv::Arguments;

  static Problem MakeProblem(const QConvProblem& p) {
    return Problem(cutlass::conv::Mode::kCrossCorrelation, {p.n, p.h, p.w, p.c},
                   {int64_t(p.h) * p.w * p.c, int64_t(p.w) * p.c, p.c, 1}, {p.k, p.r, p.s, p.c},
                   {int64_t(p.r) * p.s * p.c, int64_t(p.s) * p.c, p.c, 1}, {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w},
                   {p.stride_h, p.stride_w}, {p.dil_h, p.dil_w}, 1);
  }

  static Arguments MakeArguments(const QConvProblem& p, const QConvOperands& o) {
    const Problem problem = MakeProblem(p);
    typename Epilogue::StrideC stride_c{};
    typename Epilogue::StrideD stride_d{};
    // Output strides as CUTLASS's fprop reads them: mode 0 holds the (q, p, n) strides, innermost first.
    cute::for_each(cute::make_seq<cute::rank<0>(typename Epilogue::StrideC{})>{}, [&](auto i) {
      cute::get<0, i>(stride_c) = problem.stride_C[Problem::RankT - 2 - i];
    });
    cute::for_each(cute::make_seq<cute::rank<0>(typename Epilogue::StrideD{})>{}, [&](auto i) {
      cute::get<0, i>(stride_d) = problem.stride_C[Problem::RankT - 2 - i];
    });
    typename Epilogue::Arguments epi{{},
                                     static_cast<const typename Epilogue::ElementC*>(
                                         kResidual != 0 ? o.residual : nullptr),
                                     stride_c, static_cast<ElementD*>(o.y), stride_d};
    epi.thread = QEpilogueTree<TileShape, kInt8Out, kResidual>::Arguments(o.scale, o.bias, o.lo, o.hi, o.y_scale, o.r_scale);
    const cutlass::KernelHardwareInfo hw = HardwareInfo();
    return Arguments{problem, {o.x, o.w}, epi, hw};
  }
};

}  // namespace detail

template <bool kInt8Out, int kResidual, int kTileN, int kTileK, int kStages>
const char* QConvImpl<kInt8Out, kResidual, kTileN, kTileK, kStages>::Unsupported(const QConvProblem& p) {
  using K = detail::Kernel<kInt8Out, kResidual, kTileN, kTileK, kStages>;
  if (p.c % 16 != 0) return "input channels are not a multiple of 16";
  if (p.k % K::kAlignD != 0 || (kResidual != 0 && p.k % K::kAlignC != 0))
    return kInt8Out ? "output channels are not a multiple of 16" : "output channels are not a multiple of 4";
  QConvOperands probe;
  const typename K::Arguments args = K::MakeArguments(p, probe);
  if (K::Conv::can_implement(args) != cutlass::Status::kSuccess) return "CUTLASS cannot implement this problem";
  return nullptr;
}

template <bool kInt8Out, int kResidual, int kTileN, int kTileK, int kStages>
size_t QConvImpl<kInt8Out, kResidual, kTileN, kTileK, kStages>::WorkspaceBytes(const QConvProblem& p) {
  using K = detail::Kernel<kInt8Out, kResidual, kTileN, kTileK, kStages>;
  QConvOperands probe;
  return K::Conv::get_workspace_size(K::MakeArguments(p, probe));
}

template <bool kInt8Out, int kResidual, int kTileN, int kTileK, int kStages>
const char* QConvImpl<kInt8Out, kResidual, kTileN, kTileK, kStages>::Run(const QConvProblem& p, const QConvOperands& o,
                                                        void* workspace, cudaStream_t stream) {
  using K = detail::Kernel<kInt8Out, kResidual, kTileN, kTileK, kStages>;
  typename K::Conv conv;
  const typename K::Arguments args = K::MakeArguments(p, o);
  if (conv.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return "CUTLASS initialize failed";
  if (conv.run(stream) != cutlass::Status::kSuccess) return "CUTLASS launch failed";
  return nullptr;
}

}  // namespace kiln::cuda::cutlass_sm90
