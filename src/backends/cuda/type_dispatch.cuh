// Host-side dtype dispatch for launchers (*.cu, C++17): calls f(TypeTag<T>{}) with the storage type that a dtype
// code or an element size names, and returns false where there is none.
#pragma once

#include <cstdint>

#include "backends/cuda/kernel_util.cuh"

namespace kiln::cuda {

template <typename T>
struct TypeTag {
  using type = T;
};

// float32, float16, bfloat16.
template <typename F>
bool DispatchLowFloat(int dtype, F&& f) {
  switch (dtype) {
    case kF32: f(TypeTag<float>{}); return true;
    case kF16: f(TypeTag<__half>{}); return true;
    case kBF16: f(TypeTag<__nv_bfloat16>{}); return true;
    default: return false;
  }
}

// float32, float16, bfloat16, float64.
template <typename F>
bool DispatchFloat(int dtype, F&& f) {
  if (dtype == kF64) {
    f(TypeTag<double>{});
    return true;
  }
  return DispatchLowFloat(dtype, f);
}

// Every integer type (not bool).
template <typename F>
bool DispatchInt(int dtype, F&& f) {
  switch (dtype) {
    case kI8: f(TypeTag<int8_t>{}); return true;
    case kU8: f(TypeTag<uint8_t>{}); return true;
    case kI16: f(TypeTag<int16_t>{}); return true;
    case kU16: f(TypeTag<uint16_t>{}); return true;
    case kI32: f(TypeTag<int32_t>{}); return true;
    case kU32: f(TypeTag<uint32_t>{}); return true;
    case kI64: f(TypeTag<int64_t>{}); return true;
    case kU64: f(TypeTag<uint64_t>{}); return true;
    default: return false;
  }
}

// Integers and floats.
template <typename F>
bool DispatchNumeric(int dtype, F&& f) {
  return DispatchInt(dtype, f) || DispatchFloat(dtype, f);
}

// Integers, floats, and bool (as bool).
template <typename F>
bool DispatchStorage(int dtype, F&& f) {
  if (dtype == kBool) {
    f(TypeTag<bool>{});
    return true;
  }
  return DispatchNumeric(dtype, f);
}

// An unsigned type of `bytes` bytes (1, 2, 4 or 8), for kernels that move raw elements.
template <typename F>
bool DispatchElemBytes(int bytes, F&& f) {
  switch (bytes) {
    case 1: f(TypeTag<uint8_t>{}); return true;
    case 2: f(TypeTag<uint16_t>{}); return true;
    case 4: f(TypeTag<uint32_t>{}); return true;
    case 8: f(TypeTag<unsigned long long>{}); return true;
    default: return false;
  }
}

}  // namespace kiln::cuda
