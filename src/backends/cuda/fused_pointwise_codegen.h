// kiln.FusedPointwise by runtime code generation (tactic "nvrtc"): the node's program becomes straight-line
// CUDA source (one float expression per step, in registers), compiled once per distinct source with NVRTC
// (nvrtc_module.h) and launched with cuLaunchKernel. See fused_pointwise_codegen.cpp for the kernel's shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/layer.h"
#include "backends/cuda/pointwise_kernels.h"
#include "ops/fused_ops.h"

namespace kiln::cuda {

// How the generated kernel reads an operand, fixed when the source is generated (from the node's symbolic
// shapes): like the output (16-byte vector loads), one element (loaded once per thread), or through broadcast
// strides given at launch.
enum class FpwKind : uint8_t { kFull, kScalar, kBroadcast };

struct FpwCodegenOptions {
  int dtype = 1;  // DataType code of every input and the output: float32 (1), float16 (10) or bfloat16 (16)
  int sm = 90;    // compute capability of the target (bf16 conversion instructions need 80)
  std::vector<FpwKind> operands;
};

// The kernel's source ("kiln_fused_pointwise"); the same program and options give the same text.
std::string FusedPointwiseSource(const fused::PwProgram& prog, const FpwCodegenOptions& opts);

// The operand kinds of node `n` from its values' (symbolic) shapes: kFull where an input's shape is the
// output's, kScalar where every dim is 1, kBroadcast otherwise (or unknown).
std::vector<FpwKind> FusedPointwiseKinds(const Node& n);

// The "nvrtc" layer: compiles at creation. At run time, shapes that break the kinds it was generated for (or
// outputs of 2^31 elements and more) run the interpreter kernel (LaunchFusedPointwise with `interp`) instead.
// `compile_ms` (optional) receives the compile time (0 when the module cache had it).
Result<std::unique_ptr<Layer>> MakeFusedPointwiseNvrtcLayer(const Node& n, const fused::PwProgram& prog,
                                                            const PwProgramArgs& interp, double* compile_ms = nullptr);

}  // namespace kiln::cuda
