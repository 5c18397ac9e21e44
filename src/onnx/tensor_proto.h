// onnx.TensorProto <-> kiln Tensor (raw_data, typed fields, external data).
#pragma once

#include <string>

#include "core/tensor.h"
#include "onnx.pb.h"

namespace kiln {

// `base_dir` is where external-data files live; `what` names the tensor in messages ("initializer 'w'").
Result<Tensor> TensorFromProto(const onnx::TensorProto& p, const std::string& base_dir, const std::string& what);

}  // namespace kiln
