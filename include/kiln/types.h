// kiln — public types: element types, dimensions, tensor IO modes, profile selectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// Element types. The numeric values are ONNX's TensorProto.DataType codes.
enum class DataType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  // 4-bit integers (ONNX packs two per byte; kiln holds one value per byte, sign-extended for int4, so a host
  // tensor of these types is an int8/uint8 array whose values lie in [-8, 7] / [0, 15]).
  kUInt4 = 21,
  kInt4 = 22,
  // ONNX 1.18+ (opsets 23-25): 4-bit float E2M1 (packed two per byte in ONNX), the scale type E8M0 (an exponent only:
  // 2^(bits-127), 0xff is NaN), and 2-bit integers (four per byte in ONNX). kiln holds one value per byte, as for
  // int4: float4e2m1 as its 4-bit code, int2/uint2 as int8/uint8 values in [-2, 1] / [0, 3].
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

// Bytes per element as kiln holds it (1 for int4/uint4); 0 for types kiln cannot hold (string, undefined).
size_t DataTypeSize(DataType t);
// "float32", "float16", ... (numpy spelling).
const char* DataTypeName(DataType t);
bool IsFloatType(DataType t);  // float16/32/64, bfloat16, fp8

// A tensor's dimensions; -1 marks a dimension that is only known at run time (dynamic).
using Dims = std::vector<int64_t>;

std::string ShapeToString(const Dims& d);  // "[1,3,224,224]"
int64_t NumElements(const Dims& d);        // the product of the dims (1 for a scalar)

enum class TensorIOMode { kNone, kInput, kOutput };

// Which shape of an optimization profile: the smallest, the one to tune for, the largest.
enum class ProfileSelector { kMin = 0, kOpt = 1, kMax = 2 };

}  // namespace kiln
