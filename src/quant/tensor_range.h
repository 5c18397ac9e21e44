// What calibration learns about one tensor: its extremes, and a histogram of |x| from which the calibrators pick
// the clipping threshold (the tensor's INT8 scale is threshold / 127).
//
// The histogram has kHistogramBins equal bins over [0, range). The first batch that has a non-zero value sets the
// range to its largest |x|; a later batch with a larger |x| doubles the range (adjacent bins merged pairwise) until
// it fits, so no value is ever dropped or counted twice and a batch costs one pass over its elements. The range thus
// covers max|x| within a factor of two; the resolution lost by merging is at most half the bins.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln::quant {

inline constexpr int kHistogramBins = 2048;

class TensorRange {
 public:
  TensorRange() : hist_(kHistogramBins, 0) {}
  // Adds every element of a float tensor (float32/16/64, bfloat16); NaNs are counted apart and ignored, infinities
  // clamp to the largest finite value seen in the same batch. Tensors of other types are ignored.
  void Add(const Tensor& t);
  // Adds values directly (tests, and what Add converts to).
  void AddValues(const float* v, int64_t n);

  int64_t count() const { return count_; }    // finite values seen
  int64_t nan_count() const { return nans_; }
  float min() const { return min_; }           // 0 before any value
  float max() const { return max_; }
  float amax() const { return amax_; }         // largest |x|
  double range() const { return range_; }      // upper edge of the histogram (0 until a non-zero value)
  const std::vector<int64_t>& histogram() const { return hist_; }
  double bin_width() const { return range_ / kHistogramBins; }

 private:
  void Grow(double needed);

  std::vector<int64_t> hist_;
  double range_ = 0;
  int64_t count_ = 0, nans_ = 0;
  float min_ = 0, max_ = 0, amax_ = 0;
};

}  // namespace kiln::quant
