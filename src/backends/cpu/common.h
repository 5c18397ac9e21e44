// Small helpers shared by the CPU reference kernels: type dispatch, strides, broadcasting.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/error.h"

namespace kiln::cpu {

// Rounds v to the precision of a float type (float16 and bfloat16 to nearest even; float32: unchanged).
inline float RoundTo(DataType t, float v) {
  if (t == DataType::kFloat16) return HalfToFloat(FloatToHalf(v));
  if (t == DataType::kBFloat16) return BFloat16ToFloat(FloatToBFloat16(v));
  return v;
}

// QuantizeLinear's rounding of x / scale (already divided, in x's precision) to an integer in [lo, hi]: half to even
// (the default rounding mode), plus the zero point, saturated; NaN gives 0. Shared by QuantizeLinear and the
// LayerNorm's quantized output (ops/quantized_ops.h: kQScale), which must give the same integers.
inline double QuantizeRounded(double x_over_scale, double zero_point, double lo, double hi) {
  double v = std::nearbyint(x_over_scale) + zero_point;
  if (std::isnan(v)) v = 0;
  return v < lo ? lo : (v > hi ? hi : v);
}

// Calls fn.template operator()<T>() with the C++ storage type of `t`:
// float, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t, bool (uint8_t
// storage, tagged as bool), Half (float16), BFloat16. Returns Unsupported for other types.
template <typename Fn>
Status DispatchAll(DataType t, const Node& n, Fn&& fn) {
  switch (t) {
    case DataType::kFloat32: fn.template operator()<float>(); return Status::Ok();
    case DataType::kFloat64: fn.template operator()<double>(); return Status::Ok();
    case DataType::kFloat16: fn.template operator()<Half>(); return Status::Ok();
    case DataType::kBFloat16: fn.template operator()<BFloat16>(); return Status::Ok();
    case DataType::kInt8: fn.template operator()<int8_t>(); return Status::Ok();
    case DataType::kUInt8: fn.template operator()<uint8_t>(); return Status::Ok();
    case DataType::kInt16: fn.template operator()<int16_t>(); return Status::Ok();
    case DataType::kUInt16: fn.template operator()<uint16_t>(); return Status::Ok();
    case DataType::kInt32: fn.template operator()<int32_t>(); return Status::Ok();
    case DataType::kUInt32: fn.template operator()<uint32_t>(); return Status::Ok();
    case DataType::kInt64: fn.template operator()<int64_t>(); return Status::Ok();
    case DataType::kUInt64: fn.template operator()<uint64_t>(); return Status::Ok();
    case DataType::kBool: fn.template operator()<bool>(); return Status::Ok();
    default:
      return Err(StatusCode::kUnsupported, "{}: element type {} is not supported by the CPU reference kernel",
                 n.Where(), DataTypeName(t));
  }
}

// Calls fn.template operator()<T>() for the floating-point storage types (float, double, Half, BFloat16).
template <typename Fn>
Status DispatchFloat(DataType t, const Node& n, Fn&& fn) {
  switch (t) {
    case DataType::kFloat32: fn.template operator()<float>(); return Status::Ok();
    case DataType::kFloat64: fn.template operator()<double>(); return Status::Ok();
    case DataType::kFloat16: fn.template operator()<Half>(); return Status::Ok();
    case DataType::kBFloat16: fn.template operator()<BFloat16>(); return Status::Ok();
    default:
      return Err(StatusCode::kUnsupported, "{}: element type {} is not supported (floating-point types only)",
                 n.Where(), DataTypeName(t));
  }
}

// Storage <-> compute conversions: Half/BFloat16 compute in float, everything else as itself.
template <typename T> struct Compute { using type = T; };
template <> struct Compute<Half> { using type = float; };
template <> struct Compute<BFloat16> { using type = float; };
template <typename T> using ComputeT = typename Compute<T>::type;

template <typename T> inline ComputeT<T> Load(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, Half>) return HalfToFloat(p[i].bits);
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16ToFloat(p[i].bits);
  else return p[i];
}
template <typename T> inline void Store(T* p, int64_t i, ComputeT<T> v) {
  if constexpr (std::is_same_v<T, Half>) p[i].bits = FloatToHalf(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, BFloat16>) p[i].bits = FloatToBFloat16(static_cast<float>(v));
  else p[i] = static_cast<T>(v);
}

// Row-major strides of a shape.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape);

// Strides of `in` broadcast to `out` (rank-aligned to the right; 0 where the input dim is 1 or missing).
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

// Numpy broadcast of concrete shapes; error names the node.
Result<std::vector<int64_t>> BroadcastShape(const Node& n, const std::vector<int64_t>& a,
                                            const std::vector<int64_t>& b);

// Iterates a multi-index over `shape` keeping one flat offset per strided operand:
//   BroadcastIterator it(out_shape, {sa, sb}); for (i...) { use it.offset(0), it.offset(1); it.Next(); }
class BroadcastIterator {
 public:
  BroadcastIterator(const std::vector<int64_t>& shape, std::vector<std::vector<int64_t>> strides);
  int64_t offset(size_t k) const { return offsets_[k]; }
  void Next();

 private:
  std::vector<int64_t> shape_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> index_;
  std::vector<int64_t> offsets_;
};

}  // namespace kiln::cpu
