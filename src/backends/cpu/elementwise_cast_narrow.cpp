// CPU Cast/CastLike to and from the narrow types ONNX 1.18+ added (float4e2m1, float8e8m0, int2, uint2), held one
// value per byte (include/kiln/types.h). Semantics, as ONNX's reference (onnx 1.23) computes them and its node tests
// check:
//   to float4e2m1: round half to even, saturating to +-6 (float4 has no Inf or NaN; NaN: core/dtype.cpp);
//   to float8e8m0: |x| rounded to a power of two by `round_mode` (up, down, nearest), `saturate` as Cast-24's table;
//   to int2/uint2 (int4/uint4): integers wrap (the two (four) low bits), floats truncate toward zero and then wrap;
//   from them: their exact values, then the target's usual conversion (to float8: as from float).
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/elementwise_internal.h"
#include "core/narrow_types.h"

namespace kiln::cpu::elem {

bool IsNarrowType(DataType t) {
  return t == DataType::kFloat4E2M1 || t == DataType::kFloat8E8M0 || Is2BitType(t);
}

Status CastNarrow(const Node& n, const Tensor& x, Tensor& y, bool saturate, const std::string& round_mode) {
  const DataType from = x.dtype(), to = y.dtype();
  const int64_t count = x.numel();
  if (!IsSupportedType(from) || !IsSupportedType(to))
    return Err(StatusCode::kUnsupported, "{}: cannot cast {} to {}", n.Where(), DataTypeName(from), DataTypeName(to));
  const bool int_source = IsIntegerType(from) || from == DataType::kBool;
  if (Is2BitType(to)) {
    const bool is_signed = to == DataType::kInt2;
    int8_t* q = y.data<int8_t>();
    for (int64_t i = 0; i < count; ++i)
      q[i] = Wrap2Bit(int_source ? x.GetAsInt(i) : TruncatedForWrap(ElementAsDouble(x, i)), is_signed);
    return Status::Ok();
  }
  // Through double: exact for every narrow and float source, and for integers up to 2^53 (beyond, only an e8m0
  // rounding up or down from a power of two could tell the difference).
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = ElementAsDouble(x, i);
  if (to == DataType::kFloat4E2M1) {
    uint8_t* q = y.data<uint8_t>();
    for (int64_t i = 0; i < count; ++i) q[i] = DoubleToFloat4E2M1(v[i]);
    return Status::Ok();
  }
  if (to == DataType::kFloat8E8M0) {
    uint8_t* q = y.data<uint8_t>();
    for (int64_t i = 0; i < count; ++i) q[i] = DoubleToFloat8E8M0(v[i], round_mode, saturate);
    return Status::Ok();
  }
  if (Is4BitType(to)) {  // as every cast to int4/uint4 (elementwise_cast.cpp): integers (int2/uint2 values) wrap,
                         // floats truncate toward zero and then wrap (ml_dtypes: float4e2m1 -6 -> uint4 10)
    const bool is_signed = to == DataType::kInt4;
    int8_t* q = y.data<int8_t>();
    for (int64_t i = 0; i < count; ++i)
      q[i] = Wrap4Bit(int_source ? static_cast<int64_t>(v[i]) : TruncatedForWrap(v[i]), is_signed);
    return Status::Ok();
  }
  if (IsFloat8Type(to)) {
    uint8_t* q = y.data<uint8_t>();
    for (int64_t i = 0; i < count; ++i) q[i] = FloatToFloat8(to, static_cast<float>(v[i]), saturate);
    return Status::Ok();
  }
  return DispatchAll(to, n, [&]<typename U>() {
    U* q = y.data<U>();
    for (int64_t i = 0; i < count; ++i) {
      const double d = v[i];
      if constexpr (std::is_same_v<U, bool>) {
        q[i] = d != 0.0;  // NaN is true, as for every float source
      } else if constexpr (std::is_integral_v<U>) {
        if (int_source) {
          q[i] = static_cast<U>(static_cast<int64_t>(d));  // an int2/uint2 value: exact, then wraps
        } else if (std::isnan(d)) {  // float4e2m1 / float8e8m0 values: as every float -> int Cast
          q[i] = U(0);
        } else if (d <= static_cast<double>(std::numeric_limits<U>::lowest())) {
          q[i] = std::numeric_limits<U>::lowest();
        } else if (d >= static_cast<double>(std::numeric_limits<U>::max())) {
          q[i] = std::numeric_limits<U>::max();
        } else {
          q[i] = static_cast<U>(d);
        }
      } else {
        Store(q, i, static_cast<ComputeT<U>>(d));
      }
    }
  });
}

}  // namespace kiln::cpu::elem
