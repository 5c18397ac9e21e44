// Dispatch of qgemm_sm90.h's entry points to the instances (input type x output type x residual x tile, and GELU).
#include "qgemm_sm90.h"
#include "qgemm_sm90_impl.h"

namespace kiln::cuda::cutlass_sm90 {
namespace {

template <int kOut, int kResidual, int kAct = 0, bool kFp8 = false>
struct ByGemmTile {
  template <class Fn>
  static auto Call(GemmTile t, Fn&& fn) {
    switch (t) {
      case GemmTile::k128x64x128: return fn(QGemmImpl<kOut, kResidual, 128, 64, kAct, kFp8>{});
      case GemmTile::k256x128x128: return fn(QGemmImpl<kOut, kResidual, 256, 128, kAct, kFp8>{});
      case GemmTile::k128x128x128: break;
    }
    return fn(QGemmImpl<kOut, kResidual, 128, 128, kAct, kFp8>{});
  }
};

// The combinations with no instances (the callers check Mismatch first): GELU has int8 output and no residual;
// a float16 output has no residual or a float16 one, and a float16 residual a float16 output.
const char* Mismatch(const QGemmProblem& p) {
  if (p.fp8) {
    // FP8: float32 (no residual or a float32 one), float16 (none or a float16 one), float8 (none; GELU or the clamp).
    if (p.int8_output || p.residual_int8) return "an FP8 GEMM has no int8 output or residual";
    if (p.fp8_output && (p.residual || p.half_output)) return "a float8 output takes no residual";
    if (p.gelu && !p.fp8_output) return "GELU runs with a float8 output and no residual only";
  } else if (p.fp8_output) {
    return "a float8 output needs float8 X and W";
  }
  if (p.gelu && !p.fp8 && (!p.int8_output || p.residual)) return "GELU runs with an int8 output and no residual only";
  if (p.half_output && (p.int8_output || (p.residual && !p.residual_half)))
    return "a float16 output takes no residual or a float16 one";
  if (p.residual_half && (!p.half_output || !p.residual)) return "a float16 residual needs a float16 output";
  return nullptr;
}

template <class Fn>
auto Dispatch(const QGemmProblem& p, GemmTile t, Fn&& fn) {
  const int r = !p.residual ? 0 : p.residual_int8 ? 2 : 1;
  if (p.fp8) {
    if (p.fp8_output) return p.gelu ? ByGemmTile<3, 0, 1, true>::Call(t, fn) : ByGemmTile<3, 0, 0, true>::Call(t, fn);
    if (p.half_output)
      return p.residual ? ByGemmTile<2, 3, 0, true>::Call(t, fn) : ByGemmTile<2, 0, 0, true>::Call(t, fn);
    return r == 0 ? ByGemmTile<0, 0, 0, true>::Call(t, fn) : ByGemmTile<0, 1, 0, true>::Call(t, fn);
  }
  if (p.gelu) return ByGemmTile<1, 0, 1>::Call(t, fn);
  if (p.half_output) return p.residual ? ByGemmTile<2, 3>::Call(t, fn) : ByGemmTile<2, 0>::Call(t, fn);
  if (p.int8_output)
    return r == 0 ? ByGemmTile<1, 0>::Call(t, fn) : r == 1 ? ByGemmTile<1, 1>::Call(t, fn) : ByGemmTile<1, 2>::Call(t, fn);
  return r == 0 ? ByGemmTile<0, 0>::Call(t, fn) : r == 1 ? ByGemmTile<0, 1>::Call(t, fn) : ByGemmTile<0, 2>::Call(t, fn);
}

}  // namespace

const char* Unsupported(const QGemmProblem& p, GemmTile t) {
  if (const char* e = Mismatch(p)) return e;
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::Unsupported(p); });
}

size_t WorkspaceBytes(const QGemmProblem& p, GemmTile t) {
  if (Mismatch(p)) return 0;
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::WorkspaceBytes(p); });
}

const char* Run(const QGemmProblem& p, GemmTile t, const QGemmOperands& o, void* workspace, cudaStream_t stream) {
  if (const char* e = Mismatch(p)) return e;
  return Dispatch(p, t, [&](auto impl) { return decltype(impl)::Run(p, o, workspace, stream); });
}

}  // namespace kiln::cuda::cutlass_sm90
