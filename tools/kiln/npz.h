// Reading numpy .npz archives (numpy.savez / savez_compressed: a ZIP of .npy files, stored or deflated), through
// libzip.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// Every array of the archive, in archive order, named as numpy names them (the member name without ".npy"). A
// regular file only; each member is parsed as a .npy (every malformed header is an error naming the archive and
// member); a member that would expand past `max_member_bytes` is refused before it is read.
Result<std::vector<std::pair<std::string, Tensor>>> ReadNpz(const std::string& path,
                                                             uint64_t max_member_bytes = uint64_t{16} << 30);
// The same from bytes in memory (`source` names them in errors).
Result<std::vector<std::pair<std::string, Tensor>>> ParseNpz(std::string_view bytes, const std::string& source,
                                                              uint64_t max_member_bytes = uint64_t{16} << 30);

}  // namespace kiln
