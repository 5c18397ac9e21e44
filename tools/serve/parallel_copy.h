// kiln serve — host memory copies split over a few threads. One thread's memcpy moves 4-6 GB/s, so gathering a batch
// of 32 ResNet-50 inputs (19 MB) into page-locked staging took it 3-5 ms, longer than the engine runs the batch; a few
// threads, each copying chunks of at least 1 MiB, share the copy.
#pragma once

#include <cstddef>
#include <vector>

namespace kiln::serve {

struct CopyPiece {
  void* dst;
  const void* src;
  size_t bytes;
};

// Copies every piece (pieces must not overlap one another). When they add up to 2 MiB or more, the copy is split into
// chunks of at least 1 MiB, shared by the calling thread and up to 7 threads of a process-wide pool; otherwise the
// calling thread copies them. Returns when every byte is copied. Thread-safe.
void ParallelCopy(const std::vector<CopyPiece>& pieces);

}  // namespace kiln::serve
