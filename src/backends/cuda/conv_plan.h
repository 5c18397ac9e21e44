// cuDNN plans of Conv / FusedConv / ConvTranspose for one set of shapes (conv_plan.cpp): the geometry in cuDNN's
// terms (1-D convolutions gain a unit H dim; asymmetric pads of Conv become an explicit zero-padding copy;
// ConvTranspose pads that cuDNN's backward-data op cannot express become a crop of the unpadded result), the
// operation graph (conv alone, or conv -> add bias -> add residual -> activation when fused), engine listing and
// plan building.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/cudnn_graph.h"
#include "ir/graph.h"

namespace kiln::cuda {

struct ConvGeometry {
  bool transpose = false;
  std::vector<int64_t> y_node;   // the node's output shape [N, M, out...]
  int64_t out_channels = 0;      // M
  int64_t out_inner = 1;         // product of the node output's spatial dims
  bool degenerate = false;       // X or W has no elements: Y is just the bias (and activation)
  // cuDNN's view (rank 4 or 5). Forward: conv_x = the conv input (the padded copy when `window`),
  // conv_y = the node's Y. Transpose (backward data): conv_x = dx (the node's Y, or the uncropped result in the
  // workspace when `window`), conv_y = dy = the node's X.
  std::vector<int64_t> conv_x, conv_w, conv_y;
  std::vector<int64_t> pre_pads, post_pads, strides, dilations;
  bool window = false;
  WindowCopyParams copy;       // forward: X -> padded conv_x; transpose: conv_x -> Y (crop)
  int64_t window_elements = 0;  // elements of the workspace tensor when `window`
};

// Geometry of `n` (Conv, FusedConv or ConvTranspose attributes) at input shapes x and w. Errors name the node.
Result<ConvGeometry> ComputeConvGeometry(const Node& n, bool transpose, const std::vector<int64_t>& x,
                                         const std::vector<int64_t>& w);

struct ConvGraphOptions {
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;  // storage type of X, W, B, Y
  bool fused = false;                        // bias (and activation) inside the cuDNN graph
  bool has_bias = false;                     // fused only: add B [1, M, 1, 1...]
  bool residual = false;                     // fused only: add R (Y's shape and layout) after the bias
  std::optional<cudnnPointwiseMode_t> act;   // fused only: activation after the bias and residual
  int64_t alignment = 16;                    // byte alignment promised for every tensor pointer
  bool allow_tf32 = true;                    // float32: engines may use TF32 tensor cores
  bool nhwc = false;                         // X, Y channels-last in memory, W in KRSC (kiln_layout = "NHWC")
};

// Tensor uids of the plans' variant packs.
constexpr int64_t kUidConvX = 1, kUidConvW = 2, kUidConvY = 3, kUidBias = 4, kUidResidual = 5;

struct ConvPlan {
  ConvGeometry geo;
  std::deque<dnn::Desc> keep;  // descriptors the plan refers to
  dnn::Desc plan;
  size_t cudnn_workspace = 0;
  std::string engine;           // EngineChoice::Name()
  // cuDNN compiles the engine's kernel at run time (its runtime-fusion engines). cuDNN 9.19's runtime-fusion kernel
  // on Hopper can start before the kernel ahead of it on the stream has finished writing (programmatic dependent
  // launch) and read its input unfinished: measured on an H200, ResNet-50's conv3 (eng=4, 1x1 + bias + residual +
  // Relu) after an eng=51 conv gave rel L2 0.27-0.47 off the CPU in TF32 and 0.012-0.024 in FP16, different from
  // run to run. Such plans run after an empty kernel (LaunchStreamBarrier), which ends any overlap.
  bool runtime_compiled = false;
  size_t WindowOffset() const { return (cudnn_workspace + 255) / 256 * 256; }
  size_t WorkspaceBytes(size_t elem_bytes) const {
    return geo.window ? WindowOffset() + static_cast<size_t>(geo.window_elements) * elem_bytes : cudnn_workspace;
  }
};

// Up to `limit` engine configurations (names as EngineChoice::Name()) whose plans finalize, heuristics mode A
// first, then the fallback list. Engines with reduced-precision reduction are skipped, and for float32 without
// TF32 those using tensor cores or down-converting inputs.
Result<std::vector<std::string>> ListConvEngines(const ConvGeometry& g, const ConvGraphOptions& o, size_t limit);

// The plan for `choice`, or for the first acceptable heuristic engine when `choice` is empty.
Result<std::shared_ptr<const ConvPlan>> BuildConvPlan(const ConvGeometry& g, const ConvGraphOptions& o,
                                                      const std::optional<dnn::EngineChoice>& choice);

}  // namespace kiln::cuda
