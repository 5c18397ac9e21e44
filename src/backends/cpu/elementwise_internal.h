// Internals (namespace kiln::cpu::elem) shared by the elementwise CPU kernels (elementwise*.cpp):
// type-category dispatch, output allocation, a coalesced N-ary broadcast plan, float8 conversions.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/common.h"

namespace kiln::cpu::elem {

// Elements per parallel task for cheap elementwise loops.
inline constexpr int64_t kElemGrain = 32768;

// The integer types the bitwise ops take: int8..int64 and uint8..uint64 (not the 4- and 2-bit ones).
inline bool IsBitwiseInteger(DataType t) { return IsIntegerType(t) && !IsSubByteIntegerType(t); }

// ---- type-category dispatch (instantiates only the types an op allows; DispatchFloat is in common.h) ----
template <typename Fn>
Status DispatchSigned(DataType t, const Node& n, Fn&& fn) {
  switch (t) {
    case DataType::kInt8: fn.template operator()<int8_t>(); return Status::Ok();
    case DataType::kInt16: fn.template operator()<int16_t>(); return Status::Ok();
    case DataType::kInt32: fn.template operator()<int32_t>(); return Status::Ok();
    case DataType::kInt64: fn.template operator()<int64_t>(); return Status::Ok();
    default: return DispatchFloat(t, n, std::forward<Fn>(fn));
  }
}

template <typename Fn>
Status DispatchNumeric(DataType t, const Node& n, Fn&& fn) {
  switch (t) {
    case DataType::kUInt8: fn.template operator()<uint8_t>(); return Status::Ok();
    case DataType::kUInt16: fn.template operator()<uint16_t>(); return Status::Ok();
    case DataType::kUInt32: fn.template operator()<uint32_t>(); return Status::Ok();
    case DataType::kUInt64: fn.template operator()<uint64_t>(); return Status::Ok();
    default: return DispatchSigned(t, n, std::forward<Fn>(fn));
  }
}

// Makes output i a tensor of `dtype` and `shape`, reusing the pre-allocated one when it matches.
void EnsureOutput(KernelContext& ctx, size_t i, DataType dtype, const std::vector<int64_t>& shape);

// Checks that input i is present; error names the node.
Status NeedInput(const KernelContext& ctx, size_t i);

// ---- N-ary broadcast plan ----
// The output shape is split into "rows": outer dims (coalesced where every operand broadcasts alike) and
// one inner run of length `inner` along which each operand's stride is 0 or 1.
struct BroadcastPlan {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> outer;                      // coalesced outer dims
  std::vector<std::vector<int64_t>> outer_strides; // per operand, per outer dim
  std::vector<int64_t> inner_stride;               // per operand: 0 or 1
  int64_t inner = 1;
  int64_t rows = 0;  // product of outer (0 when the output is empty)
};

// Fails (naming the node) when the shapes do not broadcast.
Result<BroadcastPlan> MakeBroadcastPlan(const Node& n, const std::vector<std::vector<int64_t>>& shapes);

// Calls fn(offsets, out_offset, len) for the output elements [begin, end) in runs along the inner dim:
// offsets[k] is operand k's element offset at the run start, out_offset the output's; within a run operand
// k advances by inner_stride[k] (0 or 1) per element.
template <size_t K, typename Fn>
void ForRange(const BroadcastPlan& p, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const size_t nd = p.outer.size();
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, K> off{};
  int64_t row = begin / p.inner;
  int64_t col = begin % p.inner;
  for (int64_t d = static_cast<int64_t>(nd) - 1, r = row; d >= 0; --d) {
    idx[d] = r % p.outer[d];
    r /= p.outer[d];
    for (size_t k = 0; k < K; ++k) off[k] += idx[d] * p.outer_strides[k][d];
  }
  while (true) {
    const int64_t row_start = row * p.inner;
    const int64_t len = std::min(p.inner, end - row_start) - col;
    std::array<int64_t, K> o = off;
    for (size_t k = 0; k < K; ++k) o[k] += col * p.inner_stride[k];
    fn(o, row_start + col, len);
    if (row_start + p.inner >= end) return;
    ++row;
    col = 0;
    for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
      if (++idx[d] < p.outer[d]) {
        for (size_t k = 0; k < K; ++k) off[k] += p.outer_strides[k][d];
        break;
      }
      for (size_t k = 0; k < K; ++k) off[k] -= p.outer_strides[k][d] * (p.outer[d] - 1);
      idx[d] = 0;
    }
  }
}

// Runs ForRange over the whole output, split across threads.
template <size_t K, typename Fn>
void ParallelRange(const BroadcastPlan& p, Fn&& fn) {
  const int64_t total = p.rows * p.inner;
  ParallelFor(total, [&](int64_t b, int64_t e) { ForRange<K>(p, b, e, fn); }, kElemGrain);
}

// ---- float8 formats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) ----
bool IsFloat8Type(DataType t);
float Float8ToFloat(DataType t, uint8_t v);
uint8_t FloatToFloat8(DataType t, float f, bool saturate);

// Element i of any supported tensor as double (float8 formats included).
double ElementAsDouble(const Tensor& t, int64_t i);

// ---- the narrow types ONNX 1.18+ added: float4e2m1, float8e8m0, int2, uint2 (elementwise_cast_narrow.cpp) ----
bool IsNarrowType(DataType t);
// Cast (and CastLike) where x or y has one of them; `round_mode` ("up", "down", "nearest") applies to float8e8m0.
Status CastNarrow(const Node& n, const Tensor& x, Tensor& y, bool saturate, const std::string& round_mode);

// Sub-registrations (elementwise_binary.cpp, elementwise_cast.cpp).
void RegisterBinaryElementwiseKernels(KernelRegistry& r);
void RegisterCastQuantKernels(KernelRegistry& r);

}  // namespace kiln::cpu::elem
