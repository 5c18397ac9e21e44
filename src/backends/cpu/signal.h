// What the signal-processing kernels share with the CUDA backend: MelWeightMatrix's filter edges, computed on the
// host by both (signal.cpp), so the two backends place every triangle at the same spectrogram bins.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::cpu {

// The num_mel_bins + 2 edges of MelWeightMatrix's triangular filters as spectrogram bins: evenly spaced on the mel
// scale mel(f) = 2595 log10(1 + f / 700) from lower_hz to upper_hz (spaced by the range / (mels + 2), as the ONNX
// reference does), each mapped to floor((dft_length + 1) * f / sample_rate). Filter i rises from edge i to edge
// i + 1 (peak 1) and falls to edge i + 2. An error (naming `where`) when an edge is not a finite bin.
Result<std::vector<int64_t>> MelEdges(const std::string& where, int64_t mels, int64_t dft_length, int64_t sample_rate,
                                      double lower_hz, double upper_hz);

}  // namespace kiln::cpu
