// kiln — building a Status with fmt-style formatting:  return Err(StatusCode::kInvalidArgument, "bad '{}'", name);
// (kiln depends on fmt; find_package(kiln) finds it too.)
#pragma once

#include <utility>

#include <fmt/format.h>

#include "kiln/status.h"

namespace kiln {

template <typename... Args>
Status Err(StatusCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kiln
