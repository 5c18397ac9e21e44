// Launchers of the signal-processing kernels around cuFFT (spectral.cu): DFT's and STFT's lines gathered into a
// contiguous complex buffer (zero padding or cropping to the transform length, a real signal's zero imaginary parts,
// IRFFT's Hermitian mirror, STFT's windowed frames), the transformed buffer stored as the output (one-sided bins,
// the inverse's 1 / n scale, the output's type), and MelWeightMatrix's triangles. Plain C++ (no IR); dtypes are
// DTypeCode ints. Every launcher only enqueues work on `stream`.
//
// The complex buffer holds `lines` transforms of `len` points each, contiguous, as interleaved (real, imaginary)
// pairs of double (f64: cufftDoubleComplex) or float (cufftComplex).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda {

// float32, float16, bfloat16 and float64 signals.
bool SpectralSupports(int dtype);

// DFT: x seen as [outer, m, inner, channels] (channels 1: real, 2: complex) -> buffer line (o, i) of len points:
// point j is x[o, j, i] for j < m, else 0; with irfft, points j > len / 2 are the conjugates of points len - j (a
// Hermitian spectrum from its first len / 2 + 1 bins).
cudaError_t LaunchDftGather(int dtype, bool f64, const void* x, void* buffer, int64_t outer, int64_t m, int64_t inner,
                            int channels, int64_t len, bool irfft, cudaStream_t stream);

// STFT: x [batch, signal, channels] -> buffer line (b, f) of frame points: x[b, f * step + j] * window[j] (window of
// x's dtype, or null for none).
cudaError_t LaunchStftFrames(int dtype, bool f64, const void* x, const void* window, void* buffer, int64_t batch,
                             int64_t signal, int channels, int64_t frames, int64_t frame, int64_t step,
                             cudaStream_t stream);

// Buffer line (o, i) of len points -> y [outer, out_len, inner, out_channels]: y[o, k, i] = point k * scale (k <
// out_len <= len; scale 1 multiplies nothing), its real part only where out_channels is 1. Stored as `dtype` the
// way the CPU reference stores its double results (float16/bfloat16 through float32).
cudaError_t LaunchSpectrumStore(int dtype, bool f64, const void* buffer, void* y, int64_t outer, int64_t len,
                                int64_t inner, int64_t out_len, int out_channels, double scale, cudaStream_t stream);

// MelWeightMatrix: y [spectrum, mels] of `dtype` (integers or floats), column i the triangle over edges[i],
// edges[i + 1], edges[i + 2] (host memory, mels + 2 values: cpu::MelEdges) as the CPU reference draws it: 1 at
// the peak bin where the rise is empty, (j - lo) / (mid - lo) on the rise [lo, mid], (hi - j) / (hi - mid) on the
// fall [mid, hi) (the fall wins where they meet), 0 elsewhere; computed in double. Several launches where mels is
// large (the edges travel as kernel parameters).
bool MelWeightsSupports(int dtype);
cudaError_t LaunchMelWeights(int dtype, void* y, int64_t spectrum, int64_t mels, const int64_t* edges,
                             cudaStream_t stream);

}  // namespace kiln::cuda
