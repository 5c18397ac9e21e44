// Launchers of the example plugins' CUDA kernels (example_kernels.cu). Plain C++: no CUDA headers, no kiln
// headers. Each returns nullptr on success, else the CUDA error's text.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln_examples {

// y = act(alpha * x + beta) over n elements of float32 (half = false) or float16 (half = true).
const char* LaunchScaleShift(const void* x, void* y, int64_t n, bool half, float alpha, float beta, bool relu,
                             void* stream);

// SelectAbove in two steps around one synchronization: the kept elements of x (in order) go to the workspace and
// their count to *count (the stream is synchronized); then CopySelected moves them to the output.
size_t SelectAboveWorkspaceBytes(int64_t n);
const char* RunSelectAbove(const float* x, int64_t n, float threshold, void* workspace, int64_t* count, void* stream);
const char* CopySelected(const void* workspace, float* y, int64_t count, void* stream);

}  // namespace kiln_examples
