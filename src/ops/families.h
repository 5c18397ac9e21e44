// Registration functions of the op families (one .cpp file each in src/ops/): each defines its ops' OpDefs —
// converter, shape function, traits — and helpers the families share (defined in infer.cpp).
#pragma once

#include "ops/infer.h"
#include "ops/op_def.h"

namespace kiln {
void RegisterElementwiseOps(OpRegistry& r);  // elementwise.cpp: unary/binary/compare/logic/cast/quant
void RegisterReduceOps(OpRegistry& r);       // reduce.cpp: Reduce*, ArgMax/Min, Softmax, TopK, CumSum
void RegisterNormOps(OpRegistry& r);         // norm.cpp: Batch/Instance/Layer/GroupNormalization
void RegisterLinalgOps(OpRegistry& r);       // linalg.cpp: MatMul, Gemm, Einsum
void RegisterConvOps(OpRegistry& r);         // conv.cpp: Conv, ConvTranspose, DeformConv, pooling
void RegisterTensorOps(OpRegistry& r);       // tensor.cpp, tensor_more.cpp: Reshape, Transpose, Concat, Slice, Pad...
void RegisterIndexOps(OpRegistry& r);        // index.cpp: Gather*, Scatter*, OneHot, NonZero, NMS, RoiAlign
void RegisterResizeOps(OpRegistry& r);       // resize.cpp: Resize, Upsample
void RegisterRnnOps(OpRegistry& r);          // rnn.cpp: RNN, GRU, LSTM
void RegisterTransformerOps(OpRegistry& r);  // transformer.cpp: Attention, RotaryEmbedding, SwiGLU (ONNX's, opset 23+)
void RegisterFusedOps(OpRegistry& r);        // fused.cpp: ops the optimizer creates (domain "kiln")
void RegisterQuantizedOps(OpRegistry& r);    // quantized.cpp: QConv, QMatMul (domain "kiln")
void RegisterControlFlowOps(OpRegistry& r);  // control_flow.cpp: If, Loop, Scan
void RegisterSequenceOps(OpRegistry& r);     // sequence.cpp: Sequence*, SplitToSequence, ConcatFromSequence, Optional*
void RegisterLlmOps(OpRegistry& r);          // llm_ops.cpp: LinearAttention, CausalConvWithState (opset 27)
void RegisterSignalOps(OpRegistry& r);       // signal.cpp: DFT, STFT, MelWeightMatrix

// Input i is a floating-point tensor; the error names the node.
Status RequireFloat(const InferContext& ctx, size_t i);
// Output i takes x's dtype and shape (rank unknown where x has no shape).
void SetOutputLike(InferContext& ctx, size_t i, const TensorInfo& x);
// A dim known never to be negative: a constant >= 0, or a symbol whose expression has no subtraction (a plain
// name like "seq", or sums, products and quotients of such; "seq-5" may be negative).
inline bool NonNegativeDim(const Dim& d) {
  return d.known() || (d.symbolic() && d.sym.find('-') == std::string::npos && d.sym[0] != '#');
}

// ---- helpers for converters (convert_helpers.cpp) ----
// Moves int-list attribute `attr` to input slot `index` as an int64 constant (when present), padding the
// input list with omitted inputs as needed, and erases the attribute.
void MoveIntsAttrToInput(ConvertContext& c, const std::string& attr, size_t index);
// Same for a float attribute, as a scalar of the dtype of input 0 when known, else float32.
void MoveFloatAttrToInput(ConvertContext& c, const std::string& attr, size_t index, DataType dtype);
// Sets input slot `index` (padding with omitted inputs).
void SetInput(Node& n, size_t index, Value* v);
}  // namespace kiln
