// CPU kernels of the signal-processing ops: DFT (forward, inverse, one-sided RFFT and IRFFT, dft_length zero-padding
// or cropping, any signal axis), STFT (windowed frames, each transformed) and MelWeightMatrix (triangular mel
// filterbanks). A complex tensor is a real one whose last dim holds (real, imaginary); a real one has a last dim of 1.
// Transforms run in double: a radix-2 FFT where the length is a power of two, else a direct O(n^2) sum over a table
// of the n roots of unity; results are stored as the input's type. The window generators are in generators.cpp.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/signal.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

using Complex = std::complex<double>;

// The unnormalized transform of length n: y[k] = sum_j x[j] e^(-+2 pi i jk / n) (+ for the inverse).
class Transform {
 public:
  Transform(int64_t n, bool inverse) : n_(n), roots_(static_cast<size_t>(n)) {
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n; ++k) {
      const double a = sign * 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
      roots_[static_cast<size_t>(k)] = Complex(std::cos(a), std::sin(a));
    }
    pow2_ = n > 0 && (n & (n - 1)) == 0;
  }

  // Transforms x (n values) in place; scratch is resized as needed.
  void Run(std::vector<Complex>& x, std::vector<Complex>& scratch) const {
    if (pow2_) return Fft(x);
    scratch.assign(x.begin(), x.end());
    for (int64_t k = 0; k < n_; ++k) {
      Complex s = 0;
      int64_t idx = 0;  // j * k mod n
      for (int64_t j = 0; j < n_; ++j) {
        s += scratch[static_cast<size_t>(j)] * roots_[static_cast<size_t>(idx)];
        idx += k;
        if (idx >= n_) idx -= n_;
      }
      x[static_cast<size_t>(k)] = s;
    }
  }

 private:
  // Iterative radix-2 Cooley-Tukey: bit-reversal permutation, then butterflies of doubling span.
  void Fft(std::vector<Complex>& x) const {
    for (int64_t i = 1, j = 0; i < n_; ++i) {
      int64_t bit = n_ >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(x[static_cast<size_t>(i)], x[static_cast<size_t>(j)]);
    }
    for (int64_t len = 2; len <= n_; len <<= 1) {
      const int64_t step = n_ / len, half = len / 2;
      for (int64_t start = 0; start < n_; start += len)
        for (int64_t k = 0; k < half; ++k) {
          const Complex t = roots_[static_cast<size_t>(k * step)] * x[static_cast<size_t>(start + k + half)];
          const Complex u = x[static_cast<size_t>(start + k)];
          x[static_cast<size_t>(start + k)] = u + t;
          x[static_cast<size_t>(start + k + half)] = u - t;
        }
    }
  }

  int64_t n_;
  std::vector<Complex> roots_;
  bool pow2_ = false;
};

Result<int64_t> ScalarIntInput(const KernelContext& c, size_t i, const char* what) {
  const Tensor& t = c.in(i);
  if (t.numel() != 1 || (t.dtype() != DataType::kInt32 && t.dtype() != DataType::kInt64))
    return Err(StatusCode::kInvalidArgument, "{}: {} must be an int32 or int64 scalar, got {}", c.node.Where(), what,
               t.Describe());
  return t.GetAsInt(0);
}

Status DftKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.in(0);
  const bool inverse = n.geti("inverse", 0) != 0, onesided = n.geti("onesided", 0) != 0;
  const int64_t r = x.rank();
  if (r < 2 || (x.dim(r - 1) != 1 && x.dim(r - 1) != 2))
    return Err(StatusCode::kInvalidArgument, "{}: the input must be [signal dims..., 1 or 2], got {}", n.Where(),
               x.Describe());
  int64_t axis = n.geti("axis", -2);  // opset 20's default; DFT-17's attribute is input 2 once imported
  if (c.input(2)) {
    KILN_ASSIGN_OR_RETURN(axis, ScalarIntInput(c, 2, "axis"));
  }
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a > r - 2)
    return Err(StatusCode::kInvalidArgument,
               "{}: axis {} is out of range for {} (the last dim holds the complex parts)", n.Where(), axis,
               x.Describe());
  const int64_t m = x.dim(a), channels = x.dim(r - 1);
  const bool irfft = onesided && inverse;
  int64_t len = irfft ? 2 * (m - 1) : m;
  if (c.input(1)) {
    KILN_ASSIGN_OR_RETURN(len, ScalarIntInput(c, 1, "dft_length"));
  }
  if (len < 1)
    return Err(StatusCode::kInvalidArgument, "{}: the transform length (dft_length) must be at least 1, got {}",
               n.Where(), len);
  std::vector<int64_t> out_shape = x.shape();
  out_shape[a] = onesided && !inverse ? len / 2 + 1 : len;
  out_shape[r - 1] = irfft ? 1 : 2;
  Tensor& y = AllocOutput(c, 0, x.dtype(), out_shape);
  if (y.numel() == 0) return Status::Ok();
  // x as [outer, m, inner, channels], y as [outer, out_len, inner, 1 or 2].
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a; ++d) outer *= x.dim(d);
  for (int64_t d = a + 1; d < r - 1; ++d) inner *= x.dim(d);
  const int64_t out_len = out_shape[a], out_ch = out_shape[r - 1];
  const Transform t(len, inverse);
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ParallelFor(outer * inner, [&](int64_t begin, int64_t end) {
      std::vector<Complex> line(static_cast<size_t>(len)), scratch;
      for (int64_t li = begin; li < end; ++li) {
        const int64_t o = li / inner, i = li % inner;
        auto in_at = [&](int64_t j) { return ((o * m + j) * inner + i) * channels; };
        std::fill(line.begin(), line.end(), Complex(0));
        // IRFFT: bins 0..len/2 from the input, the rest their conjugate mirror (a Hermitian spectrum).
        const int64_t given = std::min(m, irfft ? len / 2 + 1 : len);
        for (int64_t j = 0; j < given; ++j) {
          const int64_t off = in_at(j);
          line[static_cast<size_t>(j)] =
              Complex(static_cast<double>(Load(xp, off)), channels == 2 ? static_cast<double>(Load(xp, off + 1)) : 0.0);
        }
        if (irfft)
          for (int64_t k = len / 2 + 1; k < len; ++k)
            line[static_cast<size_t>(k)] = std::conj(line[static_cast<size_t>(len - k)]);
        t.Run(line, scratch);
        const double scale = inverse ? 1.0 / static_cast<double>(len) : 1.0;
        for (int64_t k = 0; k < out_len; ++k) {
          const int64_t off = ((o * out_len + k) * inner + i) * out_ch;
          const Complex v = line[static_cast<size_t>(k)] * scale;
          Store(yp, off, static_cast<ComputeT<T>>(v.real()));
          if (out_ch == 2) Store(yp, off + 1, static_cast<ComputeT<T>>(v.imag()));
        }
      }
    }, std::max<int64_t>(1, 4096 / len));
  });
}

Status StftKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.in(0);
  const bool onesided = n.geti("onesided", 1) != 0;
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    return Err(StatusCode::kInvalidArgument, "{}: the signal must be [batch, length, 1 or 2], got {}", n.Where(),
               x.Describe());
  const int64_t batch = x.dim(0), signal = x.dim(1), channels = x.dim(2);
  KILN_ASSIGN_OR_RETURN(const int64_t step, ScalarIntInput(c, 1, "frame_step"));
  const Tensor* window = c.input(2);
  if (window && (window->rank() != 1 || window->dtype() != x.dtype()))
    return Err(StatusCode::kInvalidArgument, "{}: the window {} must be 1-D of the signal's type {}", n.Where(),
               window->Describe(), DataTypeName(x.dtype()));
  int64_t frame = window ? window->dim(0) : signal;
  if (c.input(3)) {
    KILN_ASSIGN_OR_RETURN(frame, ScalarIntInput(c, 3, "frame_length"));
    if (window && window->dim(0) != frame)
      return Err(StatusCode::kInvalidArgument, "{}: the window has {} elements but frame_length is {}", n.Where(),
                 window->dim(0), frame);
  }
  if (step < 1 || frame < 1 || frame > signal)
    return Err(StatusCode::kInvalidArgument,
               "{}: frame_step ({}) and frame_length ({}) must be at least 1, frame_length at most the signal's length "
               "({})", n.Where(), step, frame, signal);
  const int64_t frames = (signal - frame) / step + 1, bins = onesided ? frame / 2 + 1 : frame;
  Tensor& y = AllocOutput(c, 0, x.dtype(), {batch, frames, bins, 2});
  if (y.numel() == 0) return Status::Ok();
  const Transform t(frame, false);
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    const T* wp = window ? window->data<T>() : nullptr;
    T* yp = y.data<T>();
    ParallelFor(batch * frames, [&](int64_t begin, int64_t end) {
      std::vector<Complex> line(static_cast<size_t>(frame)), scratch;
      for (int64_t bf = begin; bf < end; ++bf) {
        const int64_t b = bf / frames, f = bf % frames;
        for (int64_t j = 0; j < frame; ++j) {
          const int64_t off = (b * signal + f * step + j) * channels;
          const double w = wp ? static_cast<double>(Load(wp, j)) : 1.0;
          const double im = channels == 2 ? static_cast<double>(Load(xp, off + 1)) : 0.0;
          line[static_cast<size_t>(j)] = Complex(static_cast<double>(Load(xp, off)) * w, im * w);
        }
        t.Run(line, scratch);
        for (int64_t k = 0; k < bins; ++k) {
          const int64_t off = (bf * bins + k) * 2;
          Store(yp, off, static_cast<ComputeT<T>>(line[static_cast<size_t>(k)].real()));
          Store(yp, off + 1, static_cast<ComputeT<T>>(line[static_cast<size_t>(k)].imag()));
        }
      }
    }, std::max<int64_t>(1, 4096 / frame));
  });
}

// Filter i of MelEdges rises from edge i to edge i + 1 (peak 1) and falls to edge i + 2; bins outside the spectrum
// have no row.
Status MelWeightMatrixKernel(KernelContext& c) {
  const Node& n = c.node;
  KILN_ASSIGN_OR_RETURN(const int64_t mels, ScalarIntInput(c, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(const int64_t length, ScalarIntInput(c, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(const int64_t rate, ScalarIntInput(c, 2, "sample_rate"));
  if (mels < 1 || length < 1 || rate < 1)
    return Err(StatusCode::kInvalidArgument, "{}: num_mel_bins ({}), dft_length ({}) and sample_rate ({}) must be "
               "at least 1", n.Where(), mels, length, rate);
  for (size_t i : {3, 4})
    if (c.in(i).numel() != 1)
      return Err(StatusCode::kInvalidArgument, "{}: input {} must be a scalar, got {}", n.Where(), i,
                 c.in(i).Describe());
  const double lower = c.in(3).GetAsDouble(0), upper = c.in(4).GetAsDouble(0);
  KILN_ASSIGN_OR_RETURN(const int64_t code, n.attr_int("output_datatype", 1));
  const int64_t spectrum = length / 2 + 1;
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> edge, MelEdges(n.Where(), mels, length, rate, lower, upper));
  Tensor& y = AllocOutput(c, 0, static_cast<DataType>(code), {spectrum, mels});
  std::vector<double> w(static_cast<size_t>(spectrum * mels), 0.0);
  // Bins outside [0, spectrum) (edges beyond the Nyquist frequency or below 0 Hz) have no row: they are skipped.
  auto first = [](int64_t b) { return std::max<int64_t>(b, 0); };
  auto last = [&](int64_t b) { return std::min<int64_t>(b, spectrum - 1); };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t lo = edge[static_cast<size_t>(i)], mid = edge[static_cast<size_t>(i + 1)],
                  hi = edge[static_cast<size_t>(i + 2)];
    double* col = w.data() + i;
    if (mid == lo && mid >= 0 && mid < spectrum) col[mid * mels] = 1.0;
    for (int64_t j = first(lo); mid > lo && j <= last(mid); ++j)
      col[j * mels] = static_cast<double>(j - lo) / static_cast<double>(mid - lo);
    for (int64_t j = first(mid); j <= last(hi - 1); ++j)
      col[j * mels] = static_cast<double>(hi - j) / static_cast<double>(hi - mid);
  }
  for (int64_t i = 0; i < y.numel(); ++i) y.SetFromDouble(i, w[static_cast<size_t>(i)]);
  return Status::Ok();
}

}  // namespace

Result<std::vector<int64_t>> MelEdges(const std::string& where, int64_t mels, int64_t dft_length, int64_t sample_rate,
                                      double lower_hz, double upper_hz) {
  auto to_mel = [](double hz) { return 2595.0 * std::log1p(hz / 700.0) / std::log(10.0); };
  const double low_mel = to_mel(lower_hz), mel_step = (to_mel(upper_hz) - low_mel) / static_cast<double>(mels + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700.0 * std::expm1((static_cast<double>(i) * mel_step + low_mel) / 2595.0 * std::log(10.0));
    const double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    if (!std::isfinite(bin) || std::fabs(bin) > 1e15)
      return Err(StatusCode::kInvalidArgument, "{}: the mel edge {} falls at no spectrogram bin (lower_edge_hertz {}, "
                 "upper_edge_hertz {})", where, i, lower_hz, upper_hz);
    edge[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  return edge;
}

void RegisterSignalKernels(KernelRegistry& r) {
  r.Add("DFT", DftKernel);
  r.Add("STFT", StftKernel);
  r.Add("MelWeightMatrix", MelWeightMatrixKernel);
}

}  // namespace kiln::cpu
