// Registration functions of the converter families (one .cpp file each in src/onnx/).
#pragma once

#include "onnx/converter.h"

namespace kiln {
void RegisterElementwiseConverters(ConverterRegistry& r);  // convert_elementwise.cpp
void RegisterReduceConverters(ConverterRegistry& r);       // convert_reduce.cpp
void RegisterNormConverters(ConverterRegistry& r);         // convert_norm.cpp
void RegisterLinalgConverters(ConverterRegistry& r);       // convert_linalg.cpp
void RegisterConvConverters(ConverterRegistry& r);         // convert_conv.cpp
void RegisterTensorConverters(ConverterRegistry& r);       // convert_tensor.cpp
void RegisterIndexConverters(ConverterRegistry& r);        // convert_index.cpp
void RegisterResizeConverters(ConverterRegistry& r);       // convert_resize.cpp
}  // namespace kiln
