// Reading and writing numpy .npy files (format versions 1, 2 and 3; C order; little-endian numeric types).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// What a .npy header says: the element type, the shape, and where the data starts.
struct NpyHeader {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  uint64_t data_offset = 0;  // bytes from the start of the file
  uint64_t data_bytes = 0;   // elements x element size (checked against 2^40 elements)
};

// Parses the magic, version, header length and header dict at the start of `bytes` (which may hold more than the
// header). `source` names the file in messages. Every malformed header is an error, never a different shape.
Result<NpyHeader> ParseNpyHeader(std::string_view bytes, const std::string& source);
// A whole .npy file held in memory.
Result<Tensor> ParseNpy(std::string_view bytes, const std::string& source);
// Reads a .npy file (a regular file only: a FIFO or device is refused rather than read).
Result<Tensor> ReadNpy(const std::string& path);
Status WriteNpy(const std::string& path, const Tensor& t);

}  // namespace kiln
