// kiln-conformance helper (header-only): compares an output tensor with the expected one (dtype, shape,
// values within a per-dtype tolerance, NaN equal to NaN) and describes the first difference in one line.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::conformance {

inline std::string OneLine(std::string s, size_t max_len = 1500) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > max_len) s = s.substr(0, max_len) + "...";
  return s;
}

inline std::string ShapeStr(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

inline std::string MultiIndex(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return ShapeStr(idx);
}

struct Tolerance {
  double rtol, atol;
};

// Tolerances by element type: |got - expected| <= atol + rtol * |expected|. Exact for fp8 (few values,
// cast tests expect exact rounding) and for non-float types.
inline Tolerance ToleranceFor(DataType t, double rtol32, double atol32) {
  switch (t) {
    case DataType::kFloat16: return {1e-2, 1e-3};
    case DataType::kBFloat16: return {2e-2, 1e-2};
    case DataType::kFloat8E4M3FN: return {0.0, 0.0};
    default: return {rtol32, atol32};
  }
}

inline bool ComparesAsFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16 || t == DataType::kFloat8E4M3FN;
}

// Empty string when `got` matches `want`; otherwise a one-line description of the first difference.
inline std::string CompareTensors(const Tensor& got, const Tensor& want, double rtol32, double atol32) {
  if (got.dtype() != want.dtype())
    return std::string("dtype ") + DataTypeName(got.dtype()) + ", expected " + DataTypeName(want.dtype());
  if (got.shape() != want.shape())
    return "shape " + ShapeStr(got.shape()) + ", expected " + ShapeStr(want.shape());
  const int64_t n = want.numel();
  if (n > 0 && (got.raw() == nullptr || want.raw() == nullptr)) return "output has no data";
  int64_t bad = 0, first = -1;
  double first_got = 0, first_want = 0, max_abs = 0;
  if (ComparesAsFloat(want.dtype())) {
    const Tolerance tol = ToleranceFor(want.dtype(), rtol32, atol32);
    for (int64_t i = 0; i < n; ++i) {
      const double a = got.GetAsDouble(i), e = want.GetAsDouble(i);
      bool ok;
      if (std::isnan(e)) ok = std::isnan(a);
      else if (std::isinf(e)) ok = a == e;
      else ok = std::isfinite(a) && std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
      if (ok) continue;
      if (std::isfinite(a) && std::isfinite(e)) max_abs = std::max(max_abs, std::fabs(a - e));
      if (bad++ == 0) first = i, first_got = a, first_want = e;
    }
    if (bad == 0) return "";
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%lld of %lld values differ (rtol=%g atol=%g); first at %s: got %.9g, expected %.9g; "
                  "max abs diff %.3g",
                  static_cast<long long>(bad), static_cast<long long>(n), tol.rtol, tol.atol,
                  MultiIndex(first, want.shape()).c_str(), first_got, first_want, max_abs);
    return buf;
  }
  const size_t es = DataTypeSize(want.dtype());
  if (es == 0) return std::string("cannot compare dtype ") + DataTypeName(want.dtype());
  const auto* pa = static_cast<const uint8_t*>(got.raw());
  const auto* pe = static_cast<const uint8_t*>(want.raw());
  // The other float8 formats compare by byte, with any two NaNs equal (ONNX leaves the NaN's bits open: onnx 1.16's
  // data writes E5M2's NaN as 0x7f, 1.23's as 0x7e). float4e2m1 (one 4-bit code per byte, no NaN) and float8e8m0
  // (one NaN, 0xff) compare by byte as they are.
  const DataType wt = want.dtype();
  auto f8_nan = [wt](uint8_t b) {
    if (wt == DataType::kFloat8E4M3FNUZ || wt == DataType::kFloat8E5M2FNUZ) return b == 0x80;
    if (wt == DataType::kFloat8E5M2) return (b & 0x7c) == 0x7c && (b & 0x03) != 0;
    return false;
  };
  for (int64_t i = 0; i < n; ++i) {
    const bool same = wt == DataType::kBool ? (pa[i] != 0) == (pe[i] != 0)
                                            : std::memcmp(pa + i * es, pe + i * es, es) == 0 ||
                                                  (es == 1 && f8_nan(pa[i]) && f8_nan(pe[i]));
    if (!same && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  const bool is_u64 = want.dtype() == DataType::kUInt64;
  const bool f8 = wt == DataType::kFloat8E4M3FNUZ || wt == DataType::kFloat8E5M2 || wt == DataType::kFloat8E5M2FNUZ;
  const bool coded = wt == DataType::kFloat4E2M1 || wt == DataType::kFloat8E8M0;  // shown as code and value
  auto fmt = [&](const Tensor& t) {
    if (f8 || coded) {
      char buf[64];
      const unsigned code = t.data<uint8_t>()[first];
      if (coded) std::snprintf(buf, sizeof buf, "0x%02x (%g)", code, t.GetAsDouble(first));
      else std::snprintf(buf, sizeof buf, "0x%02x", code);
      return std::string(buf);
    }
    return is_u64 ? std::to_string(t.data<uint64_t>()[first]) : std::to_string(t.GetAsInt(first));
  };
  return std::to_string(bad) + " of " + std::to_string(n) + " values differ (exact compare); first at " +
         MultiIndex(first, want.shape()) + ": got " + fmt(got) + ", expected " + fmt(want);
}

}  // namespace kiln::conformance
