// onnx.TensorProto <-> kiln Tensor (raw_data, typed fields, external data).
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "onnx.pb.h"

namespace kiln {

// The folders external-data files may be read from: the model's own first, then any the user allowed
// (--externalDataDir). A location is looked up in each in turn and must resolve (links followed) inside the folder
// it is found in.
using DataDirs = std::vector<std::string>;

// `what` names the tensor in messages ("initializer 'w'").
Result<Tensor> TensorFromProto(const onnx::TensorProto& p, const DataDirs& data_dirs, const std::string& what);

}  // namespace kiln
