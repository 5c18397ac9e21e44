// Reading and writing numpy .npy files (format versions 1 and 2; C order).
#pragma once

#include <string>

#include "kiln/tensor.h"

namespace kiln {

Result<Tensor> ReadNpy(const std::string& path);
Status WriteNpy(const std::string& path, const Tensor& t);

}  // namespace kiln
