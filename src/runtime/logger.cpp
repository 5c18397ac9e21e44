#include <cstdio>
#include <mutex>

#include "kiln/logger.h"

namespace kiln {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInternalError: return "F";
    case Severity::kError: return "E";
    case Severity::kWarning: return "W";
    case Severity::kInfo: return "I";
    case Severity::kVerbose: return "V";
  }
  return "?";
}

void StderrLogger::log(Severity severity, const char* message) noexcept {
  if (static_cast<int>(severity) > static_cast<int>(min_)) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[kiln] [%s] %s\n", SeverityName(severity), message);
}

}  // namespace kiln
