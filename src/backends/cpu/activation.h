// The activations of the fused and quantized layers' epilogues (ops/fused_ops.h), one formula each, for a compile-
// time activation (Activate<A>: the epilogue loops instantiate one per activation) or one read at run time.
#pragma once

#include <cmath>

#include "ops/fused_ops.h"

namespace kiln::cpu {

template <fused::Act A, typename C>
inline C Activate(C x, C alpha, C beta) {
  using fused::Act;
  if constexpr (A == Act::kNone) return x;
  else if constexpr (A == Act::kRelu) return x < C(0) ? C(0) : x;
  else if constexpr (A == Act::kLeakyRelu) return x < C(0) ? alpha * x : x;
  else if constexpr (A == Act::kSigmoid) return C(1) / (C(1) + std::exp(-x));
  else if constexpr (A == Act::kTanh) return std::tanh(x);
  else if constexpr (A == Act::kClip) return x < alpha ? alpha : (x > beta ? beta : x);
  else if constexpr (A == Act::kHardSigmoid) {
    const C t = alpha * x + beta;
    return t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
  } else if constexpr (A == Act::kSiLU) return x / (C(1) + std::exp(-x));
  else if constexpr (A == Act::kGelu) return C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476)));
  else {
    static_assert(A == Act::kGeluTanh);
    const C k = C(0.7978845608028654);
    return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
  }
}

// Calls f(std::integral_constant<fused::Act, A>{}) for the run-time activation a.
template <typename F>
inline auto WithActivation(fused::Act a, F&& f) {
  using fused::Act;
  switch (a) {
    case Act::kRelu: return f(std::integral_constant<Act, Act::kRelu>{});
    case Act::kLeakyRelu: return f(std::integral_constant<Act, Act::kLeakyRelu>{});
    case Act::kSigmoid: return f(std::integral_constant<Act, Act::kSigmoid>{});
    case Act::kTanh: return f(std::integral_constant<Act, Act::kTanh>{});
    case Act::kClip: return f(std::integral_constant<Act, Act::kClip>{});
    case Act::kHardSigmoid: return f(std::integral_constant<Act, Act::kHardSigmoid>{});
    case Act::kSiLU: return f(std::integral_constant<Act, Act::kSiLU>{});
    case Act::kGelu: return f(std::integral_constant<Act, Act::kGelu>{});
    case Act::kGeluTanh: return f(std::integral_constant<Act, Act::kGeluTanh>{});
    case Act::kNone: break;
  }
  return f(std::integral_constant<Act, Act::kNone>{});
}

}  // namespace kiln::cpu
