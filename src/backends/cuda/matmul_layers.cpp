// CUDA layers of the matmul family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterMatmulLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
