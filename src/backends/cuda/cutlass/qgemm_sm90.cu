// Dispatch of qgemm_sm90.h's entry points to the instances (output type x residual x tile, and GELU).
#include "qgemm_sm90.h"
#include "qgemm_sm90_impl.h"

namespace kiln::cuda::cutlass_sm90 {
namespace {

template <bool kInt8Out, int kResidual, int kAct = 0>
struct ByGemmTile {
  template <class Fn>
  static auto Call(GemmTile t, Fn&& fn) {
    switch (t) {
      case GemmTile::k128x64x128: return fn(QGemmImpl<kInt8Out, kResidual, 128, 64, kAct>{});
      case GemmTile::k256x128x128: return fn(QGemmImpl<kInt8Out, kResidual, 256, 128, kAct>{});
      case GemmTile::k128x128x128: break;
    }
    return fn(QGemmImpl<kInt8Out, kResidual, 128, 128, kAct>{});
  }
};

// GELU has one instance set: int8 output, no residual (the callers check GeluMismatch first).
const char* GeluMismatch(const QGemmProblem& p) {
  return p.gelu && (!p.int8_output || p.residual) ? "GELU runs with an int8 output and no residual only" : nullptr;
}

template <class Fn>
auto Dispatch(const QGemmProblem& p, GemmTile t, Fn&& fn) {
  const int r = !p.residual ? 0 : p.residual_int8 ? 2 : 1;
  if (p.gelu) return ByGemmTile<true, 0, 1>::Call(t, fn);
  if (p.int8_output)
    return r == 0 ? ByGemmTile<true, 0>::Call(t, fn) : r == 1 ? ByGemmTile<true, 1>::Call(t, fn) : ByGemmTile<true, 2>::Call(t, fn);
  return r == 0 ? ByGemmTile<false, 0>::Call(t, fn) : r == 1 ? ByGemmTile<false, 1>::Call(t, fn) : ByGemmTile<false, 2>::Call(t, fn);
}

}  // namespace

const char* Unsupported(const QGemmProblem& p, GemmTile t) {
  if (const char* e = GeluMismatch(p)) return e;
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::Unsupported(p); });
}

size_t WorkspaceBytes(const QGemmProblem& p, GemmTile t) {
  if (GeluMismatch(p)) return 0;
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::WorkspaceBytes(p); });
}

const char* Run(const QGemmProblem& p, GemmTile t, const QGemmOperands& o, void* workspace, cudaStream_t stream) {
  if (const char* e = GeluMismatch(p)) return e;
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::Run(p, o, workspace, stream); });
}

}  // namespace kiln::cuda::cutlass_sm90
