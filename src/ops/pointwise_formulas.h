// Pointwise formulas: the math of every elementwise op kiln computes per element, written once.
//
// One row per formula in three X-macro lists; the last column is the formula, an expression over the compute
// type C (float; double for the CPU's float64 kernels), the operand x (and y for binary formulas) and the op's
// two float parameters a and b (its attributes, 0 where it has none). Everything else is generated from the rows:
//   ops/pointwise_op.h          the PwOp enum, the table of names/arity/opsets/attributes, Eval/Visit helpers
//   ops/elementwise.cpp         the OpDefs of the ONNX unary ops (shape function, layout-neutral, pointwise trait)
//   ops/fused_ops.cpp           the FusedPointwise program's step names
//   passes/fuse_pointwise.cpp   which attributes become a step's a and b
//   backends/cpu/elementwise.cpp, fused_pointwise.cpp      one templated CPU kernel per ONNX unary op; the chain
//   backends/cuda/pointwise_unary.cu, pointwise_layers.cpp  one templated CUDA kernel and layer per unary formula
//   backends/cuda/fused_pointwise.cu                        the interpreter kernel of FusedPointwise chains
//   backends/cuda/fused_pointwise_codegen.cpp               NVRTC: this file's text is prepended to the generated
//                                                           source (embedded at build time), steps call the functors
// Adding a unary ONNX op is one row in KILN_POINTWISE_UNARY_OPS (plus its tests): its OpDef, its CPU and CUDA
// kernels and its FusedPointwise step follow. Integer inputs (types Signed/Numeric) run typed integer code in
// the backends (the formulas are float formulas).
//
// This file is compiled by the host compiler (C++20), nvcc (C++17) and NVRTC (no headers at all): no includes
// under NVRTC, no std::, and only the math functions overloaded below.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_HD __host__ __device__ __forceinline__
#else
#define KILN_HD inline
#endif

#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif

// X(Name, since, types, attr_a, default_a, attr_b, default_b, formula): ONNX unary ops (default domain) whose
// OpDef, CPU kernel, CUDA layer and FusedPointwise step are all generated from the row. `since`: the first opset;
// `types`: Float (float16, bfloat16, float32, float64), Signed (and signed integers), Numeric (and every integer
// type); attr_a/attr_b: the ONNX float attributes read into a and b ("" when unused), with their defaults.
#define KILN_POINTWISE_UNARY_OPS(X)                                                                                  \
  X(Relu, 1, Signed, "", 0.f, "", 0.f, x < C(0) ? C(0) : x)                                                          \
  X(Neg, 1, Signed, "", 0.f, "", 0.f, -x)                                                                            \
  X(Abs, 1, Numeric, "", 0.f, "", 0.f, fabs(x))                                                                      \
  X(Sign, 9, Numeric, "", 0.f, "", 0.f, x > C(0) ? C(1) : (x < C(0) ? C(-1) : x))                                    \
  X(Erf, 9, Numeric, "", 0.f, "", 0.f, erf(x))                                                                       \
  X(Sqrt, 1, Float, "", 0.f, "", 0.f, sqrt(x))                                                                       \
  X(Reciprocal, 1, Float, "", 0.f, "", 0.f, C(1) / x)                                                                \
  X(Exp, 1, Float, "", 0.f, "", 0.f, exp(x))                                                                         \
  X(Log, 1, Float, "", 0.f, "", 0.f, log(x))                                                                         \
  X(Tanh, 1, Float, "", 0.f, "", 0.f, tanh(x))                                                                       \
  X(Sigmoid, 1, Float, "", 0.f, "", 0.f, StableSigmoid(x))                                                           \
  X(Floor, 1, Float, "", 0.f, "", 0.f, floor(x))                                                                     \
  X(Ceil, 1, Float, "", 0.f, "", 0.f, ceil(x))                                                                       \
  X(Round, 11, Float, "", 0.f, "", 0.f, round_half_even(x))                                                          \
  X(Softplus, 1, Float, "", 0.f, "", 0.f, SoftplusOf(x))                                                             \
  X(Mish, 18, Float, "", 0.f, "", 0.f, x * tanh(SoftplusOf(x)))                                                      \
  X(HardSwish, 14, Float, "", 0.f, "", 0.f, x * Clamp01(x / C(6) + C(0.5)))                                          \
  X(HardSigmoid, 1, Float, "alpha", 0.2f, "beta", 0.5f, Clamp01(a * x + b))                                          \
  X(LeakyRelu, 1, Float, "alpha", 0.01f, "", 0.f, x < C(0) ? a * x : x)                                              \
  X(Elu, 1, Float, "alpha", 1.f, "", 0.f, x < C(0) ? a * (exp(x) - C(1)) : x)                                        \
  X(Selu, 1, Float, "alpha", 1.67326319217681884765625f, "gamma", 1.05070102214813232421875f,                        \
    x <= C(0) ? b * (a * exp(x) - a) : b * x)                                                                        \
  X(Sin, 7, Float, "", 0.f, "", 0.f, sin(x))                                                                         \
  X(Cos, 7, Float, "", 0.f, "", 0.f, cos(x))                                                                         \
  X(Tan, 7, Float, "", 0.f, "", 0.f, tan(x))                                                                         \
  X(Asin, 7, Float, "", 0.f, "", 0.f, asin(x))                                                                       \
  X(Acos, 7, Float, "", 0.f, "", 0.f, acos(x))                                                                       \
  X(Atan, 7, Float, "", 0.f, "", 0.f, atan(x))                                                                       \
  X(Sinh, 9, Float, "", 0.f, "", 0.f, sinh(x))                                                                       \
  X(Cosh, 9, Float, "", 0.f, "", 0.f, cosh(x))                                                                       \
  X(Asinh, 9, Float, "", 0.f, "", 0.f, asinh(x))                                                                     \
  X(Acosh, 9, Float, "", 0.f, "", 0.f, acosh(x))                                                                     \
  X(Atanh, 9, Float, "", 0.f, "", 0.f, atanh(x))                                                                     \
  X(Softsign, 1, Float, "", 0.f, "", 0.f, x / (C(1) + fabs(x)))                                                      \
  X(Celu, 12, Float, "alpha", 1.f, "", 0.f, x > C(0) ? x : a * (exp(x / a) - C(1)))                                  \
  X(ThresholdedRelu, 10, Float, "alpha", 1.f, "", 0.f, x > a ? x : C(0))                                             \
  X(Swish, 24, Float, "alpha", 1.f, "", 0.f, x * StableSigmoid(a * x))                                               \
  X(Shrink, 9, Numeric, "lambd", 0.5f, "bias", 0.f, x < -a ? x + b : (x > a ? x - b : C(0)))                        \
  /* one row per op, each ending in a backslash */

// X(Name, formula): unary FusedPointwise steps of ops with an OpDef and kernels of their own (Clip takes its bounds
// as inputs and runs every numeric type; Gelu's string attribute picks Gelu or GeluTanh).
#define KILN_POINTWISE_UNARY_STEPS(X)                                                                                \
  X(Clip, ClipTo(x, a, b)) /* a = min, b = max */                                                                    \
  X(Gelu, C(0.5) * x * (C(1) + erf(x * C(0.7071067811865476))))                                                      \
  X(GeluTanh, C(0.5) * x * (C(1) + tanh(C(0.7978845608028654) * (x + C(0.044715) * x * x * x))))                     \
  /* one row per step */

// X(Name, formula): binary FusedPointwise steps, y = f(x, y). The ops' own kernels are the broadcasting binary
// kernels of every dtype (backends/*/elementwise_binary*, pointwise_binary.cu).
#define KILN_POINTWISE_BINARY_STEPS(X)                                                                               \
  X(Add, x + y)                                                                                                      \
  X(Sub, x - y)                                                                                                      \
  X(Mul, x * y)                                                                                                      \
  X(Div, x / y)                                                                                                      \
  X(Pow, pow(x, y))                                                                                                  \
  X(Max, x != x ? x : (y != y ? y : (x > y ? x : y))) /* NaN wins */                                                 \
  X(Min, x != x ? x : (y != y ? y : (x < y ? x : y)))                                                                \
  X(PRelu, x < C(0) ? y * x : x)                                                                                     \
  /* one row per step */

namespace kiln {
namespace pwf {

// ---- the math the formulas call: float (CUDA's and the C library's single-precision functions) and, outside
// NVRTC, double ----
#if defined(__CUDACC_RTC__)
#define KILN_PWF_MATH1(fn) \
  KILN_HD float fn(float x) { return ::fn##f(x); }
#define KILN_PWF_MATH2(fn) \
  KILN_HD float fn(float x, float y) { return ::fn##f(x, y); }
#else
#define KILN_PWF_MATH1(fn)                           \
  KILN_HD float fn(float x) { return ::fn##f(x); } \
  KILN_HD double fn(double x) { return ::fn(x); }
#define KILN_PWF_MATH2(fn)                                              \
  KILN_HD float fn(float x, float y) { return ::fn##f(x, y); }        \
  KILN_HD double fn(double x, double y) { return ::fn(x, y); }
#endif
KILN_PWF_MATH1(fabs)
KILN_PWF_MATH1(sqrt)
KILN_PWF_MATH1(exp)
KILN_PWF_MATH1(log)
KILN_PWF_MATH1(log1p)
KILN_PWF_MATH1(erf)
KILN_PWF_MATH1(floor)
KILN_PWF_MATH1(ceil)
KILN_PWF_MATH1(sin)
KILN_PWF_MATH1(cos)
KILN_PWF_MATH1(tan)
KILN_PWF_MATH1(asin)
KILN_PWF_MATH1(acos)
KILN_PWF_MATH1(atan)
KILN_PWF_MATH1(sinh)
KILN_PWF_MATH1(cosh)
KILN_PWF_MATH1(tanh)
KILN_PWF_MATH1(asinh)
KILN_PWF_MATH1(acosh)
KILN_PWF_MATH1(atanh)
KILN_PWF_MATH2(pow)
#undef KILN_PWF_MATH1
#undef KILN_PWF_MATH2

// Round half to even (the default rounding mode): rintf on the device, nearbyint on the host.
KILN_HD float round_half_even(float x) {
#if defined(__CUDA_ARCH__)
  return ::rintf(x);
#else
  return ::nearbyintf(x);
#endif
}
#if !defined(__CUDACC_RTC__)
KILN_HD double round_half_even(double x) { return ::nearbyint(x); }
#endif

// ---- helpers of the formulas ----
template <class C>
KILN_HD C ClipTo(C x, C lo, C hi) {  // max(x, lo), then min(.., hi): hi wins when lo > hi, as numpy.clip; NaN stays
  const C t = x < lo ? lo : x;
  return t > hi ? hi : t;
}
template <class C>
KILN_HD C Clamp01(C t) {  // NaN stays NaN
  return t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
}
// 1 / (1 + e^-x) without overflow: e = e^-|x|, then 1 / (1 + e) for x >= 0 and e / (1 + e) below.
template <class C>
KILN_HD C StableSigmoid(C x) {
  const C e = exp(-fabs(x));
  return (x >= C(0) ? C(1) : e) / (C(1) + e);
}
template <class C>
KILN_HD C SoftplusOf(C x) {  // log(1 + e^x) without overflow
  return x > C(0) ? x + log1p(exp(-x)) : log1p(exp(x));
}

// ---- the functors: pwf::Name{}(x, a, b) for unary formulas, pwf::Name{}(x, y) for binary ones ----
#define KILN_PWF_UNARY_FUNCTOR(Name, since, types, attr_a, default_a, attr_b, default_b, ...) \
  struct Name {                                                                                 \
    template <class C>                                                                          \
    KILN_HD C operator()(C x, C a, C b) const {                                                 \
      (void)a;                                                                                  \
      (void)b;                                                                                  \
      return __VA_ARGS__;                                                                       \
    }                                                                                           \
  };
#define KILN_PWF_STEP_FUNCTOR(Name, ...)          \
  struct Name {                                   \
    template <class C>                            \
    KILN_HD C operator()(C x, C a, C b) const {   \
      (void)a;                                    \
      (void)b;                                    \
      return __VA_ARGS__;                         \
    }                                             \
  };
#define KILN_PWF_BINARY_FUNCTOR(Name, ...) \
  struct Name {                            \
    template <class C>                     \
    KILN_HD C operator()(C x, C y) const { \
      return __VA_ARGS__;                  \
    }                                      \
  };
KILN_POINTWISE_UNARY_OPS(KILN_PWF_UNARY_FUNCTOR)
KILN_POINTWISE_UNARY_STEPS(KILN_PWF_STEP_FUNCTOR)
KILN_POINTWISE_BINARY_STEPS(KILN_PWF_BINARY_FUNCTOR)
#undef KILN_PWF_UNARY_FUNCTOR
#undef KILN_PWF_STEP_FUNCTOR
#undef KILN_PWF_BINARY_FUNCTOR

}  // namespace pwf
}  // namespace kiln
