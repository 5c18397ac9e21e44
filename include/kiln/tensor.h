// kiln — host tensors: an element type, a static shape and a shared, 64-byte-aligned buffer. Copies share the buffer
// (like a shared_ptr); Clone() copies the bytes. The debug API (kiln/debug.h) takes and returns them, and tools use
// them for inputs and outputs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled storage.
  Tensor(DataType dtype, std::vector<int64_t> shape);
  // Allocates storage left uninitialized, for a caller that writes every byte next (large weights: zeroing first
  // would touch every page twice).
  static Tensor Uninitialized(DataType dtype, std::vector<int64_t> shape);

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return NumElements(shape_); }
  // Saturates at SIZE_MAX (a shape too large to allocate), never wraps around.
  size_t nbytes() const {
    const size_t n = static_cast<size_t>(numel()), es = DataTypeSize(dtype_);
    return es != 0 && n > SIZE_MAX / es ? SIZE_MAX : n * es;
  }
  bool defined() const { return dtype_ != DataType::kUndefined; }

  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  template <typename T> T* data() { return reinterpret_cast<T*>(data_.get()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(data_.get()); }

  // Same buffer, new shape with the same element count.
  Tensor Reshaped(std::vector<int64_t> shape) const;
  // A tensor over memory it does not own (an arena slot, a caller's buffer); the memory must outlive it.
  static Tensor View(DataType dtype, std::vector<int64_t> shape, void* data);
  Tensor Clone() const;

  // Element i converted to double / int64 whatever the dtype (for shape tensors, attributes, tests).
  double GetAsDouble(int64_t i) const;
  int64_t GetAsInt(int64_t i) const;
  void SetFromDouble(int64_t i, double v);
  // All elements as int64 (shape tensors, axes, pads).
  std::vector<int64_t> ToInt64Vector() const;
  std::vector<float> ToFloatVector() const;

  static Tensor Scalar(DataType dtype, double v);
  static Tensor FromInt64(const std::vector<int64_t>& values, std::vector<int64_t> shape);
  static Tensor FromInt64(const std::vector<int64_t>& values) {
    return FromInt64(values, {static_cast<int64_t>(values.size())});
  }
  static Tensor FromFloat(const std::vector<float>& values, std::vector<int64_t> shape);

  std::string Describe() const;  // "float32[1,3,224,224]"

 private:
  DataType dtype_ = DataType::kUndefined;
  std::vector<int64_t> shape_;
  std::shared_ptr<uint8_t[]> data_;
};

// Converts every element to `to` (ONNX Cast semantics: float->int truncates, saturate for fp8).
Tensor CastTensor(const Tensor& t, DataType to, bool saturate = true);

}  // namespace kiln
