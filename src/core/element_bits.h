// Bits per element as ONNX defines a type (for BitCast), apart from how kiln stores it.
#pragma once

#include "core/dtype.h"

namespace kiln {

// Bits of one element as ONNX defines the type (bool and the 8-bit floats: 8; int4, uint4, float4e2m1: 4; int2,
// uint2: 2), whatever kiln's storage; 0 for string and undefined. BitCast reinterprets between types of equal width.
inline int ElementBits(DataType t) {
  switch (t) {
    case DataType::kInt2: case DataType::kUInt2: return 2;
    case DataType::kInt4: case DataType::kUInt4: case DataType::kFloat4E2M1: return 4;
    case DataType::kFloat8E8M0: return 8;
    default: return static_cast<int>(DataTypeSize(t)) * 8;
  }
}

}  // namespace kiln
