#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/narrow_types.h"

namespace kiln {

namespace {
std::shared_ptr<uint8_t[]> AllocAligned(size_t bytes, bool zero = true) {
  if (bytes > (size_t{1} << 48)) return nullptr;  // no machine has that much: refuse rather than round and wrap
  size_t n = (bytes + 63) / 64 * 64;
  if (n == 0) n = 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, n));
  if (!p) return nullptr;
  if (zero) std::memset(p, 0, n);
  return std::shared_ptr<uint8_t[]>(p, [](uint8_t* q) { std::free(q); });
}

template <typename To>
To SaturatingFromDouble(double v) {
  if constexpr (std::is_integral_v<To>) {
    if (std::isnan(v)) return 0;
    // ONNX Cast float->int is implementation-defined out of range; clamp keeps it deterministic.
    if (v <= static_cast<double>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}
}  // namespace

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  data_ = AllocAligned(nbytes());
}

Tensor Tensor::Uninitialized(DataType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = AllocAligned(t.nbytes(), /*zero=*/false);
  return t;
}

Tensor Tensor::Reshaped(std::vector<int64_t> shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::View(DataType dtype, std::vector<int64_t> shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // An empty view may come without memory (a zero-size input needs no address): it points at a static block, so
  // that raw() is never null and code that copies zero bytes from it stays defined.
  alignas(64) static uint8_t empty_block[64];
  if (!data && t.nbytes() == 0) data = empty_block;
  t.data_ = std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(data), [](uint8_t*) {});
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = Uninitialized(dtype_, shape_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

double Tensor::GetAsDouble(int64_t i) const {
  switch (dtype_) {
    case DataType::kFloat32: return data<float>()[i];
    case DataType::kFloat64: return data<double>()[i];
    case DataType::kFloat16: return HalfToFloat(data<uint16_t>()[i]);
    case DataType::kBFloat16: return BFloat16ToFloat(data<uint16_t>()[i]);
    case DataType::kFloat8E4M3FN: return Float8E4M3ToFloat(data<uint8_t>()[i]);
    case DataType::kFloat4E2M1: return Float4E2M1ToFloat(data<uint8_t>()[i]);
    case DataType::kFloat8E8M0: return Float8E8M0ToFloat(data<uint8_t>()[i]);
    case DataType::kInt8: case DataType::kInt4: case DataType::kInt2: return data<int8_t>()[i];
    case DataType::kUInt8: case DataType::kUInt4: case DataType::kUInt2: return data<uint8_t>()[i];
    case DataType::kInt16: return data<int16_t>()[i];
    case DataType::kUInt16: return data<uint16_t>()[i];
    case DataType::kInt32: return data<int32_t>()[i];
    case DataType::kUInt32: return data<uint32_t>()[i];
    case DataType::kInt64: return static_cast<double>(data<int64_t>()[i]);
    case DataType::kUInt64: return static_cast<double>(data<uint64_t>()[i]);
    case DataType::kBool: return data<uint8_t>()[i] ? 1.0 : 0.0;
    default: return 0.0;
  }
}

int64_t Tensor::GetAsInt(int64_t i) const {
  switch (dtype_) {
    case DataType::kInt64: return data<int64_t>()[i];
    case DataType::kInt32: return data<int32_t>()[i];
    case DataType::kUInt64: return static_cast<int64_t>(data<uint64_t>()[i]);
    default: {
      // A float read as an integer (a shape or index given in a float tensor): NaN reads as 0 and values past
      // int64's range saturate, instead of the undefined conversion.
      const double d = GetAsDouble(i);
      if (std::isnan(d)) return 0;
      if (d >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
      if (d < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(d);
    }
  }
}

void Tensor::SetFromDouble(int64_t i, double v) {
  switch (dtype_) {
    case DataType::kFloat32: data<float>()[i] = static_cast<float>(v); break;
    case DataType::kFloat64: data<double>()[i] = v; break;
    case DataType::kFloat16: data<uint16_t>()[i] = FloatToHalf(static_cast<float>(v)); break;
    case DataType::kBFloat16: data<uint16_t>()[i] = FloatToBFloat16(static_cast<float>(v)); break;
    case DataType::kFloat8E4M3FN: data<uint8_t>()[i] = FloatToFloat8E4M3(static_cast<float>(v)); break;
    case DataType::kFloat4E2M1: data<uint8_t>()[i] = DoubleToFloat4E2M1(v); break;
    case DataType::kFloat8E8M0: data<uint8_t>()[i] = DoubleToFloat8E8M0(v); break;  // Cast's defaults: up, saturated
    case DataType::kInt8: data<int8_t>()[i] = SaturatingFromDouble<int8_t>(v); break;
    case DataType::kUInt8: data<uint8_t>()[i] = SaturatingFromDouble<uint8_t>(v); break;
    case DataType::kInt4: data<int8_t>()[i] = static_cast<int8_t>(std::clamp(SaturatingFromDouble<int8_t>(v), int8_t{-8}, int8_t{7})); break;
    case DataType::kUInt4: data<uint8_t>()[i] = std::min(SaturatingFromDouble<uint8_t>(v), uint8_t{15}); break;
    case DataType::kInt2: data<int8_t>()[i] = static_cast<int8_t>(std::clamp(SaturatingFromDouble<int8_t>(v), int8_t{-2}, int8_t{1})); break;
    case DataType::kUInt2: data<uint8_t>()[i] = std::min(SaturatingFromDouble<uint8_t>(v), uint8_t{3}); break;
    case DataType::kInt16: data<int16_t>()[i] = SaturatingFromDouble<int16_t>(v); break;
    case DataType::kUInt16: data<uint16_t>()[i] = SaturatingFromDouble<uint16_t>(v); break;
    case DataType::kInt32: data<int32_t>()[i] = SaturatingFromDouble<int32_t>(v); break;
    case DataType::kUInt32: data<uint32_t>()[i] = SaturatingFromDouble<uint32_t>(v); break;
    case DataType::kInt64: data<int64_t>()[i] = SaturatingFromDouble<int64_t>(v); break;
    case DataType::kUInt64: data<uint64_t>()[i] = SaturatingFromDouble<uint64_t>(v); break;
    case DataType::kBool: data<uint8_t>()[i] = v != 0.0 ? 1 : 0; break;
    default: break;
  }
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  std::vector<int64_t> r(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) r[i] = GetAsInt(i);
  return r;
}

std::vector<float> Tensor::ToFloatVector() const {
  std::vector<float> r(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) r[i] = static_cast<float>(GetAsDouble(i));
  return r;
}

Tensor Tensor::Scalar(DataType dtype, double v) {
  Tensor t(dtype, {});
  t.SetFromDouble(0, v);
  return t;
}

Tensor Tensor::FromInt64(const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  Tensor t(DataType::kInt64, std::move(shape));
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * 8);
  return t;
}

Tensor Tensor::FromFloat(const std::vector<float>& values, std::vector<int64_t> shape) {
  Tensor t(DataType::kFloat32, std::move(shape));
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * 4);
  return t;
}

std::string Tensor::Describe() const { return fmt::format("{}{}", DataTypeName(dtype_), ShapeToString(shape_)); }

int64_t FirstOutOf4BitRange(const Tensor& t) {
  // Also the other narrow types held one per byte: int2/uint2 ([-2, 1] / [0, 3]) and float4e2m1 (codes 0 to 15).
  if (t.dtype() == DataType::kFloat4E2M1) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.data<uint8_t>()[i] > 0xf) return i;
    return -1;
  }
  if (!IsSubByteIntegerType(t.dtype())) return -1;
  const auto [lo, hi] = IntegerRange(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.GetAsInt(i) < lo || t.GetAsInt(i) > hi) return i;
  return -1;
}

Tensor CastTensor(const Tensor& t, DataType to, bool saturate) {
  if (t.dtype() == to) return t;
  Tensor r(to, t.shape());
  const int64_t n = t.numel();
  if (to == DataType::kFloat32 && t.dtype() == DataType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) r.data<float>()[i] = HalfToFloat(t.data<uint16_t>()[i]);
  } else if (to == DataType::kFloat16 && t.dtype() == DataType::kFloat32) {
    for (int64_t i = 0; i < n; ++i) r.data<uint16_t>()[i] = FloatToHalf(t.data<float>()[i]);
  } else if (to == DataType::kInt64 && IsIntegerType(t.dtype())) {
    for (int64_t i = 0; i < n; ++i) r.data<int64_t>()[i] = t.GetAsInt(i);
  } else if (t.dtype() == DataType::kInt64 && IsIntegerType(to)) {
    // Integer narrowing wraps like a C cast (ONNX Cast semantics for ints).
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = t.data<int64_t>()[i];
      switch (to) {
        case DataType::kInt32: r.data<int32_t>()[i] = static_cast<int32_t>(v); break;
        case DataType::kInt8: r.data<int8_t>()[i] = static_cast<int8_t>(v); break;
        case DataType::kUInt8: r.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
        case DataType::kInt16: r.data<int16_t>()[i] = static_cast<int16_t>(v); break;
        case DataType::kUInt16: r.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
        case DataType::kUInt32: r.data<uint32_t>()[i] = static_cast<uint32_t>(v); break;
        case DataType::kUInt64: r.data<uint64_t>()[i] = static_cast<uint64_t>(v); break;
        case DataType::kInt4: case DataType::kUInt4:  // wraps, as Cast to a 4-bit type does
          r.data<int8_t>()[i] = Wrap4Bit(v, to == DataType::kInt4);
          break;
        case DataType::kInt2: case DataType::kUInt2:  // wraps, as Cast to a 2-bit type does
          r.data<int8_t>()[i] = Wrap2Bit(v, to == DataType::kInt2);
          break;
        default: break;
      }
    }
  } else if (to == DataType::kFloat8E4M3FN) {
    for (int64_t i = 0; i < n; ++i)
      r.data<uint8_t>()[i] = FloatToFloat8E4M3(static_cast<float>(t.GetAsDouble(i)), saturate);
  } else if (to == DataType::kFloat8E8M0) {  // Cast's default round_mode, "up"
    for (int64_t i = 0; i < n; ++i)
      r.data<uint8_t>()[i] = DoubleToFloat8E8M0(t.GetAsDouble(i), "up", saturate);
  } else if (Is2BitType(to) || Is4BitType(to)) {  // as Cast does: integers wrap, floats truncate toward zero and wrap
    const bool from_int = IsIntegerType(t.dtype()) || t.dtype() == DataType::kBool;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = from_int ? t.GetAsInt(i) : TruncatedForWrap(t.GetAsDouble(i));
      r.data<int8_t>()[i] = Is2BitType(to) ? Wrap2Bit(v, to == DataType::kInt2) : Wrap4Bit(v, to == DataType::kInt4);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) r.SetFromDouble(i, t.GetAsDouble(i));
  }
  return r;
}

}  // namespace kiln
