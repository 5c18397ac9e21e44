// Declarations of every optimizer pass (one .cpp file each in src/passes/, named like the pass).
#pragma once

#include "passes/pass.h"

namespace kiln {
Result<PassReport> EliminateIdentityPass(Graph& g, const PassOptions& o);              // eliminate_identity.cpp
Result<PassReport> FoldConstantsPass(Graph& g, const PassOptions& o);                  // fold_constants.cpp
Result<PassReport> GatherConcatenatedSlicesPass(Graph& g, const PassOptions& o);       // gather_concatenated_slices.cpp
Result<PassReport> SimplifyShapeInputsPass(Graph& g, const PassOptions& o);            // simplify_shape_inputs.cpp
Result<PassReport> FoldReshapeTransposeChainsPass(Graph& g, const PassOptions& o);     // fold_reshape_transpose.cpp
Result<PassReport> EliminateCommonSubexpressionsPass(Graph& g, const PassOptions& o);  // eliminate_cse.cpp
Result<PassReport> FoldBatchNormPass(Graph& g, const PassOptions& o);                  // fold_batchnorm.cpp
Result<PassReport> UnflattenGemmPass(Graph& g, const PassOptions& o);                  // unflatten_gemm.cpp
Result<PassReport> RecognizeGeluPass(Graph& g, const PassOptions& o);                  // recognize_gelu.cpp
Result<PassReport> RecognizeLayerNormPass(Graph& g, const PassOptions& o);             // recognize_layernorm.cpp
Result<PassReport> ExposeWindowAttentionPass(Graph& g, const PassOptions& o);          // expose_window_attention.cpp
Result<PassReport> RecognizeAttentionPass(Graph& g, const PassOptions& o);             // recognize_attention.cpp
Result<PassReport> SimplifyAttentionMaskPass(Graph& g, const PassOptions& o);          // simplify_attention_mask.cpp
Result<PassReport> FuseWeightOnlyPass(Graph& g, const PassOptions& o);                 // fuse_weight_only.cpp
Result<PassReport> FuseBiasActivationPass(Graph& g, const PassOptions& o);             // fuse_bias_activation.cpp
Result<PassReport> FuseQkvProjectionPass(Graph& g, const PassOptions& o);              // fuse_qkv_projection.cpp
Result<PassReport> FuseResidualAddPass(Graph& g, const PassOptions& o);                // fuse_residual_add.cpp
Result<PassReport> PropagateQdqPass(Graph& g, const PassOptions& o);                   // propagate_qdq.cpp
Result<PassReport> FuseQuantizedPass(Graph& g, const PassOptions& o);                  // fuse_quantized.cpp
Result<PassReport> DropImplicitQdqPass(Graph& g, const PassOptions& o);                // drop_implicit_qdq.cpp
Result<PassReport> FusePointwisePass(Graph& g, const PassOptions& o);                  // fuse_pointwise.cpp
Result<PassReport> FoldDequantizedWeightsPass(Graph& g, const PassOptions& o);         // fold_constants.cpp
Result<PassReport> EliminateDeadCodePass(Graph& g, const PassOptions& o);              // eliminate_dead_code.cpp
}  // namespace kiln
