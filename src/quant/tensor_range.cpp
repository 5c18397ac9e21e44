#include "quant/tensor_range.h"

#include <algorithm>
#include <cmath>

namespace kiln::quant {

void TensorRange::Grow(double needed) {
  // Doubling merges bins 2i and 2i+1 into bin i: every value stays in the bin that holds it at the new width.
  while (range_ < needed) {
    for (int i = 0; i < kHistogramBins / 2; ++i) hist_[i] = hist_[2 * i] + hist_[2 * i + 1];
    std::fill(hist_.begin() + kHistogramBins / 2, hist_.end(), 0);
    range_ *= 2;
  }
}

void TensorRange::AddValues(const float* v, int64_t n) {
  // Pass 1: extremes of the batch's finite values.
  float bmin = 0, bmax = 0, bamax = 0;
  bool any = false;
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[i];
    if (!std::isfinite(x)) continue;
    if (!any) bmin = bmax = x, any = true;
    bmin = std::min(bmin, x);
    bmax = std::max(bmax, x);
  }
  if (any) {
    bamax = std::max(std::fabs(bmin), std::fabs(bmax));
    if (count_ == 0) min_ = bmin, max_ = bmax;
    min_ = std::min(min_, bmin);
    max_ = std::max(max_, bmax);
    amax_ = std::max(amax_, bamax);
  }
  if (bamax > 0) {
    if (range_ == 0) range_ = bamax;
    else if (bamax > range_) Grow(bamax);
  }
  // Pass 2: the histogram. Infinities count as the batch's largest finite magnitude.
  const double scale = range_ > 0 ? kHistogramBins / range_ : 0;
  for (int64_t i = 0; i < n; ++i) {
    float x = v[i];
    if (std::isnan(x)) {
      ++nans_;
      continue;
    }
    if (std::isinf(x)) x = bamax;
    const double a = std::fabs(static_cast<double>(x));
    const int b = std::min(kHistogramBins - 1, static_cast<int>(a * scale));
    ++hist_[b];
    ++count_;
  }
}

void TensorRange::Add(const Tensor& t) {
  if (!IsFloatType(t.dtype()) || t.numel() == 0) return;
  if (t.dtype() == DataType::kFloat32) return AddValues(t.data<float>(), t.numel());
  // Other float types in chunks, so a large tensor is not copied whole.
  constexpr int64_t kChunk = 1 << 16;
  std::vector<float> buf(static_cast<size_t>(std::min<int64_t>(kChunk, t.numel())));
  for (int64_t s = 0; s < t.numel(); s += kChunk) {
    const int64_t m = std::min(kChunk, t.numel() - s);
    for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<float>(t.GetAsDouble(s + i));
    AddValues(buf.data(), m);
  }
}

}  // namespace kiln::quant
