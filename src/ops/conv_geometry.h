// Geometry of sliding-window ops (Conv, ConvTranspose, MaxPool, AveragePool, LpPool): reading and checking
// their attributes, and computing output sizes and effective pads. Shared by the shape functions (symbolic
// dims) and the CPU kernels (concrete dims) so both agree on every corner case (auto_pad, ceil_mode,
// output_shape / output_padding of ConvTranspose).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dims.h"
#include "ir/graph.h"

namespace kiln {

struct WindowParams {
  int64_t nsp = 0;                    // number of spatial dims
  std::vector<int64_t> kernel;        // kernel extent per spatial dim
  std::vector<int64_t> strides;       // default 1
  std::vector<int64_t> dilations;     // default 1
  std::vector<int64_t> pads;          // [b0, b1, ..., e0, e1, ...] (resolved by the Resolve* functions)
  std::vector<int64_t> output_padding;  // ConvTranspose only
  std::vector<int64_t> output_shape;    // ConvTranspose only (empty when absent)
  std::string auto_pad = "NOTSET";
  int64_t group = 1;
  bool ceil_mode = false;
};

// Reads and validates the window attributes of `n` (checked getters; errors name the node).
// `kernel_from_weight` gives the kernel extent from W's shape for Conv/ConvTranspose (entries may be -1
// when unknown); pooling ops pass an empty vector and require kernel_shape.
Result<WindowParams> ReadWindowParams(const Node& n, int64_t nsp, const std::vector<int64_t>& kernel_from_weight,
                                      bool is_transpose);

// AveragePool-22 with count_include_pad: a ceil_mode window's overhang past the explicit end pads is left out of the
// divisor (auto_pad windows have none). Shared by the backends' pool kernels.
inline bool UncountsPoolOverhang(const Node& n, const WindowParams& p) {
  return n.opset >= 22 && p.ceil_mode && p.auto_pad == "NOTSET" && n.geti("count_include_pad", 0) != 0;
}

// Forward (Conv / pooling) output spatial dims; resolves auto_pad into p.pads when the input dim is known.
// Honors p.ceil_mode (pooling; a last window starting in the end padding is dropped, as in PyTorch/ORT).
// Errors when the window does not fit the padded input.
Result<std::vector<Dim>> ForwardOutputDims(const Node& n, WindowParams& p, const std::vector<Dim>& in);

// ConvTranspose output spatial dims; resolves pads (begin pads may be negative when output_shape is larger
// than the natural size).
Result<std::vector<Dim>> TransposeOutputDims(const Node& n, WindowParams& p, const std::vector<Dim>& in);

// Concrete-size convenience wrappers for kernels.
Result<std::vector<int64_t>> ForwardOutputSizes(const Node& n, WindowParams& p, const std::vector<int64_t>& in);
Result<std::vector<int64_t>> TransposeOutputSizes(const Node& n, WindowParams& p, const std::vector<int64_t>& in);

}  // namespace kiln
