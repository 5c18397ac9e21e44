// Definitions of QGemmImpl (qgemm_sm90_impl.h): CUTLASS 3's sm90 GEMM, X row-major times W "column-major" (both
// K-major: the int8 and float8 tensor cores read K contiguous), persistent tile scheduler, the epilogue tree of
// qepilogue_sm90.cuh ("row broadcast": a vector along N, one value per output column).
#pragma once

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "qepilogue_sm90.cuh"
#include "sm90_launch.cuh"
#include "qgemm_sm90_impl.h"

namespace kiln::cuda::cutlass_sm90 {
namespace detail {

using namespace cute;

template <int kOut, int kResidual, int kTileM, int kTileN, int kAct, bool kFp8>
struct GemmKernel {
  using ElementAB = std::conditional_t<kFp8, cutlass::float_e4m3_t, int8_t>;
  using ElementAcc = std::conditional_t<kFp8, float, int32_t>;
  using TileShape = Shape<Int<kTileM>, Int<kTileN>, _128>;
  using ClusterShape = Shape<_1, _1, _1>;
  static constexpr bool kCooperative = kTileM == 256;
  // FP8: fast accumulation (the tensor cores sum all of K; no promotions into separate float32 registers, each of
  // which waits for the tensor cores to drain: 2.3x slower on BERT's QKV GEMM on an H200), as TransformerEngine's
  // forward GEMMs and cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM do.
  using MainloopSchedule = std::conditional_t<
      kFp8,
      std::conditional_t<kCooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                         cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum>,
      std::conditional_t<kCooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                         cutlass::gemm::KernelTmaWarpSpecializedPingpong>>;
  using EpilogueSchedule = std::conditional_t<kCooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                              cutlass::epilogue::TmaWarpSpecialized>;
  using ElementD = typename QEpilogueTree<TileShape, kOut, kResidual, kAct>::ElementD;
  using ElementC = std::conditional_t<
      kResidual == 0, void,
      std::conditional_t<kResidual == 1, float, std::conditional_t<kResidual == 3, cutlass::half_t, int8_t>>>;
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  static constexpr int kAlignC = kResidual == 2 ? 16 : kResidual == 3 ? 8 : 4;
  using Tree = typename QEpilogueTree<TileShape, kOut, kResidual, kAct>::Tree;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, float, ElementC, cutlass::layout::RowMajor,
      kResidual != 0 ? kAlignC : kAlignD, ElementD, cutlass::layout::RowMajor, kAlignD, EpilogueSchedule,
      Tree>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, cutlass::layout::RowMajor, 16, ElementAB,
      cutlass::layout::ColumnMajor, 16, ElementAcc, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using Arguments = typename Gemm::Arguments;

  static Arguments MakeArguments(const QGemmProblem& p, const QGemmOperands& o) {
    const int m = static_cast<int>(p.m);
    auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(m, p.k, 1));
    auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(p.n, p.k, 1));
    auto stride_c = cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, cute::make_shape(m, p.n, 1));
    auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(m, p.n, 1));
    typename Epilogue::Arguments epi{
        QEpilogueTree<TileShape, kOut, kResidual, kAct>::Arguments(o.scale, o.bias, o.lo, o.hi, o.y_scale, o.r_scale),
        static_cast<const typename Epilogue::ElementC*>(kResidual != 0 ? o.residual : nullptr),
        stride_c, static_cast<ElementD*>(o.y), stride_d};
    const cutlass::KernelHardwareInfo hw = HardwareInfo();
    const auto* a = static_cast<const ElementAB*>(o.x);
    const auto* b = static_cast<const ElementAB*>(o.w);
    return Arguments{cutlass::gemm::GemmUniversalMode::kGemm, {m, p.n, p.k, 1}, {a, stride_a, b, stride_b}, epi, hw};
  }
};

}  // namespace detail

template <int kOut, int kResidual, int kTileM, int kTileN, int kAct, bool kFp8>
const char* QGemmImpl<kOut, kResidual, kTileM, kTileN, kAct, kFp8>::Unsupported(const QGemmProblem& p) {
  using K = detail::GemmKernel<kOut, kResidual, kTileM, kTileN, kAct, kFp8>;
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return "an empty problem";
  if (p.m > 0x7fffffff) return "more than 2^31 rows";
  if (p.k % 16 != 0) return "K is not a multiple of 16";
  if (p.n % K::kAlignD != 0)
    return kOut == 1 || kOut == 3 ? "N is not a multiple of 16"
           : kOut == 2            ? "N is not a multiple of 8"
                                  : "N is not a multiple of 4";
  if (kResidual == 3 && p.n % K::kAlignC != 0) return "N is not a multiple of 8 (a float16 residual)";
  if (kResidual == 2 && p.n % K::kAlignC != 0) return "N is not a multiple of 16 (an int8 residual)";
  QGemmOperands probe;
  if (K::Gemm::can_implement(K::MakeArguments(p, probe)) != cutlass::Status::kSuccess)
    return "CUTLASS cannot implement this problem";
  return nullptr;
}

template <int kOut, int kResidual, int kTileM, int kTileN, int kAct, bool kFp8>
size_t QGemmImpl<kOut, kResidual, kTileM, kTileN, kAct, kFp8>::WorkspaceBytes(const QGemmProblem& p) {
  using K = detail::GemmKernel<kOut, kResidual, kTileM, kTileN, kAct, kFp8>;
  QGemmOperands probe;
  return K::Gemm::get_workspace_size(K::MakeArguments(p, probe));
}

template <int kOut, int kResidual, int kTileM, int kTileN, int kAct, bool kFp8>
const char* QGemmImpl<kOut, kResidual, kTileM, kTileN, kAct, kFp8>::Run(const QGemmProblem& p, const QGemmOperands& o,
                                                                 void* workspace, cudaStream_t stream) {
  using K = detail::GemmKernel<kOut, kResidual, kTileM, kTileN, kAct, kFp8>;
  typename K::Gemm gemm;
  const typename K::Arguments args = K::MakeArguments(p, o);
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return "CUTLASS initialize failed";
  if (gemm.run(stream) != cutlass::Status::kSuccess) return "CUTLASS launch failed";
  return nullptr;
}

}  // namespace kiln::cuda::cutlass_sm90
