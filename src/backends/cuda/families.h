// Registration functions of the CUDA layer families (one *_layers.cpp host file each, kernels in *.cu).
#pragma once

#include "backends/cuda/layer.h"

namespace kiln::cuda {
void RegisterPointwiseLayers(LayerRegistry& r);  // pointwise_layers.cpp: unary/binary/compare/logic/cast/Where/Clip,
                                                 // activations, FusedPointwise (one kernel for a fused chain)
void RegisterReduceLayers(LayerRegistry& r);     // reduce_layers.cpp: Reduce*, ArgMax/Min, Softmax/LogSoftmax,
                                                 // TopK, CumSum
void RegisterNormLayers(LayerRegistry& r);       // norm_layers.cpp: LayerNorm, GroupNorm, InstanceNorm, BatchNorm;
                                                 // LRN, MeanVarianceNormalization (lrn_mvn_layers.cpp)
void RegisterTensorLayers(LayerRegistry& r);     // tensor_layers.cpp: views, Transpose, Concat, Split, Slice, Pad,
                                                 // Expand, Tile, Shape/Size/Range/ConstantOfShape, Trilu, D2S/S2D;
                                                 // ReverseSequence, CenterCropPad, MaxUnpool, Col2Im
                                                 // (rearrange_layers.cpp); EyeLike, windows (generator_layers.cpp);
                                                 // kiln.Reformat (reformat_layers.cpp)
void RegisterIndexLayers(LayerRegistry& r);      // index_layers.cpp: Gather*, Scatter*, OneHot, NonZero, NMS, Resize,
                                                 // GridSample, AffineGrid (grid_layers.cpp)
void RegisterMatmulLayers(LayerRegistry& r);     // matmul_layers.cpp: MatMul/Gemm/FusedGemm/FusedMatMul (cuBLASLt),
                                                 // Einsum
void RegisterAttentionLayers(LayerRegistry& r);  // attention_layers.cpp: kiln.Attention (fused, flash style); ONNX
                                                 // Attention (onnx_attention_layers.cpp); RotaryEmbedding,
                                                 // TensorScatter, LinearAttention, CausalConvWithState (llm_layers.cpp)
void RegisterConvLayers(LayerRegistry& r);       // conv_layers.cpp: Conv/FusedConv/ConvTranspose (cuDNN)
void RegisterQuantizedLayers(LayerRegistry& r);  // quantized_layers.cpp: kiln.QConv, kiln.QMatMul (int8)
void RegisterPoolLayers(LayerRegistry& r);       // pool_layers.cpp: MaxPool, AveragePool, LpPool, Global*Pool
void RegisterWeightOnlyLayers(LayerRegistry& r); // weight_only_layers.cpp: kiln.WeightOnlyMatMul (packed 4-bit W)
void RegisterRnnLayers(LayerRegistry& r);        // rnn_layers.cpp: RNN, GRU, LSTM (own kernels, rnn.cu)
void RegisterVisionLayers(LayerRegistry& r);     // vision_layers.cpp: RoiAlign (roi_align.cu), DeformConv
                                                 // (deform_conv.cu)
void RegisterCumProdLpNormBitCastLayers(LayerRegistry& r);  // cumprod_lpnorm_bitcast_layers.cpp: CumProd,
                                                            // LpNormalization, BitCast
void RegisterControlFlowLayers(LayerRegistry& r);  // control_flow_layers.cpp: If, Loop, Scan (bodies on the CUDA
                                                   // layers, body_exec.cpp)
void RegisterIntegerOpLayers(LayerRegistry& r);  // integer_ops_layers.cpp: MatMulInteger, QLinearMatMul,
                                                 // ConvInteger, QLinearConv, Det (integer_ops.cu)
void RegisterSpectralLayers(LayerRegistry& r);   // spectral_layers.cpp: DFT, STFT (cuFFT), MelWeightMatrix
}  // namespace kiln::cuda
