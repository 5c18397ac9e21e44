// Dispatch of qconv_sm90.h's entry points to the instances (output type x residual x tile).
#include "qconv_sm90.h"
#include "qconv_sm90_impl.h"

namespace kiln::cuda::cutlass_sm90 {
namespace {

template <bool kInt8Out, int kResidual>
struct ByTile {
  template <class Fn>
  static auto Call(Tile t, Fn&& fn) {
    switch (t) {
      case Tile::k128x64x128: return fn(QConvImpl<kInt8Out, kResidual, 64, 128, 0>{});
      case Tile::k128x128x64: return fn(QConvImpl<kInt8Out, kResidual, 128, 64, 4>{});
      case Tile::k128x64x64: return fn(QConvImpl<kInt8Out, kResidual, 64, 64, 4>{});
      case Tile::k128x128x128: break;
    }
    return fn(QConvImpl<kInt8Out, kResidual, 128, 128, 0>{});
  }
};

template <class Fn>
auto Dispatch(const QConvProblem& p, Tile t, Fn&& fn) {
  const int r = !p.residual ? 0 : p.residual_int8 ? 2 : 1;
  if (p.int8_output)
    return r == 0 ? ByTile<true, 0>::Call(t, fn) : r == 1 ? ByTile<true, 1>::Call(t, fn) : ByTile<true, 2>::Call(t, fn);
  return r == 0 ? ByTile<false, 0>::Call(t, fn) : r == 1 ? ByTile<false, 1>::Call(t, fn) : ByTile<false, 2>::Call(t, fn);
}

}  // namespace

const char* Unsupported(const QConvProblem& p, Tile t) {
  if (p.n <= 0 || p.h <= 0 || p.w <= 0 || p.c <= 0 || p.k <= 0 || p.r <= 0 || p.s <= 0) return "an empty problem";
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::Unsupported(p); });
}

size_t WorkspaceBytes(const QConvProblem& p, Tile t) {
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::WorkspaceBytes(p); });
}

const char* Run(const QConvProblem& p, Tile t, const QConvOperands& o, void* workspace, cudaStream_t stream) {
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::Run(p, o, workspace, stream); });
}

}  // namespace kiln::cuda::cutlass_sm90
