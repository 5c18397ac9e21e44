// Registration functions of the CPU kernel families (one or more .cpp files each in src/backends/cpu/).
#pragma once

#include "backends/cpu/kernel.h"

namespace kiln::cpu {
void RegisterElementwiseKernels(KernelRegistry& r);  // elementwise.cpp (+ activations, compare, cast, quant)
void RegisterReduceKernels(KernelRegistry& r);       // reduce.cpp (Reduce*, ArgMax/Min, Softmax, TopK, CumSum)
void RegisterNormKernels(KernelRegistry& r);         // norm.cpp
void RegisterLinalgKernels(KernelRegistry& r);       // linalg.cpp (MatMul, Gemm through OpenBLAS; Einsum)
void RegisterConvKernels(KernelRegistry& r);         // conv.cpp, pool.cpp, deform_conv.cpp
void RegisterTensorKernels(KernelRegistry& r);       // tensor.cpp (Reshape, Transpose, Concat, Slice, Pad...)
void RegisterIndexKernels(KernelRegistry& r);        // index.cpp (Gather*, Scatter*, OneHot, NonZero, NMS, RoiAlign)
void RegisterResizeKernels(KernelRegistry& r);       // resize.cpp
void RegisterRnnKernels(KernelRegistry& r);          // rnn.cpp (RNN, GRU, LSTM)
void RegisterTransformerKernels(KernelRegistry& r);  // onnx_attention.cpp, rotary_embedding.cpp (ONNX's, opset 23+)
void RegisterFusedKernels(KernelRegistry& r);        // fused.cpp (ops the optimizer creates: fused conv/matmul, pointwise chains, attention)
void RegisterControlFlowKernels(KernelRegistry& r);  // control_flow.cpp (If, Loop, Scan: bodies run by RunGraph)
void RegisterSequenceKernels(KernelRegistry& r);     // sequence.cpp (Sequence*, SplitToSequence, Optional*, SequenceMap)
void RegisterQuantizedKernels(KernelRegistry& r);    // quantized.cpp (QConv, QMatMul: int8 layers)
void RegisterLlmKernels(KernelRegistry& r);          // linear_attention.cpp, causal_conv.cpp (opset 27)
void RegisterSignalKernels(KernelRegistry& r);       // signal.cpp (DFT, STFT, MelWeightMatrix)
}  // namespace kiln::cpu
