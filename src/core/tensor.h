// A host tensor (include/kiln/tensor.h: Tensor and CastTensor are public), with the internal dims and dtype helpers.
#pragma once

#include "core/dims.h"
#include "core/dtype.h"
#include "kiln/tensor.h"
