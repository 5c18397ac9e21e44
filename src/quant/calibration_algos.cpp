#include "quant/calibration_algos.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace kiln::quant {

const char* AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kEntropy: return "entropy";
    case Algorithm::kMinMax: return "minmax";
    case Algorithm::kPercentile: return "percentile";
  }
  return "?";
}

double MinMaxThreshold(const TensorRange& r) { return r.amax(); }

double PercentileThreshold(const TensorRange& r, double percentile) {
  const auto& h = r.histogram();
  int64_t total = 0;
  for (int64_t c : h) total += c;
  if (total == 0 || r.range() == 0) return r.amax();
  const double want = std::clamp(percentile, 0.0, 100.0) / 100.0 * static_cast<double>(total);
  int64_t cum = 0;
  for (int b = 0; b < kHistogramBins; ++b) {
    cum += h[b];
    if (static_cast<double>(cum) >= want) return std::min<double>((b + 1) * r.bin_width(), r.amax());
  }
  return r.amax();
}

namespace {

// KL(P || Q) over bins where P > 0; both unnormalized (normalized here). Q's empty bins where P is not are given a
// small mass, as the reference algorithm smooths them, so a candidate that drops mass is penalized, not infinite.
double KlDivergence(const std::vector<double>& p, const std::vector<double>& q) {
  double ps = 0, qs = 0;
  for (size_t i = 0; i < p.size(); ++i) ps += p[i], qs += q[i];
  if (ps <= 0 || qs <= 0) return std::numeric_limits<double>::infinity();
  constexpr double kEps = 1e-4;
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    const double pi = p[i] / ps;
    const double qi = q[i] > 0 ? q[i] / qs : kEps / qs;
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

}  // namespace

double EntropyThreshold(const TensorRange& r) {
  // Bin 0 holds the exact zeros (a ReLU's output is mostly zeros, and so is zero padding): every threshold represents
  // them exactly, yet their spike would dominate the divergence and pull the threshold far down. It counts as its
  // neighbour does.
  std::vector<int64_t> h = r.histogram();
  if (h.size() > 1) h[0] = h[1];
  int last = -1;
  for (int b = kHistogramBins - 1; b >= 0; --b)
    if (h[b] != 0) {
      last = b;
      break;
    }
  if (last < 0 || r.range() == 0) return r.amax();
  const int used = last + 1;
  // Few enough bins for 128 levels to hold them all: nothing to clip.
  if (used <= kQuantLevels) return r.amax();

  std::vector<double> p, q;
  double best_kl = std::numeric_limits<double>::infinity();
  int best_i = used;
  double outliers = 0;  // the mass in bins >= i, folded into bin i-1
  for (int b = kQuantLevels; b < kHistogramBins; ++b) outliers += static_cast<double>(h[b]);
  for (int i = kQuantLevels; i <= used; ++i) {
    if (i > kQuantLevels) outliers -= static_cast<double>(h[i - 1]);  // bin i-1 is inside the candidate now
    p.assign(h.begin(), h.begin() + i);
    p[i - 1] += outliers;
    // Q: bins [0, i) merged into 128 levels (level j covers [j*i/128, (j+1)*i/128)), each level's count spread
    // evenly over its non-empty source bins (an empty source bin stays empty, as it would after quantization).
    q.assign(i, 0.0);
    for (int j = 0; j < kQuantLevels; ++j) {
      const int lo = static_cast<int>(static_cast<int64_t>(j) * i / kQuantLevels);
      const int hi = static_cast<int>(static_cast<int64_t>(j + 1) * i / kQuantLevels);
      double sum = 0;
      int nonzero = 0;
      for (int k = lo; k < hi; ++k)
        if (h[k] != 0) sum += static_cast<double>(h[k]), ++nonzero;
      if (nonzero == 0) continue;
      for (int k = lo; k < hi; ++k)
        if (h[k] != 0) q[k] = sum / nonzero;
    }
    const double kl = KlDivergence(p, q);
    // Ties go to the wider threshold: values on a few discrete levels (an image's 17 grey levels) keep KL at 0 for
    // every width that separates them, and clipping them would gain nothing.
    if (kl <= best_kl) best_kl = kl, best_i = i;
  }
  return std::min<double>(best_i * r.bin_width(), r.amax());
}

double Threshold(const TensorRange& r, Algorithm a, double percentile) {
  switch (a) {
    case Algorithm::kEntropy: return EntropyThreshold(r);
    case Algorithm::kMinMax: return MinMaxThreshold(r);
    case Algorithm::kPercentile: return PercentileThreshold(r, percentile);
  }
  return r.amax();
}

}  // namespace kiln::quant
