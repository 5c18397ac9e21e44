// kiln — logging. Every library message goes through an ILogger the caller provides (or the default one, which
// prints to stderr). Implementations must be thread-safe: several builds or contexts may log at once.
#pragma once

namespace kiln {

enum class Severity { kInternalError = 0, kError = 1, kWarning = 2, kInfo = 3, kVerbose = 4 };

class ILogger {
 public:
  virtual ~ILogger() = default;
  virtual void log(Severity severity, const char* message) noexcept = 0;
};

// Prints messages at `min_severity` or more severe to stderr ("[kiln] [W] ...").
class StderrLogger : public ILogger {
 public:
  explicit StderrLogger(Severity min_severity = Severity::kWarning) : min_(min_severity) {}
  void log(Severity severity, const char* message) noexcept override;
  void setMinSeverity(Severity s) { min_ = s; }

 private:
  Severity min_;
};

const char* SeverityName(Severity s);  // "E", "W", "I", "V"

}  // namespace kiln
