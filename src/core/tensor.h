// A host tensor (include/kiln/tensor.h: Tensor and CastTensor are public), with the internal dims and dtype helpers.
#pragma once

#include "core/dims.h"
#include "core/dtype.h"
#include "kiln/tensor.h"

namespace kiln {

// int4/uint4 tensors hold one value per byte (include/kiln/types.h): the index of the first byte that is not a value
// of the type, or -1 when every one is (and for every other type).
int64_t FirstOutOf4BitRange(const Tensor& t);

}  // namespace kiln
