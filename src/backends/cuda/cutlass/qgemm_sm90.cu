// Dispatch of qgemm_sm90.h's entry points to the instances (output type x residual x tile).
#include "qgemm_sm90.h"
#include "qgemm_sm90_impl.h"

namespace kiln::cuda::cutlass_sm90 {
namespace {

template <bool kInt8Out, int kResidual>
struct ByGemmTile {
  template <class Fn>
  static auto Call(GemmTile t, Fn&& fn) {
    switch (t) {
      case GemmTile::k128x64x128: return fn(QGemmImpl<kInt8Out, kResidual, 128, 64>{});
      case GemmTile::k256x128x128: return fn(QGemmImpl<kInt8Out, kResidual, 256, 128>{});
      case GemmTile::k128x128x128: break;
    }
    return fn(QGemmImpl<kInt8Out, kResidual, 128, 128>{});
  }
};

template <class Fn>
auto Dispatch(const QGemmProblem& p, GemmTile t, Fn&& fn) {
  const int r = !p.residual ? 0 : p.residual_int8 ? 2 : 1;
  if (p.int8_output)
    return r == 0 ? ByGemmTile<true, 0>::Call(t, fn) : r == 1 ? ByGemmTile<true, 1>::Call(t, fn) : ByGemmTile<true, 2>::Call(t, fn);
  return r == 0 ? ByGemmTile<false, 0>::Call(t, fn) : r == 1 ? ByGemmTile<false, 1>::Call(t, fn) : ByGemmTile<false, 2>::Call(t, fn);
}

}  // namespace

const char* Unsupported(const QGemmProblem& p, GemmTile t) {
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::Unsupported(p); });
}

size_t WorkspaceBytes(const QGemmProblem& p, GemmTile t) {
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::WorkspaceBytes(p); });
}

const char* Run(const QGemmProblem& p, GemmTile t, const QGemmOperands& o, void* workspace, cudaStream_t stream) {
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::Run(p, o, workspace, stream); });
}

}  // namespace kiln::cuda::cutlass_sm90
