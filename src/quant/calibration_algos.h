// The calibrators' choice of clipping threshold for a tensor, from what calibration saw (quant/tensor_range.h).
// The INT8 scale is threshold / 127: values beyond the threshold saturate.
//
// - MinMax: the largest |x| seen (no clipping).
// - Percentile(p): the |x| below which p percent of the values lie (the upper edge of the histogram bin where the
//   cumulative count reaches p%), never above the largest |x|.
// - Entropy (TensorRT's entropy-2 idea): for each candidate threshold at a bin edge i (from 128 bins up to the last
//   non-empty bin), the reference distribution P is the first i bins with every value beyond folded into bin i-1,
//   and Q is those i bins quantized to 128 levels (each level's count spread evenly over its non-empty bins). The
//   threshold whose KL(P || Q) is smallest wins: it keeps the distribution's shape at 128 levels while clipping
//   rare outliers. Bin 0 (the exact zeros, exact at any threshold) counts as bin 1 does, so a ReLU's spike of zeros
//   does not pull the threshold down.
#pragma once

#include <string>

#include "quant/tensor_range.h"

namespace kiln::quant {

enum class Algorithm { kEntropy, kMinMax, kPercentile };

// "entropy", "minmax", "percentile".
const char* AlgorithmName(Algorithm a);

inline constexpr int kQuantLevels = 128;  // |x| levels of a symmetric int8 (0..127)

double EntropyThreshold(const TensorRange& r);
double PercentileThreshold(const TensorRange& r, double percentile);
double MinMaxThreshold(const TensorRange& r);

// The threshold for `a` (percentile only read by kPercentile).
double Threshold(const TensorRange& r, Algorithm a, double percentile);

}  // namespace kiln::quant
