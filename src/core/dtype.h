// Element types. The numeric values are ONNX's TensorProto.DataType codes, so import is a cast.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "kiln/types.h"

namespace kiln {

// DataType (the ONNX TensorProto codes), DataTypeSize, DataTypeName and IsFloatType are public: include/kiln/types.h.

// Parses "float32"/"fp32"/"float" etc.; kUndefined when unknown.
DataType DataTypeFromName(const std::string& name);
bool IsIntegerType(DataType t);  // signed and unsigned ints (int4/uint4 included)
bool Is4BitType(DataType t);     // int4, uint4
// The range of an integer type's values (int4: [-8, 7]); {0, 0} for other types.
std::pair<int64_t, int64_t> IntegerRange(DataType t);
bool IsSignedType(DataType t);
// Types kiln holds (everything but string): graph inputs, initializers and tensor files of these types import.
bool IsSupportedType(DataType t);

// ---- 16-bit and 8-bit float storage types ----
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};
struct Float8E4M3 {
  uint8_t bits = 0;
};

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);  // round to nearest even
inline float BFloat16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t FloatToBFloat16(float f);  // round to nearest even
float Float8E4M3ToFloat(uint8_t v);
uint8_t FloatToFloat8E4M3(float f, bool saturate = true);

}  // namespace kiln
