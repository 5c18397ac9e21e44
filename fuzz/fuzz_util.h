// Shared by the fuzz targets: a logger that stays quiet (the fuzzer's output is its own), and the check that
// every error a target gets back is a sentence (an empty message would be a Status built without one).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::fuzz {

class QuietLogger : public ILogger {
 public:
  void log(Severity, const char*) noexcept override {}
};

inline void CheckError(const Status& s, const char* what) {
  if (!s.ok() && s.message().empty()) {
    std::fprintf(stderr, "%s returned an error without a message\n", what);
    std::abort();
  }
}

// Elements of `d`, or SIZE_MAX when a dim is dynamic or the tensor holds more than 4096 (a run would only be slow).
inline size_t SmallElements(const Dims& d) {
  size_t n = 1;
  for (int64_t x : d) {
    if (x < 0 || x > 4096) return SIZE_MAX;
    n *= static_cast<size_t>(x);
    if (n > 4096) return SIZE_MAX;
  }
  return n;
}

// Binds a buffer to every I/O tensor of `ctx` at its current shapes (bytes 0x01: a valid bool, a small number
// otherwise) and runs it once; does nothing when a tensor is large or dynamic.
inline void RunOnceIfSmall(const Engine& e, ExecutionContext& ctx) {
  std::vector<std::vector<uint8_t>> buffers;
  for (int i = 0; i < e.getNbIOTensors(); ++i) {
    const std::string name = e.getIOTensorName(i);
    auto shape = ctx.getTensorShape(name);
    CheckError(shape.status(), "getTensorShape");
    if (!shape.ok()) return;
    const size_t n = SmallElements(*shape);
    if (n == SIZE_MAX) return;
    buffers.emplace_back(n * 8 + 8, uint8_t{0x01});
    if (!ctx.setTensorAddress(name, buffers.back().data()).ok()) return;
  }
  CheckError(ctx.enqueue(), "enqueue");
}

}  // namespace kiln::fuzz
