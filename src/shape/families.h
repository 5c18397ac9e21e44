// Registration functions of the shape-function families (one .cpp file each in src/shape/), and helpers they
// share (defined in infer.cpp).
#pragma once

#include "shape/infer.h"

namespace kiln {
void RegisterElementwiseShapes(ShapeRegistry& r);  // shape_elementwise.cpp: unary/binary/compare/logic/cast/quant
void RegisterReduceShapes(ShapeRegistry& r);       // shape_reduce.cpp: Reduce*, ArgMax/Min, Softmax, TopK, CumSum
void RegisterNormShapes(ShapeRegistry& r);         // shape_norm.cpp: Batch/Instance/Layer/GroupNormalization
void RegisterLinalgShapes(ShapeRegistry& r);       // shape_linalg.cpp: MatMul, Gemm, Einsum
void RegisterConvShapes(ShapeRegistry& r);         // shape_conv.cpp: Conv, ConvTranspose, pooling
void RegisterTensorShapes(ShapeRegistry& r);       // shape_tensor.cpp: Reshape, Transpose, Concat, Slice, Pad...
void RegisterIndexShapes(ShapeRegistry& r);        // shape_index.cpp: Gather*, Scatter*, OneHot, NonZero, NMS
void RegisterResizeShapes(ShapeRegistry& r);       // shape_resize.cpp: Resize
void RegisterFusedShapes(ShapeRegistry& r);        // shape_fused.cpp: ops the optimizer creates (domain "kiln")

// Input i is a floating-point tensor; the error names the node.
Status RequireFloat(const InferContext& ctx, size_t i);
// Output i takes x's dtype and shape (rank unknown where x has no shape).
void SetOutputLike(InferContext& ctx, size_t i, const TensorInfo& x);
}  // namespace kiln
