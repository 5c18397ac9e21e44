// kiln — error model: one Status / Result<T> for the whole library.
// Library code never aborts and never throws across the public API; every failure is a Status that says
// what went wrong and where (file, node, tensor) so that a person can act on it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something wrong (flag, shape, input)
  kInvalidModel,     // the model file or graph is malformed
  kUnsupported,      // valid, but kiln does not handle it (yet)
  kNotFound,         // a file, tensor, node or attribute is missing
  kIoError,          // reading or writing a file failed
  kOutOfRange,       // a value lies outside what is allowed (shape outside a profile, index)
  kInternal,         // a bug in kiln
  kCudaError,        // a CUDA / cuBLAS / cuDNN call failed
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidModel: <message>" — what a person reads.
  std::string ToString() const;
  // Returns a copy with `context` put before the message ("node 'conv1' (Conv): <message>").
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}             // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}      // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

#define KILN_RETURN_IF_ERROR(expr)            \
  do {                                        \
    ::kiln::Status _kiln_st = (expr);         \
    if (!_kiln_st.ok()) return _kiln_st;      \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(_kiln_res_, __LINE__), lhs, expr)
