// The id of a pointwise formula, declared opaque: headers included everywhere (op_def.h, fused_ops.h) name it
// without depending on the formula list, so adding a formula recompiles only the code that uses the formulas.
// The enumerators are generated from ops/pointwise_formulas.h in ops/pointwise_op.h.
#pragma once

#include <cstdint>

namespace kiln {

enum class PwOp : uint8_t;
// Not a pointwise formula (PwOp::kNone).
inline constexpr PwOp kNoPwOp = static_cast<PwOp>(0xff);

}  // namespace kiln
