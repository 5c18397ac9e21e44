// Helpers to build a Status with fmt-style formatting: return Err(StatusCode::kInvalidModel, "x {}", y);
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/status.h"

namespace kiln {

template <typename... Args>
Status Err(StatusCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kiln
