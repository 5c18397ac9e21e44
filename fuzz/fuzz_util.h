// Shared by the fuzz targets: a logger that stays quiet (the fuzzer's output is its own), and the check that
// every error a target gets back is a sentence (an empty message would be a Status built without one).
#pragma once

#include <cstdio>
#include <cstdlib>

#include "kiln/logger.h"
#include "kiln/status.h"

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

}  // namespace kiln::fuzz
