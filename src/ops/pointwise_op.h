// The formulas a FusedPointwise chain can run, one id each. An OpDef names its formula through
// OpTraits::pointwise; the CPU kernel, the CUDA kernel and the NVRTC code generator switch on the id.
#pragma once

namespace kiln {

enum class PwOp {
  // unary
  kRelu, kSigmoid, kTanh, kExp, kLog, kNeg, kAbs, kSqrt, kReciprocal, kErf, kFloor, kCeil, kSoftplus, kSoftsign,
  kSin, kCos, kHardSwish, kLeakyRelu, kElu, kSelu, kHardSigmoid, kClip, kGelu, kGeluTanh,
  // binary
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kPRelu,
  // not a pointwise formula
  kNone,
};

}  // namespace kiln
