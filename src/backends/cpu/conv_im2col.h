// The im2col side of the CPU convolution kernels (conv.cpp, quantized.cpp): a convolution's concrete geometry and
// the matrix of its input taps, col[(channel, kernel tap), output position] (zero where the tap falls in the
// padding).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernel.h"
#include "ops/conv_geometry.h"

namespace kiln::cpu {

// Concrete geometry of one convolution: "in" is the image side, "out" the GEMM column side.
struct Geo {
  int64_t nsp;
  std::vector<int64_t> in, out, kernel, strides, dil, pads;  // pads: begins only
  int64_t in_size, out_size, ksize;
};

inline Geo MakeGeo(const WindowParams& p, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  Geo g{p.nsp, in, out, p.kernel, p.strides, p.dilations, {}, NumElements(in), NumElements(out),
        NumElements(p.kernel)};
  g.pads.assign(p.pads.begin(), p.pads.begin() + p.nsp);
  return g;
}

// Kernel offsets of flat kernel index kr.
inline void KernelOffsets(const Geo& g, int64_t kr, int64_t* koff) {
  for (int64_t d = g.nsp - 1; d >= 0; --d) {
    koff[d] = kr % g.kernel[d];
    kr /= g.kernel[d];
  }
}

// Visits every (image position, column position) pair of one im2col row: fn(col_index, image_index or -1).
// Walks the outer column dims with an odometer and the innermost dim in a tight loop.
template <typename Fn>
void ForEachTap(const Geo& g, const int64_t* koff, Fn&& fn) {
  const int64_t nsp = g.nsp;
  const int64_t last = g.out[nsp - 1];
  const int64_t outer = last == 0 ? 0 : g.out_size / last;
  std::vector<int64_t> o(nsp, 0);
  const int64_t s = g.strides[nsp - 1], pb = g.pads[nsp - 1], kd = koff[nsp - 1] * g.dil[nsp - 1];
  const int64_t in_last = g.in[nsp - 1];
  for (int64_t op = 0; op < outer; ++op) {
    int64_t base = 0;
    bool valid = true;
    for (int64_t d = 0; d < nsp - 1; ++d) {
      const int64_t i = o[d] * g.strides[d] - g.pads[d] + koff[d] * g.dil[d];
      valid &= i >= 0 && i < g.in[d];
      base = base * g.in[d] + i;
    }
    const int64_t col0 = op * last;
    for (int64_t ol = 0; ol < last; ++ol) {
      const int64_t i = ol * s - pb + kd;
      fn(col0 + ol, valid && i >= 0 && i < in_last ? base * in_last + i : -1);
    }
    for (int64_t d = nsp - 2; d >= 0; --d) {
      if (++o[d] < g.out[d]) break;
      o[d] = 0;
    }
  }
}

// col[r, o] for rows r = (c, kernel tap) of `channels` image channels.
template <typename F>
void Im2Col(const Geo& g, const F* x, int64_t channels, F* col) {
  ParallelFor(channels * g.ksize, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> koff(g.nsp);
    for (int64_t r = begin; r < end; ++r) {
      KernelOffsets(g, r % g.ksize, koff.data());
      const F* xc = x + (r / g.ksize) * g.in_size;
      F* dst = col + r * g.out_size;
      ForEachTap(g, koff.data(), [&](int64_t c, int64_t i) { dst[c] = i >= 0 ? xc[i] : F(0); });
    }
  }, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, g.out_size)));
}

}  // namespace kiln::cpu
