// Host helpers shared by the index-family layers (index_layers.cpp, index_misc_layers.cpp, resize_layers.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "core/error.h"

namespace kiln::cuda::index_util {

inline int64_t Prod(const std::vector<int64_t>& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) p *= s[i];
  return p;
}

inline bool IsIndexType(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }

// The tuning shape of input i where it is known (nullptr otherwise; rank-0 shapes count as unknown).
inline const std::vector<int64_t>* KnownInputShape(const LayerSpec& spec, size_t i) {
  return i < spec.input_shapes.size() && !spec.input_shapes[i].empty() ? &spec.input_shapes[i] : nullptr;
}

// The constant value of input i (nullptr when it is not a constant).
inline const Tensor* ConstInput(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v && v->const_value ? &*v->const_value : nullptr;
}

// Checks host-known indices like the CPU reference: element e against [-dims[e % dims.size()], dims[...]) on axis
// axes[e % ...]. The error names the node, the index and the axis.
inline Status CheckIndexRange(const Node& n, const Tensor& idx, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& axes) {
  if (dims.empty()) return Status::Ok();
  for (int64_t e = 0; e < idx.numel(); ++e) {
    const size_t j = static_cast<size_t>(e) % dims.size();
    const int64_t v = idx.GetAsInt(e), dim = dims[j];
    if (v < -dim || v >= dim)
      return Err(StatusCode::kOutOfRange, "{}: index {} is out of range [{}, {}) on axis {}", n.Where(), v, -dim, dim,
                 axes[j]);
  }
  return Status::Ok();
}

}  // namespace kiln::cuda::index_util
