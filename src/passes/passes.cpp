// The one ordered list of optimizer passes, and the driver that runs them.
#include "passes/pass.h"
#include "passes/pass_list.h"

#include "core/error.h"

namespace kiln {

const std::vector<Pass>& AllPasses() {
  static const std::vector<Pass> passes = {
      // Cleanup: remove what computes nothing, fold what is known.
      {"eliminate-identity", EliminateIdentityPass, false},        // Identity, Dropout, no-op Cast/Reshape
      {"fold-constants", FoldConstantsPass, false},
      {"gather-concatenated-slices", GatherConcatenatedSlicesPass, false},  // torch.roll: slices + Concat -> Gather
      {"simplify-shape-inputs", SimplifyShapeInputsPass, false},  // run-time Reshape targets known symbolically
      {"fold-reshape-transpose-chains", FoldReshapeTransposeChainsPass, false},
      {"eliminate-common-subexpressions", EliminateCommonSubexpressionsPass, false},
      {"fold-batchnorm", FoldBatchNormPass, false},                // BatchNormalization into Conv/Gemm
      {"unflatten-gemm", UnflattenGemmPass, false},                // view(-1, K) -> Gemm -> view(.., N): a MatMul
      // Recognition of decomposed blocks, as exporters write them.
      {"recognize-gelu", RecognizeGeluPass, true},
      {"recognize-layernorm", RecognizeLayerNormPass, true},
      {"expose-window-attention", ExposeWindowAttentionPass, true},  // Swin's per-window mask: attention in 5-D
      {"recognize-attention", RecognizeAttentionPass, true},
      {"simplify-attention-mask", SimplifyAttentionMaskPass, true},  // constant masks: zeros dropped, repeats shrunk
      // Fusion.
      {"fuse-weight-only", FuseWeightOnlyPass, true},             // DQ(int4 constant) -> MatMul -> packed 4-bit GEMM
      {"fuse-bias-activation", FuseBiasActivationPass, true},     // Conv/Gemm/MatMul + bias + activation
      {"fuse-qkv-projection", FuseQkvProjectionPass, true},       // attention's Q/K/V GEMMs -> one, read packed
      {"fuse-residual-add", FuseResidualAddPass, true},           // GEMM/conv + residual Add (+ conv activation)
      {"propagate-qdq", PropagateQdqPass, true},                   // Q/DQ across views and Transpose
      {"fuse-quantized", FuseQuantizedPass, true},                 // DQ -> conv/GEMM (+ epilogue) -> Q -> INT8 layer
      {"drop-implicit-qdq", DropImplicitQdqPass, true},            // implicit INT8's Q/DQ no INT8 layer took
      {"fuse-pointwise", FusePointwisePass, true},                 // adjacent pointwise ops -> one node
      {"fold-dequantized-weights", FoldDequantizedWeightsPass, false},  // quantized weights no INT8 layer took
      {"eliminate-dead-code", EliminateDeadCodePass, false},
  };
  return passes;
}

int OptimizeReport::Count(const std::string& pass_name) const {
  int n = 0;
  for (const auto& p : passes)
    if (p.name == pass_name) n += p.rewrites;
  return n;
}

Result<OptimizeReport> OptimizeGraph(Graph& g, const PassOptions& opts) {
  OptimizeReport report;
  report.nodes_before = g.nodes().size();
  for (const std::string& name : opts.disabled) {
    bool known = false;
    std::string names;
    for (const Pass& pass : AllPasses()) {
      known |= name == pass.name;
      names += names.empty() ? pass.name : std::string(", ") + pass.name;
    }
    if (!known)
      return Err(StatusCode::kInvalidArgument, "cannot disable optimizer pass '{}': no such pass (passes: {})", name,
                 names);
  }
  for (const Pass& pass : AllPasses()) {
    if ((pass.is_fusion && !opts.fuse) || opts.disabled.count(pass.name)) continue;
    auto r = pass.run(g, opts);
    if (!r.ok()) return r.status().WithContext(std::string("optimizer pass '") + pass.name + "'");
    r->name = pass.name;
    if (opts.verify) {
      Status st = VerifyGraph(g);
      if (!st.ok()) return st.WithContext(std::string("after optimizer pass '") + pass.name + "'");
    }
    report.passes.push_back(std::move(*r));
  }
  report.nodes_after = g.nodes().size();
  return report;
}

}  // namespace kiln
