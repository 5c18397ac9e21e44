// The pointwise formulas (ops/pointwise_formulas.h) as ids and a table, for code that picks a formula at run
// time: OpTraits::pointwise names an op's formula, a FusedPointwise program holds one PwOp per step, and the
// kernels map an id back to its functor with VisitUnary/VisitBinary (a switch outside the element loop) or
// EvalUnary/EvalBinary (one element). Everything here is generated from the formula lists; host and device code.
#pragma once

#include <cstdint>
#include <limits>

#include "ops/pointwise_formulas.h"
#include "ops/pointwise_id.h"

namespace kiln {

// One id per formula, in list order (0, 1, ...): the ONNX unary ops, the other unary steps, the binary steps.
enum class PwOp : uint8_t {
#define KILN_PW_ENUM(Name, ...) k##Name,
  KILN_POINTWISE_UNARY_OPS(KILN_PW_ENUM) KILN_POINTWISE_UNARY_STEPS(KILN_PW_ENUM)
      KILN_POINTWISE_BINARY_STEPS(KILN_PW_ENUM)
#undef KILN_PW_ENUM
  // not a pointwise formula
  kNone = 0xff,
};
static_assert(PwOp::kNone == kNoPwOp);

// The input types an op takes: float16/bfloat16/float32/float64, and signed integers, and every integer type.
enum class PwTypes : uint8_t { kFloat, kSigned, kNumeric };

struct PwOpInfo {
  const char* name;  // the program step name: the ONNX op's name, or "GeluTanh"
  PwOp op;
  int arity;           // 1 or 2
  bool onnx_unary;     // a row of KILN_POINTWISE_UNARY_OPS: its OpDef and kernels are generated
  int64_t since;       // with onnx_unary: its first opset
  PwTypes types;       // with onnx_unary: the input types its OpDef accepts (others: float)
  const char* attr_a;  // the ONNX float attribute read into the formula's a ("" when none), and its default
  float default_a;
  const char* attr_b;
  float default_b;
};

// Every formula, indexed by PwOp.
inline constexpr PwOpInfo kPwOps[] = {
#define KILN_PW_INFO_OP(Name, since, types, attr_a, default_a, attr_b, default_b, ...) \
  {#Name, PwOp::k##Name, 1, true, since, PwTypes::k##types, attr_a, default_a, attr_b, default_b},
#define KILN_PW_INFO_STEP(Name, ...) {#Name, PwOp::k##Name, 1, false, 1, PwTypes::kFloat, "", 0.f, "", 0.f},
#define KILN_PW_INFO_BINARY(Name, ...) {#Name, PwOp::k##Name, 2, false, 1, PwTypes::kFloat, "", 0.f, "", 0.f},
    KILN_POINTWISE_UNARY_OPS(KILN_PW_INFO_OP) KILN_POINTWISE_UNARY_STEPS(KILN_PW_INFO_STEP)
        KILN_POINTWISE_BINARY_STEPS(KILN_PW_INFO_BINARY)
#undef KILN_PW_INFO_OP
#undef KILN_PW_INFO_STEP
#undef KILN_PW_INFO_BINARY
};

#define KILN_PW_COUNT(...) +1
inline constexpr int kNumUnaryPwOps =
    0 KILN_POINTWISE_UNARY_OPS(KILN_PW_COUNT) KILN_POINTWISE_UNARY_STEPS(KILN_PW_COUNT);
inline constexpr int kNumPwOps = kNumUnaryPwOps KILN_POINTWISE_BINARY_STEPS(KILN_PW_COUNT);
#undef KILN_PW_COUNT
static_assert(sizeof(kPwOps) / sizeof(kPwOps[0]) == kNumPwOps && kNumPwOps < 0xff, "one row per PwOp; 0xff is kNone");

// The row of a formula (op must not be kNone).
inline constexpr const PwOpInfo& PwInfo(PwOp op) { return kPwOps[static_cast<int>(op)]; }
KILN_HD constexpr bool PwIsBinary(PwOp op) {
  return static_cast<int>(op) >= kNumUnaryPwOps && static_cast<int>(op) < kNumPwOps;
}

// Calls visit(pwf::Name{}) with the functor of a unary (binary) formula; false when `op` is not one. Host code
// (CPU loops, CUDA launchers that instantiate one kernel per functor).
template <class Visit>
bool VisitUnary(PwOp op, Visit&& visit) {
  switch (op) {
#define KILN_PW_VISIT(Name, ...) \
  case PwOp::k##Name: visit(pwf::Name{}); return true;
    KILN_POINTWISE_UNARY_OPS(KILN_PW_VISIT)
    KILN_POINTWISE_UNARY_STEPS(KILN_PW_VISIT)
    default: return false;
  }
}
template <class Visit>
bool VisitBinary(PwOp op, Visit&& visit) {
  switch (op) {
    KILN_POINTWISE_BINARY_STEPS(KILN_PW_VISIT)
#undef KILN_PW_VISIT
    default: return false;
  }
}

// One element of a unary (binary) formula chosen at run time (host and device); NaN for an op of the other kind.
template <class C>
KILN_HD C EvalUnary(PwOp op, C x, C a, C b) {
  switch (op) {
#define KILN_PW_EVAL(Name, ...) \
  case PwOp::k##Name: return pwf::Name{}(x, a, b);
    KILN_POINTWISE_UNARY_OPS(KILN_PW_EVAL)
    KILN_POINTWISE_UNARY_STEPS(KILN_PW_EVAL)
#undef KILN_PW_EVAL
    default: return std::numeric_limits<C>::quiet_NaN();
  }
}
template <class C>
KILN_HD C EvalBinary(PwOp op, C x, C y) {
  switch (op) {
#define KILN_PW_EVAL(Name, ...) \
  case PwOp::k##Name: return pwf::Name{}(x, y);
    KILN_POINTWISE_BINARY_STEPS(KILN_PW_EVAL)
#undef KILN_PW_EVAL
    default: return std::numeric_limits<C>::quiet_NaN();
  }
}

}  // namespace kiln
