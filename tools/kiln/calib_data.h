// Calibration data for kiln calibrate: a folder of batch files (.npz with an array per input, or .npy for one-input
// models), read in file-name order, each checked against the model's inputs and cut into batches of their shape.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::cli {

struct InputSpec {
  std::string name;
  DataType dtype;
  Dims dims;  // -1 where dynamic
};

// The batches of one file, in order. An array whose first dim is a multiple of a static batch dim holds several.
Result<std::vector<std::map<std::string, Tensor>>> LoadBatches(const std::string& path,
                                                                const std::vector<InputSpec>& inputs);
// The .npz and .npy files of `dir`, sorted by name (an error when there is none).
Result<std::vector<std::string>> ListBatchFiles(const std::string& dir);

}  // namespace kiln::cli
